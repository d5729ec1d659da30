package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

// appendEventsTx appends events, in order, to approval id's trail in tx.
// The head's row lock (taken by the upsert, which also creates the head of
// a first event) orders the appends of every replica: the second waits
// for the first to commit and reads the head it left. Two round trips
// whatever the number of events. The caller has checked that the approval
// exists.
func appendEventsTx(ctx context.Context, tx pgx.Tx, id string, events []store.ApprovalEvent, now time.Time) ([]store.ApprovalEvent, error) {
	if len(events) == 0 {
		return nil, nil
	}
	var head store.ApprovalEventHead
	err := tx.QueryRow(ctx, `INSERT INTO approval_event_heads (approval_id, seq, hash) VALUES ($1, 0, '')
		ON CONFLICT (approval_id) DO UPDATE SET seq = approval_event_heads.seq
		RETURNING seq, hash`, id).Scan(&head.Seq, &head.Hash)
	if err != nil {
		return nil, fmt.Errorf("lock trail head of %s: %w", id, err)
	}
	b := &pgx.Batch{}
	out, err := queueEvents(b, id, events, head, now)
	if err != nil {
		return nil, err
	}
	last := out[len(out)-1]
	b.Queue(`UPDATE approval_event_heads SET seq = $2, hash = $3 WHERE approval_id = $1`, id, last.Seq, last.Hash)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("append events of %s: %w", id, err)
	}
	return out, nil
}

// queueEvents seals events after head and queues their inserts (not the
// head's).
func queueEvents(b *pgx.Batch, id string, events []store.ApprovalEvent, head store.ApprovalEventHead, now time.Time) ([]store.ApprovalEvent, error) {
	out := make([]store.ApprovalEvent, 0, len(events))
	for _, e := range events {
		e, err := store.SealApprovalEvent(e, head, now)
		if err != nil {
			return nil, err
		}
		doc, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode event of %s: %w", id, err)
		}
		b.Queue(`INSERT INTO approval_events (approval_id, seq, doc) VALUES ($1, $2, $3)`, id, e.Seq, doc)
		head = store.ApprovalEventHead{Seq: e.Seq, Hash: e.Hash}
		out = append(out, e)
	}
	return out, nil
}

// queueNewTrail queues the trail of a new approval: its events and its
// head, in an ingest's batch (nothing else can append to an approval that
// does not exist yet).
func queueNewTrail(b *pgx.Batch, id string, events []store.ApprovalEvent, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	out, err := queueEvents(b, id, events, store.ApprovalEventHead{}, now)
	if err != nil {
		return err
	}
	last := out[len(out)-1]
	b.Queue(`INSERT INTO approval_event_heads (approval_id, seq, hash) VALUES ($1, $2, $3)`, id, last.Seq, last.Hash)
	return nil
}

// approvalExistsTx reports ErrNotFound when there is no approval id.
func approvalExistsTx(ctx context.Context, q tokenQuerier, id string) error {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM approvals WHERE id = $1)`, id).Scan(&ok); err != nil {
		return fmt.Errorf("approval %q: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("approval %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// AppendApprovalEvent appends e to approval id's trail (store.Approvals).
func (s *DB) AppendApprovalEvent(ctx context.Context, id string, e store.ApprovalEvent) (store.ApprovalEvent, error) {
	var out store.ApprovalEvent
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := approvalExistsTx(ctx, tx, id); err != nil {
			return err
		}
		got, err := appendEventsTx(ctx, tx, id, []store.ApprovalEvent{e}, s.now())
		if err != nil {
			return err
		}
		out = got[0]
		return nil
	})
	if err != nil {
		return e, fmt.Errorf("append approval event: %w", err)
	}
	return out, nil
}

// ApprovalEvents returns approval id's trail by seq, and its head, from
// one snapshot (store.Approvals). ErrNotFound when there is no such
// approval.
func (s *DB) ApprovalEvents(ctx context.Context, id string) ([]store.ApprovalEvent, store.ApprovalEventHead, error) {
	var out []store.ApprovalEvent
	var head store.ApprovalEventHead
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := approvalExistsTx(ctx, tx, id); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT seq, hash FROM approval_event_heads WHERE approval_id = $1`, id).Scan(&head.Seq, &head.Hash)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("trail head of %s: %w", id, err)
		}
		rows, err := tx.Query(ctx, `SELECT doc FROM approval_events WHERE approval_id = $1 ORDER BY seq`, id)
		if err != nil {
			return fmt.Errorf("trail of %s: %w", id, err)
		}
		docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return fmt.Errorf("trail of %s: %w", id, err)
		}
		out = make([]store.ApprovalEvent, 0, len(docs))
		for i, doc := range docs {
			var e store.ApprovalEvent
			if err := json.Unmarshal(doc, &e); err != nil {
				return fmt.Errorf("trail of %s: %w", id, &store.ChainError{Position: i + 1, Reason: "unreadable: " + err.Error()})
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, store.ApprovalEventHead{}, err
	}
	return out, head, nil
}
