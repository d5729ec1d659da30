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

// The core's records: small named values, provider callbacks seen,
// singleton leases, schedules and their runs, and the pruning of the
// records that only guard against repeats.

// GetKV reads a value; ok is false when it is absent.
func (s *DB) GetKV(ctx context.Context, key string) (val []byte, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT value FROM kv WHERE key = $1`, key).Scan(&val)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get %s: %w", key, err)
	}
	return val, true, nil
}

// PutKV writes a value.
func (s *DB) PutKV(ctx context.Context, key string, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO kv (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, key, val); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// DeleteKV removes a value.
func (s *DB) DeleteKV(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM kv WHERE key = $1`, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// UpdateKV changes key's value in one transaction that other replicas'
// changes of it wait for: change gets the value (ok false when there is
// none) and returns the new one, nil to leave the key as it is; an error
// from change is returned and nothing changes. When a value was written
// and topic is not empty, every replica is woken with topic (Wakeups) at
// the commit.
func (s *DB) UpdateKV(ctx context.Context, key, topic string, change func(val []byte, ok bool) ([]byte, error)) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		var val []byte
		err := tx.QueryRow(ctx, `SELECT value FROM kv WHERE key = $1 FOR UPDATE`, key).Scan(&val)
		ok := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("get %s: %w", key, err)
		}
		next, err := change(val, ok)
		if err != nil || next == nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO kv (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, key, next); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		if topic != "" {
			return s.notify(ctx, tx, topic)
		}
		return nil
	})
}

// MarkSeen records key as seen and reports whether this was the first
// time; of two replicas marking one key, exactly one is first.
func (s *DB) MarkSeen(ctx context.Context, key string) (first bool, err error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO callbacks_seen (key, at_ns) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		key, nanos(s.now()))
	if err != nil {
		return false, fmt.Errorf("mark %s seen: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ForgetSeen removes key, so that a callback whose handling failed is acted
// on when the provider retries it.
func (s *DB) ForgetSeen(ctx context.Context, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM callbacks_seen WHERE key = $1`, key); err != nil {
		return fmt.Errorf("forget %s: %w", key, err)
	}
	return nil
}

// PruneRecords removes, up to max of each kind, the idempotency keys,
// handled inbound message ids and provider callbacks older than before, and
// the liveness leases of replicas that stopped before it.
func (s *DB) PruneRecords(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = 10000
	}
	n := 0
	for _, q := range []string{
		`DELETE FROM idempotency WHERE key IN (SELECT key FROM idempotency WHERE created_ns < $1 LIMIT $2)`,
		`DELETE FROM inbound_seen WHERE (channel, msg_id) IN (SELECT channel, msg_id FROM inbound_seen WHERE at_ns < $1 LIMIT $2)`,
		`DELETE FROM callbacks_seen WHERE key IN (SELECT key FROM callbacks_seen WHERE at_ns < $1 LIMIT $2)`,
		// Stopped replicas' liveness leases (one per process start).
		`DELETE FROM singleton_leases WHERE name IN (SELECT name FROM singleton_leases
			WHERE name LIKE 'replica/%' AND until_ns < $1 LIMIT $2)`,
	} {
		tag, err := s.pool.Exec(ctx, q, nanos(before), max)
		if err != nil {
			return n, fmt.Errorf("prune records: %w", err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

// AcquireLease takes or renews a singleton's lease (store.Leases), under a
// row lock so that of two replicas taking a free lease exactly one has it.
func (s *DB) AcquireLease(ctx context.Context, name, holder string, gen uint64, ttl time.Duration) (store.Lease, bool, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return store.Lease{}, false, fmt.Errorf("acquire lease %q for %q: name, holder and a positive ttl are required", name, holder)
	}
	var out store.Lease
	var ok bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO singleton_leases (name, holder, generation, until_ns) VALUES ($1, '', 0, 0)
			ON CONFLICT DO NOTHING`, name); err != nil {
			return err
		}
		var cur store.Lease
		var g, until int64
		if err := tx.QueryRow(ctx, `SELECT holder, generation, until_ns FROM singleton_leases WHERE name = $1 FOR UPDATE`, name).
			Scan(&cur.Holder, &g, &until); err != nil {
			return err
		}
		if g > 0 {
			cur.Name, cur.Generation, cur.Until = name, uint64(g), fromNanos(until)
		}
		out, ok = store.DecideLease(cur, name, holder, gen, ttl, s.now())
		if !ok {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE singleton_leases SET holder = $2, generation = $3, until_ns = $4 WHERE name = $1`,
			name, out.Holder, int64(out.Generation), nanos(out.Until))
		return err
	})
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return out, ok, nil
}

// ReleaseLease ends holder's lease at gen; a lease no longer held is left
// alone.
func (s *DB) ReleaseLease(ctx context.Context, name, holder string, gen uint64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE singleton_leases SET until_ns = $4
		WHERE name = $1 AND holder = $2 AND generation = $3 AND until_ns > $4`,
		name, holder, int64(gen), nanos(s.now())); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// ListLeases returns every lease in name order.
func (s *DB) ListLeases(ctx context.Context) ([]store.Lease, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, holder, generation, until_ns FROM singleton_leases
		WHERE generation > 0 ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Lease, error) {
		var l store.Lease
		var g, until int64
		err := r.Scan(&l.Name, &l.Holder, &g, &until)
		l.Generation, l.Until = uint64(g), fromNanos(until)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

// maxRunsPerSchedule bounds the history kept per schedule, as on the
// embedded store.
const maxRunsPerSchedule = 200

// lockSchedule serialises the writes to one schedule across replicas for
// the rest of tx, and reads its state; ok is false when it has none.
func lockSchedule(ctx context.Context, tx pgx.Tx, name string) (st store.ScheduleState, ok bool, err error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('beachd.schedule'), hashtext($1))`, name); err != nil {
		return st, false, err
	}
	var doc []byte
	err = tx.QueryRow(ctx, `SELECT doc FROM schedules WHERE name = $1`, name).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		return st, false, fmt.Errorf("decode schedule %s: %w", name, err)
	}
	return st, true, nil
}

func putSchedule(ctx context.Context, tx pgx.Tx, st store.ScheduleState) error {
	doc, err := json.Marshal(st)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO schedules (name, doc) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET doc = EXCLUDED.doc`, st.Name, doc)
	return err
}

// ScheduleState returns the stored state of a schedule; ok is false when
// the schedule was never seen.
func (s *DB) ScheduleState(ctx context.Context, name string) (st store.ScheduleState, ok bool, err error) {
	var doc []byte
	err = s.pool.QueryRow(ctx, `SELECT doc FROM schedules WHERE name = $1`, name).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, false, nil
	}
	if err == nil {
		err = json.Unmarshal(doc, &st)
	}
	if err != nil {
		return store.ScheduleState{}, false, fmt.Errorf("read schedule %s: %w", name, err)
	}
	return st, true, nil
}

