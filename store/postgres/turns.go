package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

// turnDue is the due_ns of t: its next attempt while queued or sending
// (a sending turn's lease end), NULL once settled.
func turnDue(t *store.Turn) *int64 {
	if t.State != store.TurnQueued && t.State != store.TurnSending {
		return nil
	}
	n := t.NextAttemptAt.UnixNano()
	return &n
}

// putTurnTx writes t; a turn in flight is leased to holder (this
// replica), any other has no holder.
func putTurnTx(ctx context.Context, tx pgx.Tx, t *store.Turn, holder string) error {
	doc, err := convDoc(t)
	if err != nil {
		return fmt.Errorf("turn %s: %w", t.ID, err)
	}
	if t.State != store.TurnSending {
		holder = ""
	}
	if _, err := tx.Exec(ctx, `INSERT INTO turns (id, conversation_id, state, due_ns, lease_until_ns, doc, lease_holder)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, '')) ON CONFLICT (id) DO UPDATE SET conversation_id = excluded.conversation_id,
		state = excluded.state, due_ns = excluded.due_ns, lease_until_ns = excluded.lease_until_ns, doc = excluded.doc,
		lease_holder = excluded.lease_holder`,
		t.ID, t.ConversationID, t.State, turnDue(t), nanos(t.LeaseUntil), doc, holder); err != nil {
		return fmt.Errorf("write turn %s: %w", t.ID, err)
	}
	return nil
}

// lockTurnTx reads a turn and locks its row until the transaction ends.
func lockTurnTx(ctx context.Context, tx pgx.Tx, id string) (*store.Turn, error) {
	return convGet[store.Turn](ctx, tx, `SELECT doc FROM turns WHERE id = $1 FOR UPDATE`, id)
}

// ClaimTurns takes up to max turns due at now, at most one per
// conversation in flight (a conversation's turns go to the agent one after
// the other). A claimed turn stays due, at now+lease, so a turn whose
// worker dies is taken again when its lease runs out. Candidates are read
// in due order and each is locked as it is considered (FOR UPDATE SKIP
// LOCKED), so that two claimers never take one turn; a conversation's claims are serialised by an advisory
// lock, so that two claimers never put two of its turns in flight.
func (s *DB) ClaimTurns(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*store.Turn, error) {
	if max <= 0 {
		return nil, nil
	}
	var out []*store.Turn
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		// Due turns, and turns in flight on a replica whose liveness lease
		// ran out (it died): they need not wait for their own leases. The
		// candidates are read without locks and each is locked only when
		// it is considered: locking the whole page at once would make
		// concurrent claimers pass over turns this claim does not take.
		rows, err := tx.Query(ctx, `SELECT id FROM turns t WHERE `+turnClaimable+`
			ORDER BY due_ns, id LIMIT $2`,
			now.UnixNano(), 4*max+16, store.LivenessLease(""))
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if len(out) == max {
				break
			}
			t, err := convGet[store.Turn](ctx, tx, `SELECT doc FROM turns t WHERE id = $2 AND (`+turnClaimable+`)
				FOR UPDATE SKIP LOCKED`, now.UnixNano(), id, store.LivenessLease(""))
			if errors.Is(err, store.ErrNotFound) {
				continue // another claimer has it, or took it meanwhile
			}
			if err != nil {
				return err
			}
			busy, err := conversationBusyTx(ctx, tx, t, now)
			if err != nil {
				return err
			}
			if busy {
				continue
			}
			t.Attempts++
			t.Claims++
			t.State = store.TurnSending
			t.NextAttemptAt = now.Add(lease)
			t.LeaseUntil = t.NextAttemptAt
			t.UpdatedAt = now
			if err := putTurnTx(ctx, tx, t, s.holder); err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim turns: %w", err)
	}
	return out, nil
}

