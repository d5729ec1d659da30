package slack

import (
	"context"
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

// Recorded is a Slack message `beachd dev` would have posted, with what
// happened to it since (rewritten after a decision), or a note shown to
// one user.
type Recorded struct {
	DeliveryID string `json:"deliveryId"`
	Channel    string `json:"channel"` // the conversation it went to
	TS         string `json:"ts"`
	// ThreadTS is the thread it was posted in (a conversation's answer).
	ThreadTS string              `json:"threadTs,omitempty"`
	To       string              `json:"to"` // the recipient as addressed
	Text     string              `json:"text"`
	Blocks   []render.SlackBlock `json:"blocks"`
	// Buttons are the approval buttons' action ids and values, for a
	// click from the dev inbox.
	Buttons   []render.SlackButton `json:"buttons,omitempty"`
	UpdatedAt time.Time            `json:"updatedAt,omitzero"`
	// Ephemeral: a note only User saw.
	Ephemeral bool      `json:"ephemeral,omitempty"`
	User      string    `json:"user,omitempty"`
	At        time.Time `json:"at"`
}

// Recorder is the Slack Deliverer of `beachd dev` without a `slack:`
// section: it renders like the Sender and keeps the message instead of
// posting it; an update rewrites the kept message; notes are kept too.
type Recorder struct {
	render RenderFunc
	now    func() time.Time
	mu     sync.Mutex
	n      int
	msgs   []Recorded
}

var (
	_ channels.Deliverer = (*Recorder)(nil)
	_ Noter              = (*Recorder)(nil)
)

// NewRecorder builds the recorder.
func NewRecorder(render RenderFunc, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{render: render, now: now}
}

// Deliver records the message (or rewrites the one an update names).
func (r *Recorder) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	msg, err := r.render(job, r.now())
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("render: %w", err))
	}
	if _, err := Blocks(msg); err != nil {
		return nil, channels.Permanent(err)
	}
	d := job.Delivery
	r.mu.Lock()
	defer r.mu.Unlock()
	if where := d.Extra[ExtraUpdate]; where != "" {
		ch, ts, _ := strings.Cut(where, "/")
		for i := range r.msgs {
			if m := &r.msgs[i]; m.Channel == ch && m.TS == ts && !m.Ephemeral {
				m.Text, m.Blocks, m.Buttons, m.UpdatedAt = msg.Text, msg.Blocks, nil, r.now()
				return &channels.Result{ProviderID: where, Receipt: channels.Receipt{Data: map[string]any{"ok": true, "updated": where},
					Meta: map[string]any{"source": "slack-dev", "update": true}}}, nil
			}
		}
		return nil, channels.Permanent(errors.New("slack message_not_found: no recorded message " + where))
	}
	r.n++
	ch := d.To
	if envelope.SlackUser(ch) {
		ch = "D" + ch[1:] // as Slack answers with the direct message
	}
	rec := Recorded{DeliveryID: d.ID, Channel: ch, TS: fmt.Sprintf("%d.%06d", r.now().Unix(), r.n), To: d.To,
		ThreadTS: d.Extra[ExtraThreadTS], Text: msg.Text, Blocks: msg.Blocks, At: r.now()}
	for _, b := range msg.Blocks {
		for _, e := range b.Elements {
			if bt, ok := e.(render.SlackButton); ok {
				rec.Buttons = append(rec.Buttons, bt)
			}
		}
	}
	r.add(rec)
	return &channels.Result{ProviderID: ch + "/" + rec.TS, FollowDecision: len(d.ApprovalIDs) > 0, Receipt: channels.Receipt{Data: map[string]any{"ok": true, "channel": ch, "ts": rec.TS},
		Meta: map[string]any{"source": "slack-dev", "recorded": true}}}, nil
}

// Ephemeral records a note shown to one user.
func (r *Recorder) Ephemeral(_ context.Context, channel, user, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(Recorded{Channel: channel, User: user, Text: text, Ephemeral: true, At: r.now()})
	return nil
}

func (r *Recorder) add(m Recorded) {
	r.msgs = append(r.msgs, m)
	if len(r.msgs) > 1000 {
		r.msgs = append([]Recorded(nil), r.msgs[len(r.msgs)-1000:]...)
	}
}

// Messages returns what was recorded, oldest first.
func (r *Recorder) Messages() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Recorded(nil), r.msgs...)
}

// DevHandler lists the recorded Slack messages (GET /dev/slack/messages),
// presses a button as a Slack user (POST /dev/slack/click, form fields
// user, channel, value and action) and writes to the app as a Slack user
// (POST /dev/slack/message, form fields user, text, and channel and
// thread_ts): the click or event is signed with Secret and goes through
// Interactions or Events exactly as Slack's would.
type DevHandler struct {
	Log          *Recorder
	Interactions http.Handler
	// Events is the Events API endpoint; nil: /dev/slack/message is off.
	Events http.Handler
	Secret string
	Now    func() time.Time

	mu sync.Mutex
	n  int
}

