package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Schedule buckets. The schedule package owns their meaning.
var (
	bSchedules    = []byte("schedules")     // schedule name → ScheduleState
	bScheduleRuns = []byte("schedule_runs") // schedule name + 0 + be64(slot) + trigger byte → ScheduleRun
)

// Schedule run states.
const (
	RunQueued    = "queued"    // claimed; waits for the schedule's previous run (overlap: queue)
	RunRunning   = "running"   // claimed; the turn is in progress
	RunRetrying  = "retrying"  // an attempt failed; another follows after the retry delay
	RunSucceeded = "succeeded" // the result envelope was enqueued
	RunFailed    = "failed"    // every attempt failed, or the run was interrupted
	RunSkipped   = "skipped"   // the slot came while the previous run was still going (overlap: skip)
	RunMissed    = "missed"    // the slot passed while beachd was down (catch_up: skip)
)

// Run triggers. A cron and a catch-up run share the slot's identity (key
// byte 'c'); a manual run has its own ('m'), so that an operator's "run now"
// never takes a cron slot away.
const (
	TriggerCron    = "cron"
	TriggerCatchUp = "catch-up"
	TriggerManual  = "manual"
)

// ErrSlotTaken: the slot was already claimed (or lies at or before the
// schedule's cursor). It is how the store enforces "once per slot".
var ErrSlotTaken = errors.New("schedule slot already claimed")

// ErrSchedulePaused: a cron or catch-up slot was refused because an operator
// paused the schedule. A manual run is not refused.
var ErrSchedulePaused = errors.New("schedule is paused")

// maxRunsPerSchedule bounds the history kept per schedule; the oldest records
// are pruned in the claiming transaction.
const maxRunsPerSchedule = 200

// ScheduleState is what survives a restart about a schedule.
type ScheduleState struct {
	Name string `json:"name"`
	// Cursor is the latest cron slot claimed (run, skipped or missed), or the
	// instant the schedule was first seen. Slots at or before it are never
	// claimed again.
	Cursor    time.Time `json:"cursor"`
	FirstSeen time.Time `json:"firstSeen"`
	// Paused: an operator paused the schedule; no cron slot is claimed until
	// it is resumed. PausedAt and PausedBy (the API key's name, or "console")
	// say since when and by whom. Records written before these fields existed
	// decode as not paused.
	Paused   bool      `json:"paused,omitempty"`
	PausedAt time.Time `json:"pausedAt,omitzero"`
	PausedBy string    `json:"pausedBy,omitempty"`
}

