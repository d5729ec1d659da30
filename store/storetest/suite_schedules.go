package storetest

import (
	"strings"
	"time"

	"github.com/cool-ai/beachd/store"
)

// scheduleCases are the schedules' cursors and runs: once per slot.
var scheduleCases = []testCase{
	{"schedule/a new schedule's cursor starts at now", scheduleInit},
	{"schedule/a slot is claimed once; slots at or before the cursor are refused; manual runs have their own", scheduleClaimOnce},
	{"schedule/runs are listed newest first and updated in place", scheduleRuns},
	{"schedule/interrupt fails the runs left unfinished, once", scheduleInterrupt},
	{"schedule/pause refuses cron slots, resume skips the slots paused over", schedulePause},
	{"schedule/rewind makes only slots without a record claimable again", scheduleRewind},
}

// run is a cron run of schedule "daily" at slot, running.
func run(slot time.Time) store.ScheduleRun {
	return store.ScheduleRun{Schedule: "daily", Slot: slot, Trigger: store.TriggerCron, State: store.RunRunning, ClaimedAt: slot}
}

// claimSlot claims r and fails the case on an error.
func (e *env) claimSlot(r store.ScheduleRun) store.ScheduleState {
	e.t.Helper()
	st, err := e.s.ClaimScheduleSlot(e.ctx, r)
	e.ok(err, "claim "+r.ID())
	return st
}

func scheduleInit(e *env) {
	if _, ok, err := e.s.ScheduleState(e.ctx, "daily"); err != nil || ok {
		e.t.Fatalf("state of an unknown schedule: ok %v, %v", ok, err)
	}
	st, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	e.sameTime(st.Cursor, start, "cursor")
	e.sameTime(st.FirstSeen, start, "first seen")
	again, err := e.s.InitScheduleState(e.ctx, "daily", start.Add(time.Hour))
	e.ok(err, "init again")
	e.sameTime(again.Cursor, start, "cursor after a second init")
	read, ok, err := e.s.ScheduleState(e.ctx, "daily")
	e.ok(err, "read state")
	if !ok || read.Name != "daily" || read.Paused {
		e.t.Fatalf("state %+v, ok %v", read, ok)
	}
	e.sameTime(read.Cursor, start, "stored cursor")
}

func scheduleClaimOnce(e *env) {
	_, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	slot := start.Add(time.Minute)
	st := e.claimSlot(run(slot))
	e.sameTime(st.Cursor, slot, "cursor after the claim")
	_, err = e.s.ClaimScheduleSlot(e.ctx, run(slot))
	e.is(err, store.ErrSlotTaken, "same slot again")
	_, err = e.s.ClaimScheduleSlot(e.ctx, run(start.Add(30*time.Second)))
	e.is(err, store.ErrSlotTaken, "slot before the cursor")
	catchUp := run(slot)
	catchUp.Trigger = store.TriggerCatchUp
	_, err = e.s.ClaimScheduleSlot(e.ctx, catchUp)
	e.is(err, store.ErrSlotTaken, "catch-up of a cron slot")
	manual := run(slot)
	manual.Trigger = store.TriggerManual
	e.claimSlot(manual)
	_, err = e.s.ClaimScheduleSlot(e.ctx, manual)
	e.is(err, store.ErrSlotTaken, "same manual run again")
	if runs, _ := e.s.ScheduleRuns(e.ctx, "daily", 0); len(runs) != 2 {
		e.t.Fatalf("%d runs, want the cron and the manual run", len(runs))
	}
}

func scheduleRuns(e *env) {
	_, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	for i := 1; i <= 3; i++ {
		e.claimSlot(run(start.Add(time.Duration(i) * time.Hour)))
	}
	runs, err := e.s.ScheduleRuns(e.ctx, "daily", 2)
	e.ok(err, "list runs")
	if len(runs) != 2 || !runs[0].Slot.Equal(start.Add(3*time.Hour)) || !runs[1].Slot.Equal(start.Add(2*time.Hour)) {
		e.t.Fatalf("runs %+v, want the two newest, newest first", runs)
	}
	done := runs[0]
	done.State, done.Attempts, done.EnvelopeID, done.FinishedAt = store.RunSucceeded, 1, "env_1", start.Add(3*time.Hour+time.Minute)
	e.ok(e.s.UpdateScheduleRun(e.ctx, done), "update run")
	runs, _ = e.s.ScheduleRuns(e.ctx, "daily", 0)
	if len(runs) != 3 || runs[0].State != store.RunSucceeded || runs[0].EnvelopeID != "env_1" || runs[0].Attempts != 1 {
		e.t.Fatalf("runs after the update %+v", runs)
	}
	e.is(e.s.UpdateScheduleRun(e.ctx, run(start.Add(5*time.Hour))), store.ErrNotFound, "update of an unclaimed slot")
	if other, _ := e.s.ScheduleRuns(e.ctx, "weekly", 0); len(other) != 0 {
		e.t.Fatalf("another schedule lists %d runs", len(other))
	}
}

