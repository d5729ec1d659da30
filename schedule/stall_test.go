package schedule

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// stallingStore is the store on a disk that can stall: the first write that
// matches an armed stall announces itself, waits until the stall is
// released, and then fails with the stall's error or goes through.
type stallingStore struct {
	*bolt.DB
	mu     sync.Mutex
	stalls []*stall
}

var _ store.Schedules = (*stallingStore)(nil)

type stall struct {
	op, key string // the store method, and the run id (or schedule name) it writes; "": any
	err     error
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// stall arms a stall of the next write op of key (a run id, or a schedule
// name for the per-schedule writes). It is released when the test ends, if
// not before, so that a test that fails cannot hang.
func (h *harness) stall(op, key string, err error) *stall {
	st := &stall{op: op, key: key, err: err, entered: make(chan struct{}), release: make(chan struct{})}
	h.disk.mu.Lock()
	h.disk.stalls = append(h.disk.stalls, st)
	h.disk.mu.Unlock()
	h.t.Cleanup(st.Release)
	return st
}

// Release lets the stalled write finish.
func (st *stall) Release() { st.once.Do(func() { close(st.release) }) }

// Reached waits until the stalled write has begun.
func (st *stall) Reached(t *testing.T) {
	t.Helper()
	select {
	case <-st.entered:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s of %s within 5s", st.op, st.key)
	}
}

func (d *stallingStore) hold(op, key string) error {
	d.mu.Lock()
	i := slices.IndexFunc(d.stalls, func(st *stall) bool { return st.op == op && (st.key == "" || st.key == key) })
	var st *stall
	if i >= 0 {
		st = d.stalls[i]
		d.stalls = slices.Delete(d.stalls, i, i+1)
	}
	d.mu.Unlock()
	if st == nil {
		return nil
	}
	close(st.entered)
	<-st.release
	return st.err
}

func (d *stallingStore) InterruptScheduleRuns(ctx context.Context, now time.Time, reason string) ([]store.ScheduleRun, error) {
	if err := d.hold("InterruptScheduleRuns", ""); err != nil {
		return nil, err
	}
	return d.DB.InterruptScheduleRuns(ctx, now, reason)
}

func (d *stallingStore) InitScheduleState(ctx context.Context, name string, now time.Time) (store.ScheduleState, error) {
	if err := d.hold("InitScheduleState", name); err != nil {
		return store.ScheduleState{}, err
	}
	return d.DB.InitScheduleState(ctx, name, now)
}

func (d *stallingStore) RewindScheduleCursor(ctx context.Context, name string, to time.Time) (store.ScheduleState, error) {
	if err := d.hold("RewindScheduleCursor", name); err != nil {
		return store.ScheduleState{}, err
	}
	return d.DB.RewindScheduleCursor(ctx, name, to)
}

func (d *stallingStore) ClaimScheduleSlot(ctx context.Context, run store.ScheduleRun) (store.ScheduleState, error) {
	if err := d.hold("ClaimScheduleSlot", run.ID()); err != nil {
		return store.ScheduleState{}, err
	}
	return d.DB.ClaimScheduleSlot(ctx, run)
}

func (d *stallingStore) UpdateScheduleRun(ctx context.Context, run store.ScheduleRun) error {
	if err := d.hold("UpdateScheduleRun", run.ID()); err != nil {
		return err
	}
	return d.DB.UpdateScheduleRun(ctx, run)
}

func runID(name string, slot time.Time, trigger string) string {
	return store.ScheduleRun{Schedule: name, Slot: slot, Trigger: trigger}.ID()
}

// async runs f in its own goroutine; the channel closes when f returns.
func async(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// returnsSoon reports whether done closes within two seconds.
func returnsSoon(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}

// TestAPIDoesNotWaitForStoreWrites stalls each write the scheduler makes on
// its own initiative and checks that what the API calls meanwhile — the
// readiness check, the schedule list, "run now" of another schedule —
// answers at once instead of waiting for the disk.
func TestAPIDoesNotWaitForStoreWrites(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	cases := []struct {
		name string
		// stall arms a stall, sets off the write it catches and returns the
		// stall and what the write's caller returns.
		stall func(h *harness) (*stall, <-chan struct{})
		// owned: brief has a run being claimed or started during the stall,
		// so a RunNow of it must be refused as busy.
		owned bool
		// want is the brief schedule's run history once everything settled.
		want string
	}{
		{name: "run now claims its run", stall: func(h *harness) (*stall, <-chan struct{}) {
			st := h.stall("ClaimScheduleSlot", runID("brief", t0, store.TriggerManual), nil)
			return st, async(func() { h.s.RunNow(context.Background(), "brief") })
		}, owned: true, want: "03-02T07:59:succeeded"},
		{name: "a cron slot is claimed", stall: func(h *harness) (*stall, <-chan struct{}) {
			h.at(t0)
			slot := utc("2026-03-02T08:00:00Z")
			st := h.stall("ClaimScheduleSlot", runID("brief", slot, store.TriggerCron), nil)
			return st, async(func() { h.at(slot) })
		}, owned: true, want: "03-02T08:00:succeeded"},
		{name: "a schedule is first seen", stall: func(h *harness) (*stall, <-chan struct{}) {
			st := h.stall("InitScheduleState", "brief", nil)
			return st, async(func() { h.at(t0) })
		}},
		{name: "the clock went back", stall: func(h *harness) (*stall, <-chan struct{}) {
			h.at(t0)
			st := h.stall("RewindScheduleCursor", "brief", nil)
			return st, async(func() { h.at(t0.Add(-time.Hour)) })
		}},
		{name: "a queued run starts", stall: func(h *harness) (*stall, <-chan struct{}) {
			release := blockingAgents(h)
			h.at(t0)
			h.at(utc("2026-03-02T08:00:00Z"))
			h.at(utc("2026-03-02T08:01:00Z")) // queued behind 08:00
			st := h.stall("UpdateScheduleRun", runID("brief", utc("2026-03-02T08:01:00Z"), store.TriggerCron), nil)
			close(release) // 08:00 ends; 08:01 is recorded as running
			return st, nil
		}, owned: true, want: "03-02T08:00:succeeded 03-02T08:01:succeeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			brief := def("brief", "* * * * *")
			brief.Overlap = OverlapQueue
			h := newHarness(t, t0, brief, def("other", "0 12 * * *"))
			st, caller := c.stall(h)
			st.Reached(t)

			if !returnsSoon(async(func() { h.s.Active() })) {
				t.Error("Active waited for the stalled write")
			}
			var list []Status
			var listErr error
			if !returnsSoon(async(func() { list, listErr = h.s.List(context.Background()) })) {
				t.Error("List waited for the stalled write")
			} else if listErr != nil || len(list) != 2 || list[0].Name != "brief" {
				t.Errorf("List = %+v, %v", list, listErr)
			}
			var other store.ScheduleRun
			var otherErr error
			if !returnsSoon(async(func() { other, otherErr = h.s.RunNow(context.Background(), "other") })) {
				t.Error("RunNow of another schedule waited for the stalled write")
			} else if otherErr != nil || other.State != store.RunRunning {
				t.Errorf("RunNow(other) = %+v, %v", other, otherErr)
			}

			if c.owned {
				var busyErr error
				if !returnsSoon(async(func() { _, busyErr = h.s.RunNow(context.Background(), "brief") })) {
					t.Error("RunNow of the stalled schedule waited for the stalled write")
				} else if !errors.Is(busyErr, ErrBusy) {
					t.Errorf("RunNow(brief) during the stalled write = %v, want ErrBusy", busyErr)
				}
			}

			st.Release()
			if caller != nil && !returnsSoon(caller) {
				t.Fatal("the stalled write's caller did not return after the release")
			}
			h.idle()
			if got := h.states("brief"); got != c.want {
				t.Errorf("brief runs = %q, want %q", got, c.want)
			}
			if got := h.states("other"); !strings.HasSuffix(got, ":succeeded") {
				t.Errorf("other runs = %q, want the manual run succeeded", got)
			}
		})
	}
}

// gatedTurns holds every turn until the gate opens, and counts the turns in
// progress at once.
type gatedTurns struct {
	mu       sync.Mutex
	gate     chan struct{}
	inflight int
	most     int
}

func (g *gatedTurns) close() {
	g.mu.Lock()
	close(g.gate)
	g.mu.Unlock()
}

func (g *gatedTurns) reset() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedTurns) wait(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
	g.mu.Lock()
	g.inflight++
	g.most = max(g.most, g.inflight)
	gate := g.gate
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}()
	select {
	case <-gate:
		return textEnvelope("done " + t.TaskID), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestConcurrentRunNowStartsOneRun: of many simultaneous "run now" of one
// schedule, exactly one starts a run and the others are told it is busy,
// at once even while the winner's claim waits for the disk.
func TestConcurrentRunNowStartsOneRun(t *testing.T) {
	t0 := utc("2026-03-02T07:00:00Z")
	h := newHarness(t, t0, def("brief", "0 8 * * *"))
	g := &gatedTurns{} // the winner's turn lasts until every caller answered
	h.agents.wait = g.wait
	h.at(t0)
	// Each caller reads a different instant, so each would claim its own
	// manual slot: the store cannot refuse the others, the scheduler must.
	h.clock.Step(time.Microsecond)
	const rounds, callers = 8, 16
	for round := range rounds {
		h.clock.Set(t0.Add(time.Duration(round) * time.Second))
		g.reset()
		// In odd rounds the winner's claim stalls until every loser has
		// answered.
		var st *stall
		if round%2 == 1 {
			st = h.stall("ClaimScheduleSlot", "", nil)
		}
		errs := make([]error, callers)
		var answered atomic.Int32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				_, errs[i] = h.s.RunNow(context.Background(), "brief")
				answered.Add(1)
			})
		}
		close(start)
		if st != nil {
			st.Reached(t)
			poll.Eventually(t, 5*time.Second, "every loser answered while the winner's claim stalled", func() bool {
				return answered.Load() == callers-1
			})
			st.Release()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrBusy):
				t.Fatalf("round %d: RunNow = %v, want nil or ErrBusy", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d of %d simultaneous RunNow started a run, want 1", round, won, callers)
		}
		g.close()
		h.idle()
	}
	if n := len(h.agents.Calls()); n != rounds {
		t.Fatalf("agent called %d times in %d rounds, want one turn a round", n, rounds)
	}
	runs := h.runs("brief")
	if len(runs) != rounds {
		t.Fatalf("%d run records, want %d", len(runs), rounds)
	}
	for _, r := range runs {
		if r.Trigger != store.TriggerManual || r.State != store.RunSucceeded {
			t.Fatalf("run %s: %s %s", r.ID(), r.Trigger, r.State)
		}
	}
}

