package twilio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// decider takes inbound messages to the approvals package.
type decider interface {
	HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error)
}

// WebhookStore is what the inbound handler needs from the store.
// Every store.Store implements it.
type WebhookStore interface {
	Store
	DeliveryByProviderID(ctx context.Context, channel, pid string) (*store.Delivery, error)
	UpdateProviderStatus(ctx context.Context, id string, decide func(d *store.Delivery) (status, detail string, ok bool)) (*store.Delivery, bool, error)
	MarkSeen(ctx context.Context, key string) (bool, error)
	ForgetSeen(ctx context.Context, key string) error
}

// HandlerConfig configures the inbound webhook.
type HandlerConfig struct {
	// AuthToken signs Twilio's requests.
	AuthToken string
	// URL is the exact URL configured at Twilio (and sent as
	// StatusCallback): public_url + "/v1/inbound/twilio".
	URL string
	// MaxBody bounds a request body; default 64 KiB.
	MaxBody int64
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Handler serves POST /v1/inbound/twilio.
type Handler struct {
	cfg   HandlerConfig
	store WebhookStore
	dec   decider
	log   *slog.Logger
}

var _ http.Handler = (*Handler)(nil)

// NewHandler builds the inbound handler.
func NewHandler(cfg HandlerConfig, st WebhookStore, dec decider, log *slog.Logger) (*Handler, error) {
	if cfg.AuthToken == "" {
		return nil, errors.New("twilio: webhook needs the auth token")
	}
	if u, err := url.Parse(cfg.URL); err != nil || !u.IsAbs() {
		return nil, fmt.Errorf("twilio: webhook URL %q must be absolute (public_url + /v1/inbound/twilio)", cfg.URL)
	}
	if st == nil || dec == nil {
		return nil, errors.New("twilio: webhook needs a store and a decider")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, store: st, dec: dec, log: log}, nil
}

// emptyTwiML is the answer to every accepted webhook: do nothing more.
const emptyTwiML = `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`

func writeTwiML(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, emptyTwiML)
}

func (h *Handler) reject(w http.ResponseWriter, code int, reason string) {
	h.log.Warn("twilio webhook rejected", "status", code, "reason", reason)
	http.Error(w, http.StatusText(code), code)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, http.StatusMethodNotAllowed, "method "+r.Method)
		return
	}
	sig := r.Header.Get("X-Twilio-Signature")
	if sig == "" {
		h.reject(w, http.StatusForbidden, "no X-Twilio-Signature")
		return
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/x-www-form-urlencoded" {
		h.reject(w, http.StatusUnsupportedMediaType, "content type is not a form")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.reject(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", h.cfg.MaxBody))
			return
		}
		h.reject(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		h.reject(w, http.StatusBadRequest, "malformed form body")
		return
	}
	// Nothing below runs for a request Twilio did not sign.
	if !ValidSignature(h.cfg.AuthToken, h.cfg.URL, form, sig) {
		h.reject(w, http.StatusForbidden, "X-Twilio-Signature does not match")
		return
	}
	code, reason := h.process(r.Context(), form)
	if code != http.StatusOK {
		h.reject(w, code, reason)
		return
	}
	writeTwiML(w)
}

// process acts on a verified form. It returns 200, or the status and reason
// of a refusal; 500 makes Twilio retry.
func (h *Handler) process(ctx context.Context, form url.Values) (int, string) {
	sid := form.Get("MessageSid")
	if sid == "" {
		sid = form.Get("SmsSid")
	}
	if sid == "" || len(sid) > 64 {
		return http.StatusBadRequest, "no MessageSid"
	}
	status := strings.ToLower(form.Get("MessageStatus"))
	if status == "" && form.Get("Body") == "" && form.Get("ButtonPayload") == "" {
		status = strings.ToLower(form.Get("SmsStatus"))
	}
	if status != "" && status != "received" {
		return h.statusCallback(ctx, sid, status, form.Get("ErrorCode"), form)
	}
	in, notes := parseInbound(form, h.cfg.Now())
	for _, n := range notes {
		h.log.Warn("twilio inbound media: "+n, "channel", in.Channel, "from", redact(in.From))
	}
	return h.inbound(ctx, in)
}

// failedStatus are the statuses of a message that did not reach the
// recipient.
var failedStatus = map[string]bool{"undelivered": true, "failed": true, "canceled": true}

