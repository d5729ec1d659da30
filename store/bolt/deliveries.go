package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

type idemRecord struct {
	Hash       []byte    `json:"hash"`
	EnvelopeID string    `json:"envelopeId"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Ingest stores an envelope, its deliveries and approvals atomically, sharing
// the commit with concurrent ingests, claims and records (group.go). It
// returns once the data is on disk.
func (s *DB) Ingest(ctx context.Context, in store.Ingest) (*store.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(in.IdempotencyKey) > maxStoredKey {
		return nil, fmt.Errorf("ingest: idempotency key of %d bytes; at most %d", len(in.IdempotencyKey), maxStoredKey)
	}
	for _, d := range in.Deliveries {
		// Checked here, before the shared commit: a failure after writing
		// would abort every other caller's work in it too.
		if !validChannelName(d.Channel) {
			return nil, fmt.Errorf("ingest: %w: channel %q is not a channel name", store.ErrBadState, d.Channel)
		}
	}
	now := s.now()
	envID := s.NewID("env_")
	ids := make([]string, len(in.Deliveries))
	for i := range ids {
		ids[i] = s.NewID("dlv_")
	}
	var res *store.IngestResult
	err := s.write(func(tx *bbolt.Tx) error {
		res = nil
		if in.IdempotencyKey != "" {
			var prev idemRecord
			err := getJSON(tx.Bucket(bIdempotency), []byte(in.IdempotencyKey), &prev)
			if err == nil {
				if !bytes.Equal(prev.Hash, in.RequestHash[:]) {
					return refuse(store.ErrIdempotencyConflict)
				}
				r, err := ingestResultTx(tx, prev.EnvelopeID)
				switch {
				case err == nil:
					r.Replayed = true
					res = r
					return nil
				case !errors.Is(err, store.ErrNotFound):
					return refuse(err)
				}
				// Retention removed the envelope before its key: the key
				// has expired too, and the request is a new one.
			} else if !errors.Is(err, store.ErrNotFound) {
				return refuse(err)
			}
		}
		out, err := s.writeIngestTx(tx, &in, envID, ids, now)
		if err != nil {
			return err
		}
		if in.IdempotencyKey != "" {
			if err := putJSON(tx.Bucket(bIdempotency), []byte(in.IdempotencyKey),
				idemRecord{Hash: in.RequestHash[:], EnvelopeID: envID, CreatedAt: now}); err != nil {
				return err
			}
		}
		res = out
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	return res, nil
}

// writeIngestTx writes one accepted envelope, its deliveries (due at
// in.NotBefore or now) and its approvals. Ingest and IngestBulk share it.
func (s *DB) writeIngestTx(tx *bbolt.Tx, in *store.Ingest, envID string, ids []string, now time.Time) (*store.IngestResult, error) {
	first := now
	if in.NotBefore.After(now) {
		first = in.NotBefore
	}
	if err := checkApprovalsTx(tx, in.Approvals); err != nil {
		return nil, err
	}
	rec := store.EnvelopeRecord{ID: envID, Agent: in.Agent, Envelope: in.Envelope, CreatedAt: now, DeliveryIDs: ids, Source: in.Source}
	if err := putEnvelopeTx(tx, &rec); err != nil {
		return nil, err
	}
	out := &store.IngestResult{EnvelopeID: envID}
	for i, nd := range in.Deliveries {
		d := &store.Delivery{ID: ids[i], EnvelopeID: envID, Channel: nd.Channel, To: nd.To, Agent: in.Agent,
			State: store.StateQueued, CreatedAt: now, UpdatedAt: now, NextAttemptAt: first,
			ApprovalIDs: nd.ApprovalIDs, Extra: nd.Extra}
		if nd.Held {
			d.State = store.StateHeld
		}
		if err := putDeliveryTx(tx, d, ""); err != nil {
			return nil, err
		}
		if err := indexConversationDeliveryTx(tx, d); err != nil {
			return nil, err
		}
		out.Deliveries = append(out.Deliveries, d)
	}
	if err := s.putApprovalsTx(tx, envID, in.Approvals, now); err != nil {
		return nil, err
	}
	return out, nil
}

func ingestResultTx(tx *bbolt.Tx, envID string) (*store.IngestResult, error) {
	var rec store.EnvelopeRecord
	if err := getJSON(tx.Bucket(bEnvelopes), []byte(envID), &rec); err != nil {
		return nil, err
	}
	out := &store.IngestResult{EnvelopeID: envID}
	for _, id := range rec.DeliveryIDs {
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
			return nil, err
		}
		// Answer what the first request answered: the state at acceptance.
		d.State = store.StateQueued
		out.Deliveries = append(out.Deliveries, &d)
	}
	return out, nil
}

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
	if d.State == store.StateSending || !d.State.Valid() {
		return fmt.Errorf("%w: cannot store a delivery in state %q", store.ErrBadState, d.State)
	}
	if !validChannelName(d.Channel) {
		return fmt.Errorf("%w: channel %q is not a channel name", store.ErrBadState, d.Channel)
	}
	byState := tx.Bucket(bByState)
	switch d.State {
	case store.StateQueued, store.StateRetrying:
		if err := tx.Bucket(bDue).Put(dueKey(d.Channel, d.NextAttemptAt, d.ID), dueValue(d)); err != nil {
			return err
		}
	default:
		d.NextAttemptAt = time.Time{}
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
	return tx.Bucket(bDeliveries).Put([]byte(d.ID), encodeDelivery(d))
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

// maxStoredKey bounds the caller-given values the store uses as keys
// (idempotency keys, provider ids), far below bbolt's 32 KiB key limit:
// a key bbolt refused would fail its whole group commit after writing.
const maxStoredKey = 1024

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
// prefix) due by now, in due order.
func dueLane(c *bbolt.Cursor, dels *bbolt.Bucket, prefix []byte, now time.Time) store.ClaimLane {
	started := false
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
		_, at, id, ok := splitDueKey(k)
		if !ok || at.After(now) {
			return store.ClaimCandidate{}, false
		}
		ref := append([]byte(nil), k...)
		id = append([]byte(nil), id...)
		return store.ClaimCandidate{Recipient: string(v), Due: at, Ref: ref, Load: func() (*store.Delivery, error) {
			d := &store.Delivery{}
			if err := getDelivery(dels, id, d); err != nil {
				return nil, err
			}
			return d, nil
		}}, true
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

// Record stores the outcome of an attempt on a job this worker claimed
// (lease held until leaseUntil). If the job's lease has meanwhile been
// re-claimed by someone else, it returns ErrLeaseLost and changes nothing.
// Concurrent Records share a commit with each other and with ingests and
// claims. The outcome's ProviderID, and the ids its receipt lists in meta
// "parts", find the delivery until it is pruned.
func (s *DB) Record(ctx context.Context, id string, leaseUntil time.Time, o store.Outcome) (*store.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case o.State != store.StateSent && o.State != store.StateRetrying && o.State != store.StateDead:
		return nil, fmt.Errorf("record %s: %w: outcome state %q", id, store.ErrBadState, o.State)
	case o.State == store.StateRetrying && o.NextAttemptAt.IsZero():
		// A zero time would sort after every real one: never due again.
		return nil, fmt.Errorf("record %s: %w: retrying without a next attempt time", id, store.ErrBadState)
	case len(o.ProviderID) > maxStoredKey:
		return nil, fmt.Errorf("record %s: provider id of %d bytes; at most %d", id, len(o.ProviderID), maxStoredKey)
	}
	pids := attemptPIDs(&o) // decoded outside the shared transaction
	now := s.now()
	var out *store.Delivery
	err := s.write(func(tx *bbolt.Tx) error {
		out = nil
		stored, err := takeLease(tx, id, leaseUntil)
		if err != nil {
			return err
		}
		d, prev := *stored, *stored
		d.Attempts++
		o.Attempt.N = d.Attempts
		d.State = o.State
		d.UpdatedAt = now
		d.LastError = o.Error
		d.MaybeSent = o.MaybeSent
		if o.ProviderID != "" {
			d.ProviderID = o.ProviderID
		}
		for _, pid := range pids {
			if err := putProviderIDTx(tx, &d, pid); err != nil {
				return err
			}
		}
		switch o.State {
		case store.StateSent:
			d.SentAt = now
			d.DeadReason = ""
		case store.StateRetrying:
			d.NextAttemptAt = o.NextAttemptAt
		case store.StateDead:
			d.DeadReason = o.DeadReason
		}
		if err := putDeliveryTx(tx, &d, prev.State); err != nil {
			return err
		}
		var k [4]byte
		binary.BigEndian.PutUint32(k[:], uint32(o.Attempt.N))
		if err := putJSON(tx.Bucket(bAttempts), append([]byte(d.ID+"/"), k[:]...), o.Attempt); err != nil {
			return err
		}
		out = &d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record attempt of %s: %w", id, err)
	}
	return out, nil
}

// Release puts a claimed job back in the queue without counting an attempt
// (the worker is shutting down, or a rate limit refused it), due at `at`.
func (s *DB) Release(ctx context.Context, id string, leaseUntil, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("release %s: %w: no due time", id, store.ErrBadState)
	}
	err := s.write(func(tx *bbolt.Tx) error {
		d, err := takeLease(tx, id, leaseUntil)
		if err != nil {
			return err
		}
		d.NextAttemptAt = at
		d.UpdatedAt = s.now()
		return putDeliveryTx(tx, d, d.State)
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	return nil
}

func providerKey(channel, pid string) []byte { return []byte(channel + "\x00" + pid) }

func deliveryPIDKey(id, pid string) []byte { return []byte(id + "\x00" + pid) }

// attemptPIDs are the provider ids an outcome gives its delivery: its
// ProviderID, and the ids its receipt lists in meta "parts" (an SMS sent as
// several messages, each of which gets its own status callbacks). A part id
// too long to be a key is left out: it only helps find the delivery.
func attemptPIDs(o *store.Outcome) []string {
	var out []string
	if o.ProviderID != "" {
		out = append(out, o.ProviderID)
	}
	if !bytes.Contains(o.Attempt.Receipt, []byte(`"parts"`)) {
		return out
	}
	var r struct {
		Meta struct {
			Parts []string `json:"parts"`
		} `json:"meta"`
	}
	if json.Unmarshal(o.Attempt.Receipt, &r) != nil {
		return out // not a receipt with a list of ids: nothing more to find it by
	}
	for _, pid := range r.Meta.Parts {
		if pid != "" && len(pid) <= maxStoredKey && !slices.Contains(out, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// putProviderIDTx makes pid find d, and lists it under d so that pruning d
// removes the entry (deleteProviderIDsTx). An id a provider reuses (an SMTP
// queue id) finds its latest delivery.
func putProviderIDTx(tx *bbolt.Tx, d *store.Delivery, pid string) error {
	if err := tx.Bucket(bProviderIDs).Put(providerKey(d.Channel, pid), []byte(d.ID)); err != nil {
		return err
	}
	return tx.Bucket(bDeliveryPIDs).Put(deliveryPIDKey(d.ID, pid), nil)
}

// deleteProviderIDsTx removes every provider id listed under d, and its
// entry unless a later delivery has taken the id over.
func deleteProviderIDsTx(tx *bbolt.Tx, d *store.Delivery) error {
	pids := tx.Bucket(bProviderIDs)
	prefix := deliveryPIDKey(d.ID, "")
	c := tx.Bucket(bDeliveryPIDs).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		pk := providerKey(d.Channel, string(k[len(prefix):]))
		if bytes.Equal(pids.Get(pk), []byte(d.ID)) {
			if err := pids.Delete(pk); err != nil {
				return err
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// DeliveryByProviderID finds the delivery that a provider id belongs to: the
// id of any of its attempts or message parts, until the delivery is pruned
// (a status callback about an earlier attempt's message may come late).
func (s *DB) DeliveryByProviderID(ctx context.Context, channel, pid string) (*store.Delivery, error) {
	var d store.Delivery
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		id := tx.Bucket(bProviderIDs).Get(providerKey(channel, pid))
		if id == nil {
			return store.ErrNotFound
		}
		if err := getDelivery(tx.Bucket(bDeliveries), id, &d); err != nil {
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

// SetProviderStatus records a status the provider reported after sending
// (Twilio status callbacks). It does not change the delivery's state.
func (s *DB) SetProviderStatus(ctx context.Context, id, status, detail string) (*store.Delivery, error) {
	d, _, err := s.UpdateProviderStatus(ctx, id, func(*store.Delivery) (string, string, bool) { return status, detail, true })
	return d, err
}

// UpdateProviderStatus is SetProviderStatus decided inside the write
// transaction: decide sees the stored delivery and returns the status and
// detail to record, or ok false to leave it. Two callbacks about one
// delivery (the parts of a long SMS) then cannot both read the old status
// and the later overwrite the earlier's verdict. decide may be called more
// than once and must not have side effects.
func (s *DB) UpdateProviderStatus(ctx context.Context, id string, decide func(d *store.Delivery) (status, detail string, ok bool)) (*store.Delivery, bool, error) {
	var out *store.Delivery
	var changed bool
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		out, changed = nil, false
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
			return err
		}
		overlayLease(tx, &d)
		status, detail, ok := decide(&d)
		if !ok {
			out = &d
			return nil
		}
		var stored store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &stored); err != nil {
			return err
		}
		stored.ProviderStatus = status
		if detail != "" {
			stored.LastError = detail
		}
		stored.UpdatedAt = s.now()
		if err := tx.Bucket(bDeliveries).Put([]byte(id), encodeDelivery(&stored)); err != nil {
			return err
		}
		overlayLease(tx, &stored)
		out, changed = &stored, true
		return nil
	})
	return out, changed, err
}

// RequeueExpired ends every lease that ran out at or before `before`: the
// job is due again now, marked maybe-sent (its send may have reached the
// peer). At start-up call it with a time far in the future: bbolt admits one
// process, so every lease is stale. Leases are few (the jobs in flight), so
// it walks them all.
func (s *DB) RequeueExpired(ctx context.Context, before time.Time) (int, error) {
	now := s.now()
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		var ids [][]byte
		if err := tx.Bucket(bLeases).ForEach(func(k, v []byte) error {
			if len(v) != 8 || !unbe64(v).After(before) {
				ids = append(ids, append([]byte(nil), k...))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range ids {
			if err := tx.Bucket(bLeases).Delete(id); err != nil {
				return err
			}
			var d store.Delivery
			if err := getDelivery(tx.Bucket(bDeliveries), id, &d); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				return err
			}
			// The lease ran out mid-send: the job may have reached its peer.
			d.MaybeSent = true
			d.NextAttemptAt = now
			d.UpdatedAt = now
			if err := putDeliveryTx(tx, &d, d.State); err != nil {
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

// Envelope returns an envelope record.
func (s *DB) Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error) {
	var rec store.EnvelopeRecord
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		if err := getJSON(tx.Bucket(bEnvelopes), []byte(id), &rec); err != nil {
			return err
		}
		body := tx.Bucket(bEnvelopeBodies).Get([]byte(id))
		if body == nil {
			return fmt.Errorf("envelope %s: %w: its body is missing", id, store.ErrCorrupt)
		}
		rec.Envelope = append(json.RawMessage(nil), body...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// putEnvelopeTx stores an envelope: its body as sent, in its own bucket (so
// that it is never re-encoded or decoded to reach it), and the record
// without the body.
func putEnvelopeTx(tx *bbolt.Tx, rec *store.EnvelopeRecord) error {
	if err := tx.Bucket(bEnvelopeBodies).Put([]byte(rec.ID), rec.Envelope); err != nil {
		return err
	}
	meta := *rec
	meta.Envelope = nil
	return putJSON(tx.Bucket(bEnvelopes), []byte(rec.ID), &meta)
}

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
