package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"
)

// SchedulesCmd groups the schedule commands; they talk to a running beachd.
type SchedulesCmd struct {
	List SchedulesListCmd `cmd:"" help:"List schedules: next slot, last run and its outcome."`
	Run  SchedulesRunCmd  `cmd:"" help:"Fire a schedule now (a manual run; it takes no cron slot)."`
}

// SchedulesListCmd lists schedules.
type SchedulesListCmd struct {
	apiFlags
	JSON bool `name:"json" help:"Print JSON."`
}

type scheduleRunView struct {
	ID         string    `json:"id"`
	Slot       time.Time `json:"slot"`
	Trigger    string    `json:"trigger"`
	State      string    `json:"state"`
	Reason     string    `json:"reason"`
	Attempts   int       `json:"attempts"`
	EnvelopeID string    `json:"envelopeId"`
}

// Run lists the schedules.
func (c *SchedulesListCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("GET", "/v1/schedules", nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Schedules []struct {
			Name, Cron, TimeZone, Agent string
			Enabled, Running            bool
			Next                        time.Time
			Last                        *scheduleRunView
			LastOutcome                 string
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode schedules: %w", err)
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tZONE\tAGENT\tNEXT\tLAST SLOT\tLAST STATE\tLAST OUTCOME\tREASON")
	for _, s := range out.Schedules {
		next := ts(s.Next)
		if !s.Enabled {
			next = "disabled"
		}
		lastSlot, lastState, reason := "-", "-", ""
		if s.Last != nil {
			lastSlot, lastState, reason = ts(s.Last.Slot), s.Last.State, s.Last.Reason
			if s.Last.Trigger != "cron" {
				lastState += " (" + s.Last.Trigger + ")"
			}
		}
		if s.Running {
			lastState = "running"
		}
		if len(reason) > 60 {
			reason = reason[:57] + "..."
		}
		outcome := s.LastOutcome
		if outcome == "" {
			outcome = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.TimeZone, s.Agent, next, lastSlot,
			lastState, outcome, reason)
	}
	return tw.Flush()
}

// SchedulesRunCmd fires a schedule now.
type SchedulesRunCmd struct {
	apiFlags
	Name string `arg:"" help:"Schedule name."`
	JSON bool   `name:"json" help:"Print JSON."`
}

// Run fires the schedule and prints the claimed run.
func (c *SchedulesRunCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("POST", "/v1/schedules/"+url.PathEscape(c.Name)+"/run", nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct{ Run scheduleRunView }
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode run: %w", err)
	}
	fmt.Fprintf(g.stdout, "started %s (%s); see `beachd schedules list` for its outcome\n", out.Run.ID, out.Run.State)
	return nil
}
