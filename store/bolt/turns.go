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

func putTurnTx(tx *bbolt.Tx, t *store.Turn) error {
	if t.State == store.TurnQueued || t.State == store.TurnSending {
		if err := tx.Bucket(bTurnDue).Put(timeKey(t.NextAttemptAt, t.ID), nil); err != nil {
			return err
		}
	}
	return putJSON(tx.Bucket(bTurns), []byte(t.ID), t)
}

// ClaimTurns takes up to max turns due at now, at most one per
// conversation in flight (a conversation's turns go to the agent one after
// the other). A claimed turn stays in the due index, moved to now+lease, so
// a turn whose worker dies is taken again when its lease runs out.
func (s *DB) ClaimTurns(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*store.Turn, error) {
	var out []*store.Turn
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		out = out[:0]
		due, active := tx.Bucket(bTurnDue), tx.Bucket(bTurnActive)
		limit := be64(now)
		var keys [][]byte
		c := due.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0 && len(keys) < 4*max+16; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if len(out) == max {
				break
			}
			var t store.Turn
			if err := getJSON(tx.Bucket(bTurns), k[8:], &t); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					if err := due.Delete(k); err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("due turn %s: %w", k[8:], err)
			}
			if id := active.Get([]byte(t.ConversationID)); id != nil && string(id) != t.ID {
				var other store.Turn
				if getJSON(tx.Bucket(bTurns), id, &other) == nil && other.State == store.TurnSending && other.LeaseUntil.After(now) {
					continue // the conversation's earlier turn is in flight
				}
			}
			if err := due.Delete(k); err != nil {
				return err
			}
			t.Attempts++
			t.Claims++
			t.State = store.TurnSending
			t.NextAttemptAt = now.Add(lease)
			t.LeaseUntil = t.NextAttemptAt
			t.UpdatedAt = now
			if err := putTurnTx(tx, &t); err != nil {
				return err
			}
			if err := active.Put([]byte(t.ConversationID), []byte(t.ID)); err != nil {
				return err
			}
			out = append(out, &t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim turns: %w", err)
	}
	return out, nil
}

// NextTurn is when the earliest turn is due, if any.
func (s *DB) NextTurn() (time.Time, bool) { return s.firstTime(bTurnDue) }

// claimedTurnTx loads a turn and checks that the caller's claim still holds.
func claimedTurnTx(tx *bbolt.Tx, claimed *store.Turn) (*store.Turn, error) {
	var t store.Turn
	if err := getJSON(tx.Bucket(bTurns), []byte(claimed.ID), &t); err != nil {
		return nil, err
	}
	if t.State != store.TurnSending || t.Claims != claimed.Claims {
		return nil, store.ErrLeaseLost
	}
	return &t, nil
}

// SetTurnTask records the agent's task id of a claimed turn, and its push
// id ("" when it asked for no pushes), so that after a restart the turn's
// task is waited for — under the same push id — instead of sending the
// message again.
func (s *DB) SetTurnTask(ctx context.Context, claimed *store.Turn, taskID, pushID string) error {
	if len(taskID) > store.MaxKey {
		return fmt.Errorf("turn %s: task id of %d bytes; at most %d", claimed.ID, len(taskID), store.MaxKey)
	}
	if len(pushID) > store.MaxKey {
		return fmt.Errorf("turn %s: push id of %d bytes; at most %d", claimed.ID, len(pushID), store.MaxKey)
	}
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		t, err := claimedTurnTx(tx, claimed)
		if err != nil {
			return err
		}
		t.TaskID, t.PushID = taskID, pushID
		return putJSON(tx.Bucket(bTurns), []byte(t.ID), t)
	})
	if err != nil {
		return fmt.Errorf("set task of turn %s: %w", claimed.ID, err)
	}
	claimed.TaskID, claimed.PushID = taskID, pushID
	return nil
}

