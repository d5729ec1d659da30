package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// limitTurnTx applies the flood limits of w to a turn queued at now in
// conversation c (locked): the conversation's own, then each of w.Limits,
// whose counters (turn_limits rows) it locks first, in key order, so that
// two transactions never wait on each other's. It returns why a limit
// holds the turn; when none does, the turn is counted in c's recent turns
// and in every limit's counter. A concurrent message waits on the rows
// until this transaction ends, then counts with this turn in: no replica
// can get past a limit.
func limitTurnTx(ctx context.Context, tx pgx.Tx, c *store.Conversation, w *store.InboundWrite, now time.Time) (string, error) {
	recent, lastMinute := store.TrimTurns(c.RecentTurns, now)
	c.RecentTurns = recent
	if reason := store.ConversationLimitReason(w.PerMinute, w.PerHour, lastMinute, len(recent)); reason != "" {
		return reason, nil
	}
	if len(w.Limits) == 0 {
		c.RecentTurns = store.AddTurn(c.RecentTurns, now, store.MaxRecentTurns)
		return "", nil
	}
	keys := make([]string, 0, len(w.Limits))
	for _, l := range w.Limits {
		if l.Key == "" || len(l.Key) > store.MaxKey {
			return "", fmt.Errorf("turn limit %q: key empty or longer than %d bytes", l.Name, store.MaxKey)
		}
		keys = append(keys, l.Key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	counters := make(map[string][]time.Time, len(keys))
	for _, k := range keys {
		ts, err := lockTurnLimitTx(ctx, tx, k)
		if err != nil {
			return "", err
		}
		counters[k], _ = store.TrimTurns(ts, now)
	}
	for _, l := range w.Limits {
		ts := counters[l.Key]
		_, lastMinute := store.TrimTurns(ts, now)
		if reason := store.LimitReason(l.Name, l.PerMinute, l.PerHour, lastMinute, len(ts)); reason != "" {
			return reason, nil
		}
	}
	c.RecentTurns = store.AddTurn(c.RecentTurns, now, store.MaxRecentTurns)
	for _, k := range keys {
		ts := store.AddTurn(counters[k], now, store.MaxLimitTurns)
		ns := make([]int64, len(ts))
		for i, t := range ts {
			ns[i] = t.UnixNano()
		}
		if _, err := tx.Exec(ctx, `UPDATE turn_limits SET last_ns = $2, times = $3 WHERE key = $1`,
			[]byte(k), ns[len(ns)-1], ns); err != nil {
			return "", fmt.Errorf("count a turn under a limit: %w", err)
		}
	}
	return "", nil
}

// lockTurnLimitTx locks the counter of key until the transaction ends
// (creating it empty when there is none) and returns its turn times. Two
// first turns at once: the second insert waits for the first transaction
// and does nothing; its SELECT … FOR UPDATE then reads the committed row.
func lockTurnLimitTx(ctx context.Context, tx pgx.Tx, key string) ([]time.Time, error) {
	read := func() ([]int64, error) {
		var ns []int64
		err := tx.QueryRow(ctx, `SELECT times FROM turn_limits WHERE key = $1 FOR UPDATE`, []byte(key)).Scan(&ns)
		return ns, err
	}
	ns, err := read()
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err = tx.Exec(ctx, `INSERT INTO turn_limits (key, last_ns, times) VALUES ($1, 0, '{}') ON CONFLICT (key) DO NOTHING`,
			[]byte(key)); err != nil {
			return nil, fmt.Errorf("create a turn limit counter: %w", err)
		}
		ns, err = read()
	}
	if err != nil {
		return nil, fmt.Errorf("lock a turn limit counter: %w", err)
	}
	out := make([]time.Time, len(ns))
	for i, n := range ns {
		out[i] = time.Unix(0, n).UTC()
	}
	return out, nil
}

// pruneTurnLimitsTx removes at most max counters whose latest turn came
// before `before` (a sender who has not written since), and returns how
// many it removed.
func pruneTurnLimitsTx(ctx context.Context, tx pgx.Tx, before time.Time, max int) (int, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM turn_limits WHERE key IN (
		SELECT key FROM turn_limits WHERE last_ns < $1 ORDER BY last_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, nanos(before), max)
	if err != nil {
		return 0, fmt.Errorf("prune turn limit counters: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ReleaseInbound queues turn for a held inbound message and marks the
// record a turn ("released by an operator; held: <why>"), in one
// transaction. The conversation counts the turn; no flood limit applies.
func (s *DB) ReleaseInbound(ctx context.Context, id string, turn store.Turn, at time.Time) (*store.InboundWritten, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *store.InboundWritten
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rec, err := convGet[store.InboundRecord](ctx, tx, `SELECT doc FROM inbound_records WHERE id = $1 FOR UPDATE`, id)
		if err != nil {
			return fmt.Errorf("inbound %s: %w", id, err)
		}
		if rec.Disposition != envelope.DispositionHeld || rec.ConversationID == "" {
			return fmt.Errorf("inbound %s is %s, not a held message of a conversation: %w", id, rec.Disposition, store.ErrBadState)
		}
		c, err := lockConversationTx(ctx, tx, rec.ConversationID)
		if err != nil {
			return fmt.Errorf("conversation %s: %w", rec.ConversationID, err)
		}
		c.Turns++
		if err := putConversationTx(ctx, tx, c); err != nil {
			return err
		}
		t := turn
		t.ConversationID, t.InboundID, t.State = c.ID, rec.ID, store.TurnQueued
		t.CreatedAt, t.UpdatedAt, t.NextAttemptAt = at, at, at
		if err := putTurnTx(ctx, tx, &t, s.holder); err != nil {
			return err
		}
		if err := s.notify(ctx, tx, store.WakeTurns); err != nil {
			return err
		}
		rec.Disposition, rec.TurnID = envelope.DispositionTurn, t.ID
		rec.Reason = store.ReleasedBy + "; held: " + rec.Reason
		doc, err := convDoc(rec)
		if err != nil {
			return fmt.Errorf("inbound %s: %w", rec.ID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE inbound_records SET doc = $2 WHERE id = $1`, rec.ID, doc); err != nil {
			return fmt.Errorf("write inbound %s: %w", rec.ID, err)
		}
		out = &store.InboundWritten{Record: rec, Conversation: c, Turn: &t}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("release inbound message: %w", err)
	}
	return out, nil
}
