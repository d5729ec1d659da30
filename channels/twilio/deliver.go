package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	texttemplate "text/template"
	"time"

	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/templates"
)

// Store is what the deliverers keep between runs (WhatsApp windows,
// opt-outs). Every store.Store implements it.
type Store interface {
	GetKV(ctx context.Context, key string) ([]byte, bool, error)
	PutKV(ctx context.Context, key string, val []byte) error
	DeleteKV(ctx context.Context, key string) error
}

// Templates are WhatsApp content templates (Twilio Content API). Their
// variables are text/templates over render.View, evaluated by the renderer
// (e.g. {"1": "{{.Text}}", "2": "{{(index .Approvals 0).ApprovalID}}"}).
type Templates struct {
	// Approval is used for deliveries that ask for an approval; its
	// quick-reply buttons carry the payloads (variables button1…3).
	Approval *render.ContentTemplate
	// Result is used for everything else.
	Result *render.ContentTemplate
}

// Config configures the SMS and WhatsApp deliverers.
type Config struct {
	// SMSFrom is the sending number (E.164) for SMS; WhatsAppFrom the
	// WhatsApp sender ("whatsapp:+…" or "+…"). MessagingServiceSID, when
	// set, is used instead of a From number on both channels.
	SMSFrom             string
	WhatsAppFrom        string
	MessagingServiceSID string
	// StatusCallback is public_url + "/v1/inbound/twilio"; empty sends none.
	StatusCallback string
	// Templates for WhatsApp outside the 24-hour window.
	Templates Templates
	// SMSNumbers and WhatsAppNumbers are further numbers of ours (E.164;
	// "whatsapp:" optional) that a delivery may name as its sender (Extra
	// "from": the number the person wrote to, e.g. an agent's inbound
	// number). SMSFrom and WhatsAppFrom are always allowed.
	SMSNumbers      []string
	WhatsAppNumbers []string
	// WindowTemplate is the content SID (HX…) of the WhatsApp template
	// sent for a delivery that asks for it (Extra "template": "window"):
	// the person's 24-hour window is closed and the answer itself waits
	// until they write again.
	WindowTemplate string
	// NoQuickReplies: never create the approval quick-reply content
	// through the Content API. By default, a WhatsApp approval inside the
	// window with no approval template goes out with quick-reply buttons
	// from a content beachd creates once (and caches in the Store); with
	// NoQuickReplies, or when the creation fails, it goes out as text with
	// a code.
	NoQuickReplies bool
	// CallReserve is the part of an attempt's deadline kept for the HTTP
	// call when waiting for the rate limiter; default 5s.
	CallReserve time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Validate reports the first problem with c for the given channel.
func (c Config) validate(channel string) error {
	switch channel {
	case envelope.ChannelSMS:
		if c.MessagingServiceSID == "" && !isE164(c.SMSFrom) {
			return fmt.Errorf("twilio: sms_from %q must be an E.164 number (or set messaging_service_sid)", c.SMSFrom)
		}
	case envelope.ChannelWhatsApp:
		if c.MessagingServiceSID == "" && !isE164(strings.TrimPrefix(c.WhatsAppFrom, "whatsapp:")) {
			return fmt.Errorf("twilio: whatsapp_from %q must be whatsapp:+E.164 (or set messaging_service_sid)", c.WhatsAppFrom)
		}
	default:
		return fmt.Errorf("twilio: no sender for channel %q (sms or whatsapp)", channel)
	}
	for _, n := range c.SMSNumbers {
		if !isE164(n) {
			return fmt.Errorf("twilio: sms number %q must be an E.164 number", n)
		}
	}
	for _, n := range c.WhatsAppNumbers {
		if !isE164(strings.TrimPrefix(n, "whatsapp:")) {
			return fmt.Errorf("twilio: whatsapp number %q must be whatsapp:+E.164 or +E.164", n)
		}
	}
	if c.WindowTemplate != "" && !contentSID.MatchString(c.WindowTemplate) {
		return fmt.Errorf("twilio: whatsapp window_template %q must be a content SID (HX and 32 hex digits)", c.WindowTemplate)
	}
	for name, t := range map[string]*render.ContentTemplate{"approval": c.Templates.Approval, "result": c.Templates.Result} {
		if t == nil {
			continue
		}
		if t.ContentSID == "" {
			return fmt.Errorf("twilio: whatsapp_templates.%s.content_sid is required", name)
		}
		for k, v := range t.Variables {
			if _, err := texttemplate.New(k).Funcs(templates.Funcs()).Parse(v); err != nil {
				return fmt.Errorf("twilio: whatsapp_templates.%s.variables.%s: %w", name, k, err)
			}
		}
	}
	return nil
}

// Deps are the parts the deliverers share.
type Deps struct {
	// Client is the shared Twilio client.
	Client *Client
	Store  Store
	// Limiter paces each sender; shared by SMS and WhatsApp.
	Limiter *Limiter
	// Render turns a job into a message; nil renders with the embedded
	// default templates (render.New(render.Config{})).
	Render RenderFunc
	Log    *slog.Logger
}

// sender is the machinery SMS and WhatsApp share.
type sender struct {
	channel string
	cfg     Config
	api     messageAPI
	content contentAPI
	store   Store
	limiter *Limiter
	render  RenderFunc
	log     *slog.Logger

	// slots are the limiter slots Admit reserved, by delivery id: the
	// time each may be used.
	mu    sync.Mutex
	slots map[string]time.Time

	// quick serialises the creation of quick-reply content; quickFailed
	// is until when, after a failed creation, none is tried again.
	quick       sync.Mutex
	quickFailed time.Time
}

// admitAhead bounds how far ahead Admit reserves a slot of the sender's
// rate limit, and so how long a dispatch worker waits in Deliver for the
// slot it was admitted with. A job whose slot would be further off is not
// admitted: it stays due, and the worker is free for other channels.
const admitAhead = 2 * time.Second

// Admit reserves the job's first message a slot of the sender's rate
// limit within admitAhead, or refuses it.
func (s *sender) Admit(d *store.Delivery) bool {
	wait, ok := s.limiter.reserve(s.senderKey(d), admitAhead)
	if !ok {
		return false
	}
	s.mu.Lock()
	s.slots[d.ID] = s.limiter.now().Add(wait)
	s.mu.Unlock()
	return true
}

// Done gives back a slot Admit reserved that no message used.
func (s *sender) Done(d *store.Delivery) {
	s.mu.Lock()
	_, unused := s.slots[d.ID]
	delete(s.slots, d.ID)
	s.mu.Unlock()
	if unused {
		s.limiter.cancel(s.senderKey(d))
	}
}

// pace waits for the sender's rate limit before a message: for the slot
// Admit reserved, when there is one, or else for the next free slot. It
// returns a RetryAfter error when that is beyond ctx's deadline.
func (s *sender) pace(ctx context.Context, d *store.Delivery) error {
	key := s.senderKey(d)
	s.mu.Lock()
	at, ok := s.slots[d.ID]
	delete(s.slots, d.ID)
	s.mu.Unlock()
	if ok {
		wait := at.Sub(s.limiter.now())
		if dl, has := ctx.Deadline(); has && wait > 0 && time.Until(dl)-s.cfg.CallReserve < wait {
			s.limiter.cancel(key)
			return &channels.Error{RetryAfter: wait, Err: fmt.Errorf("%s rate limit: this attempt's slot is %s away, beyond its deadline", s.channel, wait.Round(time.Millisecond))}
		}
		if err := s.limiter.sleep(ctx, wait); err != nil {
			s.limiter.cancel(key)
			return channels.Temporary(fmt.Errorf("wait for the %s rate limit: %w", s.channel, err))
		}
		return nil
	}
	if ra, err := s.limiter.Wait(ctx, key, s.cfg.CallReserve); err != nil {
		return channels.Temporary(fmt.Errorf("wait for the %s rate limit: %w", s.channel, err))
	} else if ra > 0 {
		return &channels.Error{RetryAfter: ra, Err: fmt.Errorf("%s rate limit: next slot for this sender in %s", s.channel, ra.Round(time.Millisecond))}
	}
	return nil
}

// SMS delivers jobs as SMS through Twilio.
type SMS struct{ s *sender }

// WhatsApp delivers jobs as WhatsApp messages through Twilio.
type WhatsApp struct{ s *sender }

var (
	_ channels.Deliverer       = (*SMS)(nil)
	_ channels.Deliverer       = (*WhatsApp)(nil)
	_ channels.ChannelAdmitter = (*SMS)(nil)
	_ channels.ChannelAdmitter = (*WhatsApp)(nil)
)

// NewSMS builds the SMS deliverer.
func NewSMS(cfg Config, deps Deps) (*SMS, error) {
	s, err := newSender(envelope.ChannelSMS, cfg, deps)
	if err != nil {
		return nil, err
	}
	return &SMS{s: s}, nil
}

// NewWhatsApp builds the WhatsApp deliverer.
func NewWhatsApp(cfg Config, deps Deps) (*WhatsApp, error) {
	s, err := newSender(envelope.ChannelWhatsApp, cfg, deps)
	if err != nil {
		return nil, err
	}
	return &WhatsApp{s: s}, nil
}

func newSender(channel string, cfg Config, deps Deps) (*sender, error) {
	if err := cfg.validate(channel); err != nil {
		return nil, err
	}
	if deps.Client == nil || deps.Store == nil {
		return nil, errors.New("twilio: a client and a store are required")
	}
	if cfg.CallReserve <= 0 {
		cfg.CallReserve = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if deps.Limiter == nil {
		deps.Limiter = NewLimiter(LimiterConfig{})
	}
	if deps.Render == nil {
		r, err := render.New(render.Config{})
		if err != nil {
			return nil, fmt.Errorf("twilio: default renderer: %w", err)
		}
		deps.Render = Renderer(r, nil, nil)
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return &sender{channel: channel, cfg: cfg, api: deps.Client, content: deps.Client, store: deps.Store, limiter: deps.Limiter,
		render: deps.Render, log: deps.Log, slots: map[string]time.Time{}}, nil
}

// Deliver sends job as one SMS.
func (d *SMS) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	return d.s.deliver(ctx, job)
}

// Admit reserves the job a slot of the sender's rate limit (see admitAhead).
func (d *SMS) Admit(del *store.Delivery) bool { return d.s.Admit(del) }

// Done gives back a slot Admit reserved that no message used.
func (d *SMS) Done(del *store.Delivery) { d.s.Done(del) }

// RefusesChannel: a refusal is about the sender's rate limit, which every
// SMS job shares (channels.ChannelAdmitter).
func (d *SMS) RefusesChannel() {}

// Admit reserves the job a slot of the sender's rate limit (see admitAhead).
func (d *WhatsApp) Admit(del *store.Delivery) bool { return d.s.Admit(del) }

// RefusesChannel: a refusal is about the sender's rate limit, which every
// WhatsApp job shares (channels.ChannelAdmitter).
func (d *WhatsApp) RefusesChannel() {}

// Done gives back a slot Admit reserved that no message used.
func (d *WhatsApp) Done(del *store.Delivery) { d.s.Done(del) }

// Deliver sends job as one WhatsApp message.
func (d *WhatsApp) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	return d.s.deliver(ctx, job)
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func isE164(s string) bool { return e164.MatchString(s) }

// Keys in the Store.
func optOutKey(channel, number string) string { return "twilio-optout/" + channel + "/" + number }
func windowKey(number string) string          { return "wa-window/" + number }

// pairWindowKey is the window of person with one number of ours: WhatsApp
// opens the window per pair. windowKey is the window with any of ours.
func pairWindowKey(ours, person string) string { return "wa-window/" + ours + "/" + person }

// windowMargin keeps a send off the edge of the channel's answer window.
const windowMargin = 5 * time.Minute

// window is how long after the person's last message free-form messages
// are allowed on the sender's channel (its spec's window), less the margin.
func (s *sender) window() time.Duration {
	spec, _ := envelope.Channel(s.channel)
	return spec.Inbound.Window - windowMargin
}

func (s *sender) address(n string) string {
	if s.channel == envelope.ChannelWhatsApp {
		return "whatsapp:" + n
	}
	return n
}

func (s *sender) from() string {
	if s.channel == envelope.ChannelWhatsApp {
		if s.cfg.WhatsAppFrom == "" {
			return ""
		}
		if strings.HasPrefix(s.cfg.WhatsAppFrom, "whatsapp:") {
			return s.cfg.WhatsAppFrom
		}
		return "whatsapp:" + s.cfg.WhatsAppFrom
	}
	return s.cfg.SMSFrom
}

// fromFor is the From address of delivery d: the number its Extra "from"
// names, which must be one of the channel's configured numbers, or ""
// when it names none (then the configured sender: from(), or the
// Messaging Service).
func (s *sender) fromFor(d *store.Delivery) (string, error) {
	want := strings.TrimPrefix(strings.TrimSpace(d.Extra[envelope.ExtraFrom]), "whatsapp:")
	if want == "" {
		return "", nil
	}
	allowed := s.cfg.SMSNumbers
	def := s.cfg.SMSFrom
	if s.channel == envelope.ChannelWhatsApp {
		allowed, def = s.cfg.WhatsAppNumbers, strings.TrimPrefix(s.cfg.WhatsAppFrom, "whatsapp:")
	}
	if isE164(want) && (want == def || slices.ContainsFunc(allowed, func(n string) bool { return strings.TrimPrefix(n, "whatsapp:") == want })) {
		return s.address(want), nil
	}
	return "", fmt.Errorf("%w: %q is not one of the configured %s numbers", ErrUnknownSender, truncate(want, 40), s.channel)
}

// sendingFrom is the From of d's messages, "" for the Messaging Service.
func (s *sender) sendingFrom(d *store.Delivery) (string, error) {
	f, err := s.fromFor(d)
	if err != nil || f != "" {
		return f, err
	}
	if s.cfg.MessagingServiceSID != "" {
		return "", nil
	}
	return s.from(), nil
}

// senderKey names the limiter's bucket of d: its From number, or the
// Messaging Service.
func (s *sender) senderKey(d *store.Delivery) string {
	if f, err := s.sendingFrom(d); err == nil && f != "" {
		return f
	}
	if s.cfg.MessagingServiceSID != "" {
		return s.cfg.MessagingServiceSID
	}
	return s.from()
}

// OptedOut reports whether number has opted out on channel.
func optedOut(ctx context.Context, st Store, channel, number string) (bool, error) {
	_, ok, err := st.GetKV(ctx, optOutKey(channel, number))
	return ok, err
}

// windowOpen reports whether number's window is open: with our number
// ours when a delivery names it (Extra "from"), else with any of ours.
func (s *sender) windowOpen(ctx context.Context, ours, number string) (bool, error) {
	key := windowKey(number)
	if ours != "" {
		key = pairWindowKey(ours, number)
	}
	v, ok, err := s.store.GetKV(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	t, err := time.Parse(time.RFC3339Nano, string(v))
	if err != nil {
		return false, nil
	}
	return s.cfg.Now().Sub(t) < s.window(), nil
}

func (s *sender) deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	res, err := s.attempt(ctx, job)
	if err != nil && job.Delivery.MaybeSent {
		// Nothing this attempt did settles whether the earlier one reached
		// Twilio: the next attempt must still look before it sends.
		e := channels.AsError(err)
		if !e.Permanent {
			e.MaybeSent = true
			if e.ProviderID == "" {
				e.ProviderID = job.Delivery.ProviderID
			}
			return nil, e
		}
	}
	return res, err
}

func (s *sender) attempt(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	d := job.Delivery
	to := d.To
	if !isE164(to) {
		return nil, channels.Permanent(fmt.Errorf("%w: %s", ErrBadNumber, redact(to)))
	}
	if out, err := optedOut(ctx, s.store, s.channel, to); err != nil {
		return nil, channels.Temporary(fmt.Errorf("read opt-out: %w", err))
	} else if out {
		return nil, channels.Permanent(ErrOptedOut)
	}
	from, err := s.sendingFrom(d)
	if err != nil {
		return nil, channels.Permanent(err)
	}
	msg, err := s.message(ctx, job)
	if err != nil {
		return nil, err
	}
	res, err := s.send(ctx, job, from, msg)
	if err != nil && msg.textFallback != nil {
		// Twilio refused the quick-reply message itself (its variables,
		// say): the approval goes out as text with a code instead.
		if e := channels.AsError(err); e.Permanent && !e.MaybeSent && !errors.Is(err, ErrOptedOut) {
			s.log.Warn("whatsapp quick-reply message refused; approval sent as text", "delivery_id", d.ID, "err", err)
			text, terr := msg.textFallback()
			if terr != nil {
				return nil, terr
			}
			return s.send(ctx, job, from, text)
		}
	}
	return res, err
}

// send sends msg from `from` (the Messaging Service when ""): one message,
// or an SMS's parts in turn.
func (s *sender) send(ctx context.Context, job *channels.Job, from string, msg *Message) (*channels.Result, error) {
	d := job.Delivery
	if msg.ContentSID == "" && len(msg.Bodies) == 0 && len(msg.MediaURLs) == 0 {
		return nil, channels.Permanent(ErrEmptyMessage)
	}
	if msg.ContentSID != "" || len(msg.Bodies) == 0 {
		msg.Bodies = []string{""} // one message: the template, or media only
	}

	// An SMS split into parts is several messages; each is looked up
	// (when an earlier attempt may have sent it) and sent in turn.
	var sids []string
	var first *openapi.ApiV2010Message
	firstRecovered := false
	maybe := d.MaybeSent || d.ProviderID != ""
	for i, body := range msg.Bodies {
		m, recovered, err := s.sendOne(ctx, job, from, msg, i, body, maybe, sids)
		if err != nil {
			e := channels.AsError(err)
			if i > 0 {
				// Parts already went out: the next attempt must look
				// before it sends, so that they are not repeated; and
				// their SIDs are recorded (receipt meta "parts") so that
				// their status callbacks find the delivery even if it
				// never sends again.
				e.MaybeSent = true
				e.ProviderID = sids[0]
				if e.Receipt == nil {
					e.Receipt = &channels.Receipt{Data: map[string]any{}, Meta: map[string]any{"source": "twilio"}}
				}
				if e.Receipt.Meta == nil {
					e.Receipt.Meta = map[string]any{}
				}
				e.Receipt.Meta["parts"] = slices.Clone(sids)
			}
			return nil, e
		}
		if i == 0 {
			first, firstRecovered = m, recovered
		}
		sids = append(sids, deref(m.Sid))
	}
	res := s.result(first, firstRecovered)
	if len(sids) > 1 {
		res.Receipt.Meta["parts"] = sids
	}
	return res, nil
}

// sendOne sends one message of a delivery (the template, or one body),
// unless lookFirst finds that an earlier attempt already did.
func (s *sender) sendOne(ctx context.Context, job *channels.Job, from string, msg *Message, part int, body string, lookFirst bool, used []string) (*openapi.ApiV2010Message, bool, error) {
	d := job.Delivery
	if lookFirst {
		m, err := s.recover(ctx, job, from, part, body, used)
		if err != nil {
			return nil, false, err
		}
		if m != nil {
			s.log.Info("earlier attempt reached twilio; not sending again", "delivery_id", d.ID, "channel", s.channel, "part", part)
			return m, true, nil
		}
	}
	if err := s.pace(ctx, d); err != nil {
		return nil, false, err
	}
	m, info, err := s.api.CreateMessage(ctx, s.params(from, d.To, msg, body))
	if err != nil {
		e := classify(ctx, err, info, true)
		if errors.Is(e.Err, ErrOptedOut) {
			if perr := s.store.PutKV(context.WithoutCancel(ctx), optOutKey(s.channel, d.To), []byte(s.cfg.Now().UTC().Format(time.RFC3339))); perr != nil {
				s.log.Warn("record opt-out", "delivery_id", d.ID, "err", perr)
			}
		}
		return nil, false, e
	}
	return m, false, nil
}

// params are the Messages API parameters of one message from `from` (the
// Messaging Service when "").
func (s *sender) params(from, to string, msg *Message, body string) *openapi.CreateMessageParams {
	p := (&openapi.CreateMessageParams{}).SetTo(s.address(to))
	if from == "" {
		p.SetMessagingServiceSid(s.cfg.MessagingServiceSID)
	} else {
		p.SetFrom(from)
	}
	if s.cfg.StatusCallback != "" {
		p.SetStatusCallback(s.cfg.StatusCallback)
	}
	if msg.ContentSID != "" {
		p.SetContentSid(msg.ContentSID)
		if len(msg.ContentVariables) > 0 {
			b, _ := json.Marshal(msg.ContentVariables)
			p.SetContentVariables(string(b))
		}
	} else if body != "" {
		p.SetBody(body)
	}
	if len(msg.MediaURLs) > 0 {
		p.SetMediaUrl(msg.MediaURLs)
	}
	return p
}

func (s *sender) result(m *openapi.ApiV2010Message, recovered bool) *channels.Result {
	sid, status := deref(m.Sid), deref(m.Status)
	meta := map[string]any{"source": "twilio", "sid": sid, "status": status}
	if m.ErrorCode != nil {
		meta["errorCode"] = *m.ErrorCode
	}
	if recovered {
		meta["recovered"] = true
	}
	return &channels.Result{ProviderID: sid, Receipt: channels.Receipt{Data: m, Meta: meta}}
}

// recover looks for a message (part `part` of the delivery, with text
// body, not one of the used SIDs already matched to earlier parts) that a
// previous, maybe-sent attempt created. It returns the message
// when Twilio has it, nil when it does not, and an error when it cannot
// tell (then nothing is sent: the next attempt asks again).
func (s *sender) recover(ctx context.Context, job *channels.Job, from string, part int, body string, used []string) (*openapi.ApiV2010Message, error) {
	d := job.Delivery
	if d.ProviderID != "" && part == 0 {
		m, info, err := s.api.FetchMessage(ctx, d.ProviderID)
		if err == nil {
			return m, nil
		}
		e := classify(ctx, err, info, false)
		if _, status, _, _ := info.snapshot(); status != 404 {
			e.Permanent = false
			e.Err = fmt.Errorf("look up earlier attempt: %w", e.Err)
			return nil, e
		}
		// 404: the recorded SID is unknown; fall through to the listing.
	}
	if body == "" {
		// A template message's body is Twilio's rendering of it, which we
		// cannot match: send again (at-least-once).
		s.log.Warn("maybe-sent template message cannot be matched; sending again", "delivery_id", d.ID, "channel", s.channel)
		return nil, nil
	}
	list, info, err := s.api.RecentMessages(ctx, s.address(d.To), from, 50)
	if err != nil {
		e := classify(ctx, err, info, false)
		e.Permanent = false
		e.Err = fmt.Errorf("look up earlier attempt: %w", e.Err)
		return nil, e
	}
	since := d.CreatedAt.Add(-time.Minute)
	for i := range list {
		m := &list[i]
		if dir := deref(m.Direction); dir != "" && !strings.HasPrefix(dir, "outbound") {
			continue
		}
		if created, err := time.Parse(time.RFC1123Z, deref(m.DateCreated)); err == nil && created.Before(since) {
			continue
		}
		if slices.Contains(used, deref(m.Sid)) {
			continue
		}
		// Twilio prefixes a trial account's messages: a suffix match.
		if got := deref(m.Body); got == body || strings.HasSuffix(got, body) {
			return m, nil
		}
	}
	return nil, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// redact keeps a phone number's country code and last two digits.
func redact(n string) string {
	if len(n) <= 5 {
		return "***"
	}
	return n[:3] + strings.Repeat("*", len(n)-5) + n[len(n)-2:]
}
