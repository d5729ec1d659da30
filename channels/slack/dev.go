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
	DeliveryID string              `json:"deliveryId"`
	Channel    string              `json:"channel"` // the conversation it went to
	TS         string              `json:"ts"`
	To         string              `json:"to"` // the recipient as addressed
	Text       string              `json:"text"`
	Blocks     []render.SlackBlock `json:"blocks"`
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
		Text: msg.Text, Blocks: msg.Blocks, At: r.now()}
	for _, b := range msg.Blocks {
		for _, e := range b.Elements {
			if bt, ok := e.(render.SlackButton); ok {
				rec.Buttons = append(rec.Buttons, bt)
			}
		}
	}
	r.add(rec)
	return &channels.Result{ProviderID: ch + "/" + rec.TS, Receipt: channels.Receipt{Data: map[string]any{"ok": true, "channel": ch, "ts": rec.TS},
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

// DevHandler lists the recorded Slack messages (GET /dev/slack/messages)
// and presses a button as a Slack user (POST /dev/slack/click, form
// fields user, channel, value and action): the click is signed with
// Secret and goes through Interactions exactly as Slack's would.
type DevHandler struct {
	Log          *Recorder
	Interactions http.Handler
	Secret       string
	Now          func() time.Time
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