func scheduleInterrupt(e *env) {
	_, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	running, queued, succeeded := run(start.Add(time.Hour)), run(start.Add(2*time.Hour)), run(start.Add(3*time.Hour))
	queued.State, succeeded.State = store.RunQueued, store.RunSucceeded
	for _, r := range []store.ScheduleRun{running, queued, succeeded} {
		e.claimSlot(r)
	}
	e.advance(4 * time.Hour)
	got, err := e.s.InterruptScheduleRuns(e.ctx, e.now(), "beachd restarted")
	e.ok(err, "interrupt")
	if len(got) != 2 {
		e.t.Fatalf("interrupted %+v, want the running and the queued run", got)
	}
	for _, r := range got {
		if r.State != store.RunFailed || !strings.HasPrefix(r.Reason, "beachd restarted") || r.Slot.Equal(succeeded.Slot) {
			e.t.Fatalf("interrupted run %+v", r)
		}
		e.sameTime(r.FinishedAt, e.now(), "finished at")
	}
	runs, _ := e.s.ScheduleRuns(e.ctx, "daily", 0)
	for _, r := range runs {
		if !r.Finished() {
			e.t.Fatalf("run left unfinished: %+v", r)
		}
	}
	if again, _ := e.s.InterruptScheduleRuns(e.ctx, e.now(), "again"); len(again) != 0 {
		e.t.Fatalf("second interrupt found %+v", again)
	}
	_, err = e.s.ClaimScheduleSlot(e.ctx, run(running.Slot))
	e.is(err, store.ErrSlotTaken, "an interrupted slot again")
}

func schedulePause(e *env) {
	_, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	st, err := e.s.SetSchedulePaused(e.ctx, "daily", true, "ops", e.now())
	e.ok(err, "pause")
	if !st.Paused || st.PausedBy != "ops" {
		e.t.Fatalf("paused state %+v", st)
	}
	e.sameTime(st.PausedAt, start, "paused at")
	e.advance(time.Hour)
	st, err = e.s.SetSchedulePaused(e.ctx, "daily", true, "other", e.now())
	e.ok(err, "pause again")
	if st.PausedBy != "ops" || !st.PausedAt.Equal(start) {
		e.t.Fatalf("pausing again changed %+v", st)
	}
	_, err = e.s.ClaimScheduleSlot(e.ctx, run(start.Add(time.Minute)))
	e.is(err, store.ErrSchedulePaused, "cron slot while paused")
	manual := run(start.Add(time.Minute))
	manual.Trigger = store.TriggerManual
	e.claimSlot(manual)
	e.advance(time.Hour)
	st, err = e.s.SetSchedulePaused(e.ctx, "daily", false, "ops", e.now())
	e.ok(err, "resume")
	if st.Paused || st.PausedBy != "" {
		e.t.Fatalf("resumed state %+v", st)
	}
	e.sameTime(st.Cursor, e.now(), "cursor after resuming")
	_, err = e.s.ClaimScheduleSlot(e.ctx, run(e.now().Add(-time.Minute)))
	e.is(err, store.ErrSlotTaken, "slot paused over")
	e.claimSlot(run(e.now().Add(time.Minute)))
	// A schedule never seen is created by a pause.
	st, err = e.s.SetSchedulePaused(e.ctx, "weekly", true, "ops", e.now())
	e.ok(err, "pause a new schedule")
	if !st.Paused {
		e.t.Fatalf("new schedule paused: %+v", st)
	}
	e.sameTime(st.Cursor, e.now(), "new paused schedule's cursor")
}

func scheduleRewind(e *env) {
	_, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	for i := 1; i <= 3; i++ {
		e.claimSlot(run(start.Add(time.Duration(i) * time.Minute)))
	}
	to := start.Add(90 * time.Second)
	st, err := e.s.RewindScheduleCursor(e.ctx, "daily", to)
	e.ok(err, "rewind")
	e.sameTime(st.Cursor, to, "cursor after rewinding")
	_, err = e.s.ClaimScheduleSlot(e.ctx, run(start.Add(2*time.Minute)))
	e.is(err, store.ErrSlotTaken, "rewound slot that ran")
	e.claimSlot(run(start.Add(150 * time.Second)))
	st, err = e.s.RewindScheduleCursor(e.ctx, "daily", start.Add(time.Hour))
	e.ok(err, "rewind forwards")
	e.sameTime(st.Cursor, start.Add(150*time.Second), "cursor after a rewind forwards")
	_, err = e.s.RewindScheduleCursor(e.ctx, "weekly", start)
	e.is(err, store.ErrNotFound, "rewind of an unknown schedule")
}
