package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/jackc/pgx/v5"
)

// queueTimers queues the inserts of timers ts (a timer already stored under
// its name is kept).
func queueTimers(b *pgx.Batch, ts []store.ApprovalTimer) error {
	for _, t := range ts {
		doc, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("encode approval timer: %w", err)
		}
		b.Queue(`INSERT INTO approval_timers (approval_id, name, due_ns, doc) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, t.ApprovalID, t.Name(), nanos(t.Due), doc)
	}
	return nil
}

// DueApprovalTimers returns up to max timers due at or before now, earliest
// first.
func (s *DB) DueApprovalTimers(ctx context.Context, now time.Time, max int) ([]store.ApprovalTimer, error) {
	return s.timers(ctx, `SELECT doc FROM approval_timers WHERE due_ns <= $1 ORDER BY due_ns, approval_id, name LIMIT $2`, nanos(now), max)
}

// ApprovalTimersOf lists the timers of approval id, by due.
func (s *DB) ApprovalTimersOf(ctx context.Context, id string) ([]store.ApprovalTimer, error) {
	return s.timers(ctx, `SELECT doc FROM approval_timers WHERE approval_id = $1 ORDER BY due_ns, name`, id)
}

func (s *DB) timers(ctx context.Context, sql string, args ...any) ([]store.ApprovalTimer, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read approval timers: %w", err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read approval timers: %w", err)
	}
	out := make([]store.ApprovalTimer, len(docs))
	for i, doc := range docs {
		if err := json.Unmarshal(doc, &out[i]); err != nil {
			return nil, fmt.Errorf("approval timer: %w: %v", store.ErrCorrupt, err)
		}
	}
	return out, nil
}

// FireApprovalTimer removes f.Timer and, when its approval is pending,
// writes the firing, in one transaction: the DELETE that finds the row
// decides which replica fires it.
func (s *DB) FireApprovalTimer(ctx context.Context, f store.TimerFire) (*store.TimerFired, error) {
	ids := make([]string, len(f.Sends))
	for i := range ids {
		ids[i] = s.NewID("dlv_")
	}
	var out *store.TimerFired
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = &store.TimerFired{}
		now := s.now()
		tag, err := tx.Exec(ctx, `DELETE FROM approval_timers WHERE approval_id = $1 AND name = $2`, f.Timer.ApprovalID, f.Timer.Name())
		if err != nil {
			return fmt.Errorf("take timer: %w", err)
		}
		if tag.RowsAffected() == 0 {
			out.Why = store.TimerWhyGone
			return nil
		}
		a, err := lockApprovalTx(ctx, tx, f.Timer.ApprovalID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			out.Why = store.TimerWhyGone // removed by retention: so is its timer
			return nil
		case err != nil:
			return err
		}
		if f.Timer.Kind == store.TimerDecided || a.State != store.ApprovalPending {
			out.Fired, out.Why = f.Timer.Kind == store.TimerDecided && a.State != store.ApprovalPending, a.State
			return nil
		}
		keep, skipped := store.KeepSends(&f, a)
		out.Fired, out.Skipped = true, skipped
		store.WithRecipients(a, f.Recipients)
		if err := updateApprovalTx(ctx, tx, a); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if err := queueTokens(b, a, f.Tokens); err != nil {
			return err
		}
		var events []store.ApprovalEvent
		if len(keep) > 0 {
			evs, err := s.queueSends(ctx, tx, b, a, keep, ids, now, out)
			if err != nil {
				return err
			}
			events = evs
		}
		if err := queueTimers(b, f.Timers); err != nil {
			return err
		}
		if err := runBatch(ctx, tx, b); err != nil {
			if uniqueViolation(err) {
				return fmt.Errorf("store the firing: %w", store.ErrDuplicateApproval)
			}
			return fmt.Errorf("store the firing: %w", err)
		}
		_, err = appendEventsTx(ctx, tx, a.ID, append(events, f.Events...), now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fire approval timer %s of %s: %w", f.Timer.Name(), f.Timer.ApprovalID, err)
	}
	if len(out.Deliveries) > 0 {
		s.wakeDispatchers(ctx)
	}
	return out, nil
}

// queueSends queues the deliveries of a firing's sends on a's envelope,
// and the envelope's longer list of deliveries, and returns the sends'
// events.
func (s *DB) queueSends(ctx context.Context, tx pgx.Tx, b *pgx.Batch, a *store.Approval, keep []store.TimerSend, ids []string, now time.Time, out *store.TimerFired) ([]store.ApprovalEvent, error) {
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM envelopes WHERE id = $1 FOR UPDATE`, a.EnvelopeID).Scan(&doc)
	if err != nil {
		return nil, fmt.Errorf("envelope %s of approval %s: %w", a.EnvelopeID, a.ID, err)
	}
	var rec store.EnvelopeRecord
	if err := json.Unmarshal(doc, &rec); err != nil {
		return nil, fmt.Errorf("envelope %s: %w: %v", a.EnvelopeID, store.ErrCorrupt, err)
	}
	var rows ingestRows
	var events []store.ApprovalEvent
	for i, snd := range keep {
		d := store.NewTimerDelivery(a, rec.Agent, ids[i], snd, now)
		ddoc, err := convDoc(d)
		if err != nil {
			return nil, fmt.Errorf("encode delivery: %w", err)
		}
		rows.ids, rows.envs, rows.channels, rows.tos = append(rows.ids, d.ID), append(rows.envs, a.EnvelopeID), append(rows.channels, d.Channel), append(rows.tos, d.To)
		rows.agents, rows.states, rows.dues = append(rows.agents, d.Agent), append(rows.states, string(d.State)), append(rows.dues, dueNanos(d))
		rows.convs, rows.docs = append(rows.convs, ""), append(rows.docs, string(ddoc))
		rows.leases, rows.holders = append(rows.leases, nil), append(rows.holders, "")
		rec.DeliveryIDs = append(rec.DeliveryIDs, d.ID)
		out.Deliveries = append(out.Deliveries, d)
		if ev := snd.Event; ev.Kind != "" {
			ev.Evidence = store.SendEvidence(ev.Evidence, d)
			events = append(events, ev)
		}
	}
	b.Queue(insertDeliveriesSQL, nanos(now), rows.ids, rows.envs, rows.channels, rows.tos, rows.agents,
		rows.states, rows.dues, rows.convs, rows.docs, rows.leases, rows.holders)
	edoc, err := convDoc(&rec)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	b.Queue(`UPDATE envelopes SET doc = $2 WHERE id = $1`, rec.ID, edoc)
	return events, nil
}
