package schedule

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

type call struct{ Agent, Text, ContextID string }

// fakeAgents answers turns; behaviour per call is set by start/wait.
type fakeAgents struct {
	mu    sync.Mutex
	calls []call
	// resumed: context/task/push id of each turn resumed after a restart.
	resumed []string
	start   func(ctx context.Context, n int, c call) (*agent.Turn, error)
	wait    func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error)
}

func (f *fakeAgents) StartTurn(ctx context.Context, agentName, text, contextID string) (*agent.Turn, error) {
	f.mu.Lock()
	c := call{agentName, text, contextID}
	f.calls = append(f.calls, c)
	n := len(f.calls)
	start := f.start
	f.mu.Unlock()
	if start != nil {
		return start(ctx, n, c)
	}
	return &agent.Turn{ContextID: contextID, TaskID: fmt.Sprintf("task-%d", n)}, nil
}

func (f *fakeAgents) WaitTurn(ctx context.Context, agentName string, t *agent.Turn, poll time.Duration) (*envelope.Envelope, error) {
	f.mu.Lock()
	n := len(f.calls)
	wait := f.wait
	f.mu.Unlock()
	if wait != nil {
		return wait(ctx, n, t)
	}
	return textEnvelope("brief " + t.TaskID), nil
}

// ResumeTurn resumes a turn under its push id, as agent.Client does.
func (f *fakeAgents) ResumeTurn(ctx context.Context, agentName, contextID, taskID, pushID string) *agent.Turn {
	f.mu.Lock()
	f.resumed = append(f.resumed, contextID+"/"+taskID+"/"+pushID)
	f.mu.Unlock()
	return &agent.Turn{ContextID: contextID, TaskID: taskID, PushID: pushID}
}

func (f *fakeAgents) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func textEnvelope(s string) *envelope.Envelope {
	return &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &s, Metadata: map[string]any{"partType": "response"}}}}
}

type enqueued struct {
	Env    *envelope.Envelope
	To     []envelope.Recipient
	Agent  string
	Source string
}

// fakeEnqueuer validates like the ingester does (against a registry) and
// records what it accepted.
type fakeEnqueuer struct {
	mu   sync.Mutex
	got  []enqueued
	reg  *envelope.Registry
	keys map[string]string // EnqueueKeyed's keys → envelope id
}

func (f *fakeEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agentName, source string) (string, error) {
	if err := f.reg.Validate(env); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, enqueued{env.Clone(), to, agentName, source})
	return fmt.Sprintf("env_%d", len(f.got)), nil
}

// EnqueueKeyed stores env once per key, as api.Ingester does: a repeat
// answers the first envelope id.
func (f *fakeEnqueuer) EnqueueKeyed(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agentName, source, key string) (string, error) {
	f.mu.Lock()
	if id, ok := f.keys[key]; ok {
		f.mu.Unlock()
		return id, nil
	}
	f.mu.Unlock()
	id, err := f.Enqueue(ctx, env, to, agentName, source)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]string{}
	}
	f.keys[key] = id
	return id, nil
}

func (f *fakeEnqueuer) Got() []enqueued {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]enqueued(nil), f.got...)
}

var alice = []envelope.Recipient{{Channel: "email", Address: "alice@example.org"}}

func def(name, spec string) Definition {
	return Definition{Name: name, Cron: spec, Agent: "travel", Message: "Today's tasks", To: alice,
		RetryDelay: time.Millisecond, Timeout: 5 * time.Second}
}

type harness struct {
	t      *testing.T
	path   string
	db     *bolt.DB
	disk   *stallingStore // what the scheduler writes through
	clock  *fakeclock.Clock
	agents *fakeAgents
	enq    *fakeEnqueuer
	reg    *prometheus.Registry
	s      *Scheduler
	ctx    context.Context
	cancel context.CancelFunc
}

func newHarness(t *testing.T, start time.Time, defs ...Definition) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "beachd.db"), clock: fakeclock.New(start),
		agents: &fakeAgents{}, enq: &fakeEnqueuer{reg: envelope.NewRegistry()}}
	h.open(defs...)
	return h
}

