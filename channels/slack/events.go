package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Where a Slack message was written, as the conversations router reads an
// inbound message's Recipients: SlackIM for a direct message to the app,
// the channel id for a mention. Its To is the thread (channel "/" ts).
const SlackIM = "im"

// Bounds of an Events API request, beside MaxRequestBytes.
const (
	maxEventType  = 64
	maxChallenge  = 256
	maxEventText  = 160 << 10 // Slack's 40,000 characters, four bytes each
	identityRetry = time.Minute
)

var (
	eventIDPattern = regexp.MustCompile(`^Ev[A-Za-z0-9]{1,62}$`)
	teamIDPattern  = regexp.MustCompile(`^[TE][A-Z0-9]{2,20}$`)
	tsPattern      = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
	botIDPattern   = regexp.MustCompile(`^B[A-Z0-9]{1,30}$`)
	challengeChars = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]+$`)
)

// Event is one request of Slack's Events API, as ParseEvent reads it.
type Event struct {
	// Type is url_verification, event_callback, or another type Slack
	// sends (app_rate_limited), which carries nothing to act on.
	Type string
	// Challenge is url_verification's, to be answered as it is.
	Challenge string
	// TeamID and EventID are event_callback's: the workspace, and the
	// event's id, which Slack's retries repeat.
	TeamID, EventID string
	// Message is event_callback's inner event.
	Message *EventMessage
}

// EventMessage is the inner event of an event_callback: for message and
// app_mention events the message's fields; for other types, Type alone.
type EventMessage struct {
	Type, Subtype, ChannelType string
	User, BotID                string
	Channel, TS, ThreadTS      string
	Text                       string
	// Edited: the message was edited (an app_mention may say so).
	Edited bool
}

// ParseEvent reads an Events API body. Every field beachd reads is
// checked and bounded; a body that is not Slack's shape is an error naming
// what is wrong. An event type beachd does not act on is not an error.
func ParseEvent(body []byte) (*Event, error) {
	if len(body) > MaxRequestBytes {
		return nil, fmt.Errorf("body of %d bytes; at most %d", len(body), MaxRequestBytes)
	}
	var p struct {
		Type      string          `json:"type"`
		Challenge string          `json:"challenge"`
		TeamID    string          `json:"team_id"`
		EventID   string          `json:"event_id"`
		Event     json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("body is not a JSON object: %v", err)
	}
	if p.Type == "" || len(p.Type) > maxEventType {
		return nil, errors.New("no type, or a type longer than Slack makes it")
	}
	ev := &Event{Type: p.Type}
	switch p.Type {
	case "url_verification":
		if p.Challenge == "" || len(p.Challenge) > maxChallenge || !challengeChars.MatchString(p.Challenge) {
			return nil, fmt.Errorf("url_verification: challenge must be 1 to %d letters, digits or -._~+/=", maxChallenge)
		}
		ev.Challenge = p.Challenge
		return ev, nil
	case "event_callback":
	default:
		return ev, nil
	}
	if !eventIDPattern.MatchString(p.EventID) {
		return nil, fmt.Errorf("event_callback: event_id %q is not a Slack event id (Ev…)", trunc(p.EventID))
	}
	if !teamIDPattern.MatchString(p.TeamID) {
		return nil, fmt.Errorf("event_callback: team_id %q is not a workspace id (T…)", trunc(p.TeamID))
	}
	ev.TeamID, ev.EventID = p.TeamID, p.EventID
	if len(p.Event) == 0 {
		return nil, errors.New("event_callback: no event")
	}
	var m struct {
		Type        string          `json:"type"`
		Subtype     string          `json:"subtype"`
		ChannelType string          `json:"channel_type"`
		User        json.RawMessage `json:"user"`
		BotID       string          `json:"bot_id"`
		Channel     json.RawMessage `json:"channel"`
		TS          string          `json:"ts"`
		ThreadTS    string          `json:"thread_ts"`
		Text        string          `json:"text"`
		Edited      json.RawMessage `json:"edited"`
	}
	if err := json.Unmarshal(p.Event, &m); err != nil {
		return nil, fmt.Errorf("event is not a JSON object: %v", err)
	}
	if m.Type == "" || len(m.Type) > maxEventType {
		return nil, errors.New("event: no type, or a type longer than Slack makes it")
	}
	msg := &EventMessage{Type: m.Type}
	ev.Message = msg
	if m.Type != "message" && m.Type != "app_mention" {
		return ev, nil
	}
	if len(m.Subtype) > maxEventType || len(m.ChannelType) > maxEventType {
		return nil, errors.New("event: subtype or channel_type longer than Slack makes it")
	}
	msg.Subtype, msg.ChannelType = m.Subtype, m.ChannelType
	// An edit or a deletion carries its message elsewhere (and a user or
	// channel of another shape): it is never acted on, so only its subtype
	// is read.
	if m.Subtype == "message_changed" || m.Subtype == "message_deleted" {
		return ev, nil
	}
	// user and channel are strings in a message event (objects elsewhere).
	str := func(raw json.RawMessage, name string) (string, error) {
		if len(raw) == 0 || string(raw) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("event: %s is not a string", name)
		}
		return s, nil
	}
	var err error
	if msg.User, err = str(m.User, "user"); err != nil {
		return nil, err
	}
	if msg.Channel, err = str(m.Channel, "channel"); err != nil {
		return nil, err
	}
	if msg.User != "" && !envelope.SlackUser(msg.User) {
		return nil, fmt.Errorf("event: user %q is not a Slack user id", trunc(msg.User))
	}
	if m.BotID != "" && !botIDPattern.MatchString(m.BotID) {
		return nil, fmt.Errorf("event: bot_id %q is not a Slack bot id", trunc(m.BotID))
	}
	msg.BotID = m.BotID
	if !envelope.SlackConversation(msg.Channel) {
		return nil, fmt.Errorf("event: channel %q is not a Slack conversation id", trunc(msg.Channel))
	}
	if !tsPattern.MatchString(m.TS) {
		return nil, fmt.Errorf("event: ts %q is not a Slack timestamp", trunc(m.TS))
	}
	if m.ThreadTS != "" && !tsPattern.MatchString(m.ThreadTS) {
		return nil, fmt.Errorf("event: thread_ts %q is not a Slack timestamp", trunc(m.ThreadTS))
	}
	msg.TS, msg.ThreadTS = m.TS, m.ThreadTS
	if len(m.Text) > maxEventText {
		return nil, fmt.Errorf("event: text of %d bytes; Slack sends at most %d", len(m.Text), maxEventText)
	}
	msg.Text = strings.ToValidUTF8(m.Text, "\uFFFD")
	msg.Edited = len(m.Edited) > 0 && string(m.Edited) != "null"
	return ev, nil
}

// Identity is the app's bot, as auth.test names it.
type Identity struct {
	UserID, BotID, TeamID string
}

// EventStore is what the events endpoint needs from the store. Every
// store.Store implements it.
type EventStore interface {
	store.KV
	MarkSeen(ctx context.Context, key string) (bool, error)
	ForgetSeen(ctx context.Context, key string) error
	// ConversationByThread finds the conversation of a thread
	// (store.ThreadKey): a reply in a channel thread without a mention is
	// taken only when the thread is one.
	ConversationByThread(ctx context.Context, key string) (*store.Conversation, error)
}

// EventsConfig configures the Events API endpoint.
type EventsConfig struct {
	SigningSecret string
	// TeamID, when set, is the only workspace whose events count; when
	// empty, the workspace Self names, once known.
	TeamID string
	// Self names the app's bot (auth.test), whose own messages are never
	// taken; nil: only a message's bot_id marks a bot's.
	Self func(ctx context.Context) (Identity, error)
	// MaxBody bounds a request body; default MaxRequestBytes.
	MaxBody int64
	Now     func() time.Time
	// Health, when set, counts the signed events received.
	Health *Health
}

// EventHandler serves POST /v1/inbound/slack/events: Slack's Events API.
// A direct message to the app (message.im) or a mention of it
// (app_mention) goes to the decider as an inbound message from the Slack
// user, in its thread.
type EventHandler struct {
	cfg     EventsConfig
	store   EventStore
	decider Decider
	log     *slog.Logger

	mu      sync.Mutex
	self    *Identity
	selfTry time.Time
}

// NewEventHandler builds the handler.
func NewEventHandler(cfg EventsConfig, st EventStore, d Decider, log *slog.Logger) (*EventHandler, error) {
	if cfg.SigningSecret == "" || st == nil || d == nil {
		return nil, errors.New("slack events: a signing secret, a store and a decider are required")
	}
	if cfg.MaxBody <= 0 || cfg.MaxBody > MaxRequestBytes {
		cfg.MaxBody = MaxRequestBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &EventHandler{cfg: cfg, store: st, decider: d, log: log}, nil
}

func (h *EventHandler) reject(w http.ResponseWriter, code int, reason string) {
	h.log.Warn("slack event refused", "status", code, "reason", reason)
	http.Error(w, reason, code)
}

func (h *EventHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, http.StatusMethodNotAllowed, "method "+r.Method+"; Slack posts events")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBody+1))
	if err != nil {
		h.reject(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	if int64(len(body)) > h.cfg.MaxBody {
		h.reject(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", h.cfg.MaxBody))
		return
	}
	// The signature first: nothing of an unsigned request is read.
	if err := Verify(r.Header, body, h.cfg.SigningSecret, h.cfg.Now()); err != nil {
		h.reject(w, http.StatusUnauthorized, err.Error())
		return
	}
	h.cfg.Health.Event(h.cfg.Now())
	ev, err := ParseEvent(body)
	if err != nil {
		h.reject(w, http.StatusBadRequest, "slack event: "+err.Error())
		return
	}
	switch ev.Type {
	case "url_verification":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"challenge": ev.Challenge})
		return
	case "event_callback":
	default:
		h.log.Info("slack event of a type beachd does not act on", "type", ev.Type)
		w.WriteHeader(http.StatusOK)
		return
	}
	code, reason := h.process(r.Context(), ev, r.Header.Get("X-Slack-Retry-Num"))
	if code != http.StatusOK {
		h.reject(w, code, reason)
		return
	}
	// Slack waits 3 s: the message is recorded (and its turn queued);
	// the turn runs after this answer.
	w.WriteHeader(http.StatusOK)
}

// Prime asks auth.test for the app's bot now, so that the first event
// does not wait for it. It never fails: without an answer, the first
// event asks again.
func (h *EventHandler) Prime(ctx context.Context) error {
	if id := h.identity(ctx); id.UserID != "" {
		h.log.Info("slack app", "bot_user", id.UserID, "team", id.TeamID)
	}
	return nil
}

// identity is the app's bot, asked once (again a minute after a failure).
func (h *EventHandler) identity(ctx context.Context) Identity {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.self != nil {
		return *h.self
	}
	if h.cfg.Self == nil || (!h.selfTry.IsZero() && h.cfg.Now().Sub(h.selfTry) < identityRetry) {
		return Identity{}
	}
	h.selfTry = h.cfg.Now()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	id, err := h.cfg.Self(ctx)
	if err != nil {
		h.log.Warn("slack: auth.test failed; the app's own messages are known by their bot_id only", "err", err)
		return Identity{}
	}
	h.self = &id
	return id
}

// process acts on a verified event_callback: 200, or the status and reason
// of a refusal (a 5xx makes Slack retry).
func (h *EventHandler) process(ctx context.Context, ev *Event, retry string) (int, string) {
	self := h.identity(ctx)
	team := h.cfg.TeamID
	if team == "" {
		team = self.TeamID
	}
	if team != "" && ev.TeamID != team {
		return http.StatusForbidden, fmt.Sprintf("event from workspace %s; this app takes workspace %s's", ev.TeamID, team)
	}
	log := h.log.With("event_id", ev.EventID)
	if retry != "" {
		log = log.With("slack_retry", trunc(retry))
	}
	// What is not a person's new message is ignored before anything is
	// written: the app's own answers come back as events too.
	in, why := inboundOfEvent(ev, self, h.cfg.Now())
	if why == "" && len(in.Recipients) == 0 {
		why = h.threadReply(ctx, in)
	}
	if why != "" {
		log.Info("slack event ignored", "type", ev.Message.Type, "reason", why)
		return http.StatusOK, ""
	}
	key := "slack-event/" + ev.EventID
	first, err := h.store.MarkSeen(ctx, key)
	if err != nil {
		return http.StatusInternalServerError, "record event: " + err.Error()
	}
	if !first {
		// Seen before: Slack retried (no answer in 3 s, or an error). The
		// seen mark is written before the decider records the message,
		// the handled mark after; a stop between them leaves the retry to
		// the decider, which knows a message it recorded.
		_, handled, err := h.store.GetKV(ctx, eventHandledKey(ev.EventID))
		if err != nil {
			return http.StatusInternalServerError, err.Error()
		}
		if handled {
			log.Info("slack event delivered again; no effect")
			return http.StatusOK, ""
		}
	}
	res, err := h.decider.HandleInbound(ctx, in)
	if err != nil {
		if first {
			if ferr := h.store.ForgetSeen(context.WithoutCancel(ctx), key); ferr != nil {
				log.Error("forget seen slack event", "err", ferr)
			}
		}
		return http.StatusInternalServerError, "hand the message on: " + err.Error()
	}
	h.handled(ctx, ev.EventID)
	log.Info("slack message handled", "slack_user", in.From, "outcome", res.Outcome, "conversation_id", res.Conversation)
	return http.StatusOK, ""
}

// threadReply says why a reply without a mention in a channel thread
// (message.channels) is not taken, or "" when it continues a conversation:
// its thread must be one beachd holds, and its writer one of the
// conversation's participants (others talking in the thread are not
// writing to the agent).
func (h *EventHandler) threadReply(ctx context.Context, in envelope.Inbound) string {
	ch, ts, _ := strings.Cut(in.To, "/")
	c, err := h.store.ConversationByThread(ctx, store.ThreadKey(envelope.ChannelSlack, ch, ts))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "a reply in a channel thread that is no conversation, without a mention"
	case err != nil:
		// Not taken: a mention in the thread still is.
		return "the thread's conversation could not be read: " + err.Error()
	}
	for _, p := range c.Participants {
		if strings.EqualFold(p, in.From) {
			return ""
		}
	}
	return "a reply in a conversation's thread by someone not in it, without a mention"
}

func (h *EventHandler) handled(ctx context.Context, eventID string) {
	if err := h.store.PutKV(ctx, eventHandledKey(eventID), []byte(h.cfg.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		// A retry asks the decider again, which knows the message.
		h.log.Warn("mark slack event handled", "err", err)
	}
}

func eventHandledKey(eventID string) string { return "slack-handled/" + eventID }

// inboundOfEvent is the inbound message an event carries, or why it
// carries none: only a person's new message, written to the app directly
// (message in an im) or mentioning it (app_mention), is one.
func inboundOfEvent(ev *Event, self Identity, now time.Time) (envelope.Inbound, string) {
	m := ev.Message
	if m == nil {
		return envelope.Inbound{}, "no event"
	}
	switch m.Type {
	case "message":
		switch {
		case m.ChannelType == "im":
		case m.ChannelType != "channel" && m.ChannelType != "group":
			return envelope.Inbound{}, "a message in a " + m.ChannelType + ": only direct messages, mentions and replies in a conversation's thread are taken"
		case m.ThreadTS == "" || m.ThreadTS == m.TS:
			return envelope.Inbound{}, "a message in a channel that does not mention the app"
		case self.UserID != "" && mentions(m.Text, self.UserID):
			return envelope.Inbound{}, "a mention of the app: its app_mention event takes it"
		}
	case "app_mention":
	default:
		return envelope.Inbound{}, "event type " + m.Type + " is not one beachd takes"
	}
	switch {
	case m.Subtype == "message_changed":
		return envelope.Inbound{}, "an edit of a message"
	case m.Subtype == "message_deleted":
		return envelope.Inbound{}, "a deletion of a message"
	case m.BotID != "" || m.Subtype == "bot_message":
		return envelope.Inbound{}, "a bot's message"
	case self.UserID != "" && m.User == self.UserID:
		return envelope.Inbound{}, "the app's own message"
	case m.Subtype != "" && m.Subtype != "file_share" && m.Subtype != "thread_broadcast":
		return envelope.Inbound{}, "a message of subtype " + m.Subtype
	case m.Edited:
		return envelope.Inbound{}, "an edited message"
	case m.User == "":
		return envelope.Inbound{}, "a message without a user"
	}
	thread := m.ThreadTS
	if thread == "" {
		thread = m.TS
	}
	// Where it was written, for the router: a direct message, a mention
	// in a channel; none for a reply without a mention in a channel
	// thread, which only continues that thread's conversation.
	var where []string
	switch {
	case m.Type == "app_mention":
		where = []string{m.Channel}
	case m.ChannelType == "im":
		where = []string{SlackIM}
	}
	text := messageText(m.Text, self.UserID)
	return envelope.Inbound{
		Channel: envelope.ChannelSlack, From: m.User,
		To: m.Channel + "/" + thread, Recipients: where,
		// A message is one in its conversation, whichever event brought
		// it and however often.
		MessageID:  "slack:" + m.Channel + ":" + m.TS,
		Text:       strings.TrimSpace(text),
		FullText:   text,
		ReceivedAt: now,
		// Only a request whose signature matched gets here.
		Evidence: map[string]string{"slackSignature": "valid", "slackEvent": ev.EventID},
	}, ""
}

// mention is a user mention in Slack's text markup, <@U…> or <@U…|name>.
var mention = regexp.MustCompile(`<@([UW][A-Z0-9]{2,20})(\|[^>]*)?>`)

// mentions reports whether text mentions user.
func mentions(text, user string) bool {
	for _, m := range mention.FindAllStringSubmatch(text, 100) {
		if m[1] == user {
			return true
		}
	}
	return false
}

// messageText is a message's text as a person wrote it: mentions of the
// app taken out (a leading mention when the app's user id is unknown),
// Slack's three escapes undone.
func messageText(s, self string) string {
	if self != "" {
		s = mention.ReplaceAllStringFunc(s, func(m string) string {
			if mention.FindStringSubmatch(m)[1] == self {
				return ""
			}
			return m
		})
	} else if loc := mention.FindStringIndex(strings.TrimLeft(s, " ")); loc != nil && loc[0] == 0 {
		s = strings.TrimLeft(s, " ")[loc[1]:]
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(strings.TrimSpace(s))
}
