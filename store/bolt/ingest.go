package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

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
	if len(in.IdempotencyKey) > store.MaxKey {
		return nil, fmt.Errorf("ingest: idempotency key of %d bytes; at most %d", len(in.IdempotencyKey), store.MaxKey)
	}
	for _, d := range in.Deliveries {
		// Checked here, before the shared commit: a failure after writing
		// would abort every other caller's work in it too.
		if !validChannelName(d.Channel) {
			return nil, fmt.Errorf("ingest: %w: channel %q is not a channel name", store.ErrBadState, d.Channel)
		}
	}
	now := s.now()
	if err := store.CheckHandOffs(&in, now); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	envID := s.NewID("env_")
	ids := make([]string, len(in.Deliveries))
	for i := range ids {
		ids[i] = s.NewID("dlv_")
	}
	// Everything the transaction writes is encoded here, before the shared
	// commit: the body's compression, the records, the idempotency entry.
	// The writer's lock is held by one commit at a time, and what runs
	// under it runs on one core.
	p := prepareIngest(&in, envID, ids, now)
	var idem []byte
	if in.IdempotencyKey != "" {
		var err error
		if idem, err = json.Marshal(idemRecord{Hash: in.RequestHash[:], EnvelopeID: envID, CreatedAt: now}); err != nil {
			return nil, fmt.Errorf("ingest: encode idempotency record: %w", err)
		}
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
		out, err := s.writeIngestTx(tx, &in, p, now)
		if err != nil {
			return err
		}
		if in.IdempotencyKey != "" {
			if err := tx.Bucket(bIdempotency).Put([]byte(in.IdempotencyKey), idem); err != nil {
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

// preparedIngest is an accepted envelope and its deliveries as an ingest
// stores them, encoded before the write transaction.
type preparedIngest struct {
	rec  store.EnvelopeRecord
	body []byte // encodeBody(in.Envelope)
	recB []byte // encodeEnvelope(&rec)
	dels []*store.Delivery
	encs [][]byte // encodeNewDelivery(dels[i])
}

// prepareIngest builds and encodes what writeIngestTx writes for in: the
// envelope envID and its deliveries ids (due at in.NotBefore or now, or
// leased when handed off). It reads nothing from the store.
func prepareIngest(in *store.Ingest, envID string, ids []string, now time.Time) *preparedIngest {
	first := now
	if in.NotBefore.After(now) {
		first = in.NotBefore
	}
	p := &preparedIngest{
		rec:  store.EnvelopeRecord{ID: envID, Agent: in.Agent, Envelope: in.Envelope, CreatedAt: now, DeliveryIDs: ids, Source: in.Source},
		body: encodeBody(in.Envelope),
		dels: make([]*store.Delivery, len(in.Deliveries)),
		encs: make([][]byte, len(in.Deliveries)),
	}
	p.recB = encodeEnvelope(&p.rec)
	for i, nd := range in.Deliveries {
		d := &store.Delivery{ID: ids[i], EnvelopeID: envID, Channel: nd.Channel, To: nd.To, Agent: in.Agent,
			State: store.StateQueued, CreatedAt: now, UpdatedAt: now, NextAttemptAt: first,
			ApprovalIDs: nd.ApprovalIDs, Extra: nd.Extra}
		if nd.Held {
			d.State = store.StateHeld
		}
		p.dels[i], p.encs[i] = d, encodeNewDelivery(d)
	}
	return p
}

// writeIngestTx writes one prepared envelope, its deliveries and its
// approvals. Ingest and IngestBulk share it. The body has a bucket of its
// own (so that it is never re-encoded or decoded to reach it), apart from
// the record.
func (s *DB) writeIngestTx(tx *bbolt.Tx, in *store.Ingest, p *preparedIngest, now time.Time) (*store.IngestResult, error) {
	if err := checkApprovalsTx(tx, in.Approvals); err != nil {
		return nil, err
	}
	fillForAppends(tx)
	if err := tx.Bucket(bEnvelopeBodies).Put([]byte(p.rec.ID), p.body); err != nil {
		return nil, err
	}
	if err := tx.Bucket(bEnvelopes).Put([]byte(p.rec.ID), p.recB); err != nil {
		return nil, err
	}
	out := &store.IngestResult{EnvelopeID: p.rec.ID, Deliveries: make([]*store.Delivery, 0, len(p.dels))}
	for i, nd := range in.Deliveries {
		// A copy: a commit that fails is not run again, but the prepared
		// value stays as encoded.
		d := new(store.Delivery)
		*d = *p.dels[i]
		if err := putDeliveryEncodedTx(tx, d, "", nd.LeaseUntil, p.encs[i]); err != nil {
			return nil, err
		}
		if err := indexConversationDeliveryTx(tx, d); err != nil {
			return nil, err
		}
		if !nd.LeaseUntil.IsZero() {
			// Handed off: answered as a claim answers it.
			d.State, d.LeaseUntil = store.StateSending, nd.LeaseUntil
		}
		out.Deliveries = append(out.Deliveries, d)
	}
	if err := s.putApprovalsTx(tx, p.rec.ID, in.Approvals, now); err != nil {
		return nil, err
	}
	return out, nil
}

func ingestResultTx(tx *bbolt.Tx, envID string) (*store.IngestResult, error) {
	var rec store.EnvelopeRecord
	if err := getEnvelope(tx.Bucket(bEnvelopes), []byte(envID), &rec); err != nil {
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

// Envelope returns an envelope record.
func (s *DB) Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error) {
	var rec *store.EnvelopeRecord
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		rec, err = readEnvelope(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Envelopes reads the records of ids in one read transaction, in their
// order; an unknown id gives nil.
func (s *DB) Envelopes(ctx context.Context, ids []string) ([]*store.EnvelopeRecord, error) {
	out := make([]*store.EnvelopeRecord, len(ids))
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		for i, id := range ids {
			rec, err := readEnvelope(tx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			out[i] = rec
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readEnvelope reads an envelope record with its body, copied out of the
// transaction.
func readEnvelope(tx *bbolt.Tx, id string) (*store.EnvelopeRecord, error) {
	var rec store.EnvelopeRecord
	if err := getEnvelope(tx.Bucket(bEnvelopes), []byte(id), &rec); err != nil {
		return nil, err
	}
	body := tx.Bucket(bEnvelopeBodies).Get([]byte(id))
	if body == nil {
		return nil, fmt.Errorf("envelope %s: %w: its body is missing", id, store.ErrCorrupt)
	}
	b, err := decodeBody(body)
	if err != nil {
		return nil, fmt.Errorf("envelope %s: %w", id, err)
	}
	rec.Envelope = b
	return &rec, nil
}
