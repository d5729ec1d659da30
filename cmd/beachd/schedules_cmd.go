package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/cool-ai/beachd/api"
)

// SchedulesCmd groups the schedule commands; they talk to a running beachd.
type SchedulesCmd struct {
	List   SchedulesListCmd   `cmd:"" help:"List schedules: next slot, last run and its outcome."`
	Run    SchedulesRunCmd    `cmd:"" help:"Fire a schedule now (a manual run; it takes no cron slot)."`
	Pause  SchedulesPauseCmd  `cmd:"" help:"Pause a schedule: it fires no slot until resumed (kept across restarts; slots due meanwhile are skipped)."`
	Resume SchedulesResumeCmd `cmd:"" help:"Resume a paused schedule: it fires from the next slot on."`
}

// SchedulesListCmd lists schedules.
type SchedulesListCmd struct {
	apiFlags
	JSON bool `name:"json" help:"Print JSON."`
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
		Schedules []api.ScheduleView `json:"schedules"`
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
		switch {
		case !s.Enabled:
			next = "disabled"
		case s.Paused:
			next = "PAUSED since " + ts(s.PausedAt)
			if s.PausedBy != "" {
				next += " by " + s.PausedBy
			}
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
	var out struct {
		Run api.RunView `json:"run"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode run: %w", err)
	}
	fmt.Fprintf(g.stdout, "started %s (%s); see `beachd schedules list` for its outcome\n", out.Run.ID, out.Run.State)
	return nil
}

// SchedulesPauseCmd pauses a schedule.
type SchedulesPauseCmd struct {
	apiFlags
	Name string `arg:"" help:"Schedule name."`
	JSON bool   `name:"json" help:"Print JSON."`
}

// Run pauses the schedule and prints its state.
func (c *SchedulesPauseCmd) Run(g *globals) error {
	return setSchedulePaused(g, c.apiFlags, c.Name, "pause", c.JSON)
}

// SchedulesResumeCmd resumes a paused schedule.
type SchedulesResumeCmd struct {
	apiFlags
	Name string `arg:"" help:"Schedule name."`
	JSON bool   `name:"json" help:"Print JSON."`
}

// Run resumes the schedule and prints its state.
func (c *SchedulesResumeCmd) Run(g *globals) error {
	return setSchedulePaused(g, c.apiFlags, c.Name, "resume", c.JSON)
}

func setSchedulePaused(g *globals, a apiFlags, name, verb string, asJSON bool) error {
	var raw json.RawMessage
	if err := a.call("POST", "/v1/schedules/"+url.PathEscape(name)+"/"+verb, nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Schedule api.ScheduleView `json:"schedule"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode schedule: %w", err)
	}
	st := out.Schedule
	if st.Paused {
		fmt.Fprintf(g.stdout, "%s: PAUSED since %s by %s; it fires no slot until `beachd schedules resume %s`\n",
			st.Name, st.PausedAt.Format(time.RFC3339), st.PausedBy, st.Name)
		return nil
	}
	next := "none"
	if !st.Next.IsZero() {
		next = st.Next.Format(time.RFC3339)
	}
	fmt.Fprintf(g.stdout, "%s: active; next slot %s\n", st.Name, next)
	return nil
}
