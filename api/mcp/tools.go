package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the arguments beyond the API's own (the envelope's size,
// recipients' count).
const (
	maxSubject        = 200
	maxSummary        = 1000
	maxName           = 256
	maxIdempotencyKey = 200
	minExpiry         = time.Minute
	maxExpiry         = 30 * 24 * time.Hour
)

const instructions = `beachd delivers messages to people — by email, SMS, WhatsApp — and to configured webhooks, and asks people to approve actions.
Every send_message, ask_for_approval and reply_to_conversation reaches a real person (a message on their phone or in their inbox): send only what they expect, once. Pass an idempotencyKey when you may retry, so that a retry sends nothing twice.
Use ask_for_approval before an action a person must allow; it returns at once with an approvalId, and get_approval tells whether they granted or denied it (poll it now and then: people answer in minutes or hours).
Use get_delivery to see whether a message was sent. Use list_conversations and read_conversation to see what people wrote to an agent, and reply_to_conversation to answer in the same thread.`

// tools are the server's tools; the approval and conversation tools only
// where beachd has approvals and conversations.
func (s *service) tools() []tool {
	ts := []tool{
		{def: &sdk.Tool{Name: "send_message", Title: "Send a message to people",
			Description: `Send a message to one or more people (email address, or phone number for SMS or WhatsApp) or to a configured webhook endpoint. Each recipient gets a real message now — an SMS or WhatsApp message on their phone, an email in their inbox — so send only what they expect, and pass an idempotencyKey if you might retry. Give "text" (Markdown; "subject" is an email's subject line and the message's heading) or, instead, a whole Beach envelope. Returns at once, before sending, with the envelope id and one delivery per recipient (status "queued", or "held" for WhatsApp outside its 24-hour window); get_delivery tells whether each was sent. To answer a person who wrote in, use reply_to_conversation instead. To ask for a decision, use ask_for_approval.`,
			InputSchema: object(map[string]any{
				"to":             recipients("Who receives the message: 1 to 100 recipients."),
				"text":           str("The message, in Markdown. Required unless envelope is given.", 0),
				"subject":        str("One line: the email subject and the message's heading. Optional; not with envelope.", maxSubject),
				"agent":          str("The agent the message is from (a name configured in beachd's agents). Optional.", maxName),
				"envelope":       map[string]any{"type": "object", "description": "Instead of text: a whole Beach response envelope (role, parts, meta), as POST /v1/deliveries takes."},
				"idempotencyKey": str("Any string unique to this message: a call repeated with the same key and arguments sends nothing again and returns the first result.", maxIdempotencyKey),
			}, "to"),
			OutputSchema: outputSchema[sendResult](),
			Annotations:  &sdk.ToolAnnotations{Title: "Send a message to people", DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
		}, call: s.sendMessage},
		{def: &sdk.Tool{Name: "get_delivery", Title: "Whether a message was delivered",
			Description: `Read the state of a message sent with send_message, ask_for_approval or reply_to_conversation: give the envelopeId (every recipient) or one delivery id (dlv_…). Each delivery is queued, sending, retrying, sent, held (WhatsApp, until the person writes again) or dead (gave up: lastError and deadReason say why). Free: nobody is contacted.`,
			InputSchema: object(map[string]any{
				"id": str("An envelopeId (env_…) or a delivery id (dlv_…).", 64),
			}, "id"),
			OutputSchema: outputSchema[deliveryResult](),
			Annotations:  &sdk.ToolAnnotations{Title: "Whether a message was delivered", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		}, call: s.getDelivery},
	}
	if s.cfg.Approvals != nil {
		ts = append(ts,
			tool{def: &sdk.Tool{Name: "ask_for_approval", Title: "Ask a person to approve an action",
				Description: `Ask one or more people to approve or deny an action before you take it (a booking, a payment, a message on their behalf). Each recipient gets a message now — an SMS with a code to reply, a WhatsApp message with buttons, an email with a link — saying the summary; the first answer decides. Returns at once with the approvalId and state "pending": the call does not wait for the decision. Read it with get_approval, now and then (people answer in minutes or hours; it expires after expiresIn, default 24h, and is then denied). Do not act until get_approval says "granted". The agent's approval rules apply: an agent with configured approvers may ask only them.`,
				InputSchema: object(map[string]any{
					"agent":          str("The agent asking (a name configured in beachd's agents).", maxName),
					"to":             recipients("Who may decide: 1 to 100 recipients (email, sms or whatsapp)."),
					"summary":        str("One sentence the person reads and decides on, e.g. \"Book flight BA2043 for 6 people, £1,240\".", maxSummary),
					"toolName":       str("The action to approve, e.g. \"book_flight\".", maxName),
					"args":           map[string]any{"type": "object", "description": "The action's arguments, shown to the person. Optional."},
					"expiresIn":      str("How long the person has to answer, e.g. \"30m\", \"2h\", \"72h\" (1 minute to 720 hours; default 24h). Unanswered, the approval expires and counts as denied.", 32),
					"idempotencyKey": str("Any string unique to this request: a call repeated with the same key and arguments asks nobody again and returns the first approvalId.", maxIdempotencyKey),
				}, "agent", "to", "summary", "toolName"),
				OutputSchema: outputSchema[askResult](),
				Annotations:  &sdk.ToolAnnotations{Title: "Ask a person to approve an action", DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
			}, call: s.askForApproval},
			tool{def: &sdk.Tool{Name: "get_approval", Title: "Read an approval's decision",
				Description: `Read the state of an approval asked with ask_for_approval: "pending" (nobody has answered yet: ask again later), "granted" (go ahead), "denied", "expired" (nobody answered in time: treat as denied) or "void" (withdrawn by an operator). decision is "granted" or "denied" once decided, with who decided (decidedBy), when, and their reason. Free: nobody is contacted.`,
				InputSchema: object(map[string]any{
					"approvalId": str("The approvalId ask_for_approval returned.", maxName),
				}, "approvalId"),
				OutputSchema: outputSchema[approvalResult](),
				Annotations:  &sdk.ToolAnnotations{Title: "Read an approval's decision", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
			}, call: s.getApproval})
	}
	if s.cfg.Conversations != nil {
		ts = append(ts,
			tool{def: &sdk.Tool{Name: "list_conversations", Title: "List conversations with people",
				Description: `List the conversations people started by writing to an agent (by email, SMS or WhatsApp), most recently active first, with who is in each. Page with after = the next value of the previous page. Free: nobody is contacted. Read one with read_conversation.`,
				InputSchema: object(map[string]any{
					"agent":   str("Only this agent's conversations. Optional.", maxName),
					"channel": map[string]any{"type": "string", "enum": api.InboundChannels, "description": "Only conversations on this channel. Optional."},
					"limit":   map[string]any{"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many (default 100)."},
					"after":   str("The next value of the previous page.", 256),
				}),
				OutputSchema: outputSchema[conversationsResult](),
				Annotations:  &sdk.ToolAnnotations{Title: "List conversations with people", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
			}, call: s.listConversations},
			tool{def: &sdk.Tool{Name: "read_conversation", Title: "Read a conversation",
				Description: `Read one conversation: its messages both ways, oldest first ("in" from the person, "out" the agent's answers with their delivery state), and on WhatsApp whether its 24-hour window is open (when it is closed, a reply waits until the person writes again). Free: nobody is contacted.`,
				InputSchema: object(map[string]any{
					"id": str("The conversation id (cnv_…).", 64),
				}, "id"),
				OutputSchema: outputSchema[api.ConversationDetail](),
				Annotations:  &sdk.ToolAnnotations{Title: "Read a conversation", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
			}, call: s.readConversation},
			tool{def: &sdk.Tool{Name: "reply_to_conversation", Title: "Reply to a person in a conversation",
				Description: `Answer the people in a conversation, on its channel and in its thread (an email reply, an SMS or a WhatsApp message on their phone, now). Returns at once with the envelope id and the delivery; get_delivery tells whether it was sent. On WhatsApp outside the 24-hour window the reply is held (status "held") until the person writes again. Pass an idempotencyKey if you might retry.`,
				InputSchema: object(map[string]any{
					"id":             str("The conversation id (cnv_…).", 64),
					"text":           str("The reply, in Markdown.", 0),
					"idempotencyKey": str("Any string unique to this reply: a call repeated with the same key and arguments sends nothing again.", maxIdempotencyKey),
				}, "id", "text"),
				OutputSchema: outputSchema[sendResult](),
				Annotations:  &sdk.ToolAnnotations{Title: "Reply to a person in a conversation", DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
			}, call: s.replyToConversation})
	}
	return ts
}

// sendResult is what send_message and reply_to_conversation return.
type sendResult struct {
	EnvelopeID string         `json:"envelopeId" jsonschema:"the envelope id: pass it to get_delivery"`
	Deliveries []sentDelivery `json:"deliveries" jsonschema:"one delivery per recipient"`
	Replayed   bool           `json:"replayed,omitempty" jsonschema:"true when an earlier call with the same idempotencyKey already sent it: nothing was sent again"`
}

type sentDelivery struct {
	ID      string `json:"id" jsonschema:"the delivery id (dlv_…)"`
	Channel string `json:"channel"`
	To      string `json:"to" jsonschema:"the address, number or webhook endpoint"`
	Status  string `json:"status" jsonschema:"queued, or held (WhatsApp outside its 24-hour window)"`
}

func sent(acc *api.Accepted, replayed bool) sendResult {
	out := sendResult{EnvelopeID: acc.ID, Deliveries: make([]sentDelivery, 0, len(acc.Deliveries)), Replayed: replayed}
	for _, d := range acc.Deliveries {
		out.Deliveries = append(out.Deliveries, sentDelivery{ID: d.ID, Channel: d.Channel, To: d.To, Status: d.Status})
	}
	return out
}

// deliveryResult is what get_delivery returns.
type deliveryResult struct {
	EnvelopeID string          `json:"envelopeId"`
	Agent      string          `json:"agent,omitempty"`
	Deliveries []deliveryState `json:"deliveries"`
}

type deliveryState struct {
	ID             string    `json:"id"`
	Channel        string    `json:"channel"`
	To             string    `json:"to"`
	State          string    `json:"state" jsonschema:"queued, sending, retrying, sent, held or dead"`
	Attempts       int       `json:"attempts"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	SentAt         time.Time `json:"sentAt,omitzero"`
	NextAttemptAt  time.Time `json:"nextAttemptAt,omitzero"`
	LastError      string    `json:"lastError,omitempty"`
	DeadReason     string    `json:"deadReason,omitempty"`
	ProviderStatus string    `json:"providerStatus,omitempty" jsonschema:"what the provider last said (delivered, read, failed…)"`
	ApprovalIDs    []string  `json:"approvalIds,omitempty"`
}

func deliveryStateOf(v api.DeliveryView) deliveryState {
	return deliveryState{ID: v.ID, Channel: v.Channel, To: v.To, State: v.State, Attempts: v.Attempts, CreatedAt: v.CreatedAt,
		UpdatedAt: v.UpdatedAt, SentAt: v.SentAt, NextAttemptAt: v.NextAttemptAt, LastError: v.LastError, DeadReason: v.DeadReason,
		ProviderStatus: v.ProviderStatus, ApprovalIDs: v.ApprovalIDs}
}

// askResult is what ask_for_approval returns.
type askResult struct {
	ApprovalID string         `json:"approvalId" jsonschema:"pass it to get_approval"`
	State      string         `json:"state" jsonschema:"pending until someone decides"`
	ExpiresAt  time.Time      `json:"expiresAt"`
	EnvelopeID string         `json:"envelopeId" jsonschema:"the messages asking: pass it to get_delivery"`
	Deliveries []sentDelivery `json:"deliveries"`
	Replayed   bool           `json:"replayed,omitempty"`
}

// approvalResult is what get_approval returns.
type approvalResult struct {
	ApprovalID string    `json:"approvalId"`
	State      string    `json:"state" jsonschema:"pending, granted, denied, expired or void"`
	Decision   string    `json:"decision,omitempty" jsonschema:"granted or denied, once decided (expired counts as denied)"`
	DecidedBy  string    `json:"decidedBy,omitempty" jsonschema:"who decided: a channel and address, or operator:<key id>"`
	Reason     string    `json:"reason,omitempty"`
	DecidedAt  time.Time `json:"decidedAt,omitzero"`
	ExpiresAt  time.Time `json:"expiresAt"`
	Agent      string    `json:"agent,omitempty"`
	Summary    string    `json:"summary,omitempty"`
}

// conversationsResult is what list_conversations returns.
type conversationsResult struct {
	Conversations []api.ConversationItem `json:"conversations"`
	Next          string                 `json:"next,omitempty" jsonschema:"pass as after for the next page; absent on the last"`
}

func (s *service) sendMessage(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "to", "text", "subject", "agent", "envelope", "idempotencyKey")
	to := a.list("to", "recipients")
	text := a.str("text", false, int(s.cfg.Ingester.MaxEnvelopeBytes()))
	subject := a.str("subject", false, maxSubject)
	agent := a.str("agent", false, maxName)
	env := a.raw("envelope")
	key := a.str("idempotencyKey", false, maxIdempotencyKey)
	switch {
	case env != nil && (a.has("text") || a.has("subject")):
		a.add("envelope", "give text (and subject) or envelope, not both")
	case env == nil && strings.TrimSpace(text) == "" && !a.has("text"):
		a.add("text", "required: the message (or give a whole envelope)")
	case env == nil && strings.TrimSpace(text) == "":
		a.add("text", "must not be empty")
	}
	if strings.ContainsAny(subject, "\r\n") {
		a.add("subject", "must be one line")
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	var names [][2]string
	if env == nil {
		if subject != "" {
			text = "# " + strings.TrimSpace(subject) + "\n\n" + text
		}
		env = s.textEnvelope(text, s.cfg.NewID("mcp_"))
		names = [][2]string{{"envelope.parts[0].text", "text"}}
	}
	acc, replayed, err := s.accept(ctx, "send_message", a, env, to, agent, key)
	if err != nil {
		return nil, renamed(err, names)
	}
	return sent(acc, replayed), nil
}

// textEnvelope is a finished turn's envelope with one text part.
func (s *service) textEnvelope(text, turn string) json.RawMessage {
	env := envelope.Envelope{Role: "agent",
		Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": envelope.PartResponse}}},
		Meta:  envelope.Meta{SessionID: Session, TurnID: turn, ProducedAt: s.cfg.Now().UTC(), FinalizedBy: "complete"}}
	b, _ := json.Marshal(env)
	return b
}

// accept stores env for to as POST /v1/deliveries does. An idempotency
// key is bound to the tool and its arguments (the envelope built from them
// carries a fresh producedAt), and kept apart from the API's keys.
func (s *service) accept(ctx context.Context, tool string, a *args, env, to json.RawMessage, agent, key string) (*api.Accepted, bool, error) {
	body, err := json.Marshal(struct {
		Envelope json.RawMessage `json:"envelope"`
		To       json.RawMessage `json:"to"`
		Agent    string          `json:"agent,omitempty"`
	}{env, to, agent})
	if err != nil {
		return nil, false, err
	}
	var hash [32]byte
	if key != "" {
		key = "mcp:" + key
		hash = sha256.Sum256(append([]byte(tool+"\x00"), a.canonical()...))
	}
	acc, replayed, err := s.cfg.Ingester.AcceptAs(ctx, body, key, Source, hash)
	if errors.Is(err, store.ErrIdempotencyConflict) {
		err = &api.ConflictError{Problems: []envelope.Problem{{Path: "idempotencyKey",
			Reason: "already used with other arguments: a new message needs a new key"}}, Err: err}
	}
	return acc, replayed, err
}

func (s *service) getDelivery(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "id")
	id := a.str("id", true, 64)
	if id != "" && !api.ValidID(id, "env_") && !api.ValidID(id, "dlv_") {
		a.add("id", "not an envelope id (env_…) or a delivery id (dlv_…)")
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	v, err := api.LookupDelivery(ctx, s.cfg.Deliveries, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("id", fmt.Sprintf("no message has the id %q", id))
	} else if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case api.DeliveryView:
		return deliveryResult{EnvelopeID: v.EnvelopeID, Agent: v.Agent, Deliveries: []deliveryState{deliveryStateOf(v)}}, nil
	case api.EnvelopeView:
		out := deliveryResult{EnvelopeID: v.ID, Agent: v.Agent, Deliveries: make([]deliveryState, 0, len(v.Deliveries))}
		for _, d := range v.Deliveries {
			out.Deliveries = append(out.Deliveries, deliveryStateOf(d))
		}
		return out, nil
	}
	return nil, fmt.Errorf("get_delivery: unexpected view %T", v)
}

func (s *service) askForApproval(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "agent", "to", "summary", "toolName", "args", "expiresIn", "idempotencyKey")
	agent := a.str("agent", true, maxName)
	to := a.list("to", "recipients")
	summary := a.str("summary", true, maxSummary)
	toolName := a.str("toolName", true, maxName)
	toolArgs := a.object("args")
	expiresIn := a.str("expiresIn", false, 32)
	key := a.str("idempotencyKey", false, maxIdempotencyKey)
	if agent != "" && !s.cfg.Agents[agent] {
		a.add("agent", "unknown agent %q (configure it under agents)", agent)
	}
	ttl := 24 * time.Hour
	if expiresIn != "" {
		d, err := time.ParseDuration(expiresIn)
		switch {
		case err != nil:
			a.add("expiresIn", "not a duration such as \"30m\" or \"2h\"")
		case d < minExpiry || d > maxExpiry:
			a.add("expiresIn", "must be from 1m to 720h")
		default:
			ttl = d
		}
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	if toolArgs == nil {
		toolArgs = map[string]any{}
	}
	id := s.cfg.NewID("apr_")
	if key != "" {
		// A retry names the same approval.
		sum := sha256.Sum256([]byte(agent + "\x00" + key))
		id = "apr_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:26]
	}
	now := s.cfg.Now().UTC()
	exp := now.Add(ttl).Truncate(time.Second)
	req := envelope.ApprovalRequest{ApprovalID: id, ToolName: toolName, ToolCallID: id, Args: toolArgs, Handler: Source,
		Turn: id, Session: Session, ExpiresAt: &exp, Summary: summary}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(envelope.Envelope{Role: "agent",
		Parts: []envelope.Part{{Data: data, Metadata: map[string]any{"partType": envelope.PartApprovalRequest}}},
		Meta:  envelope.Meta{SessionID: Session, TurnID: id, ProducedAt: now, FinalizedBy: "suspended"}})
	if err != nil {
		return nil, err
	}
	acc, replayed, err := s.accept(ctx, "ask_for_approval", a, env, to, agent, key)
	if err != nil {
		return nil, renamed(err, [][2]string{{"envelope.parts[0].data.expiresAt", "expiresIn"},
			{"envelope.parts[0].data.approvalId", "idempotencyKey"}, {"envelope.parts[0].data", ""}})
	}
	sr := sent(acc, replayed)
	out := askResult{ApprovalID: id, State: store.ApprovalPending, ExpiresAt: exp, EnvelopeID: sr.EnvelopeID, Deliveries: sr.Deliveries, Replayed: replayed}
	if replayed {
		// The first call's approval, as it stands now.
		if v, err := s.cfg.Approvals.Get(ctx, id); err == nil {
			out.State, out.ExpiresAt = v.State, v.ExpiresAt
		}
	}
	return out, nil
}

func (s *service) getApproval(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "approvalId")
	id := a.str("approvalId", true, maxName)
	if err := a.err(); err != nil {
		return nil, err
	}
	v, err := s.cfg.Approvals.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("approvalId", fmt.Sprintf("no approval has the id %q", id))
	} else if err != nil {
		return nil, err
	}
	return approvalResult{ApprovalID: v.ID, State: v.State, Decision: v.Decision(), DecidedBy: v.DecidedBy, Reason: v.Reason,
		DecidedAt: v.DecidedAt, ExpiresAt: v.ExpiresAt, Agent: v.Agent, Summary: v.Summary}, nil
}

func (s *service) listConversations(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "agent", "channel", "limit", "after")
	q := url.Values{}
	for _, k := range []string{"agent", "channel", "after"} {
		if v := a.str(k, false, 256); v != "" {
			q.Set(k, v)
		}
	}
	if a.has("limit") {
		q.Set("limit", strconv.Itoa(a.integer("limit", 1, 1000, 100)))
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	cq, err := api.ParseConversationQuery(q, s.cfg.Agents)
	if err != nil {
		return nil, err
	}
	cs, next, err := s.cfg.Conversations.ListConversations(ctx, cq)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		cs = []api.ConversationItem{}
	}
	for i := range cs {
		if cs[i].Participants == nil {
			cs[i].Participants = []string{}
		}
	}
	return conversationsResult{Conversations: cs, Next: next}, nil
}

func (s *service) readConversation(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "id")
	id := conversationID(a)
	if err := a.err(); err != nil {
		return nil, err
	}
	d, err := s.conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.Messages == nil {
		d.Messages = []api.Message{}
	}
	if d.Conversation.Participants == nil {
		d.Conversation.Participants = []string{}
	}
	return d, nil
}

func (s *service) replyToConversation(ctx context.Context, raw json.RawMessage) (any, error) {
	a := readArgs(raw, "id", "text", "idempotencyKey")
	id := conversationID(a)
	text := a.str("text", true, int(s.cfg.Ingester.MaxEnvelopeBytes()))
	key := a.str("idempotencyKey", false, maxIdempotencyKey)
	if err := a.err(); err != nil {
		return nil, err
	}
	// The conversation's agent answers.
	d, err := s.conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	to, _ := json.Marshal([]envelope.Recipient{{Conversation: id}})
	acc, replayed, err := s.accept(ctx, "reply_to_conversation", a, s.textEnvelope(text, s.cfg.NewID("mcp_")), to, d.Conversation.Agent, key)
	if err != nil {
		return nil, renamed(err, [][2]string{{"envelope.parts[0].text", "text"}, {"to[0].conversation", "id"}, {"to[0]", "id"}})
	}
	return sent(acc, replayed), nil
}

// Schema helpers.

func object(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string, max int) map[string]any {
	s := map[string]any{"type": "string", "description": desc}
	if max > 0 {
		s["maxLength"] = max
	}
	return s
}

func recipients(desc string) map[string]any {
	return map[string]any{"type": "array", "minItems": 1, "maxItems": 100, "description": desc,
		"items": map[string]any{"type": "object", "additionalProperties": false,
			"description": `One recipient: {"channel":"email","address":"alice@example.org"}, {"channel":"sms","address":"+447700900123"}, {"channel":"whatsapp","address":"+447700900123"} or {"channel":"webhook","endpoint":"<configured endpoint name>"}; or {"conversation":"cnv_…"} to answer in a conversation's thread.`,
			"properties": map[string]any{
				"channel":      map[string]any{"type": "string", "enum": envelope.ChannelNames()},
				"address":      str("email: the address; sms and whatsapp: the number in E.164 form (+ and country code).", 320),
				"endpoint":     str("webhook: the name of an endpoint configured in beachd.", maxName),
				"name":         str("The person's name, for the greeting. Optional.", maxName),
				"conversation": str("A conversation id (cnv_…), instead of channel and address.", 64),
			}}}
}

// outputSchema is the JSON Schema of T's JSON.
func outputSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// conversationID reads the argument id, a conversation id (cnv_…).
func conversationID(a *args) string {
	id := a.str("id", true, 64)
	if id != "" && !api.ValidID(id, "cnv_") {
		a.add("id", "not a conversation id (cnv_…)")
	}
	return id
}

// conversation reads conversation id; one that does not exist is a tool
// error naming the argument.
func (s *service) conversation(ctx context.Context, id string) (*api.ConversationDetail, error) {
	d, err := s.cfg.Conversations.Conversation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("id", fmt.Sprintf("no conversation has the id %q", id))
	}
	return d, err
}
