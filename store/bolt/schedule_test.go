package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

func openScheduleDB(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return db
}

func TestClaimScheduleSlotOnceAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "beachd.db")
	db := openScheduleDB(t, path)
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := db.InitScheduleState(ctx, "brief", t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	run := store.ScheduleRun{Schedule: "brief", Slot: t0, Trigger: store.TriggerCron, State: store.RunRunning, ClaimedAt: t0}
	st, err := db.ClaimScheduleSlot(ctx, run)
	if err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if !st.Cursor.Equal(t0) {
		t.Fatalf("cursor = %v, want %v", st.Cursor, t0)
	}
	if _, err := db.ClaimScheduleSlot(ctx, run); !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("second claim: err = %v, want ErrSlotTaken", err)
	}
	db.Close()

	db = openScheduleDB(t, path)
	defer db.Close()
	// Same slot after a restart, also as a catch-up: refused.
	run.Trigger = store.TriggerCatchUp
	if _, err := db.ClaimScheduleSlot(ctx, run); !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("claim after reopen: err = %v, want ErrSlotTaken", err)
	}
	// An earlier slot (the clock went back): refused by the cursor.
	early := store.ScheduleRun{Schedule: "brief", Slot: t0.Add(-time.Minute), Trigger: store.TriggerCron, State: store.RunRunning}
	if _, err := db.ClaimScheduleSlot(ctx, early); !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("claim before cursor: err = %v, want ErrSlotTaken", err)
	}
	// A manual run at the very same instant has its own identity.
	man := store.ScheduleRun{Schedule: "brief", Slot: t0, Trigger: store.TriggerManual, State: store.RunRunning}
	if _, err := db.ClaimScheduleSlot(ctx, man); err != nil {
		t.Fatalf("manual claim: %v", err)
	}
	st, ok, err := db.ScheduleState(ctx, "brief")
	if err != nil || !ok || !st.Cursor.Equal(t0) {
		t.Fatalf("state = %+v %v %v; manual run must not move the cursor", st, ok, err)
	}
	// The next slot is free.
	next := store.ScheduleRun{Schedule: "brief", Slot: t0.Add(24 * time.Hour), Trigger: store.TriggerCron, State: store.RunRunning}
	if _, err := db.ClaimScheduleSlot(ctx, next); err != nil {
		t.Fatalf("next slot: %v", err)
	}
}

