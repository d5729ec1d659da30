package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// MaxKey bounds the outside values a backend keeps as a key (idempotency
// keys, provider ids, message ids): 1 KiB, far below any backend's limit
// (bbolt's is 32 KiB, and a key it refused would fail its whole group
// commit after writing).
const MaxKey = 1024

// CheckOutcome refuses an outcome no backend may record for delivery id:
// a state other than sent, retrying or dead, a retry without a time, an
// over-long provider id.
func CheckOutcome(id string, o Outcome) error {
	switch {
	case o.State != StateSent && o.State != StateRetrying && o.State != StateDead:
		return fmt.Errorf("record %s: %w: outcome state %q", id, ErrBadState, o.State)
	case o.State == StateRetrying && o.NextAttemptAt.IsZero():
		// A zero time would sort after every real one: never due again.
		return fmt.Errorf("record %s: %w: retrying without a next attempt time", id, ErrBadState)
	case len(o.ProviderID) > MaxKey:
		return fmt.Errorf("record %s: provider id of %d bytes; at most %d", id, len(o.ProviderID), MaxKey)
	}
	return nil
}

// OutcomeProviderIDs are the ids that find the delivery after the outcome:
// its ProviderID, and the ids its receipt lists in meta "parts" (each part
// of a split SMS).
func OutcomeProviderIDs(o *Outcome) []string {
	var out []string
	if o.ProviderID != "" {
		out = append(out, o.ProviderID)
	}
	if !bytes.Contains(o.Attempt.Receipt, []byte(`"parts"`)) {
		return out
	}
	var r struct {
		Meta struct {
			Parts []string `json:"parts"`
		} `json:"meta"`
	}
	if json.Unmarshal(o.Attempt.Receipt, &r) != nil {
		return out // not a receipt with a list of ids: nothing more to find it by
	}
	for _, pid := range r.Meta.Parts {
		if pid != "" && len(pid) <= MaxKey && !slices.Contains(out, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// ApplyOutcome is what recording o does to the stored delivery d at now:
// one more attempt (o.Attempt is numbered), the new state and what it
// carries.
func ApplyOutcome(d *Delivery, o *Outcome, now time.Time) {
	d.Attempts++
	o.Attempt.N = d.Attempts
	d.State = o.State
	d.UpdatedAt = now
	d.LastError = o.Error
	d.MaybeSent = o.MaybeSent
	if o.ProviderID != "" {
		d.ProviderID = o.ProviderID
	}
	switch o.State {
	case StateSent:
		d.SentAt = now
		d.DeadReason = ""
	case StateRetrying:
		d.NextAttemptAt = o.NextAttemptAt
	case StateDead:
		d.DeadReason = o.DeadReason
	}
}
