package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// twilioInboundPath is where Twilio posts inbound messages and status
// callbacks; public_url + this path is what Twilio signs.
const twilioInboundPath = "/v1/inbound/twilio"

// errNoTwilioCredentials: serve (and config check) refuse a twilio section
// without credentials, which only `beachd dev` accepts.
var errNoTwilioCredentials = errors.New("twilio.account_sid and twilio.auth_token are required (only `beachd dev` records messages without them)")

// wireTwilio builds the SMS and WhatsApp deliverers and the signed inbound
// webhook from the `twilio:` section. In `beachd dev` without credentials,
// both channels record instead of sending, and /dev/messages and /dev/reply
// let a person read and answer them.
func (a *app) wireTwilio() error {
	c := a.cfg.Twilio
	if c == nil && !a.dev {
		return nil
	}
	r := a.renderer
	if r == nil {
		var err error
		if r, err = render.New(render.Config{PublicURL: a.cfg.PublicURL}); err != nil {
			return err
		}
	}
	renderFn := twilio.Renderer(r, a.registry, a.wireMessagePages(r))
	if c == nil || !c.HasCredentials() {
		if !a.dev {
			return errNoTwilioCredentials
		}
		return a.wireTwilioRecorder(c, renderFn)
	}
	log := a.log.With("component", "twilio")
	timeout := durationOr(c.Timeout, defaultTwilioTimeout)
	client, err := twilio.NewClient(twilio.ClientConfig{AccountSID: c.AccountSID, AuthToken: c.AuthToken,
		APIBaseURL: c.APIBaseURL, Timeout: timeout, MediaFetch: a.fetcher})
	if err != nil {
		return err
	}
	limiter := twilio.NewLimiter(twilio.LimiterConfig{PerSecond: c.RatePerSecond, Burst: c.Burst})
	hookURL := a.cfg.PublicURL + twilioInboundPath
	cfg := twilio.Config{
		SMSFrom: c.SMSFrom, WhatsAppFrom: c.WhatsAppFrom, MessagingServiceSID: c.MessagingServiceSID,
		StatusCallback: hookURL,
		Templates:      twilio.Templates{Approval: contentTemplate(c.WhatsAppTemplates.Approval), Result: contentTemplate(c.WhatsAppTemplates.Result)},
		// The limiter may wait as long as the attempt leaves after one call.
		CallReserve:     timeout,
		Now:             a.now,
		WindowTemplate:  c.WhatsApp.WindowTemplate,
		NoQuickReplies:  c.WhatsApp.QuickReplies != nil && !*c.WhatsApp.QuickReplies,
		SMSNumbers:      a.cfg.InboundNumbers(envelope.ChannelSMS),
		WhatsAppNumbers: a.cfg.InboundNumbers(envelope.ChannelWhatsApp),
	}
	a.media = client
	deps := twilio.Deps{Client: client, Store: a.db, Limiter: limiter, Render: renderFn, Log: log}
	policy := channels.MessagingPolicy
	policy.Lifetime = durationOr(c.Lifetime, policy.Lifetime)
	// An attempt may wait for the rate limit, look up a maybe-sent message
	// and send: room for a wait and two calls.
	policy.Timeout = max(policy.Timeout, 3*timeout)
	if c.SMSFrom != "" || c.MessagingServiceSID != "" {
		sms, err := twilio.NewSMS(cfg, deps)
		if err != nil {
			return err
		}
		a.deliverers[envelope.ChannelSMS] = sms
		a.policies[envelope.ChannelSMS] = policy
	}
	if c.WhatsAppFrom != "" || c.MessagingServiceSID != "" {
		wa, err := twilio.NewWhatsApp(cfg, deps)
		if err != nil {
			return err
		}
		a.deliverers[envelope.ChannelWhatsApp] = wa
		a.policies[envelope.ChannelWhatsApp] = policy
	}
	h, err := twilio.NewHandler(twilio.HandlerConfig{AuthToken: c.AuthToken, URL: hookURL, Now: a.now}, a.db, a.twilioDecider(), log)
	if err != nil {
		return err
	}
	a.routes = append(a.routes, api.Route{Method: "POST", Pattern: twilioInboundPath, Handler: h, Auth: false})
	return nil
}

const defaultTwilioTimeout = 15 * time.Second