// open (re)opens the database and builds a fresh scheduler over it, as a
// restarted process would.
func (h *harness) open(defs ...Definition) {
	h.t.Helper()
	db := storetest.OpenAt(h.t, h.path, bolt.Options{Now: h.clock.Now})
	h.db = db
	h.reg = prometheus.NewRegistry()
	var err error
	h.s, err = New(Config{Schedules: defs, Agents: map[string]bool{"travel": true}, DefaultZone: time.UTC,
		Now: h.clock.Now, Metrics: h.reg, ShutdownWait: 5 * time.Second, AbandonAfter: 50 * time.Millisecond},
		h.db, h.agents, h.enq)
	if err != nil {
		h.t.Fatal(err)
	}
	h.disk = &stallingStore{DB: db}
	h.s.db = h.disk
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if err := h.s.begin(h.ctx); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(h.close)
}

// close stops the scheduler as Run does on shutdown and closes the store.
func (h *harness) close() {
	if h.db == nil {
		return
	}
	h.cancel()
	h.s.end()
	h.db.Close()
	h.db = nil
}

// at sets the clock and ticks once.
func (h *harness) at(t time.Time) time.Time {
	h.clock.Set(t)
	return h.s.tick()
}

// idle waits until no schedule has a run in progress.
func (h *harness) idle() {
	h.t.Helper()
	poll.Eventually(h.t, 5*time.Second, "runs still in progress", func() bool {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		for _, j := range h.s.jobs {
			if j.running {
				return false
			}
		}
		return true
	})
}

// turns waits until n turns have been started.
func (h *harness) turns(n int) {
	h.t.Helper()
	poll.Eventually(h.t, 5*time.Second, fmt.Sprintf("%d turns started", n), func() bool { return len(h.agents.Calls()) >= n })
}

