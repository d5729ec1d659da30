package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/go-json-experiment/json/jsontext"
)

// ApprovalPreparer mints the approvals of an envelope at ingest: the
// records and token hashes to store in the ingest transaction, and for each
// recipient (by index in `to`) the approval ids its delivery asks about.
// The approvals package implements it.
type ApprovalPreparer interface {
	Prepare(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent string) (approvals []store.NewApproval, perRecipient [][]string, err error)
}

// ApprovalCommitter is a preparer's optional after-commit hook: it is
// given the approvals of each ingest that committed (not a replay), so that
// what must follow the commit (an injection decided at ingest, the timers
// of a policy) starts at once. The approvals package implements it.
type ApprovalCommitter interface {
	Committed(ctx context.Context, approvals []store.NewApproval)
}

// IngestConfig is what ingest checks requests against.
type IngestConfig struct {
	Registry *envelope.Registry
	Limits   envelope.Limits
	// MaxRecipients per request; default 100.
	MaxRecipients int
	// Channels that are configured (have a deliverer).
	Channels map[string]bool
	// Endpoints are the configured webhook endpoints.
	Endpoints map[string]bool
	// Agents are the configured agent names.
	Agents map[string]bool
	// Approvers, per agent, restrict who may be asked to approve: when an
	// agent has a set (keys from ApproverKey), every recipient of an
	// envelope of that agent carrying an approval-request must be in it, so
	// that a compromised agent cannot send its approvals to itself.
	Approvers map[string]map[string]bool
	// Conversations, when set, resolves recipients that name a
	// conversation ({"conversation":"cnv_…"}); without it such a recipient
	// is refused (422).
	Conversations ConversationResolver
	// Remember, when set, is given each envelope accepted from a request,
	// decoded, with its id and body size (the dispatcher's cache). The
	// envelope is not changed after.
	Remember func(id string, env *envelope.Envelope, size int)
	// HandOff, when set, takes new deliveries straight to a dispatch
	// worker when one is free: they are stored leased to this process and
	// need no claim (channels.Dispatcher).
	HandOff HandOff
}

// HandOff is the dispatcher's side of a hand-off (channels.Dispatcher):
// Reserve before the ingest, then Hand each reserved delivery as stored,
// or Unreserve it.
type HandOff interface {
	Reserve(channel, to string) (*channels.Reservation, bool)
	Hand(r *channels.Reservation, del *store.Delivery)
	Unreserve(r *channels.Reservation)
}

// ConversationResolver says where a delivery to a conversation goes now:
// its channel, address, the Extra keys that thread it, and whether it is
// held. Unknown conversations are errors matching store.ErrNotFound.
// Conversations includes it.
type ConversationResolver interface {
	Resolve(ctx context.Context, id string) (store.NewDelivery, error)
}

// IngestStore is the part of the store an Ingester writes to: it stores
// envelopes and looks up the approvals they answer. Every store.Store is
// one.
type IngestStore interface {
	Ingest(ctx context.Context, in store.Ingest) (*store.IngestResult, error)
	Approval(ctx context.Context, id string) (*store.Approval, error)
}

// Ingester validates delivery requests and stores them. It is used by the
// HTTP API, `beachd send`, the scheduler and approvals' confirmations.
type Ingester struct {
	cfg      IngestConfig
	db       IngestStore
	preparer ApprovalPreparer
	notify   func()
	observe  func(deliveries []*store.Delivery)
}

// MaxEnvelopeBytes is the configured bound of one envelope (limits.max_envelope_bytes),
// the limit a 413 states.
func (in *Ingester) MaxEnvelopeBytes() int64 {
	if in == nil || in.cfg.Limits.MaxBytes <= 0 {
		return envelope.DefaultLimits.MaxBytes
	}
	return in.cfg.Limits.MaxBytes
}

// NewIngester builds an Ingester. preparer may be nil (approval-request parts
// are then delivered without tokens); notify is called after each accepted
// ingest (the dispatcher's wake-up); observe (metrics) may be nil.
func NewIngester(cfg IngestConfig, db IngestStore, preparer ApprovalPreparer, notify func(), observe func([]*store.Delivery)) *Ingester {
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = 100
	}
	if notify == nil {
		notify = func() {}
	}
	return &Ingester{cfg: cfg, db: db, preparer: preparer, notify: notify, observe: observe}
}

