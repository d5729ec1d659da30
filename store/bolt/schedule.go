package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Schedule buckets. The schedule package owns their meaning.
var (
	bSchedules    = []byte("schedules")     // schedule name → ScheduleState
	bScheduleRuns = []byte("schedule_runs") // schedule name + 0 + be64(slot) + trigger byte → ScheduleRun
)

// maxRunsPerSchedule bounds the history kept per schedule; the oldest records
// are pruned in the claiming transaction.
const maxRunsPerSchedule = 200

func runPrefix(name string) []byte { return append([]byte(name), 0) }

func runKey(r store.ScheduleRun) []byte {
	k := runPrefix(r.Schedule)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(r.Slot.UnixNano()))
	k = append(k, b[:]...)
	if r.Trigger == store.TriggerManual {
		return append(k, 'm')
	}
	return append(k, 'c')
}

// ScheduleState returns the stored state of a schedule; ok is false when the
// schedule was never seen.
func (s *DB) ScheduleState(ctx context.Context, name string) (st store.ScheduleState, ok bool, err error) {
	err = s.bolt.View(func(tx *bbolt.Tx) error {
		err := getJSON(tx.Bucket(bSchedules), []byte(name), &st)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err != nil {
		return store.ScheduleState{}, false, fmt.Errorf("read schedule %s: %w", name, err)
	}
	return st, ok, nil
}

// InitScheduleState returns the schedule's state, creating it with the cursor
// at now when the schedule is new (so that a new schedule never fires for
// slots before it was configured).
func (s *DB) InitScheduleState(ctx context.Context, name string, now time.Time) (store.ScheduleState, error) {
	var st store.ScheduleState
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSchedules)
		err := getJSON(b, []byte(name), &st)
		if err == nil || !errors.Is(err, store.ErrNotFound) {
			return err
		}
		st = store.ScheduleState{Name: name, Cursor: now.UTC(), FirstSeen: now.UTC()}
		return putJSON(b, []byte(name), st)
	})
	if err != nil {
		return store.ScheduleState{}, fmt.Errorf("init schedule %s: %w", name, err)
	}
	return st, nil
}

// ClaimScheduleSlot records run in one durable transaction. For a cron or
// catch-up run it fails with ErrSchedulePaused while the schedule is paused,
// and with ErrSlotTaken when the slot is at or before the
// schedule's cursor or already has a record, and otherwise moves the cursor
// to the slot in the same transaction. A manual run only needs its own key to
// be free. The caller starts the turn only after this returns nil.
func (s *DB) ClaimScheduleSlot(ctx context.Context, run store.ScheduleRun) (store.ScheduleState, error) {
	if run.Schedule == "" || run.Slot.IsZero() {
		return store.ScheduleState{}, errors.New("claim schedule slot: schedule and slot are required")
	}
	run.Slot = run.Slot.UTC()
	var st store.ScheduleState
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		sb, rb := tx.Bucket(bSchedules), tx.Bucket(bScheduleRuns)
		err := getJSON(sb, []byte(run.Schedule), &st)
		if errors.Is(err, store.ErrNotFound) {
			st = store.ScheduleState{Name: run.Schedule, FirstSeen: run.Slot}
		} else if err != nil {
			return err
		}
		key := runKey(run)
		if rb.Get(key) != nil {
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
			if err := putJSON(sb, []byte(run.Schedule), st); err != nil {
				return err
			}
		}
		if err := putJSON(rb, key, run); err != nil {
			return err
		}
		return pruneRuns(rb, run.Schedule)
	})
	if err != nil {
		return store.ScheduleState{}, fmt.Errorf("claim %s: %w", run.ID(), err)
	}
	return st, nil
}

func pruneRuns(rb *bbolt.Bucket, name string) error {
	prefix := runPrefix(name)
	c := rb.Cursor()
	n := 0
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	if n <= maxRunsPerSchedule {
		return nil
	}
	var old [][]byte
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(old) < n-maxRunsPerSchedule; k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := rb.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// UpdateScheduleRun rewrites a claimed run (state, attempts, outcome). The run
// must exist: an update never claims a slot.
func (s *DB) UpdateScheduleRun(ctx context.Context, run store.ScheduleRun) error {
	run.Slot = run.Slot.UTC()
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		rb := tx.Bucket(bScheduleRuns)
		key := runKey(run)
		if rb.Get(key) == nil {
			return store.ErrNotFound
		}
		return putJSON(rb, key, run)
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", run.ID(), err)
	}
	return nil
}

