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
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/templates"
	gomail "github.com/wneessen/go-mail"
)

// RenderCmd prints what beachd would send for an envelope on one channel:
// the tool a template author uses. It needs no configuration file.
type RenderCmd struct {
	Channel          string   `required:"" enum:"email,sms,whatsapp,webhook" help:"Channel: email, sms, whatsapp or webhook."`
	Format           string   `default:"text" enum:"text,html,mime,json" help:"Output: text, html (email), mime (email: the whole RFC 5322 message), json."`
	Templates        string   `type:"path" help:"Template override directory (as render.templates_dir)."`
	To               string   `help:"Recipient address (email address, E.164 number or webhook endpoint name)."`
	From             string   `default:"beachd <beachd@example.org>" help:"Sender address for email."`
	ReplyTo          string   `name:"reply-to" help:"Base reply address for email (local@replydomain)."`
	PublicURL        string   `name:"public-url" default:"http://127.0.0.1:8025" help:"public_url, for approval links in the preview."`
	Consumes         []string `help:"Webhook endpoint's consumes list."`
	SMSPolicy        string   `name:"sms-policy" default:"truncate" enum:"truncate,split" help:"SMS over the cap: truncate or split."`
	AttachDomainData bool     `name:"attach-domain-data" help:"Attach domain-data as JSON to email when no surface shows it."`
	File             string   `arg:"" type:"existingfile" help:"An envelope, or a bare A2UI surface (wrapped in a one-part envelope)."`
}

// Run renders the file.
func (c *RenderCmd) Run(g *globals) error {
	return runRender(g.stdout, renderOpts{
		Channel: c.Channel, Format: c.Format, TemplatesDir: c.Templates, To: c.To, From: c.From,
		ReplyTo: c.ReplyTo, PublicURL: c.PublicURL, Consumes: c.Consumes, SMSPolicy: c.SMSPolicy,
		AttachDomainData: c.AttachDomainData, File: c.File, Now: g.now(),
	})
}

type renderOpts struct {
	Channel, Format, TemplatesDir, To, From, ReplyTo, PublicURL string
	Consumes                                                    []string
	SMSPolicy                                                   string
	AttachDomainData                                            bool
	File                                                        string
	Now                                                         time.Time
}

// previewToken and friends stand in for the approval handles the approvals
// package would mint: valid in shape, obviously not real.
const (
	previewToken    = "previewpreviewpreviewprevi"
	previewCode     = "0000"
	previewDelivery = "preview"
)

func runRender(w io.Writer, o renderOpts) error {
	usage := func(format string, args ...any) error {
		return &exitError{code: 2, err: fmt.Errorf(format, args...)}
	}
	if !envelope.KnownChannel(o.Channel) {
		return usage("--channel %q: must be email, sms, whatsapp or webhook", o.Channel)
	}
	switch o.Format {
	case "", "text", "json":
	case "html", "mime":
		if o.Channel != envelope.ChannelEmail {
			return usage("--format %s is for email only", o.Format)
		}
	default:
		return usage("--format %q: must be text, html, mime or json", o.Format)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	f, err := os.Open(o.File)
	if err != nil {
		return err
	}
	raw, err := envelope.ReadLimited(f, envelope.DefaultLimits.MaxBytes)
	f.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", o.File, err)
	}
	reg := envelope.NewRegistry()
	env, err := envelopeOrSurface(raw, o.Now)
	if err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	if err := reg.Validate(env); err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	set, err := templates.Load(o.TemplatesDir)
	if err != nil {
		return err
	}
	r, err := render.New(render.Config{Templates: set, PublicURL: o.PublicURL, SMSPolicy: o.SMSPolicy, AttachDomainData: o.AttachDomainData})
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
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	_, err = w.Write(out)
	return err
}

// envelopeOrSurface decodes raw as an envelope, or, when it is not one (no
// "parts"), as a bare A2UI surface wrapped in a one-part envelope.
func envelopeOrSurface(raw []byte, now time.Time) (*envelope.Envelope, error) {
	var probe any
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if obj, ok := probe.(map[string]any); ok {
		if _, isEnv := obj["parts"]; isEnv {
			return envelope.Decode(raw, envelope.Limits{})
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
	if to == "" {
		switch o.Channel {
		case envelope.ChannelEmail:
			to = "recipient@example.org"
		case envelope.ChannelWebhook:
			to = "endpoint"
		default:
			to = "+15555550100"
		}
	}
	in := render.Input{
		Envelope: env, Registry: reg, DeliveryID: previewDelivery, Now: o.Now,
		Recipient: render.Recipient{Channel: o.Channel, Address: to},
		From:      o.From, ReplyTo: o.ReplyTo, Consumes: o.Consumes,
		FullMessageURL:     strings.TrimRight(o.PublicURL, "/") + "/m/" + previewDelivery,
		WhatsAppWindowOpen: true,
	}
	ars, err := env.ApprovalRequests()
	if err != nil {
		return in, err
	}
	for _, ar := range ars {
		h := render.ApprovalHandle{ApprovalID: ar.ApprovalID, Request: ar,
			LinkURL: strings.TrimRight(o.PublicURL, "/") + "/a/preview"}
		switch o.Channel {
		case envelope.ChannelEmail:
			h.Token = previewToken
		case envelope.ChannelSMS:
			h.Code = previewCode
		case envelope.ChannelWhatsApp:
			h.Buttons = []render.Button{{Title: "Approve", Payload: ar.ApprovalID + ":preview-yes"}, {Title: "Deny", Payload: ar.ApprovalID + ":preview-no"}}
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