// turnClaimable is the condition, on a turn row t, that a claim at $1
// may take it ($3: the liveness leases' name prefix): it is due, or in
// flight on a replica whose liveness lease ran out.
var turnClaimable = `due_ns <= $1 OR (state = 'sending' AND lease_holder IS NOT NULL AND ` + holderDead("$1", "$3") + `)`

// holderDead is the condition, on a turn row t, that its lease holder's
// liveness lease ran out by the parameter now; prefix is the parameter
// holding the liveness leases' name prefix.
func holderDead(now, prefix string) string {
	return `EXISTS (SELECT 1 FROM singleton_leases l WHERE l.name = ` + prefix + ` || t.lease_holder AND l.until_ns <= ` + now + `)`
}

// conversationBusyTx reports whether t's conversation has another turn in
// flight (sending, its lease not run out at now, its holder alive), or another claimer is
// deciding about it at this moment. Otherwise the conversation's claim
// lock is held until the transaction ends.
func conversationBusyTx(ctx context.Context, tx pgx.Tx, t *store.Turn, now time.Time) (bool, error) {
	var locked bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, convLockClaim, convHash(t.ConversationID)).Scan(&locked); err != nil {
		return false, fmt.Errorf("lock conversation %s: %w", t.ConversationID, err)
	}
	if !locked {
		return true, nil
	}
	var busy bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns t WHERE conversation_id = $1 AND state = 'sending'
		AND id <> $2 AND lease_until_ns > $3 AND NOT (lease_holder IS NOT NULL AND `+holderDead("$3", "$4")+`))`,
		t.ConversationID, t.ID, now.UnixNano(), store.LivenessLease("")).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("turns in flight of %s: %w", t.ConversationID, err)
	}
	return busy, nil
}

// NextTurn is when the earliest turn is due, if any.
func (s *DB) NextTurn() (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var due int64
	err := s.pool.QueryRow(ctx, `SELECT due_ns FROM turns WHERE due_ns IS NOT NULL ORDER BY due_ns LIMIT 1`).Scan(&due)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, due), true
}

// claimedTurnTx locks a turn and checks that the caller's claim still
// holds (store.ErrLeaseLost when it was claimed again or settled since).
func claimedTurnTx(ctx context.Context, tx pgx.Tx, claimed *store.Turn) (*store.Turn, error) {
	t, err := lockTurnTx(ctx, tx, claimed.ID)
	if err != nil {
		return nil, err
	}
	if t.State != store.TurnSending || t.Claims != claimed.Claims {
		return nil, store.ErrLeaseLost
	}
	return t, nil
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		t, err := claimedTurnTx(ctx, tx, claimed)
		if err != nil {
			return err
		}
		t.TaskID, t.PushID = taskID, pushID
		return putTurnTx(ctx, tx, t, s.holder)
	})
	if err != nil {
		return fmt.Errorf("set task of turn %s: %w", claimed.ID, err)
	}
	claimed.TaskID, claimed.PushID = taskID, pushID
	return nil
}

// RecordTurn records an attempt of a claimed turn (claimed as ClaimTurns
// returned it); store.ErrLeaseLost when it was claimed again since.
func (s *DB) RecordTurn(ctx context.Context, claimed *store.Turn, o store.TurnOutcome) (*store.Turn, error) {
	if o.State == store.TurnQueued && o.NextAt.IsZero() {
		return nil, fmt.Errorf("record turn %s: %w: queued without a next attempt time", claimed.ID, store.ErrBadState)
	}
	var out *store.Turn
	err := s.tx(ctx, func(tx pgx.Tx) error {
		t, err := claimedTurnTx(ctx, tx, claimed)
		if err != nil {
			return err
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
		if err := putTurnTx(ctx, tx, t, s.holder); err != nil {
			return err
		}
		out = t
		if t.State == store.TurnQueued {
			return s.notify(ctx, tx, store.WakeTurns)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record turn %s: %w", claimed.ID, err)
	}
	return out, nil
}

// RequeueClaimedTurns makes every turn still claimed with a claim taken
// before `before` due at `at`, and refuses those claims (store.ErrLeaseLost).
// Other replicas may hold such claims: a shared store's caller passes a
// `before` no live claim precedes.
func (s *DB) RequeueClaimedTurns(ctx context.Context, before, at time.Time) (int, error) {
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT doc FROM turns WHERE state = 'sending' ORDER BY id FOR UPDATE`)
		if err != nil {
			return err
		}
		claimed, err := convCollect(rows, math.MaxInt, func(t *store.Turn) bool { return t.UpdatedAt.Before(before) })
		if err != nil {
			return err
		}
		for _, t := range claimed {
			t.State, t.NextAttemptAt, t.LeaseUntil, t.UpdatedAt = store.TurnQueued, at, time.Time{}, at
			t.Claims++
			if err := putTurnTx(ctx, tx, t, s.holder); err != nil {
				return err
			}
		}
		n = len(claimed)
		if n == 0 {
			return nil
		}
		return s.notify(ctx, tx, store.WakeTurns)
	})
	if err != nil {
		return 0, fmt.Errorf("requeue claimed turns: %w", err)
	}
	return n, nil
}