// DeliveryRequest is the body of POST /v1/deliveries.
type DeliveryRequest struct {
	Envelope json.RawMessage `json:"envelope"`
	To       recipientList   `json:"to"`
	Agent    string          `json:"agent,omitempty"`
}

// recipientList decodes at most envelope.MaxDecodedRecipients recipients.
type recipientList []envelope.Recipient

// UnmarshalJSONFrom implements the JSON v2 decoder hook.
func (l *recipientList) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]envelope.Recipient)(l), dec, envelope.MaxDecodedRecipients, "recipients")
}

// Accepted is the 202 answer.
type Accepted struct {
	ID         string             `json:"id"`
	Deliveries []AcceptedDelivery `json:"deliveries"`
}

// AcceptedDelivery is one delivery in the 202 answer.
type AcceptedDelivery struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	To      string `json:"to"`
	Status  string `json:"status"`
}

// Accept decodes, validates and stores a delivery request body. Bad input
// is a *envelope.ValidationError listing every problem; nothing is stored
// then.
func (in *Ingester) Accept(ctx context.Context, body []byte, idempotencyKey, source string) (*Accepted, bool, error) {
	return in.AcceptAs(ctx, body, idempotencyKey, source, store.HashRequest(body))
}

// AcceptAs is Accept with the idempotency key bound to hash instead of
// the body's own hash: a caller that builds the body from what it was sent
// (the MCP tools, whose envelopes carry a fresh producedAt) binds a key to
// what its own caller sent.
func (in *Ingester) AcceptAs(ctx context.Context, body []byte, idempotencyKey, source string, hash [32]byte) (*Accepted, bool, error) {
	req, env, err := DecodeDeliveryRequest(body, in.cfg.Limits)
	if len(idempotencyKey) > 255 {
		probs := []envelope.Problem{{Path: "Idempotency-Key", Reason: "longer than 255 characters"}}
		var ve *envelope.ValidationError
		if errors.As(err, &ve) {
			probs = append(ve.Problems, probs...)
		}
		return nil, false, &envelope.ValidationError{Problems: probs}
	}
	if err != nil {
		return nil, false, err
	}
	res, err := in.ingest(ctx, env, req.Envelope, req.To, req.Agent, source, idempotencyKey, hash)
	if err != nil {
		return nil, false, err
	}
	return accepted(res), res.Replayed, nil
}

// DecodeDeliveryRequest decodes a POST /v1/deliveries body as the API
// does before it looks at the configuration: strict JSON (an unknown
// member is a problem at its path, with the member meant), then the
// envelope within the limits. Its errors are a *envelope.ValidationError
// (or *envelope.TooLargeError) whose problems name their paths. `beachd
// send` checks a request with it before sending.
func DecodeDeliveryRequest(body []byte, lim envelope.Limits) (*DeliveryRequest, *envelope.Envelope, error) {
	var req DeliveryRequest
	if err := envelope.StrictUnmarshal(body, &req); err != nil {
		return nil, nil, &envelope.ValidationError{Problems: []envelope.Problem{envelope.ProblemOf("", err)}}
	}
	if len(req.Envelope) == 0 || string(req.Envelope) == "null" {
		return nil, nil, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "envelope", Reason: "required"}}}
	}
	env, err := envelope.Decode(req.Envelope, lim)
	if err != nil {
		return nil, nil, prefixProblems("envelope", err)
	}
	return &req, env, nil
}

// Enqueue validates and stores an envelope built inside beachd (a schedule's
// result, an approval confirmation). It returns the envelope id.
func (in *Ingester) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error) {
	res, err := in.ingest(ctx, env, nil, to, agent, source, "", [32]byte{})
	if err != nil {
		return "", err
	}
	return res.EnvelopeID, nil
}

// EnqueueReply is Enqueue for a message that answers another: extra goes
// on every delivery (for email, the Message-ID it answers and its
// References: channels/email ExtraInReplyTo, ExtraReferences).
func (in *Ingester) EnqueueReply(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, extra map[string]string, agent, source string) (string, error) {
	res, err := in.ingestExtra(ctx, env, nil, to, agent, source, "", [32]byte{}, extra)
	if err != nil {
		return "", err
	}
	return res.EnvelopeID, nil
}

