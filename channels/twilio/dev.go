package twilio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// Recorded is a message the Recorder would have sent.
type Recorded struct {
	SID              string            `json:"sid"`
	DeliveryID       string            `json:"deliveryId"`
	Channel          string            `json:"channel"`
	To               string            `json:"to"`
	Body             string            `json:"body,omitempty"`
	Buttons          []render.Button   `json:"buttons,omitempty"`
	MediaURLs        []string          `json:"mediaUrls,omitempty"`
	ContentSID       string            `json:"contentSid,omitempty"`
	ContentVariables map[string]string `json:"contentVariables,omitempty"`
	At               time.Time         `json:"at"`
}

// RecorderLog is the shared list of recorded messages of both channels.
type RecorderLog struct {
	mu   sync.Mutex
	msgs []Recorded
	max  int
}

// NewRecorderLog keeps at most max messages (default 1000).
func NewRecorderLog(max int) *RecorderLog {
	if max <= 0 {
		max = 1000
	}
	return &RecorderLog{max: max}
}

func (l *RecorderLog) add(m Recorded) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, m)
	if len(l.msgs) > l.max {
		l.msgs = append([]Recorded(nil), l.msgs[len(l.msgs)-l.max:]...)
	}
}

// Messages returns the recorded messages, oldest first.
func (l *RecorderLog) Messages() []Recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Recorded(nil), l.msgs...)
}

// Recorder is the SMS and WhatsApp Deliverer of `beachd dev` without Twilio
// credentials: it renders like the real one, honours opt-outs, and keeps
// the message in a RecorderLog instead of sending it.
type Recorder struct {
	channel string
	store   Store
	render  RenderFunc
	now     func() time.Time
	log     *RecorderLog
}

var _ channels.Deliverer = (*Recorder)(nil)

// NewRecorder builds the recording deliverer for channel (sms or
// whatsapp). now nil means time.Now.
func NewRecorder(channel string, st Store, log *RecorderLog, render RenderFunc, now func() time.Time) (*Recorder, error) {
	if st == nil || log == nil || render == nil {
		return nil, errors.New("twilio: recorder needs a store, a log and a renderer")
	}
	if now == nil {
		now = time.Now
	}
	return &Recorder{channel: channel, store: st, render: render, now: now, log: log}, nil
}

// Deliver records the message the real deliverer would send.
func (d *Recorder) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	to := job.Delivery.To
	if !isE164(to) {
		return nil, channels.Permanent(fmt.Errorf("%w: %s", ErrBadNumber, redact(to)))
	}
	if out, err := optedOut(ctx, d.store, d.channel, to); err != nil {
		return nil, channels.Temporary(err)
	} else if out {
		return nil, channels.Permanent(ErrOptedOut)
	}
	msg, err := d.render(RenderInput{Channel: d.channel, Job: job, Now: d.now(), WindowOpen: true, ShowButtons: true})
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("render %s: %w", d.channel, err))
	}
	sum := sha256.Sum256([]byte(job.Delivery.ID))
	sid := "SM" + hex.EncodeToString(sum[:16])
	d.log.add(Recorded{SID: sid, DeliveryID: job.Delivery.ID, Channel: d.channel, To: to, Body: strings.Join(msg.Bodies, "\n"),
		Buttons: msg.Buttons, MediaURLs: msg.MediaURLs, ContentSID: msg.ContentSID, ContentVariables: msg.ContentVariables, At: d.now()})
	return &channels.Result{ProviderID: sid, Receipt: channels.Receipt{
		Data: map[string]any{"recorded": true},
		Meta: map[string]any{"source": "twilio", "sid": sid, "status": "recorded"},
	}}, nil
}

// DevHandler serves GET /dev/messages (what was recorded, as JSON) and POST
// /dev/reply (form: channel sms|whatsapp, from, body or button_payload):
// the reply goes through the same path as a signed Twilio webhook, without
// the signature. Mount it only in `beachd dev`, on loopback.
type DevHandler struct {
	Log     *RecorderLog
	Inbound *Handler
	// OurNumber is the To of simulated replies.
	OurNumber string
	Now       func() time.Time

	mu  sync.Mutex
	seq int
}