// InitScheduleState returns the schedule's state, creating it with the
// cursor at now when the schedule is new.
func (s *DB) InitScheduleState(ctx context.Context, name string, now time.Time) (store.ScheduleState, error) {
	var st store.ScheduleState
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var ok bool
		var err error
		if st, ok, err = lockSchedule(ctx, tx, name); err != nil || ok {
			return err
		}
		st = store.ScheduleState{Name: name, Cursor: now.UTC(), FirstSeen: now.UTC()}
		return putSchedule(ctx, tx, st)
	})
	if err != nil {
		return store.ScheduleState{}, fmt.Errorf("init schedule %s: %w", name, err)
	}
	return st, nil
}

// ClaimScheduleSlot records run, once per slot across replicas (see the
// embedded store's ClaimScheduleSlot for the rules).
func (s *DB) ClaimScheduleSlot(ctx context.Context, run store.ScheduleRun) (store.ScheduleState, error) {
	if run.Schedule == "" || run.Slot.IsZero() {
		return store.ScheduleState{}, errors.New("claim schedule slot: schedule and slot are required")
	}
	run.Slot = run.Slot.UTC()
	var st store.ScheduleState
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var ok bool
		var err error
		if st, ok, err = lockSchedule(ctx, tx, run.Schedule); err != nil {
			return err
		}
		if !ok {
			st = store.ScheduleState{Name: run.Schedule, FirstSeen: run.Slot}
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schedule_runs WHERE schedule = $1 AND slot_ns = $2 AND manual = $3)`,
			run.Schedule, run.Slot.UnixNano(), run.Trigger == store.TriggerManual).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return store.ErrSlotTaken
		}
		if run.Trigger != store.TriggerManual {
			if st.Paused {
				return store.ErrSchedulePaused
			}
			if !run.Slot.After(st.Cursor) {
				return store.ErrSlotTaken
			}
			st.Cursor = run.Slot
			if err := putSchedule(ctx, tx, st); err != nil {
				return err
			}
		}
		if err := putRun(ctx, tx, run, true); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM schedule_runs WHERE schedule = $1 AND (slot_ns, manual) IN (
			SELECT slot_ns, manual FROM schedule_runs WHERE schedule = $1
			ORDER BY slot_ns DESC, manual DESC OFFSET $2)`, run.Schedule, maxRunsPerSchedule)
		return err
	})
	if err != nil {
		return store.ScheduleState{}, fmt.Errorf("claim %s: %w", run.ID(), err)
	}
	return st, nil
}