func (h *harness) runs(name string) []store.ScheduleRun {
	h.t.Helper()
	runs, err := h.db.ScheduleRuns(context.Background(), name, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

// states lists run states oldest first as "slot:state".
func (h *harness) states(name string) string {
	runs := h.runs(name)
	var out []string
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		out = append(out, r.Slot.UTC().Format("01-02T15:04")+":"+r.State)
	}
	return strings.Join(out, " ")
}

func (h *harness) seedCursor(name string, at time.Time) {
	h.t.Helper()
	if _, err := h.db.InitScheduleState(context.Background(), name, at); err != nil {
		h.t.Fatal(err)
	}
}

// newScheduler builds a scheduler over a store in a temporary directory in
// which each of cfg's schedules was last seen at seen (zero: never, so a
// schedule is first seen when Run looks at it). The store is closed when
// the test ends.
func newScheduler(t *testing.T, cfg Config, agents Agents, enq Enqueuer, seen time.Time) (*Scheduler, *bolt.DB) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	if !seen.IsZero() {
		for _, d := range cfg.Schedules {
			if _, err := db.InitScheduleState(context.Background(), d.Name, seen); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := New(cfg, db, agents, enq)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// running runs s.Run (the real loop, not the harness's begin) until stop is
// called or the test ends, and checks that Run then returns nil.
func running(t *testing.T, s *Scheduler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestFiresOnceAndDeliversResult(t *testing.T) {
	t0 := utc("2026-03-02T07:00:00Z")
	h := newHarness(t, t0, def("brief", "0 8 * * *"))
	if next := h.at(t0); !next.Equal(utc("2026-03-02T08:00:00Z")) {
		t.Fatalf("next = %v", next)
	}
	if len(h.agents.Calls()) != 0 {
		t.Fatal("fired before its slot")
	}
	h.at(utc("2026-03-02T08:00:00.2Z"))
	h.idle()
	h.at(utc("2026-03-02T08:00:30Z")) // a second look within the same slot
	h.idle()
	calls := h.agents.Calls()
	if len(calls) != 1 || calls[0].Agent != "travel" || calls[0].Text != "Today's tasks" {
		t.Fatalf("calls = %+v", calls)
	}
	got := h.enq.Got()
	if len(got) != 1 || got[0].Source != "schedule:brief" || got[0].Agent != "travel" || got[0].To[0].Address != "alice@example.org" {
		t.Fatalf("enqueued = %+v", got)
	}
	env := got[0].Env
	if env.Text("response") != "brief task-1" || env.Meta.SessionID != calls[0].ContextID || env.Meta.TurnID != "task-1" ||
		env.Meta.FinalizedBy != "complete" || env.Meta.ProducedAt.IsZero() {
		t.Fatalf("envelope = %+v", env)
	}
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].EnvelopeID != "env_1" || runs[0].Attempts != 1 ||
		runs[0].Trigger != store.TriggerCron || !runs[0].Slot.Equal(utc("2026-03-02T08:00:00Z")) {
		t.Fatalf("runs = %+v", runs)
	}
	if v := metricValue(t, h.s.m.runs.WithLabelValues("brief", "succeeded")); v != 1 {
		t.Fatalf("runs_total{succeeded} = %v", v)
	}
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"beachd_schedule_runs_total", "beachd_schedule_last_run_timestamp_seconds",
		"beachd_schedule_run_duration_seconds", "beachd_schedule_next_run_timestamp_seconds", "beachd_schedule_running"} {
		if !names[n] {
			t.Errorf("metric %s not registered", n)
		}
	}
}

func TestSlotNeverFiredTwiceAcrossRestartAndClockSteps(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	h := newHarness(t, t0, d)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:01Z"))
	h.idle()
	h.close()

	// Restart 30 seconds later: the 08:00 slot is still "on time", but claimed.
	h.clock.Set(utc("2026-03-02T08:00:31Z"))
	h.open(d)
	h.at(utc("2026-03-02T08:00:31Z"))
	h.idle()
	// The clock steps back an hour and comes forward again.
	h.at(utc("2026-03-02T07:00:00Z"))
	h.at(utc("2026-03-02T07:59:59Z"))
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("agent called %d times for one slot", n)
	}
	// The next day's slot fires.
	h.at(utc("2026-03-03T08:00:00Z"))
	h.idle()
	if n := len(h.agents.Calls()); n != 2 {
		t.Fatalf("agent called %d times after the next slot, want 2", n)
	}
	if got := h.states("brief"); got != "03-02T08:00:succeeded 03-03T08:00:succeeded" {
		t.Fatalf("runs = %s", got)
	}
}

func TestRunInterruptedByCrashIsNotRepeated(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	h := newHarness(t, t0, d)
	h.at(t0)
	h.close()
	// A process claimed the 08:00 slot and died during the turn.
	db := storetest.OpenAt(t, h.path, bolt.Options{})
	if _, err := db.ClaimScheduleSlot(context.Background(), store.ScheduleRun{Schedule: "brief",
		Slot: utc("2026-03-02T08:00:00Z"), Trigger: store.TriggerCron, State: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	h.clock.Set(utc("2026-03-02T08:00:20Z"))
	h.open(d)
	h.at(utc("2026-03-02T08:00:20Z"))
	h.idle()
	if n := len(h.agents.Calls()); n != 0 {
		t.Fatalf("interrupted slot fired again (%d calls)", n)
	}
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunFailed || !strings.Contains(runs[0].Reason, "interrupted") {
		t.Fatalf("runs = %+v", runs)
	}
}

// A process started a run's turn (the agent's task recorded) and died
// while the agent worked: the next start resumes the run — it waits for
// that task, starts no turn, and delivers the answer once, even when the
// dead process had already stored it (keyed by run and attempt).
func TestRunInFlightAtACrashIsResumed(t *testing.T) {
	for _, stored := range []bool{false, true} {
		t.Run(fmt.Sprintf("answer-stored-%v", stored), func(t *testing.T) {
			t0 := utc("2026-03-02T07:59:00Z")
			d := def("brief", "0 8 * * *")
			h := newHarness(t, t0, d)
			h.at(t0)
			h.close()
			run := store.ScheduleRun{Schedule: "brief", Slot: utc("2026-03-02T08:00:00Z"), Trigger: store.TriggerCron,
				State: store.RunRunning, Attempts: 1}
			db := storetest.OpenAt(t, h.path, bolt.Options{})
			if _, err := db.ClaimScheduleSlot(context.Background(), run); err != nil {
				t.Fatal(err)
			}
			run.ContextID, run.TaskID, run.PushID = "ctx-9", "task-9", "push-9"
			if err := db.UpdateScheduleRun(context.Background(), run); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if stored { // the dead process stored the answer, not yet its run's record
				h.enq.got = append(h.enq.got, enqueued{Env: textEnvelope("brief task-9"), To: alice})
				h.enq.keys = map[string]string{"schedule-run:" + run.ID() + "#1": "env_1"}
			}
			var waited []string
			var mu sync.Mutex
			h.agents.wait = func(ctx context.Context, n int, tn *agent.Turn) (*envelope.Envelope, error) {
				mu.Lock()
				waited = append(waited, tn.ContextID+"/"+tn.TaskID+"/"+tn.PushID)
				mu.Unlock()
				return textEnvelope("brief " + tn.TaskID), nil
			}
			h.clock.Set(utc("2026-03-02T08:00:20Z"))
			h.open(d)
			h.idle()
			if n := len(h.agents.Calls()); n != 0 {
				t.Fatalf("the resumed run started %d turns", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(waited) != 1 || waited[0] != "ctx-9/task-9/push-9" {
				t.Fatalf("waited for %v, want the recorded task ctx-9/task-9 under its push id push-9", waited)
			}
			h.agents.mu.Lock()
			resumed := h.agents.resumed
			h.agents.mu.Unlock()
			if len(resumed) != 1 || resumed[0] != "ctx-9/task-9/push-9" {
				t.Fatalf("resumed %v, want the recorded turn ctx-9/task-9 under its push id push-9", resumed)
			}
			if got := h.enq.Got(); len(got) != 1 || *got[0].Env.Parts[0].Text != "brief task-9" {
				t.Fatalf("enqueued %d envelopes, want the answer once", len(got))
			}
			runs := h.runs("brief")
			if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].TaskID != "task-9" || runs[0].Attempts != 1 || runs[0].EnvelopeID == "" {
				t.Fatalf("runs = %+v", runs)
			}
		})
	}
}

// blockingAgents makes every turn wait for release (or its context).
func blockingAgents(h *harness) chan struct{} {
	release := make(chan struct{})
	h.agents.wait = func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
		select {
		case <-release:
			return textEnvelope("done " + t.TaskID), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return release
}

func TestOverlapSkip(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	h := newHarness(t, t0, def("minutely", "* * * * *"))
	release := blockingAgents(h)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.at(utc("2026-03-02T08:01:00Z"))
	h.at(utc("2026-03-02T08:02:00Z"))
	close(release)
	h.idle()
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("agent called %d times, want 1 (no overlap)", n)
	}
	if got := h.states("minutely"); got != "03-02T08:00:succeeded 03-02T08:01:skipped 03-02T08:02:skipped" {
		t.Fatalf("runs = %s", got)
	}
	if v := metricValue(t, h.s.m.runs.WithLabelValues("minutely", "skipped")); v != 2 {
		t.Fatalf("runs_total{skipped} = %v", v)
	}
}

func TestOverlapQueue(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	d := def("minutely", "* * * * *")
	d.Overlap = OverlapQueue
	h := newHarness(t, t0, d)
	release := blockingAgents(h)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.at(utc("2026-03-02T08:01:00Z"))
	h.at(utc("2026-03-02T08:02:00Z"))
	if got := h.states("minutely"); got != "03-02T08:00:running 03-02T08:01:queued 03-02T08:02:skipped" {
		t.Fatalf("runs while busy = %s", got)
	}
	close(release)
	h.idle()
	if n := len(h.agents.Calls()); n != 2 {
		t.Fatalf("agent called %d times, want 2 (the running one and the queued one)", n)
	}
	if got := h.states("minutely"); got != "03-02T08:00:succeeded 03-02T08:01:succeeded 03-02T08:02:skipped" {
		t.Fatalf("runs = %s", got)
	}
}

func TestQueuedRunLostToShutdownIsRecorded(t *testing.T) {
	t0 := utc("2026-03-02T07:59:30Z")
	d := def("minutely", "* * * * *")
	d.Overlap = OverlapQueue
	h := newHarness(t, t0, d)
	blockingAgents(h)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.at(utc("2026-03-02T08:01:00Z"))
	h.turns(1) // 08:00 is in progress, 08:01 waits
	h.close()
	h.open(d)
	if got := h.states("minutely"); got != "03-02T08:00:failed 03-02T08:01:failed" {
		t.Fatalf("runs = %s", got)
	}
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("agent called %d times", n)
	}
}

func TestCatchUpSkip(t *testing.T) {
	t0 := utc("2026-03-02T09:00:00Z")
	h := newHarness(t, t0, def("brief", "0 8 * * *"))
	h.seedCursor("brief", utc("2026-02-27T09:00:00Z")) // last seen three days ago
	next := h.at(t0)
	h.idle()
	if n := len(h.agents.Calls()); n != 0 {
		t.Fatalf("catch_up skip ran the agent %d times", n)
	}
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunMissed || !runs[0].Slot.Equal(utc("2026-03-02T08:00:00Z")) ||
		!strings.Contains(runs[0].Reason, "2026-02-28T08:00:00Z") {
		t.Fatalf("runs = %+v", runs)
	}
	if !next.Equal(utc("2026-03-03T08:00:00Z")) {
		t.Fatalf("next = %v", next)
	}
	h.at(next)
	h.idle()
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("next slot: %d calls", n)
	}
}

func TestCatchUpRunOnce(t *testing.T) {
	t0 := utc("2026-03-02T09:00:00Z")
	d := def("brief", "0 8 * * *")
	d.CatchUp = CatchUpRunOnce
	h := newHarness(t, t0, d)
	h.seedCursor("brief", utc("2026-02-27T09:00:00Z"))
	h.at(t0)
	h.idle()
	h.at(t0.Add(time.Minute))
	h.idle()
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("catch_up run_once ran the agent %d times, want 1", n)
	}
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].Trigger != store.TriggerCatchUp || runs[0].State != store.RunSucceeded ||
		!runs[0].Slot.Equal(utc("2026-03-02T08:00:00Z")) {
		t.Fatalf("runs = %+v", runs)
	}
	// A restart right after does not catch up again.
	h.close()
	h.open(d)
	h.at(t0.Add(2 * time.Minute))
	h.idle()
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("after restart: %d calls", n)
	}
}