// statusRank orders Twilio's message statuses so that a late "sent" does
// not overwrite "delivered".
var statusRank = map[string]int{
	"accepted": 1, "scheduled": 1, "queued": 2, "sending": 3, "sent": 4,
	"delivered": 5, "undelivered": 5, "failed": 5, "canceled": 5, "read": 6,
}

func (h *Handler) statusCallback(ctx context.Context, sid, status, errCode string, form url.Values) (int, string) {
	if _, known := statusRank[status]; !known {
		h.log.Warn("twilio status callback with an unknown status; ignored", "status", truncate(status, 32))
		return http.StatusOK, ""
	}
	channel := envelope.ChannelSMS
	if strings.HasPrefix(form.Get("To"), "whatsapp:") || strings.HasPrefix(form.Get("From"), "whatsapp:") {
		channel = envelope.ChannelWhatsApp
	}
	d, err := h.store.DeliveryByProviderID(ctx, channel, sid)
	if errors.Is(err, store.ErrNotFound) {
		other := envelope.ChannelWhatsApp
		if channel == other {
			other = envelope.ChannelSMS
		}
		d, err = h.store.DeliveryByProviderID(ctx, other, sid)
	}
	if errors.Is(err, store.ErrNotFound) {
		// Not ours (or not recorded yet): no effect, and no retry wanted.
		h.log.Info("twilio status callback for an unknown message; ignored", "status", status)
		return http.StatusOK, ""
	}
	if err != nil {
		return http.StatusInternalServerError, "look up delivery: " + err.Error()
	}
	key := "status/" + sid + "/" + status
	first, err := h.store.MarkSeen(ctx, key)
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	if !first {
		h.log.Info("duplicate twilio status callback; no effect", "delivery_id", d.ID, "status", status)
		return http.StatusOK, ""
	}
	detail := ""
	if errCode != "" && errCode != "0" {
		n, _ := strconv.Atoi(errCode)
		desc := permanentCodes[n]
		if desc == "" {
			desc = "see https://www.twilio.com/docs/api/errors/" + strconv.Itoa(n)
		}
		detail = fmt.Sprintf("twilio %s: error %d: %s", status, n, desc)
		if optOutCodes[n] {
			if err := h.store.PutKV(ctx, optOutKey(d.Channel, d.To), []byte(h.cfg.Now().UTC().Format(time.RFC3339))); err != nil {
				h.store.ForgetSeen(context.WithoutCancel(ctx), key)
				return http.StatusInternalServerError, err.Error()
			}
		}
	}
	// Decided against the stored status inside the write, so that two
	// parts' callbacks arriving together cannot both read the old status.
	var kept string
	_, changed, err := h.store.UpdateProviderStatus(ctx, d.ID, func(cur *store.Delivery) (string, string, bool) {
		st, det, why := nextStatus(cur, sid, status, detail)
		kept = why
		return st, det, why == ""
	})
	if err != nil {
		h.store.ForgetSeen(context.WithoutCancel(ctx), key)
		return http.StatusInternalServerError, "record status: " + err.Error()
	}
	if !changed {
		h.log.Info("twilio status callback; "+kept, "delivery_id", d.ID, "status", status)
		return http.StatusOK, ""
	}
	h.log.Info("twilio status recorded", "delivery_id", d.ID, "channel", d.Channel, "status", status)
	return http.StatusOK, ""
}

// nextStatus decides what a status callback about message sid makes of the
// delivery cur: the status and detail to record, or why it records
// nothing. A delivery may be several messages (the parts of a long SMS, or
// an earlier attempt's message). Its status follows its first message (its
// ProviderID), except that a failure of any of them stands: a success never
// overwrites it, and another message's success is not news.
func nextStatus(cur *store.Delivery, sid, status, detail string) (string, string, string) {
	switch {
	case failedStatus[cur.ProviderStatus] && !failedStatus[status]:
		return "", "", "kept the failure (" + cur.ProviderStatus + ")"
	case sid != cur.ProviderID && !failedStatus[status]:
		return "", "", "status of another message of the delivery; no effect"
	case sid == cur.ProviderID && statusRank[status] < statusRank[cur.ProviderStatus]:
		return "", "", "stale; kept the later status (" + cur.ProviderStatus + ")"
	}
	if sid != cur.ProviderID {
		detail = strings.TrimSpace(detail + " (message " + sid + " of this delivery)")
	}
	return status, detail, ""
}