// DevTeam is the workspace of the events `beachd dev` makes.
const DevTeam = "T0BEACHDEV"

// DevMessage is what POST /dev/slack/message answers: where the message
// was written (the thread to continue it in) and the endpoint's status.
type DevMessage struct {
	Status   int    `json:"status"`
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	ThreadTS string `json:"threadTs"`
	EventID  string `json:"eventId"`
}

// Message writes to the app as a Slack user: a direct message (channel
// empty or D…) or a mention of the app (channel C…), in the thread
// thread_ts when given, signed and posted to Events as Slack would.
func (h *DevHandler) Message(w http.ResponseWriter, r *http.Request) {
	if h.Events == nil {
		http.Error(w, "no Slack events endpoint", http.StatusNotFound)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	user, ch, text, thread := r.Form.Get("user"), r.Form.Get("channel"), r.Form.Get("text"), r.Form.Get("thread_ts")
	if !envelope.SlackUser(user) || strings.TrimSpace(text) == "" {
		http.Error(w, "user (U…) and text are required", http.StatusBadRequest)
		return
	}
	if ch == "" {
		ch = "D" + user[1:]
	}
	if !envelope.SlackConversation(ch) || ch[0] == 'U' || ch[0] == 'W' {
		http.Error(w, "channel must be a direct message (D…) or a channel (C…, G…)", http.StatusBadRequest)
		return
	}
	if thread != "" && !tsPattern.MatchString(thread) {
		http.Error(w, "thread_ts must be a Slack timestamp such as 1767225600.000100", http.StatusBadRequest)
		return
	}
	now := h.Now()
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	ts := fmt.Sprintf("%d.%06d", now.Unix(), n%1000000)
	event := map[string]any{"type": "message", "channel": ch, "channel_type": "im", "user": user, "text": text, "ts": ts, "event_ts": ts}
	if ch[0] != 'D' {
		event = map[string]any{"type": "app_mention", "channel": ch, "user": user, "text": "<@U0BEACHDEV> " + text, "ts": ts, "event_ts": ts}
	}
	if thread != "" {
		event["thread_ts"] = thread
	}
	evID := fmt.Sprintf("Ev0DEV%d%06d", now.Unix(), n%1000000)
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": DevTeam, "event_id": evID,
		"event_time": now.Unix(), "event": event})
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/inbound/slack/events", strings.NewReader(string(body)))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sts := fmt.Sprint(now.Unix())
	req.Header.Set(HeaderTimestamp, sts)
	req.Header.Set(HeaderSignature, SignatureHeader(h.Secret, sts, body))
	sw := &statusWriter{h: http.Header{}, code: http.StatusOK}
	h.Events.ServeHTTP(sw, req)
	if thread == "" {
		thread = ts
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(sw.code)
	json.NewEncoder(w).Encode(DevMessage{Status: sw.code, Channel: ch, TS: ts, ThreadTS: thread, EventID: evID})
}

// Messages serves the recorded messages as JSON.
func (h *DevHandler) Messages(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"messages": h.Log.Messages()})
}

// Click presses a button as a Slack user.
func (h *DevHandler) Click(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	user, ch, value := r.Form.Get("user"), r.Form.Get("channel"), r.Form.Get("value")
	action := r.Form.Get("action")
	if action == "" {
		action = render.SlackActionApprove
	}
	if !envelope.SlackUser(user) || value == "" {
		http.Error(w, "user (U…) and value are required", http.StatusBadRequest)
		return
	}
	now := h.Now()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": user},
		"channel": map[string]string{"id": ch}, "container": map[string]string{"type": "message", "channel_id": ch},
		"actions": []map[string]string{{"action_id": action, "value": value, "action_ts": fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)}}})
	body := url.Values{"payload": {string(payload)}}.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/inbound/slack/interactions", strings.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ts := fmt.Sprint(now.Unix())
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, SignatureHeader(h.Secret, ts, []byte(body)))
	sw := &statusWriter{h: http.Header{}, code: http.StatusOK}
	h.Interactions.ServeHTTP(sw, req)
	w.WriteHeader(sw.code)
	fmt.Fprintf(w, "slack answered %d\n", sw.code)
}

// statusWriter keeps the status an in-process request was answered with.
type statusWriter struct {
	h    http.Header
	code int
}

func (s *statusWriter) Header() http.Header         { return s.h }
func (s *statusWriter) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusWriter) WriteHeader(code int)        { s.code = code }