// TestRunNowRacingCronSlotNeverOverlaps sets a "run now" and a cron slot of
// the same schedule off together, many times: never do two turns overlap,
// and the loser of each race is handled by the overlap policy.
func TestRunNowRacingCronSlotNeverOverlaps(t *testing.T) {
	for _, overlap := range []string{OverlapSkip, OverlapQueue} {
		t.Run(overlap, func(t *testing.T) {
			t0 := utc("2026-03-02T07:59:30Z")
			d := def("minutely", "* * * * *")
			d.Overlap = overlap
			h := newHarness(t, t0, d)
			g := &gatedTurns{}
			h.agents.wait = g.wait
			h.at(t0)
			const rounds = 20
			wantCalls := 0
			for round := range rounds {
				slot := utc("2026-03-02T08:00:00Z").Add(time.Duration(round) * time.Minute)
				g.reset()
				h.clock.Set(slot)
				var runErr error
				start := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() { <-start; _, runErr = h.s.RunNow(context.Background(), "minutely") })
				wg.Go(func() { <-start; h.s.tick() })
				close(start)
				wg.Wait()
				var cron store.ScheduleRun
				for _, r := range h.runs("minutely") {
					if r.Trigger == store.TriggerCron && r.Slot.Equal(slot) {
						cron = r
					}
				}
				switch {
				case runErr == nil && overlap == OverlapSkip:
					// The manual run won; the slot came while it ran.
					wantCalls++
					if cron.State != store.RunSkipped {
						t.Fatalf("round %d: run now won, cron slot %q, want skipped", round, cron.State)
					}
				case runErr == nil:
					wantCalls += 2
					if cron.State != store.RunQueued {
						t.Fatalf("round %d: run now won, cron slot %q, want queued", round, cron.State)
					}
				case errors.Is(runErr, ErrBusy):
					wantCalls++
					if cron.State != store.RunRunning {
						t.Fatalf("round %d: run now busy, cron slot %q, want running", round, cron.State)
					}
				default:
					t.Fatalf("round %d: RunNow = %v", round, runErr)
				}
				g.close()
				h.idle()
			}
			if g.most != 1 {
				t.Fatalf("%d turns of one schedule were in progress at once", g.most)
			}
			if n := len(h.agents.Calls()); n != wantCalls {
				t.Fatalf("agent called %d times, want %d", n, wantCalls)
			}
			for _, r := range h.runs("minutely") {
				if r.State != store.RunSucceeded && r.State != store.RunSkipped {
					t.Fatalf("run %s ended %s: %s", r.ID(), r.State, r.Reason)
				}
			}
		})
	}
}

