package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// CheckInvariants verifies the outbox's invariants: every queued or
// retrying delivery has exactly one due entry at its NextAttemptAt, every
// sending delivery exactly one lease entry at its LeaseUntil, no index entry
// points at a missing or differently-stated delivery, and every delivery has
// its by-state entry. Tests call it when they end; `beachd` could run it as
// a repair check.
func (s *DB) CheckInvariants() error {
	return s.bolt.View(func(tx *bolt.Tx) error {
		dels := tx.Bucket(bDeliveries)
		due := map[string]int{}
		leases := map[string]int{}
		if err := tx.Bucket(bDue).ForEach(func(k, _ []byte) error {
			due[string(k[8:])]++
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bLeases).ForEach(func(k, _ []byte) error {
			leases[string(k[8:])]++
			return nil
		}); err != nil {
			return err
		}
		byState := tx.Bucket(bByState)
		n := 0
		err := dels.ForEach(func(k, v []byte) error {
			n++
			var d Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("delivery %s: %w", k, err)
			}
			id := string(k)
			if byState.Get(stateKey(d.State, id)) == nil {
				return fmt.Errorf("delivery %s (%s) has no by-state entry", id, d.State)
			}
			switch d.State {
			case StateQueued, StateRetrying:
				if due[id] != 1 || leases[id] != 0 {
					return fmt.Errorf("delivery %s is %s with %d due and %d lease entries", id, d.State, due[id], leases[id])
				}
				if tx.Bucket(bDue).Get(timeKey(d.NextAttemptAt, id)) == nil {
					return fmt.Errorf("delivery %s: due entry not at NextAttemptAt", id)
				}
			case StateSending:
				if leases[id] != 1 || due[id] != 0 {
					return fmt.Errorf("delivery %s is sending with %d due and %d lease entries", id, due[id], leases[id])
				}
				if tx.Bucket(bLeases).Get(timeKey(d.LeaseUntil, id)) == nil {
					return fmt.Errorf("delivery %s: lease entry not at LeaseUntil", id)
				}
			default:
				if due[id] != 0 || leases[id] != 0 {
					return fmt.Errorf("delivery %s is %s with %d due and %d lease entries", id, d.State, due[id], leases[id])
				}
			}
			delete(due, id)
			delete(leases, id)
			return nil
		})
		if err != nil {
			return err
		}
		for id := range due {
			return fmt.Errorf("due entry for missing delivery %s", id)
		}
		for id := range leases {
			return fmt.Errorf("lease entry for missing delivery %s", id)
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
		return nil
	})
}