// EnqueueKeyed is Enqueue with an idempotency key: a repeat with the same
// key stores nothing and answers the first envelope id. Conversations
// store agents' answers through it (to = the conversation).
func (in *Ingester) EnqueueKeyed(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source, key string) (string, error) {
	res, err := in.ingestExtra(ctx, env, nil, to, agent, source, key, sha256.Sum256([]byte("enqueue\x00"+key)), nil)
	if err != nil {
		return "", err
	}
	return res.EnvelopeID, nil
}

// ingest validates and stores env. raw, when given, is env exactly as the
// caller sent it: it is stored as is, so that peers receive the bytes the
// agent produced (and it is not encoded a second time).
func (in *Ingester) ingest(ctx context.Context, env *envelope.Envelope, raw json.RawMessage, to []envelope.Recipient, agent, source, key string, hash [32]byte) (*store.IngestResult, error) {
	return in.ingestExtra(ctx, env, raw, to, agent, source, key, hash, nil)
}

func (in *Ingester) ingestExtra(ctx context.Context, env *envelope.Envelope, raw json.RawMessage, to []envelope.Recipient, agent, source, key string, hash [32]byte, extra map[string]string) (*store.IngestResult, error) {
	var probs []envelope.Problem
	if err := in.cfg.Registry.Validate(env); err != nil {
		if ve, ok := err.(*envelope.ValidationError); ok {
			for _, p := range ve.Problems {
				probs = append(probs, envelope.Problem{Path: joinPath("envelope", p.Path), Reason: p.Reason})
			}
		} else {
			return nil, err
		}
	}
	if len(probs) == 0 {
		// A surface no rendition could render within its budget is
		// refused now rather than dead-lettered at every delivery.
		if i, err := render.CheckSurfaces(env); err != nil {
			probs = append(probs, envelope.Problem{Path: fmt.Sprintf("envelope.parts[%d].data", i), Reason: err.Error()})
		}
	}
	to, resolved, cprobs, err := in.resolveConversations(ctx, to)
	if err != nil {
		return nil, err
	}
	to, rprobs := in.checkRecipients(to, len(cprobs))
	probs = append(probs, rprobs...)
	hasApprovals := len(env.PartsOf(envelope.PartApprovalRequest)) > 0
	switch {
	case agent != "" && !in.cfg.Agents[agent]:
		probs = append(probs, envelope.Problem{Path: "agent", Reason: fmt.Sprintf("unknown agent %q (configure it under agents)", agent)})
	case agent == "" && hasApprovals:
		if len(in.cfg.Agents) == 1 {
			for a := range in.cfg.Agents {
				agent = a
			}
		} else {
			probs = append(probs, envelope.Problem{Path: "agent", Reason: "required when the envelope carries an approval-request: the decision is injected into that agent"})
		}
	}
	if hasApprovals && len(probs) == 0 {
		probs = append(probs, in.checkApprovers(agent, to)...)
	}
	switch {
	case len(probs) > 0:
		return nil, &envelope.ValidationError{Problems: append(cprobs, probs...)}
	case len(cprobs) > 0:
		return nil, &UnprocessableError{Problems: cprobs}
	}
	fromRequest := raw != nil
	if raw == nil {
		var err error
		if raw, err = json.Marshal(env); err != nil {
			return nil, fmt.Errorf("encode envelope: %w", err)
		}
	}
	ing := store.Ingest{Envelope: raw, Agent: agent, Source: source, IdempotencyKey: key, RequestHash: hash}
	var per [][]string
	if hasApprovals && in.preparer != nil {
		ing.Approvals, per, err = in.preparer.Prepare(ctx, env, to, agent)
		var ve *envelope.ValidationError
		if errors.As(err, &ve) {
			return nil, ve // a request this configuration cannot honour: 400, nothing stored
		} else if err != nil {
			return nil, fmt.Errorf("prepare approvals: %w", err)
		}
	}
	for i, r := range to {
		nd := store.NewDelivery{Channel: r.Channel, To: r.Target(), Extra: extra}
		if c := resolved[i]; c != nil {
			// The conversation's own keys win over the caller's.
			nd = *c
			nd.Channel, nd.To = r.Channel, r.Target()
			nd.Extra = make(map[string]string, len(extra)+len(c.Extra))
			for k, v := range extra {
				nd.Extra[k] = v
			}
			for k, v := range c.Extra {
				nd.Extra[k] = v
			}
		}
		if i < len(per) {
			nd.ApprovalIDs = per[i]
		}
		ing.Deliveries = append(ing.Deliveries, nd)
		if spec, _ := envelope.Channel(nd.Channel); nd.Held && spec.Inbound.Window > 0 {
			// The answer waits for the person to write again; the
			// channel's window template, sent now, asks them to.
			ing.Deliveries = append(ing.Deliveries, nd.WindowTemplate())
		}
	}
	for _, na := range ing.Approvals {
		// The people a policy asks who are not recipients of the request.
		ing.Deliveries = append(ing.Deliveries, na.Ask...)
	}
	held := in.reserve(&ing)
	res, err := in.db.Ingest(ctx, ing)
	if err != nil || res.Replayed {
		in.unreserve(held)
	}
	if errors.Is(err, store.ErrDuplicateApproval) {
		return nil, in.approvalConflict(ctx, env, err)
	} else if err != nil {
		return nil, err
	}
	if !res.Replayed && fromRequest && in.cfg.Remember != nil {
		in.cfg.Remember(res.EnvelopeID, env, len(raw))
	}
	if c, ok := in.preparer.(ApprovalCommitter); ok && !res.Replayed && len(ing.Approvals) > 0 {
		c.Committed(ctx, ing.Approvals)
	}
	if !res.Replayed {
		if in.hand(held, res.Deliveries) < len(res.Deliveries) {
			in.notify()
		}
		if in.observe != nil {
			in.observe(res.Deliveries)
		}
	}
	return res, nil
}