// putRun inserts (fresh) or rewrites a run; a rewrite of a run that does
// not exist is store.ErrNotFound.
func putRun(ctx context.Context, tx pgx.Tx, run store.ScheduleRun, fresh bool) error {
	doc, err := json.Marshal(run)
	if err != nil {
		return err
	}
	if fresh {
		_, err = tx.Exec(ctx, `INSERT INTO schedule_runs (schedule, slot_ns, manual, state, doc) VALUES ($1, $2, $3, $4, $5)`,
			run.Schedule, run.Slot.UnixNano(), run.Trigger == store.TriggerManual, run.State, doc)
		return err
	}
	tag, err := tx.Exec(ctx, `UPDATE schedule_runs SET state = $4, doc = $5 WHERE schedule = $1 AND slot_ns = $2 AND manual = $3`,
		run.Schedule, run.Slot.UnixNano(), run.Trigger == store.TriggerManual, run.State, doc)
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return err
}

// UpdateScheduleRun rewrites a claimed run; it never claims a slot.
func (s *DB) UpdateScheduleRun(ctx context.Context, run store.ScheduleRun) error {
	run.Slot = run.Slot.UTC()
	if err := s.tx(ctx, func(tx pgx.Tx) error { return putRun(ctx, tx, run, false) }); err != nil {
		return fmt.Errorf("update %s: %w", run.ID(), err)
	}
	return nil
}

// ScheduleRuns returns up to limit runs of a schedule, newest slot first.
func (s *DB) ScheduleRuns(ctx context.Context, name string, limit int) ([]store.ScheduleRun, error) {
	if limit <= 0 {
		limit = maxRunsPerSchedule + 1
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM schedule_runs WHERE schedule = $1
		ORDER BY slot_ns DESC, manual DESC LIMIT $2`, name, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", name, err)
	}
	out, err := collectDocs[store.ScheduleRun](rows)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", name, err)
	}
	return out, nil
}

// collectDocs decodes each row's single doc column.
func collectDocs[T any](rows pgx.Rows) ([]T, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) {
		var v T
		var doc []byte
		if err := r.Scan(&doc); err != nil {
			return v, err
		}
		return v, json.Unmarshal(doc, &v)
	})
}

// InterruptScheduleRuns marks every unfinished run failed with reason and
// returns them (the scheduler's holder calls it when it takes over).
func (s *DB) InterruptScheduleRuns(ctx context.Context, now time.Time, reason string) ([]store.ScheduleRun, error) {
	var out []store.ScheduleRun
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT doc FROM schedule_runs
			WHERE state NOT IN ($1, $2, $3, $4) ORDER BY schedule, slot_ns, manual FOR UPDATE`,
			store.RunSucceeded, store.RunFailed, store.RunSkipped, store.RunMissed)
		if err != nil {
			return err
		}
		runs, err := collectDocs[store.ScheduleRun](rows)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, r := range runs {
			prev := r.State
			r.State, r.FinishedAt, r.Reason = store.RunFailed, now.UTC(), reason
			if prev == store.RunQueued {
				r.Reason = reason + " (before the run started)"
			}
			if err := putRun(ctx, tx, r, false); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("interrupt schedule runs: %w", err)
	}
	return out, nil
}

// RewindScheduleCursor moves a schedule's cursor back to `to`; slots with a
// record stay refused.
func (s *DB) RewindScheduleCursor(ctx context.Context, name string, to time.Time) (store.ScheduleState, error) {
	var st store.ScheduleState
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var ok bool
		var err error
		if st, ok, err = lockSchedule(ctx, tx, name); err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		if !to.Before(st.Cursor) {
			return nil
		}
		st.Cursor = to.UTC()
		return putSchedule(ctx, tx, st)
	})
	if err != nil {
		return store.ScheduleState{}, fmt.Errorf("rewind schedule %s: %w", name, err)
	}
	return st, nil
}

// SetSchedulePaused pauses or resumes a schedule (the embedded store's
// SetSchedulePaused has the rules).
func (s *DB) SetSchedulePaused(ctx context.Context, name string, paused bool, by string, now time.Time) (store.ScheduleState, error) {
	if name == "" {
		return store.ScheduleState{}, errors.New("pause schedule: name is required")
	}
	now = now.UTC()
	var st store.ScheduleState
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var ok bool
		var err error
		if st, ok, err = lockSchedule(ctx, tx, name); err != nil {
			return err
		}
		if !ok {
			st = store.ScheduleState{Name: name, Cursor: now, FirstSeen: now}
		}
		if !st.SetPaused(paused, by, now) && ok {
			return nil
		}
		return putSchedule(ctx, tx, st)
	})
	if err != nil {
		verb := "resume"
		if paused {
			verb = "pause"
		}
		return store.ScheduleState{}, fmt.Errorf("%s schedule %s: %w", verb, name, err)
	}
	return st, nil
}
