package envelope

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// Buffered channels beachd delivers to.
const (
	ChannelEmail    = "email"
	ChannelSMS      = "sms"
	ChannelWhatsApp = "whatsapp"
	ChannelWebhook  = "webhook"
	ChannelSlack    = "slack"
)

// KnownChannel reports whether c names a channel of ChannelSpecs.
func KnownChannel(c string) bool { return tableSpec(c) != nil }

// Rule says whether a part of some type reaches one channel.
type Rule int

const (
	Drop       Rule = iota // never delivered on this channel
	Keep                   // always delivered
	IfConsumed             // delivered only when the peer lists the type in its consumes
)

func (r Rule) String() string {
	switch r {
	case Keep:
		return "keep"
	case IfConsumed:
		return "if-consumed"
	}
	return "drop"
}

// PartType is one entry of the open part-type registry.
type PartType struct {
	ID        string
	Canonical bool
	// Streaming is what a streaming transport does ("flush" or "drop"); beachd
	// owns no streaming transport, it is kept for the registry's completeness.
	Streaming string
	// Rules maps each buffered channel to what happens to the part there.
	Rules map[string]Rule
	// InboundOnly types (approval-response) are rejected in outbound envelopes.
	InboundOnly bool
	// RequiresPeerConsumes: suppressed for peers not listing the type.
	RequiresPeerConsumes bool
}

// TurnState is one entry of the open turn-state registry.
type TurnState struct {
	ID            string
	Canonical     bool
	IsTerminal    bool
	EmitsEnvelope bool
	HoldsActor    bool
}

// Settles reports whether an envelope finalized in this state may be
// delivered on a buffered transport: terminal states, and states that hold
// the actor waiting for someone (suspended on an approval).
func (t TurnState) Settles() bool { return t.IsTerminal || t.HoldsActor }

// Registry is the part-type and turn-state registry. Build it with
// NewRegistry and extend it with Register*/before use; it is read-only after.
type Registry struct {
	parts  map[string]PartType
	states map[string]TurnState
}

// byClass is a rule for every channel, chosen by its transport class. A
// chat channel follows messaging's rule.
func byClass(email, messaging, webhook Rule) map[string]Rule {
	out := map[string]Rule{}
	for _, s := range ChannelSpecs() {
		switch s.Class {
		case ClassEmail:
			out[s.Name] = email
		case ClassMessaging, ClassChat:
			out[s.Name] = messaging
		case ClassWebhook:
			out[s.Name] = webhook
		default:
			panic(fmt.Sprintf("envelope: channel %q has no transport class", s.Name))
		}
	}
	return out
}

func all(r Rule) map[string]Rule { return byClass(r, r, r) }

func humanAndWebhook(human, webhook Rule) map[string]Rule { return byClass(human, human, webhook) }

// rich is a rule for the parts only a rich human channel shows (email and
// chat keep them, short text messages drop them).
func rich(webhook Rule) map[string]Rule {
	out := byClass(Keep, Drop, webhook)
	for _, s := range ChannelSpecs() {
		if s.Class == ClassChat {
			out[s.Name] = Keep
		}
	}
	return out
}

// CanonicalPartTypes is the delivery table of docs/envelope.md.
func CanonicalPartTypes() []PartType {
	return []PartType{
		{ID: PartAck, Streaming: "flush", Rules: all(Drop)},
		{ID: PartThinking, Streaming: "flush", Rules: all(Drop)},
		{ID: PartProgress, Streaming: "flush", Rules: all(Drop)},
		{ID: PartResponse, Streaming: "flush", Rules: all(Keep)},
		{ID: PartClarify, Streaming: "flush", Rules: all(Keep)},
		{ID: PartError, Streaming: "flush", Rules: all(Keep)},
		{ID: PartDomainData, Streaming: "flush", Rules: rich(Keep)},
		{ID: PartA2UISurface, Streaming: "flush", Rules: rich(IfConsumed)},
		{ID: PartLLMContext, Streaming: "flush", Rules: humanAndWebhook(Drop, IfConsumed), RequiresPeerConsumes: true},
		{ID: PartArtifact, Streaming: "flush", Rules: all(Keep)},
		{ID: PartCitation, Streaming: "flush", Rules: rich(Keep)},
		{ID: PartReasoningTrace, Streaming: "drop", Rules: humanAndWebhook(Drop, IfConsumed)},
		{ID: PartApprovalRequest, Streaming: "flush", Rules: all(Keep)},
		{ID: PartSetState, Streaming: "drop", Rules: all(Drop)},
		{ID: PartApprovalResponse, Streaming: "drop", Rules: all(Drop), InboundOnly: true},
	}
}

