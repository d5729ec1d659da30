package bolt

import (
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// bSingletons holds the singletons' leases (Leases): name → Lease as JSON.
// One process opens the file, so a lease here only matters across a
// restart; the same code runs the singletons on every backend.
var bSingletons = []byte("singleton_leases")

// Shared is false: the file is locked to one process.
func (s *DB) Shared() bool { return false }

// Wakeups is nil: no other process makes work due.
func (s *DB) Wakeups() <-chan string { return nil }

// AcquireLease takes or renews a singleton's lease (see Leases).
func (s *DB) AcquireLease(ctx context.Context, name, holder string, gen uint64, ttl time.Duration) (store.Lease, bool, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return store.Lease{}, false, fmt.Errorf("acquire lease %q for %q: name, holder and a positive ttl are required", name, holder)
	}
	var out store.Lease
	var ok bool
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSingletons)
		now := s.now()
		var cur store.Lease
		if err := getJSON(b, []byte(name), &cur); err != nil && err != store.ErrNotFound {
			return err
		}
		out, ok = store.DecideLease(cur, name, holder, gen, ttl, now)
		if !ok {
			return nil
		}
		return putJSON(b, []byte(name), out)
	})
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return out, ok, nil
}

// ReleaseLease ends holder's lease at gen (see Leases).
func (s *DB) ReleaseLease(ctx context.Context, name, holder string, gen uint64) error {
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSingletons)
		var cur store.Lease
		if err := getJSON(b, []byte(name), &cur); err != nil {
			if err == store.ErrNotFound {
				return nil
			}
			return err
		}
		if cur.Holder != holder || cur.Generation != gen {
			return nil
		}
		cur.Until = s.now()
		return putJSON(b, []byte(name), cur)
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// ListLeases returns every lease in name order.
func (s *DB) ListLeases(ctx context.Context) ([]store.Lease, error) {
	var out []store.Lease
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bSingletons).ForEach(func(k, _ []byte) error {
			var l store.Lease
			if err := getJSON(tx.Bucket(bSingletons), k, &l); err != nil {
				return err
			}
			out = append(out, l)
			return nil
		})
	})
	return out, err
}
