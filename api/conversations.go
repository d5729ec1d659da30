package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// The operator surface of conversations (people who write to an agent by
// email, SMS or WhatsApp):
//
//	GET /v1/inbound?disposition=&channel=&agent=&limit=&after=
//	    → 200 {"inbound":[…], "next"?: "<cursor to pass as after>"}
//	GET /v1/conversations?agent=&channel=&limit=&after=
//	    → 200 {"conversations":[…], "next"?: "<cursor>"}
//	GET /v1/conversations/{id} → 200 the conversation, its messages both
//	    ways and, on WhatsApp, whether the 24-hour window is open; 404.
//	GET /v1/agents/{name}/transports → 200 {"transports":[{"protocol",
//	    "url"}]}: where people reach the agent; 404 for an unknown agent.
//	GET /v1/inbound/{id}/attachments/{n}?expires=&sig= → the attachment's
//	    bytes. No API key: the signature is the credential; a bad or
//	    expired signature is 403 without saying which.
//
// Every parameter is checked; a bad one is 400 naming it.

// Conversations is what the API reads of the conversations router. Unknown
// ids and agents are errors that match store.ErrNotFound (errors.Is); a bad
// or expired attachment signature is ErrBadSignature.
type Conversations interface {
	// ListInbound lists inbound records, newest first, and the cursor of
	// the next page ("" at the end).
	ListInbound(ctx context.Context, q InboundQuery) ([]InboundItem, string, error)
	// ListConversations lists conversations, most recently active first,
	// and the cursor of the next page ("" at the end).
	ListConversations(ctx context.Context, q ConversationQuery) ([]ConversationItem, string, error)
	// Conversation is one conversation with its messages.
	Conversation(ctx context.Context, id string) (*ConversationDetail, error)
	// Resolve says where a delivery to the conversation goes now: channel,
	// address, the Extra keys that thread it, and Held when WhatsApp's
	// window is closed.
	Resolve(ctx context.Context, id string) (store.NewDelivery, error)
	// Transports are the addresses and numbers at which people reach the
	// agent (what its Agent Card lists).
	Transports(agent string) []Transport
	// OpenAttachment checks the signature of an attachment URL before it
	// looks anything up, and returns the attachment.
	OpenAttachment(ctx context.Context, inboundID string, n int, expires, sig string) (filename, mediaType string, data []byte, err error)
}

// ErrBadSignature is an attachment URL whose signature is wrong or has
// expired: 403, without saying which.
var ErrBadSignature = errors.New("this link is not valid or has expired")

// ErrConversationsDisabled: a recipient names a conversation on a beachd
// without conversations.
var ErrConversationsDisabled = errors.New("conversations are not enabled")

// InboundQuery selects inbound records.
type InboundQuery struct {
	Disposition string // one of envelope.Disposition*
	Channel     string // email, sms or whatsapp
	Agent       string
	Limit       int
	After       string // a cursor from a previous page
}

// ConversationQuery selects conversations.
type ConversationQuery struct {
	Agent   string
	Channel string
	Limit   int
	After   string
}

// InboundItem is the JSON view of one inbound message.
type InboundItem struct {
	ID          string           `json:"id"`
	Channel     string           `json:"channel"`
	From        string           `json:"from"`
	To          string           `json:"to"`
	MessageID   string           `json:"messageId,omitempty"`
	Subject     string           `json:"subject,omitempty"`
	Text        string           `json:"text,omitempty"`
	Attachments []AttachmentItem `json:"attachments,omitempty"`
	ReceivedAt  time.Time        `json:"receivedAt"`
	Disposition string           `json:"disposition"`
	Reason      string           `json:"reason,omitempty"`
	Agent       string           `json:"agent,omitempty"`
	// ConversationID, ApprovalID and TurnID are what the message became.
	ConversationID string `json:"conversationId,omitempty"`
	ApprovalID     string `json:"approvalId,omitempty"`
	TurnID         string `json:"turnId,omitempty"`
}