// inboundFromForm turns Twilio's inbound message parameters into the
// normalised inbound message (opt-out handling comes later).
func inboundFromForm(form url.Values, now time.Time) envelope.Inbound {
	in, _ := parseInbound(form, now)
	return in
}

// maxInboundMedia bounds the media of one inbound message (Twilio sends at
// most 10).
const maxInboundMedia = 10

// parseInbound is inboundFromForm, with notes on what it left out (media
// over the bound, or not on Twilio's API host) for the log.
func parseInbound(form url.Values, now time.Time) (envelope.Inbound, []string) {
	from, to := form.Get("From"), form.Get("To")
	channel := envelope.ChannelSMS
	if strings.HasPrefix(from, "whatsapp:") {
		channel = envelope.ChannelWhatsApp
	}
	sid := form.Get("MessageSid")
	if sid == "" {
		sid = form.Get("SmsSid")
	}
	body := form.Get("Body")
	in := envelope.Inbound{
		Channel:       channel,
		From:          strings.TrimPrefix(from, "whatsapp:"),
		To:            strings.TrimPrefix(to, "whatsapp:"),
		MessageID:     sid,
		ButtonPayload: form.Get("ButtonPayload"),
		Text:          strings.TrimSpace(body),
		FullText:      body,
		// The SID of our message a WhatsApp reply quotes (or whose button
		// was pressed): the delivery it answers.
		InReplyTo:  form.Get("OriginalRepliedMessageSid"),
		ReceivedAt: now,
		// process runs only for a request whose X-Twilio-Signature matched.
		Evidence: map[string]string{"twilioSignature": "valid"},
	}
	if isE164(in.To) {
		in.Recipients = []string{in.To}
	}
	var notes []string
	in.Attachments, notes = mediaFromForm(form)
	if in.Text == "" && in.ButtonPayload != "" {
		in.Text = strings.TrimSpace(form.Get("ButtonText"))
	}
	if wa := form.Get("WaId"); channel == envelope.ChannelWhatsApp && in.From == "" && wa != "" {
		in.From = "+" + strings.TrimPrefix(wa, "+")
	}
	return in, notes
}

// mediaFromForm reads NumMedia, MediaUrlN and MediaContentTypeN: at most
// maxInboundMedia attachments, each a URL on Twilio's API host and the
// media type Twilio declared (lower case, without parameters; "" when it
// does not parse). A URL anywhere else is dropped, with a note.
func mediaFromForm(form url.Values) ([]envelope.InboundAttachment, []string) {
	raw := strings.TrimSpace(form.Get("NumMedia"))
	if raw == "" || raw == "0" {
		return nil, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return nil, []string{fmt.Sprintf("NumMedia %q is not a count; media ignored", truncate(raw, 20))}
	}
	var notes []string
	if n > maxInboundMedia {
		notes = append(notes, fmt.Sprintf("NumMedia %d; only the first %d read", n, maxInboundMedia))
		n = maxInboundMedia
	}
	var out []envelope.InboundAttachment
	for i := range n {
		u := form.Get("MediaUrl" + strconv.Itoa(i))
		if !MediaURLOnTwilio(u) {
			notes = append(notes, fmt.Sprintf("MediaUrl%d dropped: not a media URL on https://%s (%q)", i, TwilioMediaHost, truncate(u, 100)))
			continue
		}
		mt, _, err := mime.ParseMediaType(form.Get("MediaContentType" + strconv.Itoa(i)))
		if err != nil || !validMediaType(mt) {
			mt = ""
		}
		out = append(out, envelope.InboundAttachment{URL: u, MediaType: mt})
	}
	return out, notes
}

// Carrier keywords. Twilio matches the whole message body, case-insensitive.
// YES is an opt-in word at Twilio but a decision word here, so only START
// and UNSTOP opt back in.
var (
	stopWords  = map[string]bool{"STOP": true, "STOPALL": true, "STOP ALL": true, "UNSUBSCRIBE": true, "CANCEL": true, "END": true, "QUIT": true, "OPTOUT": true, "OPT OUT": true, "OPT-OUT": true, "REVOKE": true}
	startWords = map[string]bool{"START": true, "UNSTOP": true}
)

// keyword normalises a body for keyword matching: trimmed, upper-case,
// trailing punctuation removed, inner spaces collapsed.
func keyword(text string) string {
	t := strings.ToUpper(strings.Join(strings.Fields(text), " "))
	return strings.TrimRight(t, ".!?")
}

