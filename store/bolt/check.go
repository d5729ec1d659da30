package bolt

import (
	"bytes"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// CheckInvariants verifies the outbox's invariants: every queued or
// retrying delivery has either exactly one due entry, at its NextAttemptAt,
// or (in flight) a lease and no due entry; no delivery is stored as sending;
// no index entry points at a missing or differently-stated delivery, and
// every delivery has its by-state entry; every provider-id entry is listed
// under its delivery, so that pruning the delivery removes it. Tests call it
// when they end; `beachd` could run it as a repair check.
func (s *DB) CheckInvariants() error {
	return s.bolt.View(func(tx *bbolt.Tx) error {
		dels := tx.Bucket(bDeliveries)
		due := map[string]int{}
		if err := tx.Bucket(bDue).ForEach(func(k, _ []byte) error {
			_, _, id, ok := splitDueKey(k)
			if !ok {
				return fmt.Errorf("due entry %q is not channel, time and id", k)
			}
			due[string(id)]++
			return nil
		}); err != nil {
			return err
		}
		byState := tx.Bucket(bByState)
		n := 0
		err := dels.ForEach(func(k, v []byte) error {
			n++
			var d store.Delivery
			if err := decodeDelivery(v, &d); err != nil {
				return fmt.Errorf("delivery %s: %w", k, err)
			}
			id := string(k)
			if d.ID != id {
				return fmt.Errorf("delivery %s is stored with id %q", id, d.ID)
			}
			if byState.Get(stateKey(d.State, id)) == nil {
				return fmt.Errorf("delivery %s (%s) has no by-state entry", id, d.State)
			}
			_, leased := leaseOf(tx, k)
			switch d.State {
			case store.StateQueued, store.StateRetrying:
				if leased {
					if due[id] != 0 {
						return fmt.Errorf("delivery %s is in flight with %d due entries", id, due[id])
					}
					break
				}
				if due[id] != 1 {
					return fmt.Errorf("delivery %s is %s with %d due entries", id, d.State, due[id])
				}
				if tx.Bucket(bDue).Get(dueKey(d.Channel, d.NextAttemptAt, id)) == nil {
					return fmt.Errorf("delivery %s: due entry not at its channel and NextAttemptAt", id)
				}
			case store.StateSending:
				return fmt.Errorf("delivery %s is stored as sending (a job in flight keeps its stored state and holds a lease)", id)
			default:
				if due[id] != 0 || leased {
					return fmt.Errorf("delivery %s is %s with %d due entries, leased %v", id, d.State, due[id], leased)
				}
			}
			delete(due, id)
			return nil
		})
		if err != nil {
			return err
		}
		for id := range due {
			return fmt.Errorf("due entry for missing delivery %s", id)
		}
		if err := tx.Bucket(bLeases).ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("lease entry %q has a %d-byte value", k, len(v))
			}
			if dels.Get(k) == nil {
				return fmt.Errorf("lease entry for missing delivery %s", k)
			}
			return nil
		}); err != nil {
			return err
		}
		m := 0
		if err := byState.ForEach(func(k, _ []byte) error {
			m++
			if i := bytes.IndexByte(k, 0); i < 0 || dels.Get(k[i+1:]) == nil {
				return fmt.Errorf("by-state entry %q for a missing delivery", k)
			}
			return nil
		}); err != nil {
			return err
		}
		if m != n {
			return fmt.Errorf("%d by-state entries for %d deliveries", m, n)
		}
		lists := tx.Bucket(bDeliveryPIDs)
		if err := tx.Bucket(bProviderIDs).ForEach(func(k, v []byte) error {
			i := bytes.IndexByte(k, 0)
			switch {
			case i < 0:
				return fmt.Errorf("provider-id entry %q has no channel", k)
			case dels.Get(v) == nil:
				return fmt.Errorf("provider-id entry %q for missing delivery %s", k, v)
			case lists.Get(deliveryPIDKey(string(v), string(k[i+1:]))) == nil:
				return fmt.Errorf("provider-id entry %q is not listed under its delivery %s", k, v)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := lists.ForEach(func(k, _ []byte) error {
			if i := bytes.IndexByte(k, 0); i < 0 || dels.Get(k[:i]) == nil {
				return fmt.Errorf("provider id %q listed under a missing delivery", k)
			}
			return nil
		}); err != nil {
			return err
		}
		// Envelope records retention passes over when they do not decode.
		return tx.Bucket(bEnvelopes).ForEach(func(k, v []byte) error {
			var rec store.EnvelopeRecord
			if err := decodeEnvelope(k, v, &rec); err != nil {
				return fmt.Errorf("envelope %s: %w", k, err)
			}
			return nil
		})
	})
}