// reserve asks the dispatcher for a worker for each delivery of ing that
// is due now, and marks those it gets as handed off; the answer holds the
// reservations by index (nil where none).
func (in *Ingester) reserve(ing *store.Ingest) []*channels.Reservation {
	if in.cfg.HandOff == nil || !ing.NotBefore.IsZero() {
		return nil
	}
	var held []*channels.Reservation
	for i := range ing.Deliveries {
		nd := &ing.Deliveries[i]
		if nd.Held {
			continue
		}
		r, ok := in.cfg.HandOff.Reserve(nd.Channel, nd.To)
		if !ok {
			continue
		}
		if held == nil {
			held = make([]*channels.Reservation, len(ing.Deliveries))
		}
		held[i], nd.LeaseUntil = r, r.Until
	}
	return held
}

func (in *Ingester) unreserve(held []*channels.Reservation) {
	for _, r := range held {
		if r != nil {
			in.cfg.HandOff.Unreserve(r)
		}
	}
}

// hand gives the dispatcher the stored deliveries it reserved a worker
// for, and says how many.
func (in *Ingester) hand(held []*channels.Reservation, ds []*store.Delivery) int {
	n := 0
	for i, r := range held {
		if r == nil {
			continue
		}
		if i >= len(ds) {
			in.cfg.HandOff.Unreserve(r)
			continue
		}
		// The worker gets its own copy: the answer is built from ds.
		d := *ds[i]
		in.cfg.HandOff.Hand(r, &d)
		n++
	}
	return n
}

// maxConversationID bounds the conversation id of a recipient.
const maxConversationID = 64