// Turn returns one turn.
func (s *DB) Turn(ctx context.Context, id string) (*store.Turn, error) {
	t, err := convGet[store.Turn](ctx, s.pool, `SELECT doc FROM turns WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("turn %q: %w", id, err)
	}
	return t, nil
}

// ListTurns lists turns oldest first, optionally in one state, at most
// limit (100 when limit is not positive).
func (s *DB) ListTurns(ctx context.Context, state string, limit int) ([]*store.Turn, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM turns WHERE $1 = '' OR state = $1 ORDER BY id LIMIT $2`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	out, err := convCollect[store.Turn](rows, limit, nil)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	return out, nil
}

// RetryTurn makes a dead turn due again at `at` (operator action).
func (s *DB) RetryTurn(ctx context.Context, id string, at time.Time) (*store.Turn, error) {
	var out *store.Turn
	err := s.tx(ctx, func(tx pgx.Tx) error {
		t, err := lockTurnTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if t.State != store.TurnDead {
			return fmt.Errorf("turn is %s: %w", t.State, store.ErrBadState)
		}
		t.State, t.NextAttemptAt, t.UpdatedAt, t.Attempts = store.TurnQueued, at, at, 0
		if err := putTurnTx(ctx, tx, t, s.holder); err != nil {
			return err
		}
		out = t
		return s.notify(ctx, tx, store.WakeTurns)
	})
	if err != nil {
		return nil, fmt.Errorf("retry turn %s: %w", id, err)
	}
	return out, nil
}

// checkTurns verifies that every turn's columns agree with its record: a
// queued or sending turn is due at its next attempt, no other turn is due.
func (s *DB) checkTurns(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT id, conversation_id, state, due_ns, lease_until_ns, doc FROM turns`)
	if err != nil {
		return fmt.Errorf("check turns: %w", err)
	}
	var id, cnv, state string
	var due *int64
	var lease int64
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &cnv, &state, &due, &lease, &doc}, func() error {
		var t store.Turn
		if err := json.Unmarshal(doc, &t); err != nil {
			return fmt.Errorf("turn %s: %w", id, err)
		}
		want := turnDue(&t)
		switch {
		case t.ID != id || t.ConversationID != cnv || t.State != state || nanos(t.LeaseUntil) != lease:
			return fmt.Errorf("turn %s: row (%s, %s, %s, %d) disagrees with its record", t.ID, id, cnv, state, lease)
		case want != nil && due == nil:
			return fmt.Errorf("%s turn %s is not due", t.State, t.ID)
		case want == nil && due != nil:
			return fmt.Errorf("%s turn %s is still due", t.State, t.ID)
		case want != nil && *want != *due:
			return fmt.Errorf("%s turn %s is due at %d, its next attempt is %d", t.State, t.ID, *due, *want)
		}
		return nil
	})
	return err
}
