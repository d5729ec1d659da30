package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/email"
	"github.com/cool-ai/beachd/config"
)

// InboundCmd shows what beachd makes of inbound messages.
type InboundCmd struct {
	Parse   InboundParseCmd   `cmd:"" help:"Parse a raw reply (RFC 5322, from a file or stdin) and print what beachd makes of it, as JSON."`
	List    InboundListCmd    `cmd:"" help:"List the inbound messages a running beachd received, newest first, with what became of each (approval, turn, rejected, …)."`
	Release InboundReleaseCmd `cmd:"" help:"Let a message a flood limit held (inb_…) start its turn now, whatever the limits."`
}

// InboundReleaseCmd releases a held inbound message.
type InboundReleaseCmd struct {
	apiFlags
	ID string `arg:"" help:"The held message (inb_…)."`
}

// Run releases the message.
func (c *InboundReleaseCmd) Run(g *globals) error {
	var out struct {
		Inbound api.InboundItem `json:"inbound"`
	}
	if err := c.call("POST", "/v1/inbound/release/"+url.PathEscape(c.ID), nil, &out); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s released: turn %s goes to %s now\n", out.Inbound.ID, out.Inbound.TurnID, out.Inbound.Agent)
	return nil
}

// InboundListCmd lists inbound messages of a running beachd.
type InboundListCmd struct {
	apiFlags
	Disposition string `help:"approval, turn, rejected, ignored, held, unrouted or duplicate." enum:",approval,turn,rejected,ignored,held,unrouted,duplicate" default:""`
	Channel     string `help:"email, sms or whatsapp." enum:",email,sms,whatsapp" default:""`
	Agent       string `help:"Only messages routed to this agent."`
	Limit       int    `default:"100" help:"At most this many."`
	After       string `help:"Continue after this cursor (the next value of the previous page)."`
	JSON        bool   `name:"json" help:"Print JSON."`
}

