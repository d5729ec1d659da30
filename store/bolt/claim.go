package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Claim takes up to max due jobs (next attempt ≤ now), leases them until
// now+lease, and returns them in state sending. admit, when set, is asked
// for each candidate inside the transaction and must be fast and free of
// I/O (per-endpoint concurrency limits); it sees only the job's ID, Channel
// and To, in a value it must not keep. It is asked only about jobs Claim
// then returns or refused ones. A job it refuses stays due, and so do the
// other due jobs for the same channel and recipient in this claim.
func (s *DB) Claim(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) bool) ([]*store.Delivery, error) {
	var a func(*store.Delivery) store.Admission
	if admit != nil {
		a = func(d *store.Delivery) store.Admission {
			if admit(d) {
				return store.Admit
			}
			return store.RefuseRecipient
		}
	}
	return s.ClaimAdmitting(ctx, max, lease, a)
}

// ClaimAdmitting is Claim with an admit that may also refuse a job's whole
// channel for this claim (RefuseChannel): the channel's other due jobs are
// then passed over without being read. Jobs are taken in due order across
// channels.
//
// A claim replaces each job's due entry by a lease entry and writes nothing
// else: the job's record and by-state entry stay as they are until Record
// rewrites them once. The lease is durable before the send starts, so a job
// found leased after a crash is known to have maybe reached its peer
// (RequeueExpired makes it due again).
func (s *DB) ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) ([]*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	now := s.now()
	until := now.Add(lease)
	var out []*store.Delivery
	err := s.write(func(tx *bbolt.Tx) error {
		due := tx.Bucket(bDue)
		dels := tx.Bucket(bDeliveries)
		leases := tx.Bucket(bLeases)
		// One lane a channel, each walking its entries due by now.
		var lanes []store.ClaimLane
		probe := due.Cursor()
		for k, _ := probe.First(); k != nil; {
			ch, _, _, ok := splitDueKey(k)
			if !ok {
				k, _ = probe.Next() // CheckInvariants names it
				continue
			}
			lanes = append(lanes, dueLane(due.Cursor(), dels, append(append([]byte(nil), ch...), 0), now))
			k, _ = probe.Seek(append(append([]byte(nil), ch...), 1))
		}
		choice := store.SelectClaims(lanes, max, until, admit)
		for _, c := range choice.Orphans {
			if err := due.Delete(c.Ref); err != nil {
				return err
			}
		}
		lv := leaseValue(until)
		for i, k := range choice.Refs {
			if err := due.Delete(k); err != nil {
				return err
			}
			if err := leases.Put([]byte(choice.Taken[i].ID), lv); err != nil {
				return err
			}
		}
		out = choice.Taken
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim due jobs: %w", err)
	}
	return out, nil
}

// dueLane is one channel's lane of a claim: its due entries (keys under
// prefix) due by now, in due order. A claim may walk a long run of one
// recipient's jobs (an endpoint at its concurrency limit), so passing over
// a candidate allocates nothing: its Ref is the key in bbolt's memory
// (valid for the transaction), its Load reads the lane's current id, and
// consecutive candidates share the recipient's string.
func dueLane(c *bbolt.Cursor, dels *bbolt.Bucket, prefix []byte, now time.Time) store.ClaimLane {
	started := false
	recipient := ""
	var id []byte
	load := func() (*store.Delivery, error) {
		d := &store.Delivery{}
		if err := getDelivery(dels, id, d); err != nil {
			return nil, err
		}
		return d, nil
	}
	return func() (store.ClaimCandidate, bool) {
		var k, v []byte
		if started {
			k, v = c.Next()
		} else {
			k, v = c.Seek(prefix)
			started = true
		}
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return store.ClaimCandidate{}, false
		}
		_, at, kid, ok := splitDueKey(k)
		if !ok || at.After(now) {
			return store.ClaimCandidate{}, false
		}
		id = kid
		if string(v) != recipient {
			recipient = string(v)
		}
		return store.ClaimCandidate{Recipient: recipient, Due: at, Ref: k, Load: load}, true
	}
}

// takeLease removes the lease on id if it is the one ending at leaseUntil,
// and returns the job's stored record (whose due entry Claim removed).
// It refuses (writing nothing) when the lease is not that one.
func takeLease(tx *bbolt.Tx, id string, leaseUntil time.Time) (*store.Delivery, error) {
	if until, ok := leaseOf(tx, []byte(id)); !ok || !until.Equal(leaseUntil) {
		return nil, refuse(store.ErrLeaseLost)
	}
	var d store.Delivery
	if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
		return nil, refuse(err)
	}
	if err := tx.Bucket(bLeases).Delete([]byte(id)); err != nil {
		return nil, err
	}
	return &d, nil
}

// RequeueExpired ends every lease that ran out at or before `before`: the
// job is due again now, marked maybe-sent (its send may have reached the
// peer). At start-up call it with a time far in the future: bbolt admits one
// process, so every lease is stale. Leases are few (the jobs in flight), so
// it walks them all.
func (s *DB) RequeueExpired(ctx context.Context, before time.Time) (int, error) {
	expired := func(v []byte) bool { return len(v) != 8 || !unbe64(v).After(before) }
	// The dispatcher asks every 10 s, and a lease seldom runs out (a worker
	// hung past it): look first, so that a sweep with nothing to do costs
	// no write transaction (an fsync'd commit holding the writer's lock).
	found := false
	_ = s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bLeases).Cursor()
		for k, v := c.First(); k != nil && !found; k, v = c.Next() {
			found = expired(v)
		}
		return nil
	})
	if !found {
		return 0, nil
	}
	now := s.now()
	n := 0
	// In the group's commit, beside ingests, claims and records.
	err := s.write(func(tx *bbolt.Tx) error {
		n = 0
		// Everything is read and checked before the first write: a
		// failure after it would abort the other callers' work in the
		// shared commit too.
		var ids [][]byte
		var dels []*store.Delivery
		if err := tx.Bucket(bLeases).ForEach(func(k, v []byte) error {
			if !expired(v) {
				return nil
			}
			ids = append(ids, append([]byte(nil), k...))
			d := new(store.Delivery)
			switch err := getDelivery(tx.Bucket(bDeliveries), k, d); {
			case errors.Is(err, store.ErrNotFound):
				d = nil
			case err != nil:
				return err
			case d.State == store.StateSending || !d.State.Valid() || !validChannelName(d.Channel):
				return fmt.Errorf("%w: delivery %s in state %q, channel %q", store.ErrBadState, k, d.State, d.Channel)
			}
			dels = append(dels, d)
			return nil
		}); err != nil {
			return refuse(err)
		}
		for i, id := range ids {
			if err := tx.Bucket(bLeases).Delete(id); err != nil {
				return err
			}
			d := dels[i]
			if d == nil {
				continue
			}
			// The lease ran out mid-send: the job may have reached its peer.
			d.MaybeSent = true
			d.NextAttemptAt = now
			d.UpdatedAt = now
			if err := putDeliveryTx(tx, d, d.State); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue expired leases: %w", err)
	}
	return n, nil
}

// NextDue is the time of the earliest due job, if any: the earliest of
// each channel's first entry.
func (s *DB) NextDue() (t time.Time, ok bool) {
	_ = s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bDue).Cursor()
		for k, _ := c.First(); k != nil; {
			ch, at, _, valid := splitDueKey(k)
			if !valid {
				k, _ = c.Next()
				continue
			}
			if !ok || at.Before(t) {
				t, ok = at, true
			}
			k, _ = c.Seek(append(append([]byte(nil), ch...), 1))
		}
		return nil
	})
	return t, ok
}
