package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
)

// ApprovalsShowCmd shows one approval and its trail.
type ApprovalsShowCmd struct {
	apiFlags
	ID   string `arg:"" help:"Approval id."`
	JSON bool   `name:"json" help:"Print the approval (with its audit entries and injection) as JSON instead."`
}

// Run shows the approval: what it asks, its state, and the timeline of its
// event trail, checked here.
func (c *ApprovalsShowCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("GET", "/v1/approvals/"+url.PathEscape(c.ID), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var a api.ApprovalView
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	tr, err := c.trail(c.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s  %s\n", termText(a.ID), termText(a.Summary))
	fmt.Fprintf(g.stdout, "  state    %s", a.State)
	if a.DecidedBy != "" {
		fmt.Fprintf(g.stdout, " by %s on %s at %s", termSafe(a.DecidedBy), termSafe(a.Channel), utc(a.DecidedAt))
	}
	fmt.Fprintf(g.stdout, "\n  agent    %s\n  created  %s\n  expires  %s\n", termSafe(a.Agent), utc(a.CreatedAt), utc(a.ExpiresAt))
	if a.Injection != nil {
		fmt.Fprintf(g.stdout, "  to agent %s (%d attempt(s))", a.Injection.State, a.Injection.Attempts)
		if a.Injection.LastError != "" {
			fmt.Fprintf(g.stdout, ", last error: %s", termText(a.Injection.LastError))
		}
		fmt.Fprintln(g.stdout)
	}
	fmt.Fprintln(g.stdout)
	return printTimeline(g.stdout, tr)
}

// trail fetches an approval's events.
func (f apiFlags) trail(id string) (*api.EventsView, error) {
	var ev api.EventsView
	if err := f.call("GET", "/v1/approvals/"+url.PathEscape(id)+"/events", nil, &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// printTimeline writes a trail as a table, one event a line, and says
// whether its chain is intact (checked here, from the events as received,
// not taken from the server's word).
func printTimeline(w io.Writer, tr *api.EventsView) error {
	check := approvals.VerifyHead(tr.Events, tr.Head)
	switch {
	case len(tr.Events) == 0:
		fmt.Fprintln(w, "Trail: no events.")
	case check == nil:
		fmt.Fprintf(w, "Trail: %d events, chain intact (last hash %s).\n", len(tr.Events), short(tr.Head.Hash))
	default:
		fmt.Fprintf(w, "Trail: %d events, CHAIN BROKEN at %v.\n", len(tr.Events), check)
	}
	if len(tr.Events) == 0 {
		return check
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tAT (UTC)\tEVENT\tWHO\tCHANNEL\tDETAIL")
	for _, e := range tr.Events {
		kind := e.Kind
		if d := e.Evidence["disposition"]; d != "" {
			kind += " (" + d
			if why := e.Evidence["why"]; why != "" {
				kind += ": " + why
			}
			kind += ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, utc(e.At), termText(kind), termSafe(e.Actor), termSafe(e.Channel), evidenceText(e.Evidence))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return check
}

// evidenceText is an event's evidence as key=value pairs in key order,
// without the disposition and why the event column shows; values that are
// not plain words are quoted (so a user agent's spaces or control
// characters cannot pass for other columns or move the terminal).
func evidenceText(ev map[string]string) string {
	keys := make([]string, 0, len(ev))
	for k := range ev {
		if k != "disposition" && k != "why" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, termSafe(k)+"="+termSafe(ev[k]))
	}
	return strings.Join(parts, " ")
}

// termSafe is s as it is when it is printable text without spaces, else
// quoted with Go's escapes.
func termSafe(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) < 0 {
		return s
	}
	if s == "" {
		return "-"
	}
	return strconv.Quote(s)
}

// termText is free text with every character that is not printable (an
// escape sequence, a line break) written as a Go escape.
func termText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) || r == ' ' {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

func utc(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// ApprovalsVerifyCmd checks one approval's trail.
type ApprovalsVerifyCmd struct {
	apiFlags
	ID string `arg:"" help:"Approval id."`
}

// Run fetches the trail and checks it here: every event's hash over its
// RFC 8785 canonical JSON, every link to the event before, and the end
// against the head the store recorded. A broken chain is reported by the
// first bad position, and exits 1.
func (c *ApprovalsVerifyCmd) Run(g *globals) error {
	tr, err := c.trail(c.ID)
	if err != nil {
		return err
	}
	if err := approvals.VerifyHead(tr.Events, tr.Head); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("%s: trail of %d events does not verify: %w", c.ID, len(tr.Events), err)}
	}
	fmt.Fprintf(g.stdout, "%s: %d events, chain intact; last hash %s\n", c.ID, len(tr.Events), tr.Head.Hash)
	return nil
}

// ApprovalsExportCmd prints event trails as JSON lines.
type ApprovalsExportCmd struct {
	apiFlags
	ID string `arg:"" optional:"" help:"Approval id (default: every approval)."`
}

// exportLine is one line of the export: an event of an approval, exactly
// as stored and hashed.
type exportLine struct {
	ApprovalID string          `json:"approvalId"`
	Event      approvals.Event `json:"event"`
}

// Run prints one line per event, approval by approval in id order, each
// trail oldest first.
func (c *ApprovalsExportCmd) Run(g *globals) error {
	ids := []string{c.ID}
	if c.ID == "" {
		var err error
		if ids, err = c.approvalIDs(); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetEscapeHTML(false)
	for _, id := range ids {
		tr, err := c.trail(id)
		if err != nil {
			return fmt.Errorf("events of %s: %w", id, err)
		}
		for _, e := range tr.Events {
			if err := enc.Encode(exportLine{ApprovalID: id, Event: e}); err != nil {
				return err
			}
		}
	}
	return nil
}

// approvalIDs lists every approval's id, page by page.
func (c *ApprovalsExportCmd) approvalIDs() ([]string, error) {
	var ids []string
	after := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Approvals []api.ApprovalView `json:"approvals"`
			Next      string             `json:"next"`
		}
		if err := c.call("GET", "/v1/approvals?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		for _, a := range page.Approvals {
			ids = append(ids, a.ID)
		}
		if page.Next == "" || page.Next == after {
			return ids, nil
		}
		after = page.Next
	}
}
