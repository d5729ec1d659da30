package bolt

import (
	"bytes"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

func stateKey(st store.State, id string) []byte {
	k := make([]byte, 0, len(st)+1+len(id))
	k = append(k, st...)
	k = append(k, 0)
	return append(k, id...)
}

// putDeliveryTx writes d and moves its by-state entry from the state `old`
// to d's state; a queued or retrying d gets a due entry. The stored state is
// never sending: a job in flight is its stored (queued or retrying) record
// plus a lease entry in place of its due entry (Claim removed that).
func putDeliveryTx(tx *bbolt.Tx, d *store.Delivery, old store.State) error {
	return putDeliveryLeasedTx(tx, d, old, time.Time{})
}

// putNewDeliveryTx writes a new delivery; with leaseUntil set it is stored
// as a claim leaves a job (its record queued, a lease entry, no due entry).
func putNewDeliveryTx(tx *bbolt.Tx, d *store.Delivery, leaseUntil time.Time) error {
	return putDeliveryLeasedTx(tx, d, "", leaseUntil)
}

func putDeliveryLeasedTx(tx *bbolt.Tx, d *store.Delivery, old store.State, leaseUntil time.Time) error {
	return putDeliveryEncodedTx(tx, d, old, leaseUntil, nil)
}

// putDeliveryEncodedTx is putDeliveryLeasedTx with d's record already
// encoded (enc, from encodeNewDelivery) before the shared commit, or nil to
// encode it here.
func putDeliveryEncodedTx(tx *bbolt.Tx, d *store.Delivery, old store.State, leaseUntil time.Time, enc []byte) error {
	if d.State == store.StateSending || !d.State.Valid() {
		return fmt.Errorf("%w: cannot store a delivery in state %q", store.ErrBadState, d.State)
	}
	if !validChannelName(d.Channel) {
		return fmt.Errorf("%w: channel %q is not a channel name", store.ErrBadState, d.Channel)
	}
	byState := tx.Bucket(bByState)
	switch d.State {
	case store.StateQueued, store.StateRetrying:
		if !leaseUntil.IsZero() {
			if err := tx.Bucket(bLeases).Put([]byte(d.ID), leaseValue(leaseUntil)); err != nil {
				return err
			}
			break
		}
		if err := tx.Bucket(bDue).Put(dueKey(d.Channel, d.NextAttemptAt, d.ID), dueValue(d)); err != nil {
			return err
		}
	default:
		d.NextAttemptAt = time.Time{}
	}
	if enc == nil {
		enc = encodeDelivery(d)
	}
	if old != d.State {
		if old != "" {
			if err := byState.Delete(stateKey(old, d.ID)); err != nil {
				return err
			}
		}
		if err := byState.Put(stateKey(d.State, d.ID), nil); err != nil {
			return err
		}
	}
	return tx.Bucket(bDeliveries).Put([]byte(d.ID), enc)
}

// encodeNewDelivery encodes d as putDeliveryEncodedTx stores it: a delivery
// that is not queued or retrying has no next attempt.
func encodeNewDelivery(d *store.Delivery) []byte {
	if d.State != store.StateQueued && d.State != store.StateRetrying {
		d.NextAttemptAt = time.Time{}
	}
	return encodeDelivery(d)
}

// dueValue is what a due-index entry carries besides its key: the job's
// channel and recipient, so that Claim can ask admit about a job without
// decoding it.
func dueValue(d *store.Delivery) []byte { return []byte(store.RecipientKey(d.Channel, d.To)) }

// dueKey is a job's due-index key: its channel, a 0, when it is due, its
// id. Each channel's jobs are one run in time order, so a claim can take
// the earliest of every channel and pass over a channel that admits
// nothing now without walking its backlog.
func dueKey(channel string, t time.Time, id string) []byte {
	k := make([]byte, 0, len(channel)+9+len(id))
	k = append(append(k, channel...), 0)
	k = append(k, be64(t)...)
	return append(k, id...)
}

// splitDueKey reads a dueKey; ok is false for anything else, such as
// schema 3's keys, which began with the time (whose first byte stays below
// 0x20, the least a channel name starts with, until 2043).
func splitDueKey(k []byte) (channel []byte, at time.Time, id []byte, ok bool) {
	i := bytes.IndexByte(k, 0)
	if i < 1 || len(k) < i+9 || !validChannelName(k[:i]) {
		return nil, time.Time{}, nil, false
	}
	return k[:i], unbe64(k[i+1 : i+9]), k[i+9:], true
}

// validChannelName: printable ASCII without spaces, as every channel's name
// is; the due index depends on it.
func validChannelName[T ~string | ~[]byte](ch T) bool {
	if len(ch) == 0 || len(ch) > 64 {
		return false
	}
	for i := 0; i < len(ch); i++ {
		if ch[i] < 0x21 || ch[i] > 0x7e {
			return false
		}
	}
	return true
}

// leaseValue is a lease entry's value: when the lease ends.
func leaseValue(until time.Time) []byte { return be64(until) }

// leaseOf is the lease held on the job id, if any.
func leaseOf(tx *bbolt.Tx, id []byte) (time.Time, bool) {
	v := tx.Bucket(bLeases).Get(id)
	if len(v) != 8 {
		return time.Time{}, false
	}
	return unbe64(v), true
}

// overlayLease shows a job in flight as sending, with its lease.
func overlayLease(tx *bbolt.Tx, d *store.Delivery) {
	if until, ok := leaseOf(tx, []byte(d.ID)); ok {
		d.State, d.LeaseUntil = store.StateSending, until
	}
}