// TestQueuedSlotStartsWhenRunEndsDuringItsClaim: the run a slot is queued
// behind ends while the queued slot's claim is still being written; the
// queued slot must start all the same, not wait for ever.
func TestQueuedSlotStartsWhenRunEndsDuringItsClaim(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	d := def("minutely", "* * * * *")
	d.Overlap = OverlapQueue
	h := newHarness(t, t0, d)
	release := blockingAgents(h)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	st := h.stall("ClaimScheduleSlot", runID("minutely", utc("2026-03-02T08:01:00Z"), store.TriggerCron), nil)
	ticked := async(func() { h.at(utc("2026-03-02T08:01:00Z")) })
	st.Reached(t)
	close(release)
	// 08:00 ends while 08:01 is being claimed as queued.
	poll.Eventually(t, 5*time.Second, "08:00 finished during the claim", func() bool {
		return h.states("minutely") == "03-02T08:00:succeeded"
	})
	st.Release()
	if !returnsSoon(ticked) {
		t.Fatal("tick did not return")
	}
	h.idle()
	if got := h.states("minutely"); got != "03-02T08:00:succeeded 03-02T08:01:succeeded" {
		t.Fatalf("runs = %s", got)
	}
	if n := len(h.agents.Calls()); n != 2 {
		t.Fatalf("agent called %d times, want 2", n)
	}
}

