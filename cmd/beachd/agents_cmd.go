package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/cool-ai/beachd/api"
)

// AgentsCmd groups the agent commands; they talk to a running beachd.
type AgentsCmd struct {
	List AgentsListCmd `cmd:"" help:"List agents: URL, configured a2a_version, the A2A generation and binding in use, the last card read and its error."`
	Show AgentsShowCmd `cmd:"" help:"Show one agent as JSON."`
}

// AgentsListCmd lists agents.
type AgentsListCmd struct {
	apiFlags
	JSON bool `name:"json" help:"Print JSON."`
}

// Run lists the agents.
func (c *AgentsListCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("GET", "/v1/agents", nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Agents []api.AgentView `json:"agents"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode agents: %w", err)
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tURL\tA2A_VERSION\tIN USE\tBINDING\tCHOSEN BY\tCARD READ\tCARD ERROR")
	for _, a := range out.Agents {
		read := "-"
		if a.CardReadAt != nil {
			read = a.CardReadAt.Local().Format(time.DateTime)
		}
		cardErr := a.CardError
		if len(cardErr) > 80 {
			cardErr = cardErr[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.URL, a.A2AVersion, dash(a.Generation),
			dash(a.Binding), dash(a.ChosenBy), read, dash(cardErr))
	}
	return tw.Flush()
}

// AgentsShowCmd shows one agent.
type AgentsShowCmd struct {
	apiFlags
	Name string `arg:"" help:"Agent name."`
}

// Run shows the agent as JSON.
func (c *AgentsShowCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("GET", "/v1/agents/"+url.PathEscape(c.Name), nil, &raw); err != nil {
		return err
	}
	return printJSON(g.stdout, raw)
}
