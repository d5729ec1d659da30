package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/mail"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels/email"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	gomail "github.com/wneessen/go-mail"
)

// RenderCmd prints what beachd would send for an envelope on one channel:
// the tool a template author uses. With --config it renders as the daemon
// running on that file would: its render section and public_url, its
// consumer part types, its email addresses, a webhook endpoint's consumes
// list and its limits; the file is checked as `beachd config check` checks
// it. Without --config it renders on the built-in defaults. Flags given
// override the file.
type RenderCmd struct {
	Channel          string   `required:"" enum:"email,sms,whatsapp,slack,webhook" help:"Channel: email, sms, whatsapp, slack or webhook."`
	Format           string   `default:"text" enum:"text,html,mime,json" help:"Output: text, html (email), mime (email: the whole RFC 5322 message), json."`
	Templates        string   `type:"path" help:"Template override directory (default: render.templates_dir)."`
	To               string   `help:"Recipient address (email address, E.164 number or webhook endpoint name)."`
	From             string   `help:"Sender address for email (default: email.from, else beachd <beachd@example.org>)."`
	ReplyTo          string   `name:"reply-to" help:"Base reply address for email, local@replydomain (default: from email.reply_domain)."`
	PublicURL        string   `name:"public-url" help:"Base URL of links in messages (default: public_url, else http://127.0.0.1:8025)."`
	Consumes         []string `help:"Webhook endpoint's consumes list (default: that of the --to endpoint in the configuration)."`
	SMSPolicy        string   `name:"sms-policy" help:"SMS over the cap: truncate or split (default: render.sms.policy, else truncate)."`
	AttachDomainData bool     `name:"attach-domain-data" help:"Attach domain-data as JSON to email when no surface shows it (default: render.email.attach_domain_data)."`
	Now              string   `help:"Render as of this time: RFC 3339 (2026-04-20T10:00:00Z), or 'produced' for the envelope's meta.producedAt (default: the current time, as a delivery now would be)."`
	File             string   `arg:"" type:"existingfile" help:"An envelope, a delivery request ({\"envelope\", \"to\"}, as POST /v1/deliveries takes; its first recipient on --channel is the recipient unless --to is given), or a bare A2UI surface (wrapped in a one-part envelope)."`
}

// Run renders the file, with the configuration file when --config names one.
func (c *RenderCmd) Run(g *globals, withConfig configGiven) error {
	o := renderOpts{
		Channel: c.Channel, Format: c.Format, TemplatesDir: c.Templates, To: c.To, From: c.From,
		ReplyTo: c.ReplyTo, PublicURL: c.PublicURL, Consumes: c.Consumes, SMSPolicy: c.SMSPolicy,
		AttachDomainData: c.AttachDomainData, File: c.File, Now: g.now(), Stderr: g.stderr,
	}
	switch c.Now {
	case "":
	case "produced":
		o.NowProduced = true
	default:
		t, err := time.Parse(time.RFC3339, c.Now)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--now %q: want an RFC 3339 time such as 2026-04-20T10:00:00Z, or produced", c.Now)}
		}
		o.Now = t
	}
	if withConfig {
		cfg, reg, err := config.Check(g.configPath, g.getenv, true)
		if err != nil {
			return err
		}
		o.Config, o.Registry = cfg, reg
	}
	return runRender(g.stdout, o)
}

// renderOpts are the preview's options. Empty strings take their value
// from Config, or the built-in default.
type renderOpts struct {
	Channel, Format, TemplatesDir, To, From, ReplyTo, PublicURL string
	Consumes                                                    []string
	SMSPolicy                                                   string
	AttachDomainData                                            bool
	File                                                        string
	Now                                                         time.Time
	// NowProduced: render as of the envelope's meta.producedAt.
	NowProduced bool
	// Stderr receives what the reader of the rendition should know (an
	// approval already expired); nil: dropped.
	Stderr io.Writer

	// Config is the validated configuration file and Registry the part
	// types it defines; nil: the built-in defaults.
	Config   *config.Config
	Registry *envelope.Registry

	// Set by previewConfig: from Config, and the placeholder SMS code.
	MessageIDDomain string
	SMSCode         string
	// NoEmailLinks: approvals.email_links is false.
	NoEmailLinks bool
}