// resolveConversations replaces each recipient that names a conversation
// by the channel and address the conversation is on now; resolved holds,
// by index, the delivery the conversation asks for (nil for the other
// recipients). A recipient that names a conversation and also a channel,
// address or endpoint, an unknown conversation, or a conversation on a
// beachd without conversations are problems of their own (422 when they
// are the only ones); any other failure of the resolver is returned.
func (in *Ingester) resolveConversations(ctx context.Context, to []envelope.Recipient) ([]envelope.Recipient, []*store.NewDelivery, []envelope.Problem, error) {
	if len(to) > in.cfg.MaxRecipients {
		return to, nil, nil, nil // checkRecipients refuses the request
	}
	var resolved []*store.NewDelivery
	var probs []envelope.Problem
	out := to
	for i, r := range to {
		if r.Conversation == "" {
			continue
		}
		if resolved == nil {
			resolved = make([]*store.NewDelivery, len(to))
			out = append([]envelope.Recipient(nil), to...)
		}
		path := fmt.Sprintf("to[%d]", i)
		switch {
		case r.Channel != "" || r.Address != "" || r.Endpoint != "":
			probs = append(probs, envelope.Problem{Path: path, Reason: "names a conversation and also a channel, address or endpoint: give one or the other"})
			continue
		case in.cfg.Conversations == nil:
			probs = append(probs, envelope.Problem{Path: path + ".conversation", Reason: ErrConversationsDisabled.Error()})
			continue
		case !ValidID(r.Conversation, "cnv_") || len(r.Conversation) > maxConversationID:
			probs = append(probs, envelope.Problem{Path: path + ".conversation", Reason: fmt.Sprintf("unknown conversation %q", truncate(r.Conversation, maxConversationID))})
			continue
		}
		nd, err := in.cfg.Conversations.Resolve(ctx, r.Conversation)
		if errors.Is(err, store.ErrNotFound) {
			probs = append(probs, envelope.Problem{Path: path + ".conversation", Reason: fmt.Sprintf("unknown conversation %q", r.Conversation)})
			continue
		} else if err != nil {
			return nil, nil, nil, fmt.Errorf("resolve conversation %s: %w", r.Conversation, err)
		}
		out[i] = envelope.Recipient{Channel: nd.Channel, Address: nd.To, Name: r.Name}
		resolved[i] = &nd
	}
	if probs != nil {
		// Leave the refused recipients out of the other checks: their
		// problems are already named.
		kept := make([]envelope.Recipient, 0, len(out))
		for i, r := range out {
			if to[i].Conversation == "" || resolved[i] != nil {
				kept = append(kept, r)
			}
		}
		return kept, nil, probs, nil
	}
	if resolved == nil {
		resolved = make([]*store.NewDelivery, len(to))
	}
	return out, resolved, nil, nil
}

// ApproverKey is the key of a recipient in IngestConfig.Approvers: a
// number stands for its SMS and WhatsApp recipients alike.
func ApproverKey(r envelope.Recipient) string {
	if spec, ok := envelope.Channel(r.Channel); ok {
		return spec.RecipientKey(r)
	}
	return r.Channel + ":" + r.Target()
}

// checkApprovers refuses recipients of an approval-request envelope that
// are not among the agent's approvers (when it has any).
func (in *Ingester) checkApprovers(agent string, to []envelope.Recipient) []envelope.Problem {
	allowed, ok := in.cfg.Approvers[agent]
	if !ok {
		// A request posted to a Slack channel is decided by the agent's
		// approvers only: without any, nobody could decide it.
		var probs []envelope.Problem
		for i, r := range to {
			if r.Channel == envelope.ChannelSlack && envelope.SlackConversation(r.Address) {
				probs = append(probs, envelope.Problem{Path: fmt.Sprintf("to[%d]", i),
					Reason: fmt.Sprintf("the envelope carries an approval-request, and a request posted to the Slack channel %s is decided only by agents.%s.approvers, which is not set: nobody could decide it", r.Address, agent)})
			}
		}
		return probs
	}
	var probs []envelope.Problem
	for i, r := range to {
		if !allowed[ApproverKey(r)] {
			probs = append(probs, envelope.Problem{Path: fmt.Sprintf("to[%d]", i),
				Reason: fmt.Sprintf("%s is not among agents.%s.approvers: the envelope carries an approval-request, and this agent's approvals go only to its configured approvers", r.Target(), agent)})
		}
	}
	return probs
}

// approvalConflict names the approval-request parts whose approvalId is
// already stored (or repeated in the envelope): 409, nothing stored.
func (in *Ingester) approvalConflict(ctx context.Context, env *envelope.Envelope, err error) error {
	var probs []envelope.Problem
	seen := map[string]bool{}
	for i, p := range env.Parts {
		if p.PartType() != envelope.PartApprovalRequest {
			continue
		}
		var ar envelope.ApprovalRequest
		if p.DecodeData(&ar) != nil {
			continue
		}
		path := fmt.Sprintf("envelope.parts[%d].data.approvalId", i)
		switch _, gerr := in.db.Approval(ctx, ar.ApprovalID); {
		case seen[ar.ApprovalID]:
			probs = append(probs, envelope.Problem{Path: path, Reason: fmt.Sprintf("approvalId %q appears twice in this envelope", ar.ApprovalID)})
		case gerr == nil:
			probs = append(probs, envelope.Problem{Path: path, Reason: fmt.Sprintf("approvalId %q was already used: each approval-request needs a new approvalId (and a suspended turn that waits for it)", ar.ApprovalID)})
		}
		seen[ar.ApprovalID] = true
	}
	if len(probs) == 0 {
		return err // a token collision: the store's error, 409 all the same
	}
	return &ConflictError{Problems: probs, Err: err}
}

