package twilio

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// Recorded is a message the Recorder would have sent.
type Recorded struct {
	SID        string `json:"sid"`
	DeliveryID string `json:"deliveryId"`
	Channel    string `json:"channel"`
	// From is our number it went out from: the number the person wrote to,
	// for an answer in a conversation; empty for the default.
	From string `json:"from,omitempty"`
	To   string `json:"to"`
	// Conversation is the conversation an answer belongs to.
	Conversation     string            `json:"conversation,omitempty"`
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
	sum := sha256.Sum256([]byte(job.Delivery.ID))
	sid := "SM" + hex.EncodeToString(sum[:16])
	extra := job.Delivery.Extra
	rec := Recorded{SID: sid, DeliveryID: job.Delivery.ID, Channel: d.channel, From: extra[envelope.ExtraFrom], To: to,
		Conversation: extra[envelope.ExtraConversation], At: d.now()}
	if extra[envelope.ExtraTemplate] == "window" {
		// What goes out instead of an answer when WhatsApp's 24-hour
		// window is closed: the configured window template.
		rec.ContentSID, rec.Body = "window", "(the WhatsApp window template: the answer is held until the person writes again)"
	} else {
		msg, err := d.render(RenderInput{Channel: d.channel, Job: job, Now: d.now(), WindowOpen: true, ShowButtons: true})
		if err != nil {
			return nil, channels.Permanent(fmt.Errorf("render %s: %w", d.channel, err))
		}
		rec.Body, rec.Buttons, rec.MediaURLs = strings.Join(msg.Bodies, "\n"), msg.Buttons, msg.MediaURLs
		rec.ContentSID, rec.ContentVariables = msg.ContentSID, msg.ContentVariables
	}
	d.log.add(rec)
	return &channels.Result{ProviderID: sid, Receipt: channels.Receipt{
		Data: map[string]any{"recorded": true},
		Meta: map[string]any{"source": "twilio", "sid": sid, "status": "recorded"},
	}}, nil
}

// DevHandler serves GET /dev/messages (what was recorded, as JSON) and POST
// /dev/reply: a message a person sends to our number, either a form
// (channel sms|whatsapp, from, body or button_payload) or a JSON DevMessage
// (Content-Type application/json: text, attachments). It goes through the
// same path as a signed Twilio webhook, without the signature, to the same
// decider: an approval answer decides, any other message starts or
// continues a conversation with the agent whose number it was sent to.
// Mount it only in `beachd dev`, on loopback.
type DevHandler struct {
	Log     *RecorderLog
	Inbound *Handler
	// OurNumber is the To of simulated replies (a DevMessage may name
	// another).
	OurNumber string
	Now       func() time.Time

	mu  sync.Mutex
	seq int
}

// Bounds of a DevMessage.
const (
	DevMaxBody       = 16 << 20 // the JSON body
	DevMaxMedia      = 10       // attachments, as Twilio allows
	DevMaxMediaBytes = 5 << 20  // the bytes of one attachment, as Twilio's MMS
	devMaxText       = 1600     // characters of the text, as Twilio's
)

// DevMessage is POST /dev/reply's JSON body.
type DevMessage struct {
	Channel string `json:"channel"` // sms or whatsapp
	From    string `json:"from"`    // the person's number, E.164
	// To is our number written to; default the handler's OurNumber.
	To   string `json:"to,omitempty"`
	Text string `json:"text,omitempty"`
	// ButtonPayload and ButtonText: a WhatsApp quick-reply button pressed.
	ButtonPayload string     `json:"buttonPayload,omitempty"`
	ButtonText    string     `json:"buttonText,omitempty"`
	Media         []DevMedia `json:"media,omitempty"`
}

