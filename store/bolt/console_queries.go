package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// The operator queries: filtered listings, counts and rates, bulk retry.
// They read inside one bbolt read transaction each and visit at most
// MaxScan deliveries, so a very large store answers partly (Truncated) rather
// than slowly.

// QueryDeliveries lists the deliveries matching f, newest first (ids sort
// by creation time), at most limit (1–1000). More reports whether the scan
// stopped with matches possibly left (at limit or at MaxScan).
func (s *DB) QueryDeliveries(ctx context.Context, f store.DeliveryFilter, limit int) (out []*store.Delivery, more bool, err error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	err = s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bDeliveries).Cursor()
		var k, v []byte
		if f.Before != "" {
			k, v = c.Seek([]byte(f.Before))
			if k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, []byte(f.Before)) >= 0 {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for scanned := 0; k != nil; k, v = c.Prev() {
			if scanned++; scanned > store.MaxScan {
				more = true
				return nil
			}
			d := &store.Delivery{}
			if err := decodeDelivery(v, d); err != nil {
				return fmt.Errorf("delivery %s: %w", k, err)
			}
			overlayLease(tx, d)
			if !f.Since.IsZero() && d.CreatedAt.Before(f.Since.Add(-time.Minute)) {
				return nil // ids follow creation time; nothing older can match
			}
			if !f.Match(d) {
				continue
			}
			if len(out) == limit {
				more = true
				return nil
			}
			out = append(out, d)
		}
		return nil
	})
	return out, more, err
}

// DeliveryStats counts deliveries by state and channel and the rates of the
// last hour and day, as of now.
func (s *DB) DeliveryStats(ctx context.Context, now time.Time) (*store.DeliveryStats, error) {
	c := store.NewStatsCounter(now)
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		cur := tx.Bucket(bDeliveries).Cursor()
		for k, v := cur.Last(); k != nil && !c.Full(); k, v = cur.Prev() {
			var d store.Delivery
			if err := decodeDelivery(v, &d); err != nil {
				return fmt.Errorf("delivery %s: %w", k, err)
			}
			overlayLease(tx, &d)
			c.Add(&d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Stats(), nil
}

// DeadSince lists the ids of dead deliveries that died at or after since
// (their last update), optionally of one channel, at most MaxBulkRetry;
// more reports that there were more.
func (s *DB) DeadSince(ctx context.Context, since time.Time, channel string) (ids []string, more bool, err error) {
	err = s.bolt.View(func(tx *bbolt.Tx) error {
		dels := tx.Bucket(bDeliveries)
		prefix := stateKey(store.StateDead, "")
		c := tx.Bucket(bByState).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			var d store.Delivery
			if err := getDelivery(dels, k[len(prefix):], &d); err != nil {
				return err
			}
			if d.State != store.StateDead || d.UpdatedAt.Before(since) || channel != "" && d.Channel != channel {
				continue
			}
			if len(ids) == store.MaxBulkRetry {
				more = true
				return nil
			}
			ids = append(ids, d.ID)
		}
		return nil
	})
	return ids, more, err
}

// RetryDeadSince makes due again every dead delivery DeadSince selects and
// returns how many it retried. A delivery retried by someone else in the
// meantime is skipped, not an error.
func (s *DB) RetryDeadSince(ctx context.Context, since time.Time, channel string) (int, error) {
	ids, _, err := s.DeadSince(ctx, since, channel)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if _, err := s.Retry(ctx, id); err != nil {
			if errors.Is(err, store.ErrBadState) {
				continue
			}
			return n, err
		}
		n++
	}
	return n, nil
}