func TestNewScheduleDoesNotFireForThePast(t *testing.T) {
	t0 := utc("2026-03-02T09:00:00Z")
	d := def("brief", "0 8 * * *")
	d.CatchUp = CatchUpRunOnce
	h := newHarness(t, t0, d)
	h.at(t0)
	h.idle()
	if n := len(h.agents.Calls()); n != 0 || len(h.runs("brief")) != 0 {
		t.Fatalf("a new schedule fired for a slot before it existed")
	}
}

// TestDSTFiring drives the scheduler through both DST changes of New York
// and London, ticking at every instant it asks to be woken.
func TestDSTFiring(t *testing.T) {
	cases := []struct {
		name, spec, from, to string
		want                 string
	}{
		{"NY spring", "CRON_TZ=America/New_York 30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-09T12:00:00Z",
			"03-07T07:30 03-08T07:00 03-09T06:30"},
		{"NY fall", "CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T00:00:00Z", "2026-11-02T12:00:00Z",
			"10-31T05:30 11-01T05:30 11-02T06:30"},
		{"London spring", "CRON_TZ=Europe/London 30 1 * * *", "2026-03-28T00:00:00Z", "2026-03-30T12:00:00Z",
			"03-28T01:30 03-29T01:00 03-30T00:30"},
		{"London fall", "CRON_TZ=Europe/London 30 1 * * *", "2026-10-24T00:00:00Z", "2026-10-26T12:00:00Z",
			"10-24T00:30 10-25T00:30 10-26T01:30"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, utc(c.from), def("dst", c.spec))
			end := utc(c.to)
			for now := utc(c.from); now.Before(end); {
				next := h.at(now)
				h.idle()
				if next.IsZero() || !next.After(now) {
					t.Fatalf("next %v after %v", next, now)
				}
				// Look every 20 minutes as well, as MaxSleep would.
				now = now.Add(20 * time.Minute)
				if next.Before(now) {
					now = next
				}
			}
			var got []string
			runs := h.runs("dst")
			for i := len(runs) - 1; i >= 0; i-- {
				if runs[i].State != store.RunSucceeded {
					t.Fatalf("run %s: %s %s", runs[i].ID(), runs[i].State, runs[i].Reason)
				}
				got = append(got, runs[i].Slot.Format("01-02T15:04"))
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("fired at %v\nwant     %s", got, c.want)
			}
		})
	}
}

