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

// ReleaseInjection makes a job claimed by Decide (ClaimFor) due at once,
// for a caller that could not hand it to a worker after all.
func (s *DB) ReleaseInjection(ctx context.Context, claimed *store.Injection, at time.Time) error {
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		var inj store.Injection
		if err := getJSON(tx.Bucket(bInjections), []byte(claimed.ID), &inj); err != nil {
			return err
		}
		if inj.State != store.InjectionPending || inj.Claims != claimed.Claims {
			return store.ErrLeaseLost
		}
		if err := tx.Bucket(bInjectionDue).Delete(timeKey(inj.NextAt, inj.ID)); err != nil {
			return err
		}
		inj.Attempts--
		inj.Claims++
		inj.NextAt, inj.LeasedUntil = at, time.Time{}
		if err := tx.Bucket(bInjectionDue).Put(timeKey(at, inj.ID), nil); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bInjections), []byte(inj.ID), inj)
	})
	if err != nil {
		return fmt.Errorf("release injection %s: %w", claimed.ID, err)
	}
	return nil
}

// NextInjection is the earliest due injection, if any.
func (s *DB) NextInjection() (time.Time, bool) {
	return s.firstTime(bInjectionDue)
}

// ClaimInjections takes up to max injection jobs due at now. A claimed job
// stays in the due index, moved to now+lease, so a job whose worker dies is
// taken again when its lease runs out (at-least-once).
func (s *DB) ClaimInjections(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*store.Injection, error) {
	var out []*store.Injection
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		out = out[:0]
		due := tx.Bucket(bInjectionDue)
		c := due.Cursor()
		limit := be64(now)
		var keys [][]byte
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0 && len(keys) < max; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			id := k[8:]
			var inj store.Injection
			if err := getJSON(tx.Bucket(bInjections), id, &inj); err != nil {
				return fmt.Errorf("due injection %s: %w", id, err)
			}
			if err := due.Delete(k); err != nil {
				return err
			}
			inj.Attempts++
			inj.Claims++
			inj.NextAt = now.Add(lease)
			inj.LeasedUntil = inj.NextAt
			inj.UpdatedAt = now
			if err := due.Put(timeKey(inj.NextAt, inj.ID), nil); err != nil {
				return err
			}
			if err := putJSON(tx.Bucket(bInjections), id, inj); err != nil {
				return err
			}
			out = append(out, &inj)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim injections: %w", err)
	}
	return out, nil
}

// RecordInjection records an attempt of a claimed job (claimed is the job as
// ClaimInjections returned it) and audits it.
func (s *DB) RecordInjection(ctx context.Context, claimed *store.Injection, o store.InjectionOutcome) (*store.Injection, error) {
	var out store.Injection
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		var inj store.Injection
		if err := getJSON(tx.Bucket(bInjections), []byte(claimed.ID), &inj); err != nil {
			return err
		}
		if inj.State != store.InjectionPending || inj.Claims != claimed.Claims {
			return store.ErrLeaseLost
		}
		if err := tx.Bucket(bInjectionDue).Delete(timeKey(inj.NextAt, inj.ID)); err != nil {
			return err
		}
		inj.State, inj.UpdatedAt, inj.LastError, inj.LeasedUntil = o.State, o.At, o.Error, time.Time{}
		event, actor := store.InjectionAudit(&inj)
		switch o.State {
		case store.InjectionDone:
			inj.DoneAt, inj.NextAt = o.At, time.Time{}
		case store.InjectionDead:
			inj.NextAt = time.Time{}
			event = "injection-dead"
		default:
			inj.State, inj.NextAt = store.InjectionPending, o.NextAt
			event = "injection-failed"
			if err := tx.Bucket(bInjectionDue).Put(timeKey(inj.NextAt, inj.ID), nil); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bInjections), []byte(inj.ID), inj); err != nil {
			return err
		}
		out = inj
		if o.State == store.InjectionDone && tx.Bucket(bApprovals).Get([]byte(inj.ApprovalID)) != nil {
			if _, err := appendEventTx(tx, inj.ApprovalID, store.InjectedEvent(&inj, o.At), o.At); err != nil {
				return err
			}
		}
		return putAuditTx(tx, store.AuditEntry{At: o.At, ApprovalID: inj.ApprovalID, Event: event, Actor: actor,
			Detail: fmt.Sprintf("attempt %d %s", inj.Attempts, o.Error)})
	})
	if err != nil {
		return nil, fmt.Errorf("record injection %s: %w", claimed.ID, err)
	}
	return &out, nil
}