// AttachmentItem describes one attachment of an inbound message.
type AttachmentItem struct {
	Filename  string `json:"filename,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Size      int64  `json:"size"`
	URL       string `json:"url,omitempty"`
}

// ConversationItem is the JSON view of a conversation: the agent, the
// channel it is bound to, our address or number on it and the people in it.
type ConversationItem struct {
	ID            string    `json:"id"`
	Agent         string    `json:"agent"`
	Channel       string    `json:"channel"`
	OurAddress    string    `json:"ourAddress"`
	Participants  []string  `json:"participants"`
	Subject       string    `json:"subject,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
	LastInboundAt time.Time `json:"lastInboundAt"`
	Turns         int       `json:"turns"`
}

// ConversationDetail is a conversation with its messages, oldest first.
type ConversationDetail struct {
	Conversation ConversationItem `json:"conversation"`
	Messages     []Message        `json:"messages"`
	// Window is WhatsApp's 24-hour customer service window; absent on
	// other channels.
	Window *Window `json:"window,omitempty"`
}

// Message is one message of a conversation: "in" from a person (an inbound
// record), "out" an answer of the agent (a delivery, with its state).
type Message struct {
	At         time.Time `json:"at"`
	Direction  string    `json:"direction"` // in or out
	InboundID  string    `json:"inboundId,omitempty"`
	DeliveryID string    `json:"deliveryId,omitempty"`
	Text       string    `json:"text,omitempty"`
	// State is the disposition of an inbound message, the delivery state
	// of an answer (queued, sent, held, dead, …).
	State string `json:"state,omitempty"`
	// AnsweredBy ("in"): how the agent's answer to this message arrived —
	// send (the answer to SendMessage itself), push (an A2A push
	// notification) or poll (GetTask) — once its turn is answered.
	AnsweredBy string `json:"answeredBy,omitempty"`
}

// Window says whether a free-form WhatsApp message may be sent now.
type Window struct {
	Open     bool      `json:"open"`
	ClosesAt time.Time `json:"closesAt,omitzero"`
}

// Transport is one way to reach an agent, e.g. {"smtp","mailto:travel@example.org"}.
type Transport struct {
	Protocol string `json:"protocol"`
	URL      string `json:"url"`
}

// Dispositions are the dispositions of inbound records, in display order.
var Dispositions = []string{envelope.DispositionApproval, envelope.DispositionTurn, envelope.DispositionRejected,
	envelope.DispositionIgnored, envelope.DispositionHeld, envelope.DispositionUnrouted, envelope.DispositionDuplicate}

// InboundChannels are the channels messages come in on.
var InboundChannels = []string{envelope.ChannelEmail, envelope.ChannelSMS, envelope.ChannelWhatsApp}

const (
	defaultListLimit = 100
	maxListLimit     = 1000
	maxParamLen      = 256
)

// listParams checks the query of a list: only the allowed keys, each at
// most once and at most maxParamLen bytes, a limit from 1 to 1000, a
// channel we receive on, a known agent (when agents is not nil).
func listParams(q url.Values, allowed []string, agents map[string]bool) (limit int, err error) {
	var probs []envelope.Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, envelope.Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	for k, vs := range q {
		switch {
		case !contains(allowed, k):
			add(truncate(k, 64), "unknown parameter: one of %s", strings.Join(allowed, ", "))
		case len(vs) > 1:
			add(k, "given %d times; at most once", len(vs))
		case len(vs[0]) > maxParamLen:
			add(k, "longer than %d characters", maxParamLen)
		}
	}
	if probs != nil {
		return 0, &envelope.ValidationError{Problems: probs}
	}
	limit = defaultListLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			add("limit", "must be an integer from 1 to %d", maxListLimit)
		}
		limit = n
	}
	if ch := q.Get("channel"); ch != "" && !contains(InboundChannels, ch) {
		add("channel", "unknown channel %q: one of %s", ch, strings.Join(InboundChannels, ", "))
	}
	if d := q.Get("disposition"); d != "" && !contains(Dispositions, d) {
		add("disposition", "unknown disposition %q: one of %s", d, strings.Join(Dispositions, ", "))
	}
	if a := q.Get("agent"); a != "" && agents != nil && !agents[a] {
		add("agent", "unknown agent %q", a)
	}
	if a := q.Get("after"); a != "" && !printableASCII(a) {
		add("after", "not a cursor: pass the next value of the previous page")
	}
	if probs != nil {
		return 0, &envelope.ValidationError{Problems: probs}
	}
	return limit, nil
}