// inbound handles one inbound message (from a real webhook or /dev/reply).
func (h *Handler) inbound(ctx context.Context, in envelope.Inbound) (int, string) {
	code, reason, _ := h.handleInbound(ctx, in)
	return code, reason
}

// handleInbound is inbound, with what became of the message: the outcome
// (an approval decided, or why none was), or "duplicate" for a message
// seen before.
func (h *Handler) handleInbound(ctx context.Context, in envelope.Inbound) (int, string, envelope.InboundResult) {
	none := envelope.InboundResult{}
	if !isE164(in.From) {
		// A short code or alphanumeric sender: nobody we asked.
		h.log.Info("twilio inbound from a sender that is not an E.164 number; ignored", "channel", in.Channel)
		return http.StatusOK, "", envelope.InboundResult{Outcome: "ignored", Reason: "the sender is not an E.164 number"}
	}
	key := "msg/" + in.MessageID
	first, err := h.store.MarkSeen(ctx, key)
	if err != nil {
		return http.StatusInternalServerError, err.Error(), none
	}
	if !first {
		// The seen mark is written before the decider records the message,
		// the handled mark after: a stop between the two leaves a message
		// seen but not handled, and its retry must still reach the decider
		// (which knows a message it has recorded).
		_, handled, err := h.store.GetKV(ctx, handledKey(in.MessageID))
		if err != nil {
			return http.StatusInternalServerError, err.Error(), none
		}
		if handled {
			h.log.Info("duplicate twilio inbound message; no effect", "channel", in.Channel, "from", redact(in.From))
			return http.StatusOK, "", envelope.InboundResult{Outcome: "duplicate"}
		}
		return h.decide(ctx, in, func(reason string) (int, string, envelope.InboundResult) {
			return http.StatusInternalServerError, reason, none
		})
	}
	fail := func(reason string) (int, string, envelope.InboundResult) {
		if err := h.store.ForgetSeen(context.WithoutCancel(ctx), key); err != nil {
			h.log.Error("forget seen message", "err", err)
		}
		return http.StatusInternalServerError, reason, none
	}
	stamp := []byte(in.ReceivedAt.UTC().Format(time.RFC3339Nano))
	if spec, _ := envelope.Channel(in.Channel); spec.Inbound.Window > 0 {
		if err := h.store.PutKV(ctx, windowKey(in.From), stamp); err != nil {
			return fail("record whatsapp window: " + err.Error())
		}
		if isE164(in.To) {
			if err := h.store.PutKV(ctx, pairWindowKey(in.To, in.From), stamp); err != nil {
				return fail("record whatsapp window: " + err.Error())
			}
		}
	}
	if in.ButtonPayload == "" {
		switch kw := keyword(in.Text); {
		case stopWords[kw]:
			if err := h.store.PutKV(ctx, optOutKey(in.Channel, in.From), stamp); err != nil {
				return fail("record opt-out: " + err.Error())
			}
			in.IgnoredBecause = "opt-out: carrier keyword " + kw
			h.log.Info("recipient opted out", "channel", in.Channel, "from", redact(in.From))
		case startWords[kw]:
			if err := h.store.DeleteKV(ctx, optOutKey(in.Channel, in.From)); err != nil {
				return fail("clear opt-out: " + err.Error())
			}
			in.IgnoredBecause = "opt-in: carrier keyword " + kw
			h.log.Info("recipient opted back in", "channel", in.Channel, "from", redact(in.From))
		}
	}
	return h.decide(ctx, in, fail)
}

// decide hands the message to the decider, then marks it handled.
func (h *Handler) decide(ctx context.Context, in envelope.Inbound, fail func(string) (int, string, envelope.InboundResult)) (int, string, envelope.InboundResult) {
	res, err := h.dec.HandleInbound(ctx, in)
	if err != nil {
		return fail("hand inbound message to approvals: " + err.Error())
	}
	if err := h.store.PutKV(ctx, handledKey(in.MessageID), []byte(h.cfg.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		// A retry asks the decider again, which knows the message.
		h.log.Warn("mark twilio inbound message handled", "err", err)
	}
	h.log.Info("twilio inbound message handled", "channel", in.Channel, "from", redact(in.From), "outcome", res.Outcome)
	return http.StatusOK, "", res
}

// handledKey marks an inbound message the decider has handled.
func handledKey(messageSID string) string { return "twilio-handled/" + messageSID }