// ScheduleRuns returns up to limit runs of a schedule, newest slot first.
func (s *DB) ScheduleRuns(ctx context.Context, name string, limit int) ([]store.ScheduleRun, error) {
	var out []store.ScheduleRun
	prefix := runPrefix(name)
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bScheduleRuns).Cursor()
		// Seek past the prefix, then walk back.
		end := append(append([]byte(nil), prefix...), 0xff)
		k, v := c.Seek(end)
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if limit > 0 && len(out) >= limit {
				break
			}
			var r store.ScheduleRun
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode run %x: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", name, err)
	}
	return out, nil
}

// InterruptScheduleRuns marks every run left queued, running or retrying by a
// previous process as failed with reason, and returns them. It is called once
// at start-up, before any slot is claimed: the slots stay claimed, so an
// interrupted run is never started again (at most once per slot).
func (s *DB) InterruptScheduleRuns(ctx context.Context, now time.Time, reason string) ([]store.ScheduleRun, error) {
	var out []store.ScheduleRun
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		out = out[:0]
		rb := tx.Bucket(bScheduleRuns)
		type kv struct {
			k []byte
			r store.ScheduleRun
		}
		var todo []kv
		err := rb.ForEach(func(k, v []byte) error {
			var r store.ScheduleRun
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode run %x: %w", k, err)
			}
			if !r.Finished() {
				todo = append(todo, kv{append([]byte(nil), k...), r})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, t := range todo {
			r := t.r
			prev := r.State
			r.State = store.RunFailed
			r.FinishedAt = now.UTC()
			if prev == store.RunQueued {
				r.Reason = reason + " (before the run started)"
			} else {
				r.Reason = reason
			}
			if err := putJSON(rb, t.k, r); err != nil {
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

// RewindScheduleCursor moves a schedule's cursor back to `to` (the wall clock
// went back past it). Slots after `to` become claimable again only if they
// have no record: a slot that ran, was skipped or missed keeps its record
// and stays refused, so rewinding never fires a slot twice.
func (s *DB) RewindScheduleCursor(ctx context.Context, name string, to time.Time) (store.ScheduleState, error) {
	var st store.ScheduleState
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSchedules)
		if err := getJSON(b, []byte(name), &st); err != nil {
			return err
		}
		if !to.Before(st.Cursor) {
			return nil
		}
		st.Cursor = to.UTC()
		return putJSON(b, []byte(name), st)
	})
	if err != nil {
		return store.ScheduleState{}, fmt.Errorf("rewind schedule %s: %w", name, err)
	}
	return st, nil
}

// SetSchedulePaused pauses (paused true) or resumes a schedule, creating its
// state with the cursor at now when the schedule is new. Pausing an already
// paused schedule keeps the first PausedAt and PausedBy. Resuming moves the
// cursor forward to now, in the same transaction, so that the slots that came
// due while the schedule was paused are skipped rather than caught up: the
// next slot claimed is the first after the resumption. Resuming a schedule
// that is not paused changes nothing.
func (s *DB) SetSchedulePaused(ctx context.Context, name string, paused bool, by string, now time.Time) (store.ScheduleState, error) {
	if name == "" {
		return store.ScheduleState{}, errors.New("pause schedule: name is required")
	}
	now = now.UTC()
	var st store.ScheduleState
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSchedules)
		err := getJSON(b, []byte(name), &st)
		if errors.Is(err, store.ErrNotFound) {
			st = store.ScheduleState{Name: name, Cursor: now, FirstSeen: now}
		} else if err != nil {
			return err
		}
		if !st.SetPaused(paused, by, now) && err == nil {
			return nil
		}
		return putJSON(b, []byte(name), st)
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