// previewFrom is the sender without --from or email.from.
const previewFrom = "beachd <beachd@example.org>"

// previewToken and friends stand in for the approval handles the approvals
// package would mint: valid in shape, obviously not real.
const (
	previewToken    = "previewpreviewpreviewprevi"
	previewDelivery = "preview"
)

func runRender(w io.Writer, o renderOpts) error {
	usage := func(format string, args ...any) error {
		return &exitError{code: 2, err: fmt.Errorf(format, args...)}
	}
	spec, ok := envelope.Channel(o.Channel)
	if !ok {
		return usage("--channel %q: must be %s", o.Channel, strings.Join(envelope.ChannelNames(), ", "))
	}
	switch o.Format {
	case "", "text", "json":
	case "html", "mime":
		if spec.Class != envelope.ClassEmail {
			return usage("--format %s is for email only", o.Format)
		}
	default:
		return usage("--format %q: must be text, html, mime or json", o.Format)
	}
	switch o.SMSPolicy {
	case "", render.SMSTruncate, render.SMSSplit:
	default:
		return usage("--sms-policy %q: must be truncate or split", o.SMSPolicy)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	maxBytes := envelope.DefaultLimits.MaxBytes
	if o.Config != nil && o.Config.Limits.MaxEnvelopeBytes > 0 {
		maxBytes = o.Config.Limits.MaxEnvelopeBytes
	}
	f, err := os.Open(o.File)
	if err != nil {
		return err
	}
	// A delivery request's envelope plus its recipients and some room.
	raw, err := envelope.ReadLimited(f, maxBytes+64<<10)
	f.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", o.File, err)
	}
	if inner, to, ok, err := unwrapDeliveryRequest(raw); err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	} else if ok {
		raw = inner
		if o.To == "" {
			o.To = recipientOn(to, o.Channel)
		}
	}
	cfg, reg, err := o.previewConfig()
	if err != nil {
		return err
	}
	lim := envelope.Limits{MaxBytes: maxBytes, MaxParts: cfg.Limits.MaxParts}
	env, err := envelopeOrSurface(raw, lim, o.Now)
	if err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	if err := reg.Validate(env); err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	if o.NowProduced && !env.Meta.ProducedAt.IsZero() {
		o.Now = env.Meta.ProducedAt
	}
	warnExpired(o.Stderr, env, o.Now, o.NowProduced)
	r, err := newRenderer(cfg)
	if err != nil {
		return err
	}
	in, err := previewInput(env, reg, o)
	if err != nil {
		return err
	}
	var out []byte
	switch o.Channel {
	case envelope.ChannelEmail:
		e, err := r.Email(in)
		if err != nil {
			return err
		}
		out, err = emailOutput(e, o)
		if err != nil {
			return err
		}
	case envelope.ChannelSMS:
		s, err := r.SMS(in)
		if err != nil {
			return err
		}
		if o.Format == "json" {
			out, err = json.MarshalIndent(s, "", "  ")
		} else {
			out = []byte(s.Body)
			for i, p := range s.Parts {
				out = fmt.Appendf(out, "\n\n--- part %d of %d ---\n%s", i+1, len(s.Parts), p)
			}
		}
		if err != nil {
			return err
		}
	case envelope.ChannelWhatsApp:
		wa, err := r.WhatsApp(in)
		if err != nil {
			return err
		}
		if o.Format == "json" {
			out, err = json.MarshalIndent(wa, "", "  ")
			if err != nil {
				return err
			}
		} else {
			out = []byte(wa.Body)
			for _, b := range wa.Buttons {
				out = fmt.Appendf(out, "\n[ %s ]", b.Title)
			}
			for _, u := range wa.MediaURLs {
				out = fmt.Appendf(out, "\nmedia: %s", u)
			}
		}
	case envelope.ChannelSlack:
		sl, err := r.Slack(in)
		if err != nil {
			return err
		}
		if o.Format == "json" {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(sl); err != nil {
				return err
			}
			out = b.Bytes()
		} else {
			out = slackPreview(sl)
		}
	case envelope.ChannelWebhook:
		f, err := r.Webhook(in)
		if err != nil {
			return err
		}
		var v any = f
		if o.Format == "json" {
			v = map[string]any{"type": "beach.envelope", "timestamp": o.Now.UTC().Format(time.RFC3339),
				"data": map[string]any{"deliveryId": previewDelivery, "envelope": f}}
		}
		if out, err = json.MarshalIndent(v, "", "  "); err != nil {
			return err
		}
	default:
		return fmt.Errorf("no renderer for channel %q", o.Channel)
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	_, err = w.Write(out)
	return err
}