// Run lists the inbound messages.
func (c *InboundListCmd) Run(g *globals) error {
	q := url.Values{}
	setParam(q, "disposition", c.Disposition)
	setParam(q, "channel", c.Channel)
	setParam(q, "agent", c.Agent)
	setParam(q, "after", c.After)
	q.Set("limit", fmt.Sprint(c.Limit))
	var raw json.RawMessage
	if err := c.call("GET", "/v1/inbound?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Inbound []api.InboundItem `json:"inbound"`
		Next    string            `json:"next"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("decode inbound: %w", err)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INBOUND	RECEIVED	CHANNEL	FROM	TO	DISPOSITION	AGENT	BECAME	TEXT")
	for _, m := range out.Inbound {
		became := m.ConversationID
		if m.ApprovalID != "" {
			became = m.ApprovalID
		}
		disp := m.Disposition
		if m.Reason != "" {
			disp += " (" + oneLine(m.Reason, 40) + ")"
		}
		text := m.Text
		if text == "" {
			text = m.Subject
		}
		if len(m.Attachments) > 0 {
			text = fmt.Sprintf("[%d attachment(s)] %s", len(m.Attachments), text)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, stamp(m.ReceivedAt), m.Channel, m.From, m.To, disp,
			dash(m.Agent), dash(became), dash(oneLine(text, 60)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printNext(g.stdout, out.Next)
}

// InboundParseCmd is `beachd inbound parse [--channel email] [FILE] < reply.eml`.
// It needs no configuration file; when the configuration file exists, its
// email section supplies the reply domain, Message-ID domain, our own
// address and the trusted authserv-id, and the flags override them.
type InboundParseCmd struct {
	Channel         string `default:"email" enum:"email" help:"Channel of the message (email)."`
	ReplyDomain     string `name:"reply-domain" help:"Reply domain (plus-address tokens: LOCAL+TOKEN@DOMAIN)."`
	ReplyLocal      string `name:"reply-local" help:"Local part of the reply address."`
	MessageIDDomain string `name:"message-id-domain" help:"Domain of our Message-IDs."`
	AuthservID      string `name:"authserv-id" help:"Verify the sender with the Authentication-Results of this authserv-id."`
	TrustUnauth     bool   `name:"trust-unauthenticated" help:"Believe From without verification (as email.trust_unauthenticated)."`
	From            string `name:"own-address" help:"Our own sending address (mail from it is ignored)."`
	MaxBytes        int    `name:"max-bytes" default:"10485760" help:"Largest message read."`
	File            string `arg:"" optional:"" help:"Message file; '-' or absent reads stdin."`
}

// inboundJSON is the output of `beachd inbound parse` (docs/operations.md), plus
// the conflict, authentication and warning details.
type inboundJSON struct {
	From           string   `json:"from"`
	To             string   `json:"to"`
	Subject        string   `json:"subject"`
	MessageID      string   `json:"messageId"`
	InReplyTo      string   `json:"inReplyTo"`
	AutoGenerated  bool     `json:"autoGenerated"`
	Bounce         bool     `json:"bounce"`
	IgnoredBecause string   `json:"ignoredBecause"`
	Token          string   `json:"token"`
	TokenSource    string   `json:"tokenSource"`
	TokenConflict  bool     `json:"tokenConflict"`
	AuthFailed     bool     `json:"authFailed"`
	AuthDetail     string   `json:"authDetail,omitempty"`
	ReplyText      string   `json:"replyText"`
	Decision       string   `json:"decision"`
	DecisionReason string   `json:"decisionReason"`
	Warnings       []string `json:"warnings,omitempty"`
	// What conversations read: every address it was sent to, the
	// conversation of a signed reply address (when the approvals key is
	// at hand), the text before trimming and the attachments (never their
	// bytes; kept is false for one over the bounds).
	Recipients   []string         `json:"recipients"`
	Conversation string           `json:"conversation,omitempty"`
	FullText     string           `json:"fullText"`
	Attachments  []attachmentJSON `json:"attachments"`
}

type attachmentJSON struct {
	Filename  string `json:"filename"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
	Kept      bool   `json:"kept"`
}

// Run parses the message.
func (c *InboundParseCmd) Run(g *globals) error {
	var r io.Reader = os.Stdin
	if c.File != "" && c.File != "-" {
		f, err := os.Open(c.File)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	raw, err := io.ReadAll(io.LimitReader(r, int64(c.MaxBytes)+1))
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	opts := email.ParseOptions{MaxBytes: c.MaxBytes, ReceivedAt: g.now()}
	conf := c.config(g)
	words := approvals.EnglishWords()
	if conf != nil {
		// The daemon's decision words (approvals.words), so that the
		// decision shown is the one the daemon would take.
		if w, err := conf.Approvals.ParseWords(); err != nil {
			fmt.Fprintf(g.stderr, "beachd: approvals.words ignored: %v\n", err)
		} else {
			words = w
		}
	}
	if conf != nil {
		opts.ConversationKey = conversationKeyIfKnown(conf, "reply addresses")
	}
	if cfg := configEmail(conf); cfg != nil {
		opts.ReplyDomain, opts.ReplyLocal = cfg.ReplyDomain, cfg.ReplyLocalPart()
		opts.MessageIDDomain, opts.AuthServID = cfg.MessageIDDomain, cfg.AuthServID
		opts.DKIMAlignment = cfg.DKIMAlignment
		opts.TrustUnauthenticated = cfg.TrustUnauthenticated
		if f := cfg.FromAddress(); f != "" {
			opts.OwnAddresses = []string{f}
		}
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&opts.ReplyDomain, c.ReplyDomain)
	set(&opts.ReplyLocal, c.ReplyLocal)
	set(&opts.MessageIDDomain, c.MessageIDDomain)
	if c.AuthservID != "" {
		opts.AuthServID, opts.TrustUnauthenticated = c.AuthservID, false
	}
	if c.TrustUnauth {
		opts.AuthServID, opts.TrustUnauthenticated = "", true
	}
	if c.From != "" {
		opts.OwnAddresses = []string{c.From}
	}
	p, err := email.ParseMessage(raw, opts)
	if err != nil {
		return err
	}
	in := p.Inbound
	out := inboundJSON{
		From: in.From, To: in.To, Subject: in.Subject, MessageID: in.MessageID, InReplyTo: in.InReplyTo,
		AutoGenerated: in.AutoGenerated, Bounce: in.Bounce, IgnoredBecause: in.IgnoredBecause,
		Token: in.Token, TokenSource: in.TokenSource, TokenConflict: in.TokenConflict,
		AuthFailed: in.AuthFailed, AuthDetail: in.AuthDetail, ReplyText: in.Text, Warnings: p.Warnings,
		Recipients: in.Recipients, Conversation: in.Conversation, FullText: in.FullText, Attachments: []attachmentJSON{},
	}
	if out.Recipients == nil {
		out.Recipients = []string{}
	}
	for _, at := range in.Attachments {
		out.Attachments = append(out.Attachments, attachmentJSON{Filename: at.Filename, MediaType: at.MediaType, Size: at.Size, Kept: at.Data != nil})
	}
	// A message that is ignored or failed authentication decides nothing,
	// whatever its text says.
	if in.IgnoredBecause == "" && !in.AuthFailed && !in.AutoGenerated {
		if d, reason, ok := words.Parse(in.Text); ok {
			out.Decision, out.DecisionReason = d, reason
		}
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// config reads the configuration file (email section, decision words) when the
// file exists; a missing file is normal, a broken one is reported and
// ignored.
func (c *InboundParseCmd) config(g *globals) *config.Config {
	if g.configPath == "" {
		return nil
	}
	if _, err := os.Stat(g.configPath); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	cfg, err := config.Load(g.configPath, g.getenv)
	if err != nil {
		fmt.Fprintf(g.stderr, "beachd: configuration ignored: %v\n", err)
		return nil
	}
	return cfg
}

// configEmail is the email section of a configuration that may be absent.
func configEmail(c *config.Config) *config.EmailConfig {
	if c == nil {
		return nil
	}
	return c.Email
}