var errDisk = errors.New("disk on fire")

// TestFailedRunNowClaimFreesSchedule: when the store refuses the claim of a
// manual run, the schedule is not left busy, and a slot queued behind the
// run that never started goes ahead.
func TestFailedRunNowClaimFreesSchedule(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	d := def("minutely", "* * * * *")
	d.Overlap = OverlapQueue
	h := newHarness(t, t0, d)
	h.at(t0)
	manual := utc("2026-03-02T07:59:59Z")
	h.clock.Set(manual)
	st := h.stall("ClaimScheduleSlot", runID("minutely", manual, store.TriggerManual), errDisk)
	var runErr error
	ran := async(func() { _, runErr = h.s.RunNow(context.Background(), "minutely") })
	st.Reached(t)
	// The 08:00 slot comes while the manual run is being claimed.
	if !returnsSoon(async(func() { h.at(utc("2026-03-02T08:00:00Z")) })) {
		t.Fatal("tick waited for the stalled claim of a manual run")
	}
	if got := h.states("minutely"); got != "03-02T08:00:queued" {
		t.Fatalf("runs while the manual claim stalls = %s, want 08:00 queued", got)
	}
	st.Release()
	if !returnsSoon(ran) {
		t.Fatal("RunNow did not return")
	}
	if !errors.Is(runErr, errDisk) || errors.Is(runErr, ErrBusy) {
		t.Fatalf("RunNow = %v, want the store's error", runErr)
	}
	h.idle()
	if got := h.states("minutely"); got != "03-02T08:00:succeeded" {
		t.Fatalf("runs = %s, want the queued slot run", got)
	}
	// Nothing is left holding the schedule.
	if _, err := h.s.RunNow(context.Background(), "minutely"); err != nil {
		t.Fatalf("RunNow after = %v", err)
	}
	h.idle()
	if n := len(h.agents.Calls()); n != 2 {
		t.Fatalf("agent called %d times, want 2", n)
	}
}

