package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// bTurnLimits holds the counters of the flood limits across conversations
// (store.TurnLimit): key → the times of the turns counted within the last
// hour, oldest first, each a be64 UnixNano.
var bTurnLimits = []byte("turn_limits")

// encodeTurnTimes packs turn times as bTurnLimits keeps them.
func encodeTurnTimes(ts []time.Time) []byte {
	b := make([]byte, 0, 8*len(ts))
	for _, t := range ts {
		b = binary.BigEndian.AppendUint64(b, uint64(t.UnixNano()))
	}
	return b
}

// decodeTurnTimes reads encodeTurnTimes.
func decodeTurnTimes(b []byte) ([]time.Time, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("turn limit counter of %d bytes is not a list of times", len(b))
	}
	out := make([]time.Time, 0, len(b)/8)
	for ; len(b) > 0; b = b[8:] {
		out = append(out, time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC())
	}
	return out, nil
}

// limitTurnTx applies the flood limits of w to a turn queued at now in
// conversation c: the conversation's own, then each of w.Limits. It
// returns why one holds the turn; when none does, the turn is counted in
// c's recent turns and in every limit's counter. (bbolt has one writer at a
// time: no other message can count between the check and the count.)
func limitTurnTx(tx *bbolt.Tx, c *store.Conversation, w store.InboundWrite, now time.Time) (string, error) {
	recent, lastMinute := store.TrimTurns(c.RecentTurns, now)
	c.RecentTurns = recent
	if reason := store.ConversationLimitReason(w.PerMinute, w.PerHour, lastMinute, len(recent)); reason != "" {
		return reason, nil
	}
	b := tx.Bucket(bTurnLimits)
	counted := make([][]time.Time, len(w.Limits))
	for i, l := range w.Limits {
		if l.Key == "" || len(l.Key) > store.MaxKey {
			return "", fmt.Errorf("turn limit %q: key empty or longer than %d bytes", l.Name, store.MaxKey)
		}
		ts, err := decodeTurnTimes(b.Get([]byte(l.Key)))
		if err != nil {
			return "", fmt.Errorf("%s: %w", l.Name, err)
		}
		ts, lastMinute := store.TrimTurns(ts, now)
		if reason := store.LimitReason(l.Name, l.PerMinute, l.PerHour, lastMinute, len(ts)); reason != "" {
			return reason, nil
		}
		counted[i] = ts
	}
	c.RecentTurns = store.AddTurn(c.RecentTurns, now, store.MaxRecentTurns)
	for i, l := range w.Limits {
		if slices.ContainsFunc(w.Limits[:i], func(o store.TurnLimit) bool { return o.Key == l.Key }) {
			continue // one counter named twice counts the turn once
		}
		if err := b.Put([]byte(l.Key), encodeTurnTimes(store.AddTurn(counted[i], now, store.MaxLimitTurns))); err != nil {
			return "", err
		}
	}
	return "", nil
}

// pruneTurnLimitsTx removes at most max counters whose latest turn came
// before `before` (a sender who has not written since), and returns how
// many it removed.
func pruneTurnLimitsTx(tx *bbolt.Tx, before time.Time, max int) (int, error) {
	b := tx.Bucket(bTurnLimits)
	var doomed [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(doomed) < max; k, v = c.Next() {
		ts, err := decodeTurnTimes(v)
		if err != nil || len(ts) == 0 || ts[len(ts)-1].Before(before) {
			doomed = append(doomed, slices.Clone(k))
		}
	}
	for _, k := range doomed {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// ReleaseInbound queues turn for a held inbound message and marks the
// record a turn ("released by an operator; held: <why>"), in one
// transaction. The conversation counts the turn; no flood limit applies.
func (s *DB) ReleaseInbound(ctx context.Context, id string, turn store.Turn, at time.Time) (*store.InboundWritten, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *store.InboundWritten
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var rec store.InboundRecord
		if err := getJSON(tx.Bucket(bInboundRecords), []byte(id), &rec); err != nil {
			return fmt.Errorf("inbound %s: %w", id, err)
		}
		if rec.Disposition != envelope.DispositionHeld || rec.ConversationID == "" {
			return fmt.Errorf("inbound %s is %s, not a held message of a conversation: %w", id, rec.Disposition, store.ErrBadState)
		}
		var c store.Conversation
		if err := getJSON(tx.Bucket(bConversations), []byte(rec.ConversationID), &c); err != nil {
			return fmt.Errorf("conversation %s: %w", rec.ConversationID, err)
		}
		prev := c.UpdatedAt
		c.Turns++
		if err := putConversationTx(tx, &c, prev); err != nil {
			return err
		}
		t := turn
		t.ConversationID, t.InboundID, t.State = c.ID, rec.ID, store.TurnQueued
		t.CreatedAt, t.UpdatedAt, t.NextAttemptAt = at, at, at
		if err := putTurnTx(tx, &t); err != nil {
			return err
		}
		rec.Disposition, rec.TurnID = envelope.DispositionTurn, t.ID
		rec.Reason = store.ReleasedBy + "; held: " + rec.Reason
		if err := putJSON(tx.Bucket(bInboundRecords), []byte(rec.ID), rec); err != nil {
			return err
		}
		out = &store.InboundWritten{Record: &rec, Conversation: &c, Turn: &t}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("release inbound message: %w", err)
	}
	return out, nil
}