// ScheduleRun is one claimed slot of a schedule and what became of it.
type ScheduleRun struct {
	Schedule string    `json:"schedule"`
	Slot     time.Time `json:"slot"`
	Trigger  string    `json:"trigger"`
	State    string    `json:"state"`
	// Reason says why the run failed, was skipped or missed.
	Reason     string    `json:"reason,omitempty"`
	Attempts   int       `json:"attempts"`
	ClaimedAt  time.Time `json:"claimedAt"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	ContextID  string    `json:"contextId,omitempty"`
	TaskID     string    `json:"taskId,omitempty"`
	EnvelopeID string    `json:"envelopeId,omitempty"`
	// ErrorNoticeID is the envelope id of the error notice sent for a failed run.
	ErrorNoticeID string `json:"errorNoticeId,omitempty"`
}

// ID names the run: schedule@slot (RFC 3339, UTC), with "/manual" for an
// operator's run.
func (r ScheduleRun) ID() string {
	id := r.Schedule + "@" + r.Slot.UTC().Format(time.RFC3339Nano)
	if r.Trigger == TriggerManual {
		id += "/manual"
	}
	return id
}

// Finished reports whether the run reached a final state.
func (r ScheduleRun) Finished() bool {
	switch r.State {
	case RunSucceeded, RunFailed, RunSkipped, RunMissed:
		return true
	}
	return false
}

func runPrefix(name string) []byte { return append([]byte(name), 0) }

func runKey(r ScheduleRun) []byte {
	k := runPrefix(r.Schedule)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(r.Slot.UnixNano()))
	k = append(k, b[:]...)
	if r.Trigger == TriggerManual {
		return append(k, 'm')
	}
	return append(k, 'c')
}

// ScheduleState returns the stored state of a schedule; ok is false when the
// schedule was never seen.
func (s *DB) ScheduleState(ctx context.Context, name string) (st ScheduleState, ok bool, err error) {
	err = s.bolt.View(func(tx *bolt.Tx) error {
		err := getJSON(tx.Bucket(bSchedules), []byte(name), &st)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err != nil {
		return ScheduleState{}, false, fmt.Errorf("read schedule %s: %w", name, err)
	}
	return st, ok, nil
}

// InitScheduleState returns the schedule's state, creating it with the cursor
// at now when the schedule is new (so that a new schedule never fires for
// slots before it was configured).
func (s *DB) InitScheduleState(ctx context.Context, name string, now time.Time) (ScheduleState, error) {
	var st ScheduleState
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bSchedules)
		err := getJSON(b, []byte(name), &st)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return err
		}
		st = ScheduleState{Name: name, Cursor: now.UTC(), FirstSeen: now.UTC()}
		return putJSON(b, []byte(name), st)
	})
	if err != nil {
		return ScheduleState{}, fmt.Errorf("init schedule %s: %w", name, err)
	}
	return st, nil
}

// ClaimScheduleSlot records run in one durable transaction. For a cron or
// catch-up run it fails with ErrSchedulePaused while the schedule is paused,
// and with ErrSlotTaken when the slot is at or before the
// schedule's cursor or already has a record, and otherwise moves the cursor
// to the slot in the same transaction. A manual run only needs its own key to
// be free. The caller starts the turn only after this returns nil.
func (s *DB) ClaimScheduleSlot(ctx context.Context, run ScheduleRun) (ScheduleState, error) {
	if run.Schedule == "" || run.Slot.IsZero() {
		return ScheduleState{}, errors.New("claim schedule slot: schedule and slot are required")
	}
	run.Slot = run.Slot.UTC()
	var st ScheduleState
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		sb, rb := tx.Bucket(bSchedules), tx.Bucket(bScheduleRuns)
		err := getJSON(sb, []byte(run.Schedule), &st)
		if errors.Is(err, ErrNotFound) {
			st = ScheduleState{Name: run.Schedule, FirstSeen: run.Slot}
		} else if err != nil {
			return err
		}
		key := runKey(run)
		if rb.Get(key) != nil {
			return ErrSlotTaken
		}
		if run.Trigger != TriggerManual {
			if st.Paused {
				return ErrSchedulePaused
			}
			if !run.Slot.After(st.Cursor) {
				return ErrSlotTaken
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
		return ScheduleState{}, fmt.Errorf("claim %s: %w", run.ID(), err)
	}
	return st, nil
}

func pruneRuns(rb *bolt.Bucket, name string) error {
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
func (s *DB) UpdateScheduleRun(ctx context.Context, run ScheduleRun) error {
	run.Slot = run.Slot.UTC()
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bScheduleRuns)
		key := runKey(run)
		if rb.Get(key) == nil {
			return ErrNotFound
		}
		return putJSON(rb, key, run)
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", run.ID(), err)
	}
	return nil
}

// ScheduleRuns returns up to limit runs of a schedule, newest slot first.
func (s *DB) ScheduleRuns(ctx context.Context, name string, limit int) ([]ScheduleRun, error) {
	var out []ScheduleRun
	prefix := runPrefix(name)
	err := s.bolt.View(func(tx *bolt.Tx) error {
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
			var r ScheduleRun
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
func (s *DB) InterruptScheduleRuns(ctx context.Context, now time.Time, reason string) ([]ScheduleRun, error) {
	var out []ScheduleRun
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		out = out[:0]
		rb := tx.Bucket(bScheduleRuns)
		type kv struct {
			k []byte
			r ScheduleRun
		}
		var todo []kv
		err := rb.ForEach(func(k, v []byte) error {
			var r ScheduleRun
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
			r.State = RunFailed
			r.FinishedAt = now.UTC()
			if prev == RunQueued {
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
func (s *DB) RewindScheduleCursor(ctx context.Context, name string, to time.Time) (ScheduleState, error) {
	var st ScheduleState
	err := s.bolt.Update(func(tx *bolt.Tx) error {
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
		return ScheduleState{}, fmt.Errorf("rewind schedule %s: %w", name, err)
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
func (s *DB) SetSchedulePaused(ctx context.Context, name string, paused bool, by string, now time.Time) (ScheduleState, error) {
	if name == "" {
		return ScheduleState{}, errors.New("pause schedule: name is required")
	}
	now = now.UTC()
	var st ScheduleState
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bSchedules)
		err := getJSON(b, []byte(name), &st)
		if errors.Is(err, ErrNotFound) {
			st = ScheduleState{Name: name, Cursor: now, FirstSeen: now}
		} else if err != nil {
			return err
		}
		switch {
		case paused && st.Paused, !paused && !st.Paused:
			if err == nil {
				return nil
			}
		case paused:
			st.Paused, st.PausedAt, st.PausedBy = true, now, by
		default:
			st.Paused, st.PausedAt, st.PausedBy = false, time.Time{}, ""
			if st.Cursor.Before(now) {
				st.Cursor = now
			}
		}
		return putJSON(b, []byte(name), st)
	})
	if err != nil {
		verb := "resume"
		if paused {
			verb = "pause"
		}
		return ScheduleState{}, fmt.Errorf("%s schedule %s: %w", verb, name, err)
	}
	return st, nil
}
