package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// Job is one claimed delivery handed to a Deliverer.
type Job struct {
	Delivery *store.Delivery
	// Envelope is the whole accepted envelope; the channel filters it with
	// the registry for its own rules. It is shared with other deliveries
	// (EnvelopeCache): read it, never change it.
	Envelope *envelope.Envelope
	// Attempt is the number of this attempt, from 1.
	Attempt int
	// Approvals are the answer handles for the approvals this delivery asks
	// about, for this recipient and channel (empty when there are none).
	Approvals []render.ApprovalHandle
}

// Receipt is the result envelope of an attempt: what the provider returned
// (Data) and metadata discriminated by Meta["source"] (smtp, twilio, http).
type Receipt struct {
	Data any            `json:"data"`
	Meta map[string]any `json:"meta"`
}

// Deliverer sends one job on one channel.
//
// Deliver must return nil only when the provider accepted the message. It
// must not retry by itself; it returns an error and lets the dispatcher
// schedule the next attempt. It must send a stable id derived from the
// delivery id, so that a repeat after a crash is recognisable. It must
// return within ctx's deadline.
type Deliverer interface {
	Deliver(ctx context.Context, job *Job) (*Result, error)
}

// Result is a successful delivery's receipt and the provider's id for it.
type Result struct {
	ProviderID string
	Receipt    Receipt
	// FollowDecision: the message can still be changed once the approvals
	// it asks are decided (a Slack message's buttons); recorded after such
	// a decision, it gets the decision's follow-up of its own
	// (store.Outcome.FollowDecision).
	FollowDecision bool
}

// Error is a failed attempt, classified by the channel.
type Error struct {
	// Permanent failures are dead-lettered at once.
	Permanent bool
	// MaybeSent: the request may have reached the provider (e.g. a timeout
	// after the final "." of SMTP DATA, or after a Twilio POST).
	MaybeSent bool
	// RetryAfter is the peer's requested delay, zero if none.
	RetryAfter time.Duration
	// RateLimited: the peer refused for its rate, not for the message
	// (Slack's 429): the next attempt is due RetryAfter on, not after the
	// schedule's delay for a failure (still within the lifetime).
	RateLimited bool
	// ProviderID when the provider assigned one before failing.
	ProviderID string
	// Receipt of what the provider answered, if anything.
	Receipt *Receipt
	Err     error
}

func (e *Error) Error() string {
	kind := "temporary"
	if e.Permanent {
		kind = "permanent"
	}
	return fmt.Sprintf("%s: %v", kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as permanent.
func Permanent(err error) error { return &Error{Permanent: true, Err: err} }

// Temporary marks err as temporary (the default for unmarked errors).
func Temporary(err error) error { return &Error{Err: err} }

// AsError returns err as *Error; unmarked errors are temporary.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Err: err}
}

// marshal encodes the receipt for its attempt's record. Receipts of maps,
// slices and plain values (what every channel records) are encoded by
// segmentio's encoder, which writes the bytes encoding/json writes for
// them (TestReceiptEncodedAsEncodingJSONDoes and its fuzz test) at 60% of
// the CPU and a quarter of the allocations: every attempt records one. Any
// other value goes to encoding/json: a struct, whose omitzero segmentio's
// encoder does not know, and the kinds no channel records (raw JSON, a
// json.Number, pointers), which are not worth the risk.
func (r Receipt) marshal() json.RawMessage {
	encode := json.Marshal
	if plainJSON(r.Data, 0) && plainJSON(r.Meta, 0) {
		encode = segjson.Marshal
	}
	b, err := encode(r)
	if err != nil {
		b, _ = json.Marshal(Receipt{Data: fmt.Sprintf("unencodable receipt: %v", err), Meta: r.Meta})
	}
	return b
}

// plainJSON: v is made of maps, slices and values that segmentio's
// encoder and encoding/json encode alike, nested at most 16 deep.
func plainJSON(v any, depth int) bool {
	if depth > 16 {
		return false
	}
	switch v := v.(type) {
	case nil, string, bool, int, int64, float64:
		return true
	case map[string]string, []string:
		return true
	case map[string]any:
		for _, e := range v {
			if !plainJSON(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !plainJSON(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}
