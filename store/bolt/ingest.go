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
// in.NotBefore or now, or leased when handed off) and its approvals. Ingest and IngestBulk share it.
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
		if err := putNewDeliveryTx(tx, d, nd.LeaseUntil); err != nil {
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
	if err := s.putApprovalsTx(tx, envID, in.Approvals, now); err != nil {
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
	var rec store.EnvelopeRecord
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		if err := getEnvelope(tx.Bucket(bEnvelopes), []byte(id), &rec); err != nil {
			return err
		}
		body := tx.Bucket(bEnvelopeBodies).Get([]byte(id))
		if body == nil {
			return fmt.Errorf("envelope %s: %w: its body is missing", id, store.ErrCorrupt)
		}
		b, err := decodeBody(body)
		if err != nil {
			return fmt.Errorf("envelope %s: %w", id, err)
		}
		rec.Envelope = b
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
	fillForAppends(tx)
	if err := tx.Bucket(bEnvelopeBodies).Put([]byte(rec.ID), encodeBody(rec.Envelope)); err != nil {
		return err
	}
	return tx.Bucket(bEnvelopes).Put([]byte(rec.ID), encodeEnvelope(rec))
}