// DevMedia is one attachment of a DevMessage: its bytes (base64 in JSON)
// or a URL where they are, with a media type and an optional file name.
type DevMedia struct {
	MediaType string `json:"mediaType"`
	Filename  string `json:"filename,omitempty"`
	Data      []byte `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// ParseDevMessage decodes and checks a DevMessage: no unknown member, a
// known channel, E.164 numbers, at most DevMaxMedia attachments of at most
// DevMaxMediaBytes, each with exactly one of data or an http(s) url.
func ParseDevMessage(b []byte) (DevMessage, error) {
	var m DevMessage
	if len(b) > DevMaxBody {
		return m, fmt.Errorf("body larger than %d bytes", DevMaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("malformed JSON message: %w", err)
	}
	if dec.More() {
		return m, errors.New("malformed JSON message: more than one value")
	}
	if !numberChannel(m.Channel) {
		return m, errors.New("channel must be sms or whatsapp")
	}
	if !isE164(m.From) {
		return m, errors.New("from must be an E.164 number")
	}
	if m.To != "" && !isE164(m.To) {
		return m, errors.New("to must be an E.164 number")
	}
	if !utf8.ValidString(m.Text) || utf8.RuneCountInString(m.Text) > devMaxText {
		return m, fmt.Errorf("text must be valid UTF-8 of at most %d characters", devMaxText)
	}
	if len(m.Media) > DevMaxMedia {
		return m, fmt.Errorf("at most %d media, got %d", DevMaxMedia, len(m.Media))
	}
	for i, md := range m.Media {
		switch {
		case (md.Data == nil) == (md.URL == ""):
			return m, fmt.Errorf("media[%d]: needs exactly one of data, url", i)
		case len(md.Data) > DevMaxMediaBytes:
			return m, fmt.Errorf("media[%d]: larger than %d bytes", i, DevMaxMediaBytes)
		case md.URL != "" && !devHTTPURL(md.URL):
			return m, fmt.Errorf("media[%d].url: not an absolute http(s) URL", i)
		case md.MediaType == "":
			return m, fmt.Errorf("media[%d].mediaType: missing", i)
		case len(md.MediaType) > 255 || len(md.Filename) > 255 || len(md.URL) > 2048:
			return m, fmt.Errorf("media[%d]: mediaType, filename or url too long", i)
		}
	}
	if m.Text == "" && m.ButtonPayload == "" && len(m.Media) == 0 {
		return m, errors.New("a message needs text, a button payload or media")
	}
	return m, nil
}

func devHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
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
	var m DevMessage
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, DevMaxBody))
		if err != nil {
			http.Error(w, fmt.Sprintf("body larger than %d bytes", DevMaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		if m, err = ParseDevMessage(b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "malformed form", http.StatusBadRequest)
			return
		}
		m = DevMessage{Channel: r.PostForm.Get("channel"), From: r.PostForm.Get("from"), Text: r.PostForm.Get("body"),
			ButtonPayload: r.PostForm.Get("button_payload"), ButtonText: r.PostForm.Get("button_text")}
		if !numberChannel(m.Channel) {
			http.Error(w, "channel must be sms or whatsapp", http.StatusBadRequest)
			return
		}
		if !isE164(m.From) {
			http.Error(w, "from must be an E.164 number", http.StatusBadRequest)
			return
		}
	}
	h.reply(w, r, m)
}

// reply hands m to the webhook's processing, as Twilio would post it.
func (h *DevHandler) reply(w http.ResponseWriter, r *http.Request, m DevMessage) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	h.mu.Lock()
	h.seq++
	seq := h.seq
	h.mu.Unlock()
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d", now().UnixNano(), seq))
	to := cmp.Or(m.To, h.OurNumber)
	form := url.Values{
		"MessageSid": {"SM" + hex.EncodeToString(sum[:16])},
		"From":       {m.From},
		"To":         {to},
		"Body":       {m.Text},
	}
	if m.Channel == envelope.ChannelWhatsApp {
		form.Set("From", "whatsapp:"+m.From)
		form.Set("To", "whatsapp:"+to)
		form.Set("WaId", m.From[1:])
		if m.ButtonPayload != "" {
			form.Set("ButtonPayload", m.ButtonPayload)
			form.Set("ButtonText", m.ButtonText)
		}
	}
	in := inboundFromForm(form, now())
	// Twilio would name its media by URL only; a dev message may carry the
	// bytes themselves, so the attachments are set here, whole.
	in.Attachments = nil
	for _, md := range m.Media {
		a := envelope.InboundAttachment{Filename: md.Filename, MediaType: md.MediaType, URL: md.URL}
		if md.Data != nil {
			a.Data, a.Size = md.Data, int64(len(md.Data))
		}
		in.Attachments = append(in.Attachments, a)
	}
	if len(in.Recipients) == 0 {
		in.Recipients = []string{in.To}
	}
	if in.FullText == "" {
		in.FullText = m.Text
	}
	code, reason, res := h.Inbound.handleInbound(r.Context(), in)
	if code != http.StatusOK {
		http.Error(w, reason, code)
		return
	}
	out := DevReplyResult{MessageSID: in.MessageID, Channel: m.Channel, From: m.From, To: to, Text: in.Text,
		Media: len(in.Attachments), ButtonPayload: in.ButtonPayload, Outcome: res.Outcome, ApprovalID: res.ApprovalID,
		Decision: res.Decision, Reason: res.Reason, Conversation: res.Conversation}
	out.Why = devOutcomeWhy[res.Outcome]
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
	To            string `json:"to"`
	Text          string `json:"text"`
	Media         int    `json:"media,omitempty"`
	ButtonPayload string `json:"buttonPayload,omitempty"`
	// Outcome: decided, duplicate, no-token, unknown-token, wrong-sender,
	// quarantined, not-understood, already-decided, expired, ignored,
	// opt-out, opt-in, rate-limited or wrong-code (approvals); turn,
	// rejected, held or unrouted (conversations).
	Outcome    string `json:"outcome"`
	ApprovalID string `json:"approvalId,omitempty"`
	Decision   string `json:"decision,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Conversation is the conversation the message went to (outcome turn).
	Conversation string `json:"conversation,omitempty"`
	// Why the message decided nothing and started no turn, in words.
	Why string `json:"why,omitempty"`
}

