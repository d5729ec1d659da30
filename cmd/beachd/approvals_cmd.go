package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cool-ai/beachd/api"
)

// ApprovalsCmd groups approval commands; they talk to a running beachd.
type ApprovalsCmd struct {
	List   ApprovalsListCmd   `cmd:"" help:"List approvals, optionally by state."`
	Show   ApprovalsShowCmd   `cmd:"" help:"Show an approval and the timeline of its event trail (--json: the approval as JSON)."`
	Decide ApprovalsDecideCmd `cmd:"" help:"Decide an approval as an operator (granted, denied, or void to withdraw it)."`
	Export ApprovalsExportCmd `cmd:"" help:"Print the event trails of every approval, or of one, as JSON lines."`
	Verify ApprovalsVerifyCmd `cmd:"" help:"Check an approval's event trail: every hash and link of the chain (exit 1 when broken)."`
}

// ApprovalsListCmd lists approvals.
type ApprovalsListCmd struct {
	apiFlags
	State     string `help:"pending, granted, denied, expired or void." enum:",pending,granted,denied,expired,void" default:""`
	Injection string `help:"List by injection state instead: pending, done or dead (dead letters)." enum:",pending,done,dead" default:""`
	Limit     int    `default:"100" help:"At most this many."`
	JSON      bool   `name:"json" help:"Print JSON."`
}

// Run lists approvals.
func (c *ApprovalsListCmd) Run(g *globals) error {
	q := url.Values{}
	if c.State != "" {
		q.Set("state", c.State)
	}
	if c.Injection != "" {
		q.Set("injection", c.Injection)
	}
	q.Set("limit", fmt.Sprint(c.Limit))
	var raw json.RawMessage
	if err := c.call("GET", "/v1/approvals?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Approvals []api.ApprovalView `json:"approvals"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAGENT\tEXPIRES\tDECIDED BY\tTO AGENT\tSUMMARY")
	var dead []string
	for _, a := range out.Approvals {
		inj := "-"
		if a.Injection != nil {
			inj = a.Injection.State
			if inj == "dead" {
				inj = "DEAD"
				dead = append(dead, a.ID)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, a.Agent, a.ExpiresAt.Local().Format(time.DateTime), a.DecidedBy, inj, a.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(dead) > 0 {
		fmt.Fprintf(g.stdout, "\n%d decision(s) never reached the agent (TO AGENT DEAD): %s\n"+
			"  see why: beachd approvals show <id>; send again: POST /v1/approvals/<id>/retry-injection\n", len(dead), strings.Join(dead, ", "))
	}
	return nil
}

// ApprovalsDecideCmd decides an approval.
type ApprovalsDecideCmd struct {
	apiFlags
	ID       string `arg:"" help:"Approval id."`
	Decision string `arg:"" enum:"granted,denied,void" help:"granted, denied or void."`
	Reason   string `help:"Reason passed to the agent."`
}

// Run posts the operator decision.
func (c *ApprovalsDecideCmd) Run(g *globals) error {
	var raw json.RawMessage
	body := map[string]string{"decision": c.Decision}
	if c.Reason != "" {
		body["reason"] = c.Reason
	}
	if err := c.call("POST", "/v1/approvals/"+url.PathEscape(c.ID)+"/decision", body, &raw); err != nil {
		return err
	}
	return printJSON(g.stdout, raw)
}