// TestRunNowClaimedDuringShutdown: a manual run whose claim is still being
// written when shutdown begins is recorded as interrupted, and its turn is
// never started; shutdown waits for the claim.
func TestRunNowClaimedDuringShutdown(t *testing.T) {
	t0 := utc("2026-03-02T07:00:00Z")
	h := newHarness(t, t0, def("brief", "0 8 * * *"))
	h.at(t0)
	st := h.stall("ClaimScheduleSlot", runID("brief", t0, store.TriggerManual), nil)
	var run store.ScheduleRun
	var runErr error
	ran := async(func() { run, runErr = h.s.RunNow(context.Background(), "brief") })
	st.Reached(t)
	h.cancel()
	ended := async(h.s.end)
	if !returnsSoon(async(func() { h.s.Active() })) {
		t.Fatal("Active waited for the stalled claim")
	}
	if _, err := h.s.RunNow(context.Background(), "brief"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("RunNow during shutdown = %v, want ErrNotRunning", err)
	}
	st.Release()
	if !returnsSoon(ran) || !returnsSoon(ended) {
		t.Fatal("RunNow or shutdown did not return after the release")
	}
	if runErr != nil || run.Trigger != store.TriggerManual {
		t.Fatalf("RunNow = %+v, %v", run, runErr)
	}
	if h.s.Active() {
		t.Fatal("Active after shutdown")
	}
	if n := len(h.agents.Calls()); n != 0 {
		t.Fatalf("a turn was started after shutdown began (%d calls)", n)
	}
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunFailed || !strings.Contains(runs[0].Reason, "interrupted") {
		t.Fatalf("runs = %+v", runs)
	}
}

// TestRunNowRefusedDuringRecovery: until start-up recovery (marking runs a
// killed process left running as interrupted) is written, the scheduler
// is not active and refuses a manual run, which recovery would otherwise
// mark interrupted while it runs.
func TestRunNowRefusedDuringRecovery(t *testing.T) {
	t0 := utc("2026-03-02T07:00:00Z")
	db := storetest.Open(t, bolt.Options{})
	s, err := New(Config{Schedules: []Definition{def("brief", "0 8 * * *")}, Agents: map[string]bool{"travel": true},
		DefaultZone: time.UTC, Now: func() time.Time { return t0 }}, db, &fakeAgents{}, &fakeEnqueuer{reg: envelope.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	d := &stallingStore{DB: db}
	st := &stall{op: "InterruptScheduleRuns", entered: make(chan struct{}), release: make(chan struct{})}
	d.stalls = append(d.stalls, st)
	s.db = d
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begun := async(func() { s.begin(ctx) })
	st.Reached(t)
	if s.Active() {
		t.Error("active during recovery")
	}
	if _, err := s.RunNow(context.Background(), "brief"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("RunNow during recovery = %v, want ErrNotRunning", err)
	}
	st.Release()
	<-begun
	if !s.Active() {
		t.Error("not active after recovery")
	}
	s.end()
}

// panicStore panics in a manual run's claim, as bbolt does on some damage.
type panicStore struct{ *stallingStore }

func (p panicStore) ClaimScheduleSlot(ctx context.Context, run store.ScheduleRun) (store.ScheduleState, error) {
	if run.Trigger == store.TriggerManual {
		panic("bbolt: page already freed")
	}
	return p.stallingStore.ClaimScheduleSlot(ctx, run)
}

// TestPanicInRunNowClaimFreesSchedule: the HTTP server recovers a panic in
// a handler; the schedule must not stay owned for ever (every later run
// refused or skipped, shutdown waiting its full grace).
func TestPanicInRunNowClaimFreesSchedule(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	h := newHarness(t, t0, def("minutely", "* * * * *"))
	h.s.db = panicStore{h.disk}
	h.at(t0)
	runNow := func() (err error, panicked bool) {
		defer func() { panicked = recover() != nil }() // as net/http does
		_, err = h.s.RunNow(context.Background(), "minutely")
		return err, false
	}
	if _, panicked := runNow(); !panicked {
		t.Fatal("the store's panic did not reach RunNow's caller")
	}
	// Free again: the next manual run gets as far as its claim (and its
	// panic) instead of ErrBusy.
	if err, panicked := runNow(); !panicked {
		t.Fatalf("schedule still owned after the panic: %v", err)
	}
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	if got := h.states("minutely"); strings.Contains(got, "skipped") {
		t.Fatalf("runs = %s", got)
	}
}