func TestRetriesThenSuccess(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	d.Retries = 2
	h := newHarness(t, t0, d)
	h.agents.start = func(ctx context.Context, n int, c call) (*agent.Turn, error) {
		if n < 3 {
			return nil, errors.New("connection refused")
		}
		return &agent.Turn{ContextID: c.ContextID, TaskID: "t"}, nil
	}
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].Attempts != 3 {
		t.Fatalf("runs = %+v", runs)
	}
	calls := h.agents.Calls()
	if calls[0].ContextID == calls[1].ContextID {
		t.Fatalf("each attempt should start a new context: %+v", calls)
	}
}

func TestFailureRecordedWithErrorNotice(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	d.Retries = 1
	d.ErrorNotice = true
	h := newHarness(t, t0, d)
	h.agents.start = func(ctx context.Context, n int, c call) (*agent.Turn, error) {
		return nil, errors.New("agent exploded")
	}
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunFailed || runs[0].Attempts != 2 ||
		!strings.Contains(runs[0].Reason, "agent exploded") || runs[0].ErrorNoticeID == "" {
		t.Fatalf("runs = %+v", runs)
	}
	got := h.enq.Got()
	if len(got) != 1 {
		t.Fatalf("enqueued %d envelopes, want the error notice", len(got))
	}
	errs := got[0].Env.PartsOf(envelope.PartError)
	if len(errs) != 1 || !strings.Contains(errs[0].TextValue(), "agent exploded") || got[0].Env.Meta.FinalizedBy != "error" {
		t.Fatalf("notice = %+v", got[0].Env)
	}
	if v := metricValue(t, h.s.m.runs.WithLabelValues("brief", "failed")); v != 1 {
		t.Fatalf("runs_total{failed} = %v", v)
	}
}