// ParseInboundQuery reads an InboundQuery from query parameters; the
// console shares it. agents, when not nil, are the known agent names.
func ParseInboundQuery(q url.Values, agents map[string]bool) (InboundQuery, error) {
	limit, err := listParams(q, []string{"disposition", "channel", "agent", "limit", "after"}, agents)
	if err != nil {
		return InboundQuery{}, err
	}
	return InboundQuery{Disposition: q.Get("disposition"), Channel: q.Get("channel"), Agent: q.Get("agent"),
		Limit: limit, After: q.Get("after")}, nil
}

// ParseConversationQuery reads a ConversationQuery from query parameters;
// the console shares it.
func ParseConversationQuery(q url.Values, agents map[string]bool) (ConversationQuery, error) {
	limit, err := listParams(q, []string{"channel", "agent", "limit", "after"}, agents)
	if err != nil {
		return ConversationQuery{}, err
	}
	return ConversationQuery{Channel: q.Get("channel"), Agent: q.Get("agent"), Limit: limit, After: q.Get("after")}, nil
}

// ValidID reports whether id has the prefix and the shape of a beachd id
// (letters, digits, '_' and '-', at most 64 bytes): anything else is not
// looked up.
func ValidID(id, prefix string) bool {
	if !strings.HasPrefix(id, prefix) || len(id) > 64 || len(id) == len(prefix) {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ConversationRoutes serves the conversations endpoints above. agents are
// the configured agent names.
func ConversationRoutes(conv Conversations, agents map[string]bool, log *slog.Logger) []Route {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := conversationHandlers{conv: conv, agents: agents, log: log}
	return []Route{
		{Method: "GET", Pattern: "/v1/inbound", Handler: http.HandlerFunc(h.listInbound), Auth: true},
		{Method: "GET", Pattern: "/v1/inbound/{id}/attachments/{n}", Handler: http.HandlerFunc(h.attachment), Auth: false},
		{Method: "GET", Pattern: "/v1/conversations", Handler: http.HandlerFunc(h.listConversations), Auth: true},
		{Method: "GET", Pattern: "/v1/conversations/{id}", Handler: http.HandlerFunc(h.getConversation), Auth: true},
		{Method: "GET", Pattern: "/v1/agents/{name}/transports", Handler: http.HandlerFunc(h.transports), Auth: true},
	}
}

type conversationHandlers struct {
	conv   Conversations
	agents map[string]bool
	log    *slog.Logger
}

func (h conversationHandlers) listConversations(w http.ResponseWriter, r *http.Request) {
	q, err := ParseConversationQuery(r.URL.Query(), h.agents)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	cs, next, err := h.conv.ListConversations(r.Context(), q)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	if cs == nil {
		cs = []ConversationItem{}
	}
	out := map[string]any{"conversations": cs}
	if next != "" {
		out["next"] = next
	}
	WriteJSON(w, http.StatusOK, out)
}

func (h conversationHandlers) getConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ValidID(id, "cnv_") {
		WriteError(w, h.log, store.ErrNotFound)
		return
	}
	d, err := h.conv.Conversation(r.Context(), id)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	if d.Messages == nil {
		d.Messages = []Message{}
	}
	if d.Conversation.Participants == nil {
		d.Conversation.Participants = []string{}
	}
	WriteJSON(w, http.StatusOK, d)
}

func (h conversationHandlers) transports(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !h.agents[name] {
		WriteError(w, h.log, store.ErrNotFound)
		return
	}
	ts := h.conv.Transports(name)
	if ts == nil {
		ts = []Transport{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"transports": ts})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
