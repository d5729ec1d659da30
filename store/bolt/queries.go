package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Delivery returns one delivery.
func (s *DB) Delivery(ctx context.Context, id string) (*store.Delivery, error) {
	var d store.Delivery
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
			return err
		}
		overlayLease(tx, &d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// Attempts lists a delivery's attempts in order.
func (s *DB) Attempts(ctx context.Context, id string) ([]store.Attempt, error) {
	var out []store.Attempt
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		prefix := []byte(id + "/")
		c := tx.Bucket(bAttempts).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var a store.Attempt
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// ListDeliveries lists deliveries in a state (all states when st is ""),
// oldest first, starting after the id `after`, at most limit. A job in
// flight is listed as sending, not under its stored state.
func (s *DB) ListDeliveries(ctx context.Context, st store.State, after string, limit int) ([]*store.Delivery, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var out []*store.Delivery
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		dels := tx.Bucket(bDeliveries)
		var c *bbolt.Cursor
		var prefix []byte
		switch st {
		case "":
			c = dels.Cursor()
		case store.StateSending:
			c = tx.Bucket(bLeases).Cursor()
		default:
			prefix = stateKey(st, "")
			c = tx.Bucket(bByState).Cursor()
		}
		k, _ := c.Seek(append(append([]byte(nil), prefix...), after...))
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Next() {
			id := k[len(prefix):]
			if after != "" && string(id) == after {
				continue
			}
			d := &store.Delivery{}
			if err := getDelivery(dels, id, d); err != nil {
				return err
			}
			overlayLease(tx, d)
			if st != "" && d.State != st {
				continue // stored as queued or retrying, but in flight
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// CountByState counts deliveries per state (for queue-depth metrics); jobs
// in flight count as sending.
func (s *DB) CountByState(ctx context.Context) (map[store.State]int, error) {
	out := map[store.State]int{}
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		byState := tx.Bucket(bByState)
		if err := byState.ForEach(func(k, _ []byte) error {
			if i := bytes.IndexByte(k, 0); i > 0 {
				out[store.State(k[:i])]++
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bLeases).ForEach(func(id, _ []byte) error {
			for _, st := range [...]store.State{store.StateQueued, store.StateRetrying} {
				if byState.Get(stateKey(st, string(id))) != nil {
					out[st]--
					out[store.StateSending]++
				}
			}
			return nil
		})
	})
	for st, n := range out {
		if n == 0 {
			delete(out, st)
		}
	}
	return out, err
}

// Retry makes a dead delivery due again now (operator action). Its attempt
// count is kept; its lifetime starts again.
func (s *DB) Retry(ctx context.Context, id string) (*store.Delivery, error) {
	var out *store.Delivery
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
			return err
		}
		if d.State != store.StateDead {
			return fmt.Errorf("%w: delivery is %s; only dead deliveries can be retried", store.ErrBadState, d.State)
		}
		now := s.now()
		d.State = store.StateQueued
		d.NextAttemptAt = now
		d.UpdatedAt = now
		d.DeadReason = ""
		if d.Extra == nil {
			d.Extra = map[string]string{}
		}
		d.Extra["retriedAt"] = now.UTC().Format(time.RFC3339Nano)
		if err := putDeliveryTx(tx, &d, store.StateDead); err != nil {
			return err
		}
		out = &d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	return out, nil
}
