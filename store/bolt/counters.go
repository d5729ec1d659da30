package bolt

import (
	"context"
	"time"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Once records key and reports whether this was the first time (for "at
// most one reply per address per day", the caller puts the day in the key).
func (s *DB) Once(ctx context.Context, key string, now time.Time) (bool, error) {
	first := false
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		first = false
		b := tx.Bucket(bApprovalLimits)
		if b.Get([]byte(key)) != nil {
			return nil
		}
		first = true
		return putJSON(b, []byte(key), store.Counter{Count: 1, WindowStart: now})
	})
	return first, err
}
