package schedule

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// A paused schedule fires no slot, keeps its pause across a restart, and
// after Resume fires the next slot, not the ones that came due while paused.
func TestPauseSkipsSlotsAcrossRestartAndResumeFiresNext(t *testing.T) {
	ctx := context.Background()
	t0 := utc("2026-03-02T07:00:00Z")
	d := def("brief", "0 8 * * *")
	h := newHarness(t, t0, d)
	h.at(t0)
	st, err := h.s.Pause(ctx, "brief", "ops-key")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Paused || st.PausedBy != "ops-key" || !st.PausedAt.Equal(t0) || !st.Next.IsZero() {
		t.Fatalf("status after Pause = %+v", st)
	}
	if next := h.at(utc("2026-03-02T08:00:00.2Z")); !next.IsZero() {
		t.Fatalf("paused schedule reports next %v", next)
	}
	h.at(utc("2026-03-02T08:00:30Z"))
	if c := h.agents.Calls(); len(c) != 0 {
		t.Fatalf("paused schedule fired: %+v", c)
	}

	// A restart keeps it paused, past the next day's slot too.
	h.close()
	h.open(d)
	h.at(utc("2026-03-03T08:00:00.1Z"))
	if c := h.agents.Calls(); len(c) != 0 {
		t.Fatalf("paused schedule fired after a restart: %+v", c)
	}
	list, err := h.s.List(ctx)
	if err != nil || len(list) != 1 || !list[0].Paused || list[0].PausedBy != "ops-key" {
		t.Fatalf("List after restart = %+v, %v", list, err)
	}
	if got := h.states("brief"); got != "" {
		t.Fatalf("runs while paused = %q, want none", got)
	}

	// Resumed after the 3rd's slot: that slot is skipped, the 4th's fires.
	h.clock.Set(utc("2026-03-03T09:00:00Z"))
	st, err = h.s.Resume(ctx, "brief", "ops-key")
	if err != nil {
		t.Fatal(err)
	}
	if st.Paused || !st.PausedAt.IsZero() || !st.Next.Equal(utc("2026-03-04T08:00:00Z")) {
		t.Fatalf("status after Resume = %+v", st)
	}
	if next := h.at(utc("2026-03-03T09:00:01Z")); !next.Equal(utc("2026-03-04T08:00:00Z")) {
		t.Fatalf("next after Resume = %v", next)
	}
	if c := h.agents.Calls(); len(c) != 0 {
		t.Fatalf("a slot that came due while paused was caught up: %+v", c)
	}
	h.at(utc("2026-03-04T08:00:00.1Z"))
	h.turns(1)
	h.idle()
	if got := h.states("brief"); got != "03-04T08:00:succeeded" {
		t.Fatalf("runs = %q", got)
	}
}

// A tick that read the schedule as running before Pause was written cannot
// fire a slot once Pause has returned: the store refuses the claim.
func TestPauseRefusesClaimOfTickThatReadStaleFlag(t *testing.T) {
	ctx := context.Background()
	t0 := utc("2026-03-02T07:00:00Z")
	h := newHarness(t, t0, def("brief", "0 8 * * *"))
	h.at(t0)
	// Pause behind the ticker's back, as if it raced the tick: write the
	// store only, leaving the mirror and gen as the ticker last saw them.
	if _, err := h.db.SetSchedulePaused(ctx, "brief", true, "ops", t0); err != nil {
		t.Fatal(err)
	}
	h.at(utc("2026-03-02T08:00:00.2Z"))
	h.idle()
	if c := h.agents.Calls(); len(c) != 0 {
		t.Fatalf("fired a slot of a paused schedule: %+v", c)
	}
	if got := h.states("brief"); got != "" {
		t.Fatalf("runs = %q, want none", got)
	}
}

// A manual run works while the schedule is paused, and leaves it paused.
func TestRunNowWhilePaused(t *testing.T) {
	ctx := context.Background()
	t0 := utc("2026-03-02T07:00:00Z")
	h := newHarness(t, t0, def("brief", "0 8 * * *"))
	h.at(t0)
	if _, err := h.s.Pause(ctx, "brief", "ops"); err != nil {
		t.Fatal(err)
	}
	run, err := h.s.RunNow(ctx, "brief")
	if err != nil {
		t.Fatalf("RunNow while paused: %v", err)
	}
	if run.Trigger != store.TriggerManual {
		t.Fatalf("run = %+v", run)
	}
	h.turns(1)
	h.idle()
	list, err := h.s.List(ctx)
	if err != nil || !list[0].Paused || list[0].LastOutcome != store.RunSucceeded {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestPauseUnknownSchedule(t *testing.T) {
	h := newHarness(t, utc("2026-03-02T07:00:00Z"), def("brief", "0 8 * * *"))
	for _, f := range []func(context.Context, string, string) (Status, error){h.s.Pause, h.s.Resume} {
		if _, err := f(context.Background(), "nope", "ops"); !errors.Is(err, ErrUnknownSchedule) || !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("err = %v, want ErrUnknownSchedule", err)
		}
	}
}

// Pause and Resume work on the real loop: Resume wakes Run, which then
// fires the next slot.
func TestPauseResumeWithRun(t *testing.T) {
	ctx := context.Background()
	c := fakeclock.New(utc("2026-03-02T07:59:59Z"))
	agents := &fakeAgents{}
	s, _ := newScheduler(t, Config{Schedules: []Definition{def("brief", "* * * * *")}, Agents: map[string]bool{"travel": true},
		DefaultZone: time.UTC, Now: c.Now, MaxSleep: 10 * time.Millisecond}, agents, &fakeEnqueuer{reg: envelope.NewRegistry()}, time.Time{})
	if _, err := s.Pause(ctx, "brief", "ops"); err != nil {
		t.Fatal(err)
	}
	running(t, s)
	poll.Eventually(t, 5*time.Second, "scheduler active", s.Active)
	// The 08:00 slot comes due while paused; the loop looks at it.
	c.Set(utc("2026-03-02T08:00:00.1Z"))
	s.Wake()
	c.Set(utc("2026-03-02T08:00:30Z"))
	if _, err := s.Resume(ctx, "brief", "ops"); err != nil {
		t.Fatal(err)
	}
	c.Set(utc("2026-03-02T08:01:00.1Z"))
	s.Wake()
	poll.Eventually(t, 5*time.Second, "the slot after Resume fired", func() bool { return len(agents.Calls()) == 1 })
	poll.Eventually(t, 5*time.Second, "the run recorded", func() bool {
		l, err := s.List(ctx)
		return err == nil && l[0].LastOutcome != ""
	})
	l, err := s.List(ctx)
	if err != nil || len(l[0].Recent) != 1 || !l[0].Recent[0].Slot.Equal(utc("2026-03-02T08:01:00Z")) {
		t.Fatalf("runs = %+v, %v; want only the 08:01 slot", l, err)
	}
}