func TestBadAgentsAreFailedRunsNotCrashes(t *testing.T) {
	cases := []struct {
		name   string
		start  func(ctx context.Context, n int, c call) (*agent.Turn, error)
		wait   func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error)
		reason string
	}{
		{name: "hangs until timeout", wait: func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, reason: "did not settle in time"},
		{name: "ignores cancellation", wait: func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
			time.Sleep(2 * time.Second) // the agent call itself misbehaves; the run must not wait for it
			return textEnvelope("late"), nil
		}, reason: "abandoned"},
		{name: "panics", wait: func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
			panic("boom")
		}, reason: "panic: boom"},
		{name: "empty answer", wait: func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
			return &envelope.Envelope{Role: "agent"}, nil
		}, reason: "nothing to deliver"},
		{name: "nil turn", start: func(ctx context.Context, n int, c call) (*agent.Turn, error) { return nil, nil },
			reason: "nothing to deliver"},
		{name: "garbage parts", wait: func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
			return &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Metadata: map[string]any{"partType": "no-such-type"}}}}, nil
		}, reason: "enqueue result"},
		{name: "error state", wait: func(ctx context.Context, n int, t *agent.Turn) (*envelope.Envelope, error) {
			e := textEnvelope("tool crashed")
			e.Meta.FinalizedBy = "error"
			return e, nil
		}, reason: "turn failed: tool crashed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := utc("2026-03-02T07:59:00Z")
			d := def("brief", "* * * * *")
			d.Timeout = 100 * time.Millisecond
			h := newHarness(t, t0, d)
			h.agents.start, h.agents.wait = c.start, c.wait
			h.at(t0)
			h.at(utc("2026-03-02T08:00:00Z"))
			h.idle()
			// The schedule goes on: the next slot fires again.
			h.at(utc("2026-03-02T08:01:00Z"))
			h.idle()
			runs := h.runs("brief")
			if len(runs) != 2 {
				t.Fatalf("runs = %+v", runs)
			}
			for _, r := range runs {
				if r.State != store.RunFailed || !strings.Contains(r.Reason, c.reason) {
					t.Fatalf("run = %s %q, want failed with %q", r.State, r.Reason, c.reason)
				}
			}
			if len(h.enq.Got()) != 0 {
				t.Fatalf("a failed run delivered something")
			}
		})
	}
}

