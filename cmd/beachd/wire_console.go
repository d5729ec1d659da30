package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/email"
	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/console"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

// consoleParts are what other wire steps leave for the console.
type consoleParts struct {
	scheduler *schedule.Scheduler
	emailFrom string
	// `beachd dev` only.
	texts    *twilio.RecorderLog
	devReply http.HandlerFunc
	sink     *webhook.Sink
	mail     *email.DevServer
}

// wireConsole mounts the operator console at /ui/. It runs after the
// ingester and the scheduler exist.
func (a *app) wireConsole() error {
	svc, ok := a.preparer.(*approvals.Service)
	if !ok {
		return errors.New("the approvals service must be built before the console")
	}
	var keys []console.Key
	for _, k := range a.cfg.APIKeys {
		keys = append(keys, console.Key{Secret: k.Key, ReadOnly: k.Role == config.RoleRead})
	}
	// Sessions are signed with a key derived from the approvals secret, so
	// they survive a restart and end when that secret changes.
	m := hmac.New(sha256.New, a.linkSecret)
	m.Write([]byte("beachd console sessions"))
	deps := console.Deps{DB: a.db, Approvals: svc, Enqueuer: a.enqueuer, Notify: a.dispatcher.Notify,
		Renditions: &renditions{a: a}, Log: a.log.With("component", "console")}
	if a.console.scheduler != nil {
		deps.Schedules = a.console.scheduler
	}
	if d, ok := a.deliverers[envelope.ChannelWebhook].(*webhook.Deliverer); ok {
		urls := map[string]string{}
		for n, ep := range a.cfg.Webhooks.Endpoints {
			urls[n] = ep.URL
		}
		deps.Webhooks = &webhookEndpoints{d: d, names: sortedNames(a.cfg.Webhooks.Endpoints), urls: urls}
	}
	if c := a.conversationsAPI(); c != nil {
		deps.Conversations = c
	}
	if a.dev {
		deps.Dev = &devInbox{a: a}
	}
	if a.slackHealth != nil {
		deps.Slack = slackConsole{a}
	}
	c, err := console.New(console.Config{Keys: keys, Secret: m.Sum(nil), PublicURL: a.cfg.PublicURL, Channels: a.channelNames(), Now: a.now}, deps)
	if err != nil {
		return err
	}
	a.routes = append(a.routes, api.Route{Pattern: "/ui/", Handler: c})
	if a.dev {
		a.banner = append(a.banner, fmt.Sprintf("console      %s/ui/   (sign in with the API key)", a.cfg.PublicURL))
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type webhookEndpoints struct {
	d     *webhook.Deliverer
	names []string
	urls  map[string]string
}

func (w *webhookEndpoints) Endpoints() []webhook.EndpointStatus {
	out := make([]webhook.EndpointStatus, 0, len(w.names))
	for _, n := range w.names {
		if st, ok := w.d.Status(n); ok {
			out = append(out, st)
		}
	}
	return out
}

func (w *webhookEndpoints) Enable(name string) bool { return w.d.Enable(name) }

func (w *webhookEndpoints) URL(name string) string { return w.urls[name] }

// renditions renders a delivery as its channel would now, without approval
// handles.
type renditions struct{ a *app }

func (r *renditions) Render(ctx context.Context, d *store.Delivery) (*console.Rendition, error) {
	if r.a.renderer == nil {
		return nil, errors.New("no renderer is configured")
	}
	rec, err := r.a.db.Envelope(ctx, d.EnvelopeID)
	if err != nil {
		return nil, err
	}
	env, err := envelope.Decode(rec.Envelope, envelope.Limits{MaxBytes: r.a.cfg.Limits.MaxEnvelopeBytes, MaxParts: r.a.cfg.Limits.MaxParts})
	if err != nil {
		return nil, fmt.Errorf("decode the envelope: %w", err)
	}
	in := render.Input{Envelope: env, Registry: r.a.registry, DeliveryID: d.ID, Now: r.a.now(),
		Recipient: render.Recipient{Channel: d.Channel, Address: d.To}}
	out := &console.Rendition{}
	switch d.Channel {
	case envelope.ChannelEmail:
		in.From = r.a.console.emailFrom
		if in.From == "" {
			in.From = "beachd <beachd@localhost>"
		}
		em, err := r.a.renderer.Email(in)
		if err != nil {
			return nil, err
		}
		out.Subject, out.HTML, out.Text = em.Subject, em.HTML, em.Text
		for _, at := range em.Attachments {
			out.Facts = append(out.Facts, console.Fact{Name: "Attachment", Value: at.Filename + " (" + at.MimeType + ")"})
		}
		if msg, err := email.BuildMessage(in.From, d.To, r.a.now(), em); err == nil {
			var b bytes.Buffer
			if _, err := msg.WriteTo(&b); err == nil && b.Len() <= 4<<20 {
				out.MIME = b.Bytes()
			}
		}
	case envelope.ChannelSMS:
		s, err := r.a.renderer.SMS(in)
		if err != nil {
			return nil, err
		}
		out.Text = s.Body
		if len(s.Parts) > 0 {
			out.Text = strings.Join(s.Parts, "\n\n— next part —\n\n")
		}
		out.Facts = []console.Fact{{Name: "Encoding", Value: s.Encoding}, {Name: "Segments", Value: strconv.Itoa(s.Segments)}}
		if s.Truncated {
			out.Facts = append(out.Facts, console.Fact{Name: "Truncated", Value: "yes"})
		}
	case envelope.ChannelWhatsApp:
		in.WhatsAppWindowOpen = true
		wa, err := r.a.renderer.WhatsApp(in)
		if err != nil {
			return nil, err
		}
		out.Text = wa.Body
		for _, b := range wa.Buttons {
			out.Facts = append(out.Facts, console.Fact{Name: "Button", Value: b.Title})
		}
		for _, u := range wa.MediaURLs {
			out.Facts = append(out.Facts, console.Fact{Name: "Media", Value: u})
		}
	case envelope.ChannelWebhook:
		if ep, ok := r.a.cfg.Webhooks.Endpoints[d.To]; ok {
			in.Consumes = ep.Consumes
		}
		e, err := r.a.renderer.Webhook(in)
		if errors.Is(err, render.ErrEmpty) {
			e, err = r.a.registry.Filter(env, envelope.ChannelWebhook, in.Consumes), nil
		}
		if err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return nil, err
		}
		out.Text = string(b)
	default:
		return nil, fmt.Errorf("no preview for channel %q", d.Channel)
	}
	return out, nil
}

// devInbox shows `beachd dev`'s recorded messages through the console.
type devInbox struct{ a *app }

func (d *devInbox) Texts() []console.DevText {
	if d.a.console.texts == nil {
		return nil
	}
	var out []console.DevText
	for _, m := range d.a.console.texts.Messages() {
		t := console.DevText{Channel: m.Channel, To: m.To, Body: m.Body, DeliveryID: m.DeliveryID, At: m.At}
		for _, b := range m.Buttons {
			t.Buttons = append(t.Buttons, console.DevButton{Title: b.Title, Payload: b.Payload})
		}
		out = append(out, t)
	}
	return out
}

func (d *devInbox) Webhooks() []console.DevWebhook {
	if d.a.console.sink == nil {
		return nil
	}
	var out []console.DevWebhook
	for _, r := range d.a.console.sink.Received() {
		w := console.DevWebhook{ID: r.ID, Type: r.Type, DeliveryID: r.DeliveryID, Error: r.Error, Verified: r.Verified,
			Duplicate: r.Duplicate, Bytes: r.EnvelopeBytes, At: r.ReceivedAt}
		if env, err := envelope.Decode(r.Envelope, envelope.Limits{}); err == nil {
			for _, p := range env.Parts {
				if t := strings.TrimSpace(strings.NewReplacer("**", "", "__", "", "`", "").Replace(p.TextValue())); t != "" {
					if rs := []rune(t); len(rs) > 160 {
						t = string(rs[:159]) + "…"
					}
					w.Text = t
					break
				}
			}
		}
		out = append(out, w)
	}
	return out
}

func (d *devInbox) AgentReceived() []console.DevDecision {
	if d.a.devAgent == nil {
		return nil
	}
	d.a.devAgent.mu.Lock()
	defer d.a.devAgent.mu.Unlock()
	out := make([]console.DevDecision, 0, len(d.a.devAgent.received))
	for _, r := range d.a.devAgent.received {
		out = append(out, console.DevDecision{ApprovalID: r.Response.ApprovalID, Decision: r.Response.Decision,
			Reason: r.Response.Reason, DecidedBy: r.Response.DecidedBy, At: r.At})
	}
	return out
}

func (d *devInbox) Mail() console.DevMail {
	if d.a.console.mail == nil {
		return console.DevMail{Lines: []string{"No local mail server: the email channel is configured."}}
	}
	m := console.DevMail{Lines: d.a.console.mail.Banner(), Received: d.a.console.mail.Received()}
	for _, k := range d.a.console.mail.Messages() {
		dm := console.DevMailMessage{At: k.At, Mailboxes: k.Mailboxes, From: k.From, To: k.To, Subject: k.Subject,
			ReplyTo: k.ReplyTo, Text: k.Text, Cut: k.Cut}
		// beachd's Message-IDs begin with the delivery's id (dlv_….token@…).
		local, _, _ := strings.Cut(k.MessageID, "@")
		if id, _, _ := strings.Cut(local, "."); strings.HasPrefix(id, "dlv_") && slices.Contains(dm.Mailboxes, "you") {
			dm.DeliveryID = id
		}
		m.Messages = append(m.Messages, dm)
	}
	return m
}

// Reply goes through the dev handler's own form path, as /dev/reply does.
func (d *devInbox) Reply(ctx context.Context, channel, from, body, payload string) error {
	if d.a.console.devReply == nil {
		return errors.New("SMS and WhatsApp are not recorded here")
	}
	form := url.Values{"channel": {channel}, "from": {from}}
	if body != "" {
		form.Set("body", body)
	}
	if payload != "" {
		form.Set("button_payload", payload)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/dev/reply", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	d.a.console.devReply(rec, req)
	if rec.Code >= 300 {
		return fmt.Errorf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return nil
}