// RequeueClaimedInjections makes every job claimed before `before` and
// still held by a worker due at `at`. The injector calls it when it starts,
// with `before` its own start: bbolt admits one process, so a lease taken
// before then belongs to a process that is gone.
func (s *DB) RequeueClaimedInjections(ctx context.Context, before, at time.Time) (int, error) {
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		b, due := tx.Bucket(bInjections), tx.Bucket(bInjectionDue)
		var held []store.Injection
		err := b.ForEach(func(k, v []byte) error {
			var inj store.Injection
			if err := json.Unmarshal(v, &inj); err != nil {
				return err
			}
			if inj.State == store.InjectionPending && !inj.LeasedUntil.IsZero() && inj.UpdatedAt.Before(before) {
				held = append(held, inj)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, inj := range held {
			if err := due.Delete(timeKey(inj.NextAt, inj.ID)); err != nil {
				return err
			}
			inj.NextAt, inj.LeasedUntil, inj.UpdatedAt = at, time.Time{}, at
			inj.Claims++
			if err := due.Put(timeKey(at, inj.ID), nil); err != nil {
				return err
			}
			if err := putJSON(b, []byte(inj.ID), inj); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue claimed injections: %w", err)
	}
	return n, nil
}

// Injection returns an injection job.
func (s *DB) Injection(ctx context.Context, id string) (*store.Injection, error) {
	var inj store.Injection
	err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bInjections), []byte(id), &inj) })
	if err != nil {
		return nil, fmt.Errorf("injection %q: %w", id, err)
	}
	return &inj, nil
}

// ListInjections lists injection jobs, optionally in one state.
func (s *DB) ListInjections(ctx context.Context, st string, limit int) ([]*store.Injection, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []*store.Injection
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bInjections).ForEach(func(k, v []byte) error {
			if len(out) >= limit {
				return nil
			}
			var inj store.Injection
			if err := json.Unmarshal(v, &inj); err != nil {
				return err
			}
			if st == "" || inj.State == st {
				out = append(out, &inj)
			}
			return nil
		})
	})
	return out, err
}

// RetryInjection makes a dead injection due again at `at` (operator action).
func (s *DB) RetryInjection(ctx context.Context, id string, at time.Time) (*store.Injection, error) {
	var out store.Injection
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var inj store.Injection
		if err := getJSON(tx.Bucket(bInjections), []byte(id), &inj); err != nil {
			return err
		}
		if inj.State != store.InjectionDead {
			return fmt.Errorf("injection is %s: %w", inj.State, store.ErrBadState)
		}
		inj.State, inj.NextAt, inj.UpdatedAt, inj.CreatedAt = store.InjectionPending, at, at, at
		if err := tx.Bucket(bInjectionDue).Put(timeKey(at, inj.ID), nil); err != nil {
			return err
		}
		out = inj
		if err := putJSON(tx.Bucket(bInjections), []byte(id), inj); err != nil {
			return err
		}
		return putAuditTx(tx, store.AuditEntry{At: at, ApprovalID: inj.ApprovalID, Event: "injection-retry", Actor: "operator"})
	})
	if err != nil {
		return nil, fmt.Errorf("retry injection %s: %w", id, err)
	}
	return &out, nil
}