// CanonicalTurnStates is the turn-state table of the respond() tool.
func CanonicalTurnStates() []TurnState {
	return []TurnState{
		{ID: "awaiting"},
		{ID: "complete", IsTerminal: true, EmitsEnvelope: true},
		{ID: "clarifying", IsTerminal: true},
		{ID: "error", IsTerminal: true},
		{ID: "suspended", HoldsActor: true},
		{ID: "delegated"},
		{ID: "passed", IsTerminal: true},
	}
}

// NewRegistry returns a registry holding the canonical part types and turn
// states.
func NewRegistry() *Registry {
	r := &Registry{parts: map[string]PartType{}, states: map[string]TurnState{}}
	for _, p := range CanonicalPartTypes() {
		p.Canonical = true
		r.parts[p.ID] = p
	}
	for _, s := range CanonicalTurnStates() {
		s.Canonical = true
		r.states[s.ID] = s
	}
	return r
}

var consumerIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*\.[a-z0-9][a-z0-9.-]*$`)

// ConsumerPartType is a consumer-registered part type as configured.
type ConsumerPartType struct {
	ID string `yaml:"id"`
	// Buffered is what human channels (email, SMS, WhatsApp) do: "drop" or
	// "keep" (text parts become body text, data parts an email attachment).
	Buffered             string   `yaml:"buffered"`
	Streaming            string   `yaml:"streaming"`
	AllowedTransports    []string `yaml:"allowed_transports"`
	RequiresPeerConsumes bool     `yaml:"requires_peer_consumes"`
}

// RegisterPartType adds a consumer type. Its id must be namespaced
// (slug.name) and must not collide with a registered type.
func (r *Registry) RegisterPartType(c ConsumerPartType) error {
	if !consumerIDPattern.MatchString(c.ID) {
		return fmt.Errorf("id %q: consumer part types are namespaced, like ta.itinerary-slot-state", c.ID)
	}
	if _, dup := r.parts[c.ID]; dup {
		return fmt.Errorf("id %q: already registered", c.ID)
	}
	human := Drop
	switch c.Buffered {
	case "", "drop":
	case "keep":
		human = Keep
	default:
		return fmt.Errorf("buffered %q: must be drop or keep", c.Buffered)
	}
	switch c.Streaming {
	case "", "flush", "drop":
	default:
		return fmt.Errorf("streaming %q: must be flush or drop", c.Streaming)
	}
	webhook := Keep
	if c.RequiresPeerConsumes {
		webhook = IfConsumed
	}
	rules := humanAndWebhook(human, webhook)
	if len(c.AllowedTransports) > 0 {
		for _, t := range c.AllowedTransports {
			if !KnownChannel(t) && t != "sse" && t != "a2a" && t != "mcp" && t != "websocket" {
				return fmt.Errorf("allowed_transports: unknown transport %q", t)
			}
		}
		for ch := range rules {
			if !slices.Contains(c.AllowedTransports, ch) {
				rules[ch] = Drop
			}
		}
	}
	r.parts[c.ID] = PartType{ID: c.ID, Streaming: c.Streaming, Rules: rules, RequiresPeerConsumes: c.RequiresPeerConsumes}
	return nil
}

// RegisterTurnState adds a consumer turn state.
func (r *Registry) RegisterTurnState(s TurnState) error {
	if s.ID == "" {
		return fmt.Errorf("turn state: empty id")
	}
	if _, dup := r.states[s.ID]; dup {
		return fmt.Errorf("turn state %q: already registered", s.ID)
	}
	s.Canonical = false
	r.states[s.ID] = s
	return nil
}

// PartType looks up a part type.
func (r *Registry) PartType(id string) (PartType, bool) {
	p, ok := r.parts[id]
	return p, ok
}

// TurnState looks up a turn state.
func (r *Registry) TurnState(id string) (TurnState, bool) {
	s, ok := r.states[id]
	return s, ok
}

// PartTypeIDs lists the registered part types, sorted.
func (r *Registry) PartTypeIDs() []string {
	ids := make([]string, 0, len(r.parts))
	for id := range r.parts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Delivers reports whether a part of type partType reaches channel, given
// the peer's consumes list (only webhooks have one).
func (r *Registry) Delivers(partType, channel string, consumes []string) bool {
	pt, ok := r.parts[partType]
	if !ok {
		return false
	}
	switch pt.Rules[channel] {
	case Keep:
		return true
	case IfConsumed:
		return slices.Contains(consumes, partType)
	}
	return false
}

// Filter returns a copy of env holding only the parts that reach channel for
// a peer consuming the given types. The envelope's meta is kept.
func (r *Registry) Filter(env *Envelope, channel string, consumes []string) *Envelope {
	out := *env
	out.Parts = make([]Part, 0, len(env.Parts))
	for _, p := range env.Parts {
		if r.Delivers(p.PartType(), channel, consumes) {
			out.Parts = append(out.Parts, p)
		}
	}
	return &out
}