func TestScheduleRunsNewestFirstAndPerSchedule(t *testing.T) {
	ctx := context.Background()
	db := openScheduleDB(t, filepath.Join(t.TempDir(), "b.db"))
	defer db.Close()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	for i := range 3 {
		for _, name := range []string{"a", "ab", "b"} {
			r := store.ScheduleRun{Schedule: name, Slot: t0.Add(time.Duration(i) * time.Hour), Trigger: store.TriggerCron, State: store.RunSucceeded}
			if _, err := db.ClaimScheduleSlot(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs, err := db.ScheduleRuns(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("runs of a = %d, want 3 (prefix must not match ab)", len(runs))
	}
	for i, r := range runs {
		want := t0.Add(time.Duration(2-i) * time.Hour)
		if r.Schedule != "a" || !r.Slot.Equal(want) {
			t.Fatalf("runs[%d] = %s %v, want a %v", i, r.Schedule, r.Slot, want)
		}
	}
	runs, _ = db.ScheduleRuns(ctx, "b", 1)
	if len(runs) != 1 || !runs[0].Slot.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("latest of b = %+v", runs)
	}
	runs, _ = db.ScheduleRuns(ctx, "nope", 0)
	if len(runs) != 0 {
		t.Fatalf("unknown schedule has runs: %+v", runs)
	}
}

func TestScheduleRunsPruned(t *testing.T) {
	ctx := context.Background()
	db := openScheduleDB(t, filepath.Join(t.TempDir(), "p.db"))
	defer db.Close()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxRunsPerSchedule + 5 {
		r := store.ScheduleRun{Schedule: "s", Slot: t0.Add(time.Duration(i) * time.Minute), Trigger: store.TriggerCron, State: store.RunSkipped}
		if _, err := db.ClaimScheduleSlot(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	runs, _ := db.ScheduleRuns(ctx, "s", 0)
	if len(runs) != maxRunsPerSchedule {
		t.Fatalf("kept %d runs, want %d", len(runs), maxRunsPerSchedule)
	}
	if !runs[len(runs)-1].Slot.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("oldest kept = %v, want the 6th", runs[len(runs)-1].Slot)
	}
	// Pruning never reopens a slot: the cursor still refuses the first one.
	r := store.ScheduleRun{Schedule: "s", Slot: t0, Trigger: store.TriggerCron, State: store.RunRunning}
	if _, err := db.ClaimScheduleSlot(ctx, r); !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("pruned slot claimed again: %v", err)
	}
}

func TestInterruptScheduleRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "i.db")
	db := openScheduleDB(t, path)
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	for i, state := range []string{store.RunRunning, store.RunQueued, store.RunSucceeded, store.RunRetrying} {
		r := store.ScheduleRun{Schedule: "s", Slot: t0.Add(time.Duration(i) * time.Hour), Trigger: store.TriggerCron, State: state}
		if _, err := db.ClaimScheduleSlot(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	db = openScheduleDB(t, path)
	defer db.Close()
	got, err := db.InterruptScheduleRuns(ctx, t0.Add(5*time.Hour), "interrupted")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("interrupted %d runs, want 3", len(got))
	}
	runs, _ := db.ScheduleRuns(ctx, "s", 0)
	for _, r := range runs {
		if !r.Finished() {
			t.Fatalf("run %s still %s", r.ID(), r.State)
		}
	}
	if runs[1].State != store.RunSucceeded {
		t.Fatalf("succeeded run rewritten: %+v", runs[1])
	}
	if runs[3].State != store.RunFailed || runs[3].Reason != "interrupted" {
		t.Fatalf("running run = %+v", runs[3])
	}
	// Updating a run that was never claimed is refused.
	if err := db.UpdateScheduleRun(ctx, store.ScheduleRun{Schedule: "s", Slot: t0.Add(time.Minute), Trigger: store.TriggerCron}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of unclaimed run: %v", err)
	}
}

func TestSchedulePausedRefusesCronClaimsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "beachd.db")
	db := openScheduleDB(t, path)
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := db.InitScheduleState(ctx, "brief", t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	st, err := db.SetSchedulePaused(ctx, "brief", true, "ops", t0.Add(-30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Paused || st.PausedBy != "ops" || !st.PausedAt.Equal(t0.Add(-30*time.Minute)) {
		t.Fatalf("paused state = %+v", st)
	}
	// Pausing again keeps since when and by whom.
	if st, err = db.SetSchedulePaused(ctx, "brief", true, "other", t0.Add(-10*time.Minute)); err != nil || st.PausedBy != "ops" {
		t.Fatalf("second pause: %+v, %v", st, err)
	}
	cron := store.ScheduleRun{Schedule: "brief", Slot: t0, Trigger: store.TriggerCron, State: store.RunRunning, ClaimedAt: t0}
	if _, err := db.ClaimScheduleSlot(ctx, cron); !errors.Is(err, store.ErrSchedulePaused) {
		t.Fatalf("cron claim while paused: err = %v, want ErrSchedulePaused", err)
	}
	manual := store.ScheduleRun{Schedule: "brief", Slot: t0, Trigger: store.TriggerManual, State: store.RunRunning, ClaimedAt: t0}
	if _, err := db.ClaimScheduleSlot(ctx, manual); err != nil {
		t.Fatalf("manual claim while paused: %v", err)
	}
	db.Close()

	db = openScheduleDB(t, path)
	defer db.Close()
	st, ok, err := db.ScheduleState(ctx, "brief")
	if err != nil || !ok || !st.Paused || st.PausedBy != "ops" {
		t.Fatalf("after reopen: %+v ok=%v err=%v", st, ok, err)
	}
	if _, err := db.ClaimScheduleSlot(ctx, cron); !errors.Is(err, store.ErrSchedulePaused) {
		t.Fatalf("cron claim after reopen: err = %v, want ErrSchedulePaused", err)
	}
	// Resuming after the slot skips it: the cursor moves to the resumption.
	resumed := t0.Add(5 * time.Minute)
	st, err = db.SetSchedulePaused(ctx, "brief", false, "ops", resumed)
	if err != nil {
		t.Fatal(err)
	}
	if st.Paused || !st.PausedAt.IsZero() || st.PausedBy != "" || !st.Cursor.Equal(resumed) {
		t.Fatalf("resumed state = %+v", st)
	}
	if _, err := db.ClaimScheduleSlot(ctx, cron); !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("slot that came due while paused: err = %v, want ErrSlotTaken", err)
	}
	next := cron
	next.Slot = t0.Add(time.Hour)
	if _, err := db.ClaimScheduleSlot(ctx, next); err != nil {
		t.Fatalf("next slot after resume: %v", err)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestScheduleStateWithoutPausedFieldsDecodes(t *testing.T) {
	ctx := context.Background()
	db := openScheduleDB(t, filepath.Join(t.TempDir(), "beachd.db"))
	defer db.Close()
	old := []byte(`{"name":"brief","cursor":"2026-03-01T08:00:00Z","firstSeen":"2026-03-01T07:00:00Z"}`)
	if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bSchedules).Put([]byte("brief"), old) }); err != nil {
		t.Fatal(err)
	}
	st, ok, err := db.ScheduleState(ctx, "brief")
	if err != nil || !ok || st.Paused || !st.Cursor.Equal(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("old record: %+v ok=%v err=%v", st, ok, err)
	}
}
