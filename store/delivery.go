package store

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// State is a delivery's state.
type State string

const (
	StateQueued   State = "queued"
	StateSending  State = "sending"
	StateSent     State = "sent"
	StateRetrying State = "retrying"
	StateDead     State = "dead"
	// StateHeld: stored but not due (an answer waiting for WhatsApp's
	// 24-hour window to open again); ReleaseHeld queues it.
	StateHeld State = "held"
)

// States lists every state.
var States = []State{StateQueued, StateSending, StateSent, StateRetrying, StateDead, StateHeld}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, x := range States {
		if s == x {
			return true
		}
	}
	return false
}

// EnvelopeRecord is an accepted envelope.
type EnvelopeRecord struct {
	ID    string `json:"id"`
	Agent string `json:"agent,omitempty"`
	// Envelope is the body as accepted; stored apart from the record.
	Envelope    json.RawMessage `json:"envelope,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	DeliveryIDs []string        `json:"deliveryIds"`
	// Source says where the envelope came from: "api", "cli", "schedule:NAME".
	Source string `json:"source,omitempty"`
}

// Delivery is one outbox job: one envelope to one recipient on one channel.
type Delivery struct {
	ID         string `json:"id"`
	EnvelopeID string `json:"envelopeId"`
	Channel    string `json:"channel"`
	// To is the address (email), E.164 number (sms, whatsapp) or endpoint
	// name (webhook).
	To    string `json:"to"`
	Agent string `json:"agent,omitempty"`
	State State  `json:"state"`
	// Attempts made so far.
	Attempts      int       `json:"attempts"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	LeaseUntil    time.Time `json:"leaseUntil,omitzero"`
	SentAt        time.Time `json:"sentAt,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	DeadReason    string    `json:"deadReason,omitempty"`
	// ProviderID is the provider's id for the sent message (Twilio SID, SMTP
	// queue id); with MaybeSent it lets a channel look a send up before
	// repeating it.
	ProviderID string `json:"providerId,omitempty"`
	// MaybeSent: the last attempt may have reached the provider (timeout
	// after the request was written). The channel decides how to check.
	MaybeSent bool `json:"maybeSent,omitempty"`
	// ProviderStatus is the latest status the provider reported afterwards
	// (delivered, undelivered, failed, read).
	ProviderStatus string `json:"providerStatus,omitempty"`
	// ApprovalIDs are the approvals this delivery asks about.
	ApprovalIDs []string `json:"approvalIds,omitempty"`
	// Extra holds channel-specific values (e.g. the Message-ID a reply
	// threads under).
	Extra map[string]string `json:"extra,omitempty"`
}

// Attempt is one try of a delivery.
type Attempt struct {
	N        int           `json:"n"`
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"durationNs"`
	Outcome  string        `json:"outcome"` // sent, retry, dead
	Error    string        `json:"error,omitempty"`
	// Receipt is the result envelope: {"data": …, "meta": {"source": …}}.
	Receipt json.RawMessage `json:"receipt,omitempty"`
}

// NewDelivery is a delivery to create at ingest.
type NewDelivery struct {
	Channel     string
	To          string
	ApprovalIDs []string
	Extra       map[string]string
	// Held: stored in state held, not due until ReleaseHeld.
	Held bool
	// LeaseUntil, when set, stores the delivery already claimed by the
	// ingesting process, leased until then (a hand-off: the process sends
	// it at once, with no claim of its own). The ingest answers it in state
	// sending with this lease; a lease that runs out, or a crash, makes it
	// due again as for a claimed job. Not with Held or a later NotBefore
	// (CheckHandOffs).
	LeaseUntil time.Time
}

// HandsOff reports whether any delivery of in is handed off (LeaseUntil).
func HandsOff(in *Ingest) bool {
	for _, nd := range in.Deliveries {
		if !nd.LeaseUntil.IsZero() {
			return true
		}
	}
	return false
}

// CheckHandOffs refuses (ErrBadState) a delivery of in that is both
// handed off (LeaseUntil) and held, or due later than now.
func CheckHandOffs(in *Ingest, now time.Time) error {
	for _, nd := range in.Deliveries {
		switch {
		case nd.LeaseUntil.IsZero():
		case nd.Held:
			return fmt.Errorf("%w: a held delivery cannot be handed off", ErrBadState)
		case in.NotBefore.After(now):
			return fmt.Errorf("%w: a delivery due at %s cannot be handed off", ErrBadState, in.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// WindowTemplate is the delivery that goes with a held WhatsApp answer d:
// to the same person, from the same number, in the same conversation, it
// sends WhatsApp's window template, which asks them to write again.
func (d NewDelivery) WindowTemplate() NewDelivery {
	t := NewDelivery{Channel: d.Channel, To: d.To, Extra: make(map[string]string, len(d.Extra)+1)}
	for k, v := range d.Extra {
		t.Extra[k] = v
	}
	t.Extra[envelope.ExtraTemplate] = "window"
	return t
}

// Ingest is everything an accepted envelope writes, in one transaction.
type Ingest struct {
	Envelope   json.RawMessage
	Agent      string
	Source     string
	Deliveries []NewDelivery
	Approvals  []NewApproval
	// IdempotencyKey, when set, makes the ingest replayable: the same key
	// with the same RequestHash answers the first result.
	IdempotencyKey string
	RequestHash    [32]byte
	// NotBefore delays the first attempt (zero: now).
	NotBefore time.Time
}

// IngestResult is what an ingest produced.
type IngestResult struct {
	EnvelopeID string      `json:"id"`
	Deliveries []*Delivery `json:"deliveries"`
	// Replayed: the idempotency key had been seen with the same request.
	Replayed bool `json:"-"`
}

// HashRequest is the idempotency hash of a request body.
func HashRequest(body []byte) [32]byte { return sha256.Sum256(body) }

// Admission is admit's answer about one job in a claim.
type Admission int

const (
	// Admit: the job is taken.
	Admit Admission = iota
	// RefuseRecipient: the job stays due, and so do its recipient's other
	// jobs in this claim (an endpoint at its concurrency limit).
	RefuseRecipient
	// RefuseChannel: the job stays due, and so does every other job of its
	// channel in this claim (a paced sender, a full connection pool).
	RefuseChannel
)

// Outcome is the result of one attempt, recorded by Record.
type Outcome struct {
	// State is the job's next state: sent, retrying or dead.
	State State
	// NextAttemptAt is when a retrying job is due again.
	NextAttemptAt time.Time
	Error         string
	DeadReason    string
	// ProviderID is the provider's id for what this attempt sent (or may
	// have sent); it replaces the delivery's ProviderID, but the ids of
	// earlier attempts stay findable (DeliveryByProviderID).
	ProviderID string
	MaybeSent  bool
	Attempt    Attempt
	// FollowDecision: the message sent can be changed after the decision
	// of the approvals it asks (a Slack message's buttons give way to the
	// decision). The work after a decision acts on the messages whose
	// provider id it can read; one recorded sent after an approval of its
	// ApprovalIDs was decided gets, in the record's transaction, a
	// TimerDecided timer of that approval naming the delivery, due at
	// once (LateMessageTimers). The record and the decision are ordered by
	// the approval: whichever commits second sees the other.
	FollowDecision bool
}