// previewConfig is the configuration the preview renders with, the file's
// or the built-in defaults, with the flags given laid over it; and the
// part-type registry. It settles o's options that come from the
// configuration (sender, reply address, a webhook endpoint's consumes).
func (o *renderOpts) previewConfig() (*config.Config, *envelope.Registry, error) {
	var cfg config.Config
	reg := o.Registry
	if o.Config != nil {
		cfg = *o.Config
	} else {
		cfg.FillDefaults()
	}
	if reg == nil {
		reg = envelope.NewRegistry()
	}
	if o.PublicURL != "" {
		cfg.PublicURL = strings.TrimRight(o.PublicURL, "/")
	}
	o.PublicURL = cfg.PublicURL
	if o.TemplatesDir != "" {
		cfg.Render.TemplatesDir = o.TemplatesDir
	}
	if o.SMSPolicy != "" {
		cfg.Render.SMS.Policy = o.SMSPolicy
	}
	if o.AttachDomainData {
		cfg.Render.Email.AttachDomainData = true
	}
	if ec := cfg.Email; ec != nil {
		if o.From == "" {
			o.From = ec.From
		}
		if o.ReplyTo == "" {
			o.ReplyTo = ec.ReplyTo()
		}
		o.MessageIDDomain = ec.MessageIDDomain
	}
	if o.From == "" {
		o.From = previewFrom
	}
	if spec, _ := envelope.Channel(o.Channel); o.Config != nil && spec.Address == envelope.AddressEndpoint && o.To != "" {
		// The daemon sends only to configured endpoints, each with its
		// own consumes list.
		ep, ok := cfg.Webhooks.Endpoints[o.To]
		if !ok {
			return nil, nil, &exitError{code: 2, err: fmt.Errorf("--to %q: no such endpoint in webhooks.endpoints", o.To)}
		}
		if len(o.Consumes) == 0 {
			o.Consumes = ep.Consumes
		}
	}
	// A code as long as the daemon's (approvals.sms_code_digits, default
	// 6 in the approvals package), so that an SMS is as long as sent.
	digits := cfg.Approvals.SMSCodeDigits
	if digits == 0 {
		digits = 6
	}
	o.SMSCode = strings.Repeat("0", digits)
	o.NoEmailLinks = cfg.Approvals.EmailLinks != nil && !*cfg.Approvals.EmailLinks
	return &cfg, reg, nil
}

