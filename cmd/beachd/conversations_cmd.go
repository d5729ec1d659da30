package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cool-ai/beachd/api"
)

// ConversationsCmd groups the conversation commands; they talk to a running
// beachd.
type ConversationsCmd struct {
	List  ConversationsListCmd  `cmd:"" help:"List conversations, most recently active first: agent, channel, our address, the people in it, turns."`
	Show  ConversationsShowCmd  `cmd:"" help:"Show a conversation (cnv_…): its binding and its messages both ways, with the state of each answer."`
	Turns ConversationsTurnsCmd `cmd:"" help:"List the turn outbox: each message sent (or to send) to an agent, its state, attempts and last error."`
	Retry ConversationsRetryCmd `cmd:"" help:"Send a dead turn (trn_…) to the agent again."`
}

// ConversationsTurnsCmd lists turns.
type ConversationsTurnsCmd struct {
	apiFlags
	State string `help:"queued, sending, answered or dead." enum:",queued,sending,answered,dead" default:""`
	Limit int    `default:"100" help:"At most this many."`
	JSON  bool   `name:"json" help:"Print JSON."`
}

// Run lists the turns.
func (c *ConversationsTurnsCmd) Run(g *globals) error {
	q := url.Values{}
	setParam(q, "state", c.State)
	q.Set("limit", fmt.Sprint(c.Limit))
	var raw json.RawMessage
	if err := c.call("GET", "/v1/turns?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Turns []api.TurnItem `json:"turns"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode turns: %w", err)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TURN\tCREATED\tAGENT\tCONVERSATION\tSTATE\tATTEMPTS\tLAST ERROR")
	for _, t := range out.Turns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", t.ID, stamp(t.CreatedAt), t.Agent, t.ConversationID, t.State, t.Attempts,
			dash(clip(t.LastError, 60)))
	}
	return tw.Flush()
}

// ConversationsRetryCmd retries a dead turn.
type ConversationsRetryCmd struct {
	apiFlags
	ID string `arg:"" help:"The turn (trn_…)."`
}

// Run retries the turn.
func (c *ConversationsRetryCmd) Run(g *globals) error {
	var out struct {
		Turn api.TurnItem `json:"turn"`
	}
	if err := c.call("POST", "/v1/turns/"+url.PathEscape(c.ID)+"/retry", nil, &out); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s is %s again: it goes to %s now\n", out.Turn.ID, out.Turn.State, out.Turn.Agent)
	return nil
}

// ConversationsListCmd lists conversations.
type ConversationsListCmd struct {
	apiFlags
	Agent   string `help:"Only this agent's conversations."`
	Channel string `help:"email, sms or whatsapp." enum:",email,sms,whatsapp" default:""`
	Limit   int    `default:"100" help:"At most this many."`
	After   string `help:"Continue after this cursor (the next value of the previous page)."`
	JSON    bool   `name:"json" help:"Print JSON."`
}

// Run lists the conversations.
func (c *ConversationsListCmd) Run(g *globals) error {
	q := url.Values{}
	setParam(q, "agent", c.Agent)
	setParam(q, "channel", c.Channel)
	setParam(q, "after", c.After)
	q.Set("limit", fmt.Sprint(c.Limit))
	var raw json.RawMessage
	if err := c.call("GET", "/v1/conversations?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Conversations []api.ConversationItem `json:"conversations"`
		Next          string                 `json:"next"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode conversations: %w", err)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONVERSATION\tAGENT\tCHANNEL\tOUR ADDRESS\tWITH\tSUBJECT\tTURNS\tLAST INBOUND")
	for _, v := range out.Conversations {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", v.ID, v.Agent, v.Channel, v.OurAddress,
			dash(clip(strings.Join(v.Participants, ", "), 40)), dash(clip(v.Subject, 40)), v.Turns, stamp(v.LastInboundAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(g.stdout, out.Next)
}

// ConversationsShowCmd shows one conversation.
type ConversationsShowCmd struct {
	apiFlags
	ID   string `arg:"" help:"Conversation id (cnv_…)."`
	JSON bool   `name:"json" help:"Print JSON."`
}

// Run shows the conversation: its binding, then its messages as a thread.
func (c *ConversationsShowCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("GET", "/v1/conversations/"+url.PathEscape(c.ID), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var d api.ConversationDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decode conversation: %w", err)
	}
	v := d.Conversation
	w := g.stdout
	fmt.Fprintf(w, "Conversation  %s\n", v.ID)
	fmt.Fprintf(w, "Agent         %s\n", v.Agent)
	fmt.Fprintf(w, "Channel       %s, from %s\n", v.Channel, v.OurAddress)
	fmt.Fprintf(w, "With          %s\n", dash(strings.Join(v.Participants, ", ")))
	if v.Subject != "" {
		fmt.Fprintf(w, "Subject       %s\n", v.Subject)
	}
	fmt.Fprintf(w, "Started       %s\n", stamp(v.CreatedAt))
	fmt.Fprintf(w, "Turns         %d\n", v.Turns)
	if d.Window != nil {
		state := "closed"
		if d.Window.Open {
			state = "open"
		}
		if !d.Window.ClosesAt.IsZero() {
			verb := "closes"
			if !d.Window.Open {
				verb = "closed"
			}
			state += fmt.Sprintf(" (%s %s)", verb, stamp(d.Window.ClosesAt))
		}
		fmt.Fprintf(w, "Window        %s\n", state)
	}
	fmt.Fprintln(w)
	if len(d.Messages) == 0 {
		fmt.Fprintln(w, "No messages.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tDIR\tID\tSTATE\tTEXT")
	for _, m := range d.Messages {
		id, dir := m.InboundID, "in"
		if m.Direction == "out" {
			id, dir = m.DeliveryID, "out"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", stamp(m.At), dir, dash(id), dash(m.State), dash(oneLine(m.Text, 80)))
	}
	return tw.Flush()
}

// setParam sets a query parameter when the value is not empty.
func setParam(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// oneLine is s on one line (newlines and tabs as spaces), clipped.
func oneLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(s), " "), n)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// printNext tells how to get the next page, when there is one.
func printNext(w io.Writer, next string) error {
	if next == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nMore: pass --after %s\n", next)
	return err
}