// Messages serves GET /dev/messages.
func (h *DevHandler) Messages(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	msgs := h.Log.Messages()
	if msgs == nil {
		msgs = []Recorded{}
	}
	json.NewEncoder(w).Encode(map[string]any{"messages": msgs})
}

// Reply serves POST /dev/reply.
func (h *DevHandler) Reply(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	channel := r.PostForm.Get("channel")
	from := r.PostForm.Get("from")
	if channel != envelope.ChannelSMS && channel != envelope.ChannelWhatsApp {
		http.Error(w, "channel must be sms or whatsapp", http.StatusBadRequest)
		return
	}
	if !isE164(from) {
		http.Error(w, "from must be an E.164 number", http.StatusBadRequest)
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	h.mu.Lock()
	h.seq++
	seq := h.seq
	h.mu.Unlock()
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d", now().UnixNano(), seq))
	form := url.Values{
		"MessageSid": {"SM" + hex.EncodeToString(sum[:16])},
		"From":       {from},
		"To":         {h.OurNumber},
		"Body":       {r.PostForm.Get("body")},
	}
	if channel == envelope.ChannelWhatsApp {
		form.Set("From", "whatsapp:"+from)
		form.Set("To", "whatsapp:"+h.OurNumber)
		form.Set("WaId", from[1:])
		if p := r.PostForm.Get("button_payload"); p != "" {
			form.Set("ButtonPayload", p)
			form.Set("ButtonText", r.PostForm.Get("button_text"))
		}
	}
	in := inboundFromForm(form, now())
	code, reason, res := h.Inbound.handleInbound(r.Context(), in)
	if code != http.StatusOK {
		http.Error(w, reason, code)
		return
	}
	out := DevReplyResult{MessageSID: in.MessageID, Channel: channel, From: from, Text: in.Text,
		ButtonPayload: in.ButtonPayload, Outcome: res.Outcome, ApprovalID: res.ApprovalID, Decision: res.Decision, Reason: res.Reason}
	if res.Outcome != "decided" {
		out.Why = devOutcomeWhy[res.Outcome]
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

// DevReplyResult is POST /dev/reply's answer: the simulated message, and
// what became of it: the approval it decided, or why it decided none.
type DevReplyResult struct {
	MessageSID    string `json:"messageSid"`
	Channel       string `json:"channel"`
	From          string `json:"from"`
	Text          string `json:"text"`
	ButtonPayload string `json:"buttonPayload,omitempty"`
	// Outcome: decided, duplicate, no-token, unknown-token, wrong-sender,
	// quarantined, not-understood, already-decided, expired, ignored,
	// opt-out, opt-in or rate-limited.
	Outcome    string `json:"outcome"`
	ApprovalID string `json:"approvalId,omitempty"`
	Decision   string `json:"decision,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Why no approval was decided, in words.
	Why string `json:"why,omitempty"`
}

// devOutcomeWhy says, for /dev/reply, why a reply decided nothing.
var devOutcomeWhy = map[string]string{
	"duplicate":       "this message was handled before",
	"no-token":        "the reply carries no approval code",
	"unknown-token":   "no pending approval sent to this number has this code",
	"wrong-sender":    "the approval was sent to another number",
	"quarantined":     "the reply was held for an operator to look at",
	"not-understood":  "the approval matched, but the reply is neither a yes nor a no",
	"already-decided": "the approval was decided before",
	"expired":         "the approval has expired",
	"ignored":         "the message is not an answer (a carrier keyword, or not from a phone number)",
	"opt-out":         "a carrier opt-out keyword: nothing more is sent to this number until it opts in",
	"opt-in":          "a carrier opt-in keyword",
	"rate-limited":    "too many wrong codes from this number: it is locked for a while",
}