func TestRunNowAndList(t *testing.T) {
	t0 := utc("2026-03-02T07:00:00Z")
	off := def("off", "0 9 * * *")
	off.Disabled = true
	h := newHarness(t, t0, def("brief", "CRON_TZ=Europe/London 0 8 * * *"), off)
	release := blockingAgents(h)
	h.at(t0)
	if _, err := h.s.RunNow(context.Background(), "nope"); !errors.Is(err, ErrUnknownSchedule) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	run, err := h.s.RunNow(context.Background(), "brief")
	if err != nil || run.Trigger != store.TriggerManual || run.State != store.RunRunning {
		t.Fatalf("run now = %+v, %v", run, err)
	}
	if _, err := h.s.RunNow(context.Background(), "brief"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second run now: %v", err)
	}
	list, err := h.s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "brief" || !list[0].Running || list[0].Last == nil ||
		list[0].Last.State != store.RunRunning || !list[0].Next.Equal(utc("2026-03-02T08:00:00Z")) ||
		list[0].TimeZone != "Europe/London" {
		t.Fatalf("list[0] = %+v", list[0])
	}
	if list[1].Name != "off" || list[1].Enabled || !list[1].Next.IsZero() {
		t.Fatalf("list[1] = %+v", list[1])
	}
	close(release)
	h.idle()
	// The manual run took no cron slot: 08:00 still fires.
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	// A disabled schedule never fires by the clock, but can be run by hand.
	h.at(utc("2026-03-02T09:00:00Z"))
	h.idle()
	if len(h.runs("off")) != 0 {
		t.Fatal("disabled schedule fired")
	}
	if _, err := h.s.RunNow(context.Background(), "off"); err != nil {
		t.Fatal(err)
	}
	h.idle()
	list, _ = h.s.List(context.Background())
	if list[0].LastOutcome != store.RunSucceeded || len(list[0].Recent) != 2 || list[0].Recent[0].Trigger != store.TriggerCron {
		t.Fatalf("list[0] after = %+v", list[0])
	}
	if list[1].LastOutcome != store.RunSucceeded {
		t.Fatalf("list[1] after = %+v", list[1])
	}
	h.close()
	if _, err := h.s.RunNow(context.Background(), "brief"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("run now when stopped: %v", err)
	}
}

func TestShutdownInterruptsRunningTurn(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	h := newHarness(t, t0, d)
	blockingAgents(h)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.turns(1) // the turn is in progress
	h.close()
	h.open(d)
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunFailed || !strings.Contains(runs[0].Reason, "shutting down") {
		t.Fatalf("runs = %+v", runs)
	}
}