// NormalizeEmail checks an RFC 5322 address and returns its addr-spec with
// the domain lower-cased.
func NormalizeEmail(s string) (string, error) {
	return envelope.MustChannel(envelope.ChannelEmail).Normalize(s)
}

// checkRecipients checks to; refused is how many recipients were already
// refused (conversations that cannot be used), which do not count as
// missing.
func (in *Ingester) checkRecipients(to []envelope.Recipient, refused int) ([]envelope.Recipient, []envelope.Problem) {
	var probs []envelope.Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, envelope.Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	if len(to)+refused == 0 {
		add("to", "at least one recipient is required")
	}
	if len(to) > in.cfg.MaxRecipients {
		add("to", "%d recipients; at most %d are allowed", len(to), in.cfg.MaxRecipients)
		return nil, probs
	}
	out := make([]envelope.Recipient, 0, len(to))
	var seen map[string]int // made for a second recipient
	for i, r := range to {
		// The path is only needed for a problem: most envelopes have none.
		path := func() string { return "to[" + strconv.Itoa(i) + "]" }
		before := len(probs)
		key := ""
		if r.Channel == "" {
			add(path()+".channel", "required: one of %s", strings.Join(envelope.ChannelNames(), ", "))
			continue
		}
		spec, err := envelope.LookupChannel(r.Channel)
		if err != nil {
			add(path()+".channel", "%v", err)
			continue
		}
		field := "address"
		if spec.Address == envelope.AddressEndpoint {
			field = "endpoint"
		}
		a, err := spec.Normalize(spec.Target(r))
		switch {
		case err != nil:
			add(path()+"."+field, "%v", err)
		case spec.Address == envelope.AddressEndpoint && !in.cfg.Endpoints[a]:
			add(path()+"."+field, "unknown webhook endpoint %q (configure it under webhooks.endpoints)", a)
		}
		if spec.Address == envelope.AddressEndpoint {
			r.Endpoint = a
		} else {
			r.Address = a
		}
		if spec.Address == envelope.AddressEmail {
			// Two spellings of one mailbox are one recipient: approvals
			// bind a mailbox case-insensitively, and two handles for it
			// would leave neither answer valid.
			key = spec.Fold(a)
		}
		if envelope.KnownChannel(r.Channel) && !in.cfg.Channels[r.Channel] {
			add(path()+".channel", "channel %q is not configured on this beachd", r.Channel)
		}
		if len(probs) > before {
			continue // no duplicate check on an address already refused
		}
		if len(to) > 1 {
			if key == "" {
				key = r.Target()
			}
			k := r.Channel + "\x00" + key
			if j, dup := seen[k]; dup {
				add(path(), "duplicate of to[%d]", j)
				continue
			}
			if seen == nil {
				seen = make(map[string]int, len(to))
			}
			seen[k] = i
		}
		out = append(out, r)
	}
	return out, probs
}

func joinPath(prefix, p string) string {
	if p == "" {
		return prefix
	}
	return prefix + "." + p
}

func prefixProblems(prefix string, err error) error {
	ve, ok := err.(*envelope.ValidationError)
	if !ok {
		return err
	}
	out := &envelope.ValidationError{}
	for _, p := range ve.Problems {
		out.Problems = append(out.Problems, envelope.Problem{Path: joinPath(prefix, p.Path), Reason: p.Reason})
	}
	return out
}

func accepted(res *store.IngestResult) *Accepted {
	a := &Accepted{ID: res.EnvelopeID, Deliveries: []AcceptedDelivery{}}
	for _, d := range res.Deliveries {
		a.Deliveries = append(a.Deliveries, AcceptedDelivery{ID: d.ID, Channel: d.Channel, To: d.To, Status: status(d)})
	}
	return a
}

// status is a new delivery's state as the 202 answer shows it: queued
// (also when it was handed straight to a worker), or held for a delivery
// that waits (WhatsApp's closed window).
func status(d *store.Delivery) string {
	if d.State == "" || d.State == store.StateSending {
		return string(store.StateQueued)
	}
	return string(d.State)
}

// since is a helper for latency metrics.
func since(t time.Time, now time.Time) float64 { return now.Sub(t).Seconds() }