// unwrapDeliveryRequest recognises a delivery request, the body of POST
// /v1/deliveries ({"envelope": {…}, "to": […], "agent": "…"}), and returns
// its envelope and recipients; ok is false for anything else.
func unwrapDeliveryRequest(raw []byte) (env json.RawMessage, to []envelope.Recipient, ok bool, err error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return nil, nil, false, nil
	}
	if _, has := probe["envelope"]; !has {
		return nil, nil, false, nil
	}
	if _, has := probe["parts"]; has {
		return nil, nil, false, nil // an envelope (with a stray "envelope" key, which Decode refuses)
	}
	var req struct {
		Envelope json.RawMessage      `json:"envelope"`
		To       []envelope.Recipient `json:"to"`
		Agent    string               `json:"agent"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, nil, false, fmt.Errorf("a delivery request ({\"envelope\", \"to\", \"agent\"}, as POST /v1/deliveries takes) that does not decode: %w", err)
	}
	return req.Envelope, req.To, true, nil
}

// recipientOn is the address (or endpoint) of the first recipient on
// channel; "" when there is none.
func recipientOn(to []envelope.Recipient, channel string) string {
	for _, r := range to {
		if r.Channel == channel {
			return r.Target()
		}
	}
	return ""
}

// warnExpired tells the reader when an approval in env has expired by the
// time rendered: the rendition is then the expired form, which cannot be
// answered, and that may not be what they came to see.
func warnExpired(w io.Writer, env *envelope.Envelope, now time.Time, produced bool) {
	ars, err := env.ApprovalRequests()
	if err != nil {
		return
	}
	for _, ar := range ars {
		if ar.ExpiresAt == nil || ar.ExpiresAt.After(now) {
			continue
		}
		fmt.Fprintf(w, "beachd render: approval %s expired at %s, before the time rendered (%s): this is the expired form, which cannot be answered.",
			ar.ApprovalID, ar.ExpiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		if !produced {
			fmt.Fprint(w, " Pass --now produced to render it as it was sent, at the envelope's producedAt.")
		}
		fmt.Fprintln(w)
	}
}

// envelopeOrSurface decodes raw as an envelope, or, when it is not one (no
// "parts"), as a bare A2UI surface wrapped in a one-part envelope.
func envelopeOrSurface(raw []byte, lim envelope.Limits, now time.Time) (*envelope.Envelope, error) {
	var probe any
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if obj, ok := probe.(map[string]any); ok {
		if _, isEnv := obj["parts"]; isEnv {
			return envelope.Decode(raw, lim)
		}
	}
	return &envelope.Envelope{
		Role:  "agent",
		Parts: []envelope.Part{{Data: json.RawMessage(raw), Metadata: map[string]any{"partType": envelope.PartA2UISurface}}},
		Meta:  envelope.Meta{SessionID: "render-preview", TurnID: "render-preview", ProducedAt: now.UTC(), FinalizedBy: "complete"},
	}, nil
}

// previewInput is the rendering input a real delivery would have, with
// placeholder approval handles (the approvals service is not running).
func previewInput(env *envelope.Envelope, reg *envelope.Registry, o renderOpts) (render.Input, error) {
	to := o.To
	spec, err := envelope.LookupChannel(o.Channel)
	if err != nil {
		return render.Input{}, err
	}
	if to == "" {
		switch spec.Address {
		case envelope.AddressEmail:
			to = "recipient@example.org"
		case envelope.AddressEndpoint:
			to = "endpoint"
		case envelope.AddressNumber:
			to = "+15555550100"
		case envelope.AddressSlack:
			to = "U0PREVIEW0"
		default:
			return render.Input{}, fmt.Errorf("channel %q: no preview address for address kind %q", o.Channel, spec.Address)
		}
	}
	in := render.Input{
		Envelope: env, Registry: reg, DeliveryID: previewDelivery, Now: o.Now,
		Recipient: render.Recipient{Channel: o.Channel, Address: to},
		From:      o.From, ReplyTo: o.ReplyTo, MessageIDDomain: o.MessageIDDomain, Consumes: o.Consumes,
		FullMessageURL:     strings.TrimRight(o.PublicURL, "/") + "/m/" + previewDelivery,
		WhatsAppWindowOpen: true,
	}
	ars, err := env.ApprovalRequests()
	if err != nil {
		return in, err
	}
	for _, ar := range ars {
		// As the approvals service issues them: a link for mail (unless
		// approvals.email_links is off) and webhooks.
		h := render.ApprovalHandle{ApprovalID: ar.ApprovalID, Request: ar}
		link := strings.TrimRight(o.PublicURL, "/") + "/a/preview"
		switch {
		case spec.Class == envelope.ClassWebhook:
			h.LinkURL = link
		case spec.Supports(envelope.HandleToken):
			h.Token = previewToken
			if !o.NoEmailLinks {
				h.LinkURL = link
			}
		case spec.Supports(envelope.HandleButton):
			h.Buttons = []render.Button{{Title: "Approve", Payload: ar.ApprovalID + ":preview-yes"}, {Title: "Deny", Payload: ar.ApprovalID + ":preview-no"}}
		case spec.Supports(envelope.HandleCode):
			h.Code = o.SMSCode
		}
		if ar.ExpiresAt != nil {
			h.ExpiresAt = *ar.ExpiresAt
		}
		in.Approvals = append(in.Approvals, h)
	}
	return in, nil
}

func emailOutput(e *render.Email, o renderOpts) ([]byte, error) {
	switch o.Format {
	case "html":
		return []byte(e.HTML), nil
	case "json":
		type att struct {
			Filename  string `json:"filename"`
			MimeType  string `json:"mimeType"`
			SizeBytes int    `json:"sizeBytes"`
		}
		atts := make([]att, 0, len(e.Attachments))
		for _, a := range e.Attachments {
			atts = append(atts, att{a.Filename, a.MimeType, len(a.Bytes)})
		}
		return json.MarshalIndent(map[string]any{
			"subject": e.Subject, "text": e.Text, "html": e.HTML, "attachments": atts, "headers": e.Headers,
			"warnings": e.Warnings,
		}, "", "  ")
	case "mime":
		m, err := mimeMessage(e, o)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if _, err := m.WriteTo(&b); err != nil {
			return nil, fmt.Errorf("write message: %w", err)
		}
		return b.Bytes(), nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Subject: %s\n", e.Subject)
	keys := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, e.Headers[k])
	}
	for _, a := range e.Attachments {
		fmt.Fprintf(&b, "Attachment: %s (%s, %d bytes)\n", a.Filename, a.MimeType, len(a.Bytes))
	}
	b.WriteString("\n" + e.Text)
	return b.Bytes(), nil
}

// mimeMessage builds the message exactly as the email channel sends it.
func mimeMessage(e *render.Email, o renderOpts) (*gomail.Msg, error) {
	to := o.To
	if to == "" {
		to = "recipient@example.org"
	}
	if _, err := mail.ParseAddress(to); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--to: %w", err)}
	}
	m, err := email.BuildMessage(o.From, to, o.Now, e)
	if err != nil {
		return nil, fmt.Errorf("--from/--to: %w", err)
	}
	return m, nil
}

// slackPreview is a Slack message as text: each block on its lines
// (sections, "name: value" fields, context in parentheses, "---" for a
// divider, "[ Approve ]" for a button), mrkdwn as Slack receives it.
func slackPreview(m *render.Slack) []byte {
	var b bytes.Buffer
	for i, bl := range m.Blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch bl.Type {
		case "divider":
			b.WriteString("---\n")
		case "header":
			fmt.Fprintf(&b, "# %s\n", bl.Text.Text)
		case "context":
			for _, e := range bl.Elements {
				if t, ok := e.(render.SlackText); ok {
					fmt.Fprintf(&b, "(%s)\n", t.Text)
				}
			}
		case "actions":
			for _, e := range bl.Elements {
				if bt, ok := e.(render.SlackButton); ok {
					fmt.Fprintf(&b, "[ %s ] ", bt.Text.Text)
				}
			}
			b.WriteByte('\n')
		default:
			if bl.Text != nil {
				b.WriteString(bl.Text.Text + "\n")
			}
			for _, f := range bl.Fields {
				b.WriteString("  " + strings.ReplaceAll(f.Text, "\n", ": ") + "\n")
			}
		}
	}
	for _, w := range m.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s", w)
	}
	return b.Bytes()
}