// devOutcomeWhy says, for /dev/reply, why a reply decided nothing.
var devOutcomeWhy = map[string]string{
	"duplicate":                  "this message was handled before",
	"no-token":                   "the reply carries no approval code",
	"unknown-token":              "no pending approval sent to this number has this code",
	"wrong-sender":               "the approval was sent to another number",
	"quarantined":                "the reply was held for an operator to look at",
	"not-understood":             "the approval matched, but the reply is neither a yes nor a no",
	"already-decided":            "the approval was decided before",
	"expired":                    "the approval has expired",
	"ignored":                    "the message is not an answer (a carrier keyword, or not from a phone number)",
	"opt-out":                    "a carrier opt-out keyword: nothing more is sent to this number until it opts in",
	"opt-in":                     "a carrier opt-in keyword",
	"rate-limited":               "too many wrong codes from this number: it is locked for a while",
	"wrong-code":                 "the reply reads as an answer, but its code matches none of the approvals waiting for this number: the number is told so, with their codes",
	envelope.DispositionRejected: "the sender may not write to this agent (agents.<name>.inbound.allow), or wrote too often",
	envelope.DispositionHeld:     "a flood limit held the message (too many turns from this sender, this conversation or for this agent); an operator may release it",
	envelope.DispositionUnrouted: "no agent has this number among its inbound numbers, and the message answers no approval or conversation",
}

// DevMediaFetcher reads the media a /dev/reply message names by URL, for
// `beachd dev` without Twilio credentials (the real fetcher reads only
// Twilio's API host, with the account's credentials). The URL is content,
// so it goes through the guarded fetch client, as every fetch whose
// address comes from content does: no loopback, private, link-local
// (cloud metadata) or other internal address unless fetch.allow names it;
// at most max bytes.
type DevMediaFetcher struct {
	// Fetch is the guarded client; nil means one on fetch's defaults
	// (nothing but the public internet).
	Fetch *fetch.Client
}

// FetchMedia returns the bytes at u and their media type. Its errors are
// *MediaError, as the real fetcher's: a 4xx other than 408 and 429, a URL
// that is not http(s), an address the guard refuses and media over max
// are permanent.
func (f DevMediaFetcher) FetchMedia(ctx context.Context, u string, max int64) ([]byte, string, error) {
	fail := func(permanent bool, reason string, status int, err error) ([]byte, string, error) {
		return nil, "", &MediaError{Status: status, Permanent: permanent, Reason: reason, Err: err}
	}
	if !devHTTPURL(u) {
		return fail(true, "its address is not an http(s) URL", 0, fmt.Errorf("dev media: %q is not an absolute http(s) URL", devURLForError(u)))
	}
	fc := f.Fetch
	if fc == nil {
		var err error
		if fc, err = fetch.New(fetch.Config{}); err != nil {
			return fail(false, "the fetch failed", 0, fmt.Errorf("dev media: %w", err))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, mediaTimeout)
	defer cancel()
	resp, err := fc.Get(ctx, u)
	switch {
	case errors.Is(err, fetch.ErrRefused), errors.Is(err, fetch.ErrTooManyRedirects):
		return fail(true, "its address was refused (loopback, private and metadata addresses are not fetched unless fetch.allow names them)", 0,
			fmt.Errorf("dev media %s: %w", devURLForError(u), err))
	case err != nil:
		return fail(false, "the fetch failed (network)", 0, fmt.Errorf("dev media %s: %w", devURLForError(u), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		perm := resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests
		return fail(perm, fmt.Sprintf("the media host answered HTTP %d", resp.StatusCode), resp.StatusCode,
			fmt.Errorf("dev media %s: status %d", devURLForError(u), resp.StatusCode))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if errors.Is(err, fetch.ErrTooLarge) || int64(len(b)) > max {
		return fail(true, "it is larger than allowed", 0, fmt.Errorf("dev media %s: larger than %d bytes", devURLForError(u), max))
	}
	if err != nil {
		return fail(false, "the fetch failed (network)", 0, fmt.Errorf("dev media %s: %w", devURLForError(u), err))
	}
	return b, cmp.Or(resp.Header.Get("Content-Type"), "application/octet-stream"), nil
}

// devURLForError keeps a URL's scheme, host and path for an error (never its
// query, which may carry a signature).
func devURLForError(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return devClipURL(u.Scheme + "://" + u.Host + u.Path)
}

func devClipURL(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// numberChannel reports whether channel is addressed by telephone numbers
// (the channels Twilio carries).
func numberChannel(channel string) bool {
	spec, ok := envelope.Channel(channel)
	return ok && spec.Address == envelope.AddressNumber
}