// RecordTurn records an attempt of a claimed turn (claimed as ClaimTurns
// returned it); ErrLeaseLost when it was claimed again since.
func (s *DB) RecordTurn(ctx context.Context, claimed *store.Turn, o store.TurnOutcome) (*store.Turn, error) {
	if o.State == store.TurnQueued && o.NextAt.IsZero() {
		return nil, fmt.Errorf("record turn %s: %w: queued without a next attempt time", claimed.ID, store.ErrBadState)
	}
	var out store.Turn
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		t, err := claimedTurnTx(tx, claimed)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bTurnDue).Delete(timeKey(t.NextAttemptAt, t.ID)); err != nil {
			return err
		}
		if id := tx.Bucket(bTurnActive).Get([]byte(t.ConversationID)); string(id) == t.ID {
			if err := tx.Bucket(bTurnActive).Delete([]byte(t.ConversationID)); err != nil {
				return err
			}
		}
		t.State, t.UpdatedAt, t.LastError, t.LeaseUntil = o.State, o.At, o.Error, time.Time{}
		switch o.State {
		case store.TurnAnswered:
			t.NextAttemptAt, t.AnswerEnvelopeID, t.AnsweredBy = time.Time{}, o.AnswerEnvelopeID, o.AnsweredBy
		case store.TurnDead:
			t.NextAttemptAt = time.Time{}
		default:
			t.State, t.NextAttemptAt = store.TurnQueued, o.NextAt
		}
		if err := putTurnTx(tx, t); err != nil {
			return err
		}
		out = *t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record turn %s: %w", claimed.ID, err)
	}
	return &out, nil
}

// RequeueClaimedTurns makes every turn still claimed with a claim taken
// before `before` due at `at`. The worker calls it when it starts: bbolt
// admits one process, so such a claim belongs to a process that is gone.
func (s *DB) RequeueClaimedTurns(ctx context.Context, before, at time.Time) (int, error) {
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		var held []store.Turn
		if err := tx.Bucket(bTurns).ForEach(func(k, v []byte) error {
			var t store.Turn
			if json.Unmarshal(v, &t) == nil && t.State == store.TurnSending && t.UpdatedAt.Before(before) {
				held = append(held, t)
			}
			return nil
		}); err != nil {
			return err
		}
		for i := range held {
			t := &held[i]
			if err := tx.Bucket(bTurnDue).Delete(timeKey(t.NextAttemptAt, t.ID)); err != nil {
				return err
			}
			if err := tx.Bucket(bTurnActive).Delete([]byte(t.ConversationID)); err != nil {
				return err
			}
			t.State, t.NextAttemptAt, t.LeaseUntil, t.UpdatedAt = store.TurnQueued, at, time.Time{}, at
			t.Claims++
			if err := putTurnTx(tx, t); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue claimed turns: %w", err)
	}
	return n, nil
}

// Turn returns one turn.
func (s *DB) Turn(ctx context.Context, id string) (*store.Turn, error) {
	var t store.Turn
	if err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bTurns), []byte(id), &t) }); err != nil {
		return nil, fmt.Errorf("turn %q: %w", id, err)
	}
	return &t, nil
}

// ListTurns lists turns oldest first, optionally in one state, at most limit.
func (s *DB) ListTurns(ctx context.Context, state string, limit int) ([]*store.Turn, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []*store.Turn
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bTurns).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var t store.Turn
			if json.Unmarshal(v, &t) != nil {
				continue
			}
			if state == "" || t.State == state {
				out = append(out, &t)
			}
		}
		return nil
	})
	return out, err
}

// RetryTurn makes a dead turn due again at `at` (operator action).
func (s *DB) RetryTurn(ctx context.Context, id string, at time.Time) (*store.Turn, error) {
	var out store.Turn
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var t store.Turn
		if err := getJSON(tx.Bucket(bTurns), []byte(id), &t); err != nil {
			return err
		}
		if t.State != store.TurnDead {
			return fmt.Errorf("turn is %s: %w", t.State, store.ErrBadState)
		}
		t.State, t.NextAttemptAt, t.UpdatedAt, t.Attempts = store.TurnQueued, at, at, 0
		if err := putTurnTx(tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retry turn %s: %w", id, err)
	}
	return &out, nil
}