// wireTwilioRecorder sets up the recorded SMS and WhatsApp of `beachd dev`.
func (a *app) wireTwilioRecorder(c *config.TwilioConfig, renderFn twilio.RenderFunc) error {
	rec := twilio.NewRecorderLog(1000)
	for _, ch := range []string{envelope.ChannelSMS, envelope.ChannelWhatsApp} {
		d, err := twilio.NewRecorder(ch, a.db, rec, renderFn, a.now)
		if err != nil {
			return err
		}
		a.deliverers[ch] = d
	}
	ours := devAgentNumber
	if c != nil && c.SMSFrom != "" {
		ours = c.SMSFrom
	}
	// The dev handler reuses the webhook's processing; nothing signs for it,
	// so it is mounted only on a loopback listener (or behind the API key).
	h, err := twilio.NewHandler(twilio.HandlerConfig{AuthToken: "dev", URL: a.cfg.PublicURL + twilioInboundPath, Now: a.now},
		a.db, a.twilioDecider(), a.log.With("component", "twilio-dev"))
	if err != nil {
		return err
	}
	dev := &twilio.DevHandler{Log: rec, Inbound: h, OurNumber: ours, Now: a.now}
	if a.media == nil {
		// No Twilio account: the media a /dev/reply message names by URL,
		// through the guarded client (a URL in a message is content).
		a.media = twilio.DevMediaFetcher{Fetch: a.fetcher}
	}
	a.console.texts, a.console.devReply = rec, dev.Reply
	open := a.listener != nil && isLoopback(a.listener.Addr())
	a.routes = append(a.routes,
		api.Route{Method: "GET", Pattern: "/dev/messages", Handler: http.HandlerFunc(dev.Messages), Auth: !open},
		api.Route{Method: "POST", Pattern: "/dev/reply", Handler: devPostGuard(http.HandlerFunc(dev.Reply), open, a.cfg.PublicURL), Auth: !open})
	a.banner = append(a.banner,
		fmt.Sprintf("sms/whatsapp %s/dev/messages   (recorded, not sent; answer: curl %[1]s/dev/reply -d channel=sms --data-urlencode from=+… --data-urlencode body='YES 123456')", a.cfg.PublicURL))
	return nil
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// twilioDecider is where inbound messages go: approvals, or, when approvals is
// not wired, a sink that only logs (status callbacks still work).
func (a *app) twilioDecider() interface {
	HandleInbound(context.Context, envelope.Inbound) (envelope.InboundResult, error)
} {
	if a.inbound != nil {
		return a.inbound
	}
	return twilioNoDecider{}
}

type twilioNoDecider struct{}

func (twilioNoDecider) HandleInbound(context.Context, envelope.Inbound) (envelope.InboundResult, error) {
	return envelope.InboundResult{Outcome: "ignored"}, nil
}

// contentTemplate is the renderer's view of a configured WhatsApp content
// template; nil when it is not configured.
func contentTemplate(t *config.TwilioTemplateConfig) *render.ContentTemplate {
	if t == nil {
		return nil
	}
	return &render.ContentTemplate{ContentSID: t.ContentSID, Variables: t.Variables}
}

// wireMessagePages mounts the full-message pages (/m/{ref}) that an SMS or
// WhatsApp message cut short links to, and returns the link maker. A page
// shows the envelope as the email channel renders it.
func (a *app) wireMessagePages(r *render.Renderer) func(deliveryID string) string {
	if a.messageURL != nil {
		return a.messageURL // mounted once, for every channel that cuts
	}
	links := api.NewMessageLinks(a.linkSecret, a.cfg.PublicURL)
	page := &api.MessagePage{Links: links, DB: a.db, Log: a.log.With("component", "pages"),
		Render: func(env *envelope.Envelope, d *store.Delivery) (string, error) {
			e, err := r.Email(render.Input{Envelope: env, Registry: a.registry, DeliveryID: d.ID, Now: a.now(), Page: true,
				Recipient: render.Recipient{Channel: envelope.ChannelEmail, Address: d.To}})
			if err != nil {
				return "", err
			}
			return e.HTML, nil
		}}
	a.routes = append(a.routes, api.MessageRoutes(page)...)
	a.messageURL = links.URL
	return links.URL
}