// beachd stops while the agent works on a run's task: the run stays
// running with its task, and the next start resumes it (waits for that
// task, starts no other turn) and delivers the answer.
func TestShutdownLeavesTaskInFlightForNextStart(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	h := newHarness(t, t0, d)
	h.agents.start = func(ctx context.Context, n int, c call) (*agent.Turn, error) {
		return &agent.Turn{ContextID: c.ContextID, TaskID: fmt.Sprintf("task-%d", n),
			Task: &agent.Task{ID: fmt.Sprintf("task-%d", n), Status: agent.TaskStatus{State: agent.StateWorking}}}, nil
	}
	blockingAgents(h)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.turns(1)
	poll.Eventually(t, 5*time.Second, "the run's task recorded", func() bool {
		runs := h.runs("brief")
		return len(runs) == 1 && runs[0].TaskID == "task-1"
	})
	h.close()
	db := storetest.OpenAt(t, h.path, bolt.Options{})
	runs, err := db.ScheduleRuns(context.Background(), "brief", 0)
	db.Close()
	if err != nil || len(runs) != 1 || runs[0].State != store.RunRunning || runs[0].TaskID != "task-1" {
		t.Fatalf("after shutdown: %+v %v", runs, err)
	}
	h.agents.wait = nil // answers at once
	h.open(d)
	h.idle()
	if n := len(h.agents.Calls()); n != 1 {
		t.Fatalf("%d turns started, want the one resumed", n)
	}
	runs = h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].TaskID != "task-1" {
		t.Fatalf("after the next start: %+v", runs)
	}
	if got := h.enq.Got(); len(got) != 1 || *got[0].Env.Parts[0].Text != "brief task-1" {
		t.Fatalf("enqueued %+v", got)
	}
}

func TestRunLoop(t *testing.T) {
	// Run itself: a slot due at start fires, and Run returns nil when ctx ends.
	t0 := utc("2026-03-02T08:00:01Z")
	c := fakeclock.New(t0)
	enq := &fakeEnqueuer{reg: envelope.NewRegistry()}
	s, _ := newScheduler(t, Config{Schedules: []Definition{def("brief", "0 8 * * *")}, Now: c.Now, DefaultZone: time.UTC},
		&fakeAgents{}, enq, t0.Add(-time.Hour))
	stop := running(t, s)
	poll.Eventually(t, 5*time.Second, "the due slot's result enqueued", func() bool { return len(enq.Got()) > 0 })
	stop()
	if len(enq.Got()) != 1 {
		t.Fatalf("enqueued %d", len(enq.Got()))
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	}
	t.Fatalf("metric is neither a counter nor a gauge")
	return 0
}

func TestBogusClockJumpForwardDoesNotSilenceSchedule(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	d.CatchUp = CatchUpRunOnce
	h := newHarness(t, t0, d)
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	// The clock jumps four years ahead (a catch-up run happens then), and
	// comes back.
	h.at(utc("2030-03-02T09:00:00Z"))
	h.idle()
	next := h.at(utc("2026-03-02T09:00:00Z"))
	if !next.Equal(utc("2026-03-03T08:00:00Z")) {
		t.Fatalf("next after the clock came back = %v, want tomorrow 08:00", next)
	}
	h.at(utc("2026-03-02T08:00:00Z")) // today's slot again: refused
	h.at(next)
	h.idle()
	if got := h.states("brief"); got != "03-02T08:00:succeeded 03-03T08:00:succeeded 03-02T08:00:succeeded" {
		// states() sorts by slot, so 2030 sorts last.
		t.Fatalf("runs = %s", got)
	}
	if n := len(h.agents.Calls()); n != 3 {
		t.Fatalf("calls = %d, want 3 (08:00, the 2030 catch-up, tomorrow)", n)
	}
}

func TestPermanentAgentErrorIsNotRetried(t *testing.T) {
	t0 := utc("2026-03-02T07:59:00Z")
	d := def("brief", "0 8 * * *")
	d.Retries = 5
	h := newHarness(t, t0, d)
	h.agents.start = func(ctx context.Context, n int, c call) (*agent.Turn, error) {
		return nil, fmt.Errorf("start turn: %w", agent.ErrUnknownAgent)
	}
	h.at(t0)
	h.at(utc("2026-03-02T08:00:00Z"))
	h.idle()
	runs := h.runs("brief")
	if len(runs) != 1 || runs[0].State != store.RunFailed || runs[0].Attempts != 1 {
		t.Fatalf("runs = %+v", runs)
	}
}
