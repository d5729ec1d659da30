package bolt

import (
	"context"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// IngestBulk stores many envelopes with their deliveries and approvals in
// one transaction: a loader for scale tests and imports, not the API path
// (which uses Ingest and shares commits across concurrent requests). It
// refuses idempotency keys (they need the per-request check of Ingest).
// Keys go in ascending order, which keeps bbolt's pages full.
func (s *DB) IngestBulk(ctx context.Context, ins []store.Ingest) ([]*store.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]*store.IngestResult, 0, len(ins))
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		for _, in := range ins {
			if in.IdempotencyKey != "" {
				return errors.New("bulk ingest: idempotency keys are not supported")
			}
			if store.HandsOff(&in) {
				return errors.New("bulk ingest: hand-offs (LeaseUntil) are not supported")
			}
			ids := make([]string, len(in.Deliveries))
			for i := range ids {
				ids[i] = s.NewID("dlv_")
			}
			res, err := s.writeIngestTx(tx, &in, prepareIngest(&in, s.NewID("env_"), ids, now), now)
			if err != nil {
				return err
			}
			out = append(out, res)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bulk ingest: %w", err)
	}
	return out, nil
}

// SetNoSync turns fsync off (true) or on for the following commits: for
// bulk loading a file that is synced (SetNoSync(false) and one more
// commit) before anyone relies on it.
func (s *DB) SetNoSync(v bool) { s.bolt.NoSync = v }

// Sync flushes the file to disk.
func (s *DB) Sync() error { return s.bolt.Sync() }

// FileSize is the size of the database file in bytes.
func (s *DB) FileSize() (int64, error) {
	var n int64
	err := s.bolt.View(func(tx *bbolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}
