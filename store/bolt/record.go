package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Record stores the outcome of an attempt on a job this worker claimed
// (lease held until leaseUntil). If the job's lease has meanwhile been
// re-claimed by someone else, it returns ErrLeaseLost and changes nothing.
// Concurrent Records share a commit with each other and with ingests and
// claims. The outcome's ProviderID, and the ids its receipt lists in meta
// "parts", find the delivery until it is pruned.
func (s *DB) Record(ctx context.Context, id string, leaseUntil time.Time, o store.Outcome) (*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckOutcome(id, o); err != nil {
		return nil, err
	}
	pids := store.OutcomeProviderIDs(&o) // decoded outside the shared transaction
	now := s.now()
	var out *store.Delivery
	err := s.write(func(tx *bbolt.Tx) error {
		out = nil
		stored, err := takeLease(tx, id, leaseUntil)
		if err != nil {
			return err
		}
		d, prev := *stored, *stored
		store.ApplyOutcome(&d, &o, now)
		for _, pid := range pids {
			if err := putProviderIDTx(tx, &d, pid); err != nil {
				return err
			}
		}
		if err := putDeliveryTx(tx, &d, prev.State); err != nil {
			return err
		}
		if err := putLateMessageTimersTx(tx, &d, &o, now); err != nil {
			return err
		}
		var k [4]byte
		binary.BigEndian.PutUint32(k[:], uint32(o.Attempt.N))
		if err := putJSON(tx.Bucket(bAttempts), append([]byte(d.ID+"/"), k[:]...), o.Attempt); err != nil {
			return err
		}
		out = &d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record attempt of %s: %w", id, err)
	}
	return out, nil
}

// putLateMessageTimersTx writes the timers of d's approvals decided before
// its provider id was recorded (store.LateMessageTimers). bbolt's writes
// are serial: a decision committed before this transaction is seen, one
// after it reads the recorded provider id.
func putLateMessageTimersTx(tx *bbolt.Tx, d *store.Delivery, o *store.Outcome, now time.Time) error {
	if !o.FollowDecision || o.State != store.StateSent || d.ProviderID == "" || len(d.ApprovalIDs) == 0 {
		return nil
	}
	decided := map[string]bool{}
	for _, id := range d.ApprovalIDs {
		var a store.Approval
		switch err := getJSON(tx.Bucket(bApprovals), []byte(id), &a); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fmt.Errorf("approval %q: %w", id, err)
		default:
			decided[id] = a.State != store.ApprovalPending
		}
	}
	return putTimersTx(tx, store.LateMessageTimers(d, o, decided, now))
}

// Release puts a claimed job back in the queue without counting an attempt
// (the worker is shutting down, or a rate limit refused it), due at `at`.
func (s *DB) Release(ctx context.Context, id string, leaseUntil, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("release %s: %w: no due time", id, store.ErrBadState)
	}
	err := s.write(func(tx *bbolt.Tx) error {
		d, err := takeLease(tx, id, leaseUntil)
		if err != nil {
			return err
		}
		d.NextAttemptAt = at
		d.UpdatedAt = s.now()
		return putDeliveryTx(tx, d, d.State)
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	return nil
}
