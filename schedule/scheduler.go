package schedule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Agents is the part of agent.Client the scheduler uses: start a turn, wait
// for it to settle.
type Agents interface {
	StartTurn(ctx context.Context, agentName, text, contextID string) (*agent.Turn, error)
	WaitTurn(ctx context.Context, agentName string, turn *agent.Turn, poll time.Duration) (*envelope.Envelope, error)
}

var _ Agents = (*agent.Client)(nil)

// Enqueuer stores a result envelope and its deliveries (api.Ingester does).
// It returns the envelope id.
type Enqueuer interface {
	Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error)
}

// Config configures a Scheduler. Zero values have the documented defaults.
type Config struct {
	Schedules []Definition
	// Agents are the configured agent names schedules may use; nil skips
	// the check.
	Agents map[string]bool
	// DefaultZone is the zone of specs that name none; nil means time.Local.
	DefaultZone *time.Location
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Grace is how late a slot may be noticed and still count as on time
	// rather than missed; default 1 minute.
	Grace time.Duration
	// MaxSleep bounds the wait between two looks at the clock, so that a
	// wall-clock step is noticed within it; default 30s.
	MaxSleep time.Duration
	// Poll is how often a running turn's task is polled; default 1s.
	Poll time.Duration
	// ShutdownWait bounds how long Run waits for runs in progress to record
	// their interruption when ctx ends; default 10s.
	ShutdownWait time.Duration
	// AbandonAfter is how long past its timeout an attempt whose agent call
	// ignores cancellation is waited for before it is abandoned; default 5s.
	AbandonAfter time.Duration
	// Log receives the scheduler's log; default discard.
	Log *slog.Logger
	// Metrics is where the per-schedule metrics are registered; nil: none.
	Metrics prometheus.Registerer
}

// Scheduler fires the configured schedules. Build it with New, run it with
// Run; List, RunNow, Pause, Resume and Active may be called from any
// goroutine.
//
// No store write, agent call or other I/O is made while mu is held: List,
// Active and RunNow take it, and an API read must never wait for a disk
// flush. A change that needs a write is therefore made in three steps:
// decide and reserve under mu, write without it, then apply the outcome
// under mu. What keeps the steps safe is ownership: a schedule has at most
// one owner (job.running) — the goroutine claiming its run, running it or
// starting the slot queued behind it — and only the owner gives it up, so a
// second run can never start while the first one's claim is being written.
type Scheduler struct {
	cfg    Config
	db     store.Schedules
	agents Agents
	enq    Enqueuer
	log    *slog.Logger
	m      *metrics
	jobs   []*job
	byName map[string]*job
	wake   chan struct{}
	// wg counts the owners of schedules. It is added to only under mu, by
	// Run's goroutine or while accepting, so that end's Wait sees them all.
	wg sync.WaitGroup

	mu        sync.Mutex
	base      context.Context // Run's context, from begin until end returns
	accepting bool            // RunNow works: from after recovery until shutdown begins
}

// job is one schedule's live state. Fields below def/spec are guarded by
// Scheduler.mu. loaded, cursor and retryAt are written only by the goroutine
// that ticks (Run's), so it may hold a copy across a store write.
type job struct {
	def  Definition
	spec *Spec

	loaded  bool
	cursor  time.Time // mirror of the stored cursor
	retryAt time.Time // after a store error, do not look before this
	// running: the schedule has an owner, which runs current (or is
	// claiming it). Only the owner clears it.
	running bool
	current store.ScheduleRun
	// queued is a claimed slot waiting for the owner's run (overlap: queue);
	// the owner starts it when its run ends.
	queued *store.ScheduleRun
	// paused mirrors the stored paused flag, as the ticking goroutine last
	// read it. Pause and Resume write the store, then bump gen; the ticking
	// goroutine re-reads the state when gen differs from seen. The store
	// refuses a cron claim while the schedule is paused, so a tick that read
	// a stale flag cannot fire a slot after Pause has returned.
	paused    bool
	gen, seen uint64
}

// New checks the definitions and builds a Scheduler. It starts nothing.
// A bad definition is a *ConfigError naming the schedule and key.
func New(cfg Config, db store.Schedules, agents Agents, enq Enqueuer) (*Scheduler, error) {
	if db == nil || agents == nil || enq == nil {
		return nil, errors.New("schedule: db, agents and enqueuer are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Minute
	}
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ShutdownWait <= 0 {
		cfg.ShutdownWait = 10 * time.Second
	}
	if cfg.AbandonAfter <= 0 {
		cfg.AbandonAfter = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	specs, err := Check(cfg.Schedules, CheckOptions{Agents: cfg.Agents, DefaultZone: cfg.DefaultZone, Now: cfg.Now()})
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, db: db, agents: agents, enq: enq, log: cfg.Log, m: m,
		byName: map[string]*job{}, wake: make(chan struct{}, 1)}
	for i, d := range cfg.Schedules {
		j := &job{def: d.withDefaults(), spec: specs[i]}
		s.jobs = append(s.jobs, j)
		s.byName[d.Name] = j
		// Every series exists from the start, at zero, for dashboards.
		for _, o := range []string{store.RunSucceeded, store.RunFailed, store.RunSkipped, store.RunMissed} {
			m.runs.WithLabelValues(d.Name, o)
		}
		m.running.WithLabelValues(d.Name).Set(0)
	}
	slices.SortFunc(s.jobs, func(a, b *job) int {
		switch {
		case a.def.Name < b.def.Name:
			return -1
		case a.def.Name > b.def.Name:
			return 1
		}
		return 0
	})
	return s, nil
}

// Run fires schedules until ctx ends, then waits (up to ShutdownWait) for
// runs in progress to record their interruption and returns nil. At start it
// marks runs a previous process left unfinished as failed; their slots stay
// claimed.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	for {
		next := s.tick()
		d := s.cfg.MaxSleep
		if !next.IsZero() {
			if w := next.Sub(s.cfg.Now()); w < d {
				d = max(w, 0)
			}
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-s.wake:
			t.Stop()
		}
	}
}

// Active reports whether RunNow works: Run has begun, has recovered the runs
// a previous process left, and is not shutting down.
func (s *Scheduler) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepting && s.base.Err() == nil
}

// begin makes the scheduler active: RunNow works once it returns nil.
func (s *Scheduler) begin(ctx context.Context) error {
	s.mu.Lock()
	if s.base != nil {
		s.mu.Unlock()
		return errors.New("schedule: Run is already active")
	}
	s.base = ctx
	s.mu.Unlock()
	// Before RunNow works: a manual run claimed now would be taken for one
	// a previous process left.
	now := s.cfg.Now()
	runs, err := s.db.InterruptScheduleRuns(ctx, now, "interrupted: beachd stopped before the run finished")
	if err != nil {
		s.mu.Lock()
		s.base = nil
		s.mu.Unlock()
		return fmt.Errorf("recover schedule runs: %w", err)
	}
	var resume []store.ScheduleRun
	for _, r := range runs {
		if j := s.byName[r.Schedule]; j != nil && r.TaskID != "" && r.EnvelopeID == "" && r.ErrorNoticeID == "" {
			resume = append(resume, r)
			continue
		}
		s.log.Warn("schedule run interrupted by a restart", "schedule", r.Schedule, "run_id", r.ID(), "slot", r.Slot)
		s.m.runs.WithLabelValues(r.Schedule, store.RunFailed).Inc()
	}
	s.mu.Lock()
	s.accepting = true
	for _, r := range resume {
		s.resume(ctx, s.byName[r.Schedule], r)
	}
	s.mu.Unlock()
	return nil
}

// resume takes up a run a previous process left with its turn in flight
// (its task recorded): the run is running again, owns its schedule, and
// waits for that task — by polling, as the push URL the agent was given
// belongs to the previous process — instead of being lost or started
// twice. Called with s.mu held.
func (s *Scheduler) resume(ctx context.Context, j *job, run store.ScheduleRun) {
	if j.running {
		// Two runs of one schedule in flight: the other owns it.
		s.log.Warn("schedule run interrupted by a restart", "schedule", run.Schedule, "run_id", run.ID(), "slot", run.Slot)
		s.m.runs.WithLabelValues(run.Schedule, store.RunFailed).Inc()
		return
	}
	run.State, run.FinishedAt, run.Reason = store.RunRunning, time.Time{}, ""
	s.own(j, run)
	s.record(run)
	s.log.Info("schedule run resumed after a restart: waiting for its task", "schedule", run.Schedule, "run_id", run.ID(),
		"task_id", run.TaskID, "attempt", run.Attempts)
	go func() {
		s.perform(ctx, j.def, run, true)
		s.execute(ctx, j, nil) // the slots queued meanwhile, then frees the schedule
	}()
}

// end stops RunNow, waits for runs in progress and claims being written
// (bounded) and makes the scheduler inactive.
func (s *Scheduler) end() {
	s.mu.Lock()
	s.accepting = false
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(s.cfg.ShutdownWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("schedule runs still in progress at shutdown; they are recorded as interrupted at the next start")
	}
	s.mu.Lock()
	s.base = nil
	s.mu.Unlock()
}

// tick looks at every enabled schedule once and returns the earliest instant
// something is due (zero: nothing ever).
func (s *Scheduler) tick() time.Time {
	now := s.cfg.Now()
	var next time.Time
	for _, j := range s.jobs {
		if j.def.Disabled {
			continue
		}
		n := s.tickJob(j, now)
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// storeRetry is the pause after a store error before a schedule is looked at
// again.
const storeRetry = 5 * time.Second

func (s *Scheduler) tickJob(j *job, now time.Time) time.Time {
	name := j.def.Name
	s.mu.Lock()
	loaded, cursor, retryAt, paused, gen := j.loaded, j.cursor, j.retryAt, j.paused, j.gen
	if j.seen != gen {
		loaded = false
	}
	s.mu.Unlock()
	if now.Before(retryAt) {
		return retryAt
	}
	if !loaded {
		st, err := s.db.InitScheduleState(context.Background(), name, now)
		if err != nil {
			s.log.Error("load schedule state", "schedule", name, "err", err)
			return s.retryLater(j, now)
		}
		cursor, paused = st.Cursor, st.Paused
		s.mu.Lock()
		j.cursor, j.loaded, j.paused, j.seen = cursor, true, paused, gen
		s.mu.Unlock()
	}
	if paused {
		// Nothing is due until Resume, which wakes Run.
		return time.Time{}
	}
	if cursor.After(now.Add(s.cfg.Grace)) {
		// The wall clock went back past the cursor. Rewind it to now, so that
		// a bogus step forward cannot silence the schedule until the clock
		// catches up; slots with a record (every slot that ran, was skipped
		// or missed) stay refused by the store.
		st, err := s.db.RewindScheduleCursor(context.Background(), name, now)
		if err != nil {
			s.log.Error("rewind schedule cursor", "schedule", name, "err", err)
			return s.retryLater(j, now)
		}
		s.log.Warn("the clock went back; schedule cursor rewound", "schedule", name, "from", cursor, "to", st.Cursor)
		cursor = st.Cursor
		s.setCursor(j, cursor)
	}
	first := j.spec.Next(cursor)
	if first.IsZero() {
		return time.Time{}
	}
	if first.After(now) {
		s.m.nextRun.WithLabelValues(name).Set(float64(first.Unix()))
		return first
	}
	latest := j.spec.Latest(cursor, now)
	if latest.IsZero() {
		latest = first
	}
	run := store.ScheduleRun{Schedule: name, Slot: latest, Trigger: store.TriggerCron, ClaimedAt: now}
	if now.Sub(latest) > s.cfg.Grace {
		// Every due slot is stale: beachd was down, or the clock jumped.
		if j.def.CatchUp == CatchUpSkip {
			run.State = store.RunMissed
			run.FinishedAt = now
			run.Reason = "missed while beachd was not running (catch_up: skip)"
			if !first.Equal(latest) {
				run.Reason = fmt.Sprintf("missed, with every slot since %s, while beachd was not running (catch_up: skip)",
					first.UTC().Format(time.RFC3339))
			}
			if s.claim(j, run, now) {
				s.log.Info("schedule slot missed", "schedule", name, "slot", latest, "first_missed", first)
				s.m.runs.WithLabelValues(name, store.RunMissed).Inc()
			}
			return s.nextAfterCursor(j, now)
		}
		run.Trigger = store.TriggerCatchUp
	} else if !first.Equal(latest) {
		s.log.Info("schedule slots passed unobserved; firing the latest", "schedule", name, "first", first, "slot", latest)
	}
	s.fire(j, run, now)
	return s.nextAfterCursor(j, now)
}

func (s *Scheduler) setCursor(j *job, cursor time.Time) {
	s.mu.Lock()
	j.cursor = cursor
	s.mu.Unlock()
}

// retryLater holds j off after a store error and returns when to look again.
func (s *Scheduler) retryLater(j *job, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.retryAt = now.Add(storeRetry)
	return j.retryAt
}

func (s *Scheduler) nextAfterCursor(j *job, now time.Time) time.Time {
	s.mu.Lock()
	cursor, retryAt := j.cursor, j.retryAt
	s.mu.Unlock()
	if now.Before(retryAt) {
		return retryAt
	}
	n := j.spec.Next(cursor)
	if !n.IsZero() {
		s.m.nextRun.WithLabelValues(j.def.Name).Set(float64(n.Unix()))
	}
	return n
}

// fire applies the overlap policy to a due slot, claims it, and then starts,
// queues or skips it. A slot that finds the schedule without an owner makes
// its claimer the owner before the claim is written, so that no RunNow can
// start meanwhile.
func (s *Scheduler) fire(j *job, run store.ScheduleRun, now time.Time) {
	s.mu.Lock()
	owner := !j.running
	switch {
	case owner:
		run.State = store.RunRunning
		run.StartedAt = now
		s.own(j, run)
	case j.def.Overlap == OverlapQueue && j.queued == nil:
		// Only this goroutine queues, so the place stays free during the
		// claim.
		run.State = store.RunQueued
		run.Reason = fmt.Sprintf("waiting for the run %s (overlap: queue)", j.current.ID())
	case j.def.Overlap == OverlapQueue:
		run.State = store.RunSkipped
		run.FinishedAt = now
		run.Reason = fmt.Sprintf("overlap: the run %s is in progress and another is already queued", j.current.ID())
	default:
		run.State = store.RunSkipped
		run.FinishedAt = now
		run.Reason = fmt.Sprintf("overlap: the run %s is still in progress (overlap: skip)", j.current.ID())
	}
	ctx := s.base
	s.mu.Unlock()
	if !s.claim(j, run, now) {
		if owner {
			s.disown(ctx, j)
		}
		return
	}
	switch run.State {
	case store.RunRunning:
		go s.execute(ctx, j, &run)
	case store.RunQueued:
		s.log.Info("schedule slot queued behind the running one", "schedule", run.Schedule, "slot", run.Slot)
		s.enqueue(ctx, j, run)
	case store.RunSkipped:
		s.log.Warn("schedule slot skipped", "schedule", run.Schedule, "slot", run.Slot, "reason", run.Reason)
		s.m.runs.WithLabelValues(run.Schedule, store.RunSkipped).Inc()
	}
}

// claim records run durably, moving the cursor; false when the slot was
// taken (then the cursor is re-read) or the store failed. Called by the
// ticking goroutine, without s.mu.
func (s *Scheduler) claim(j *job, run store.ScheduleRun, now time.Time) bool {
	st, err := s.db.ClaimScheduleSlot(context.Background(), run)
	switch {
	case err == nil:
		s.setCursor(j, st.Cursor)
		return true
	case errors.Is(err, store.ErrSchedulePaused):
		// Paused since this tick read the flag: the slot is not fired, and
		// the next tick re-reads the state (Pause bumped gen).
		s.log.Info("schedule paused; slot not fired", "schedule", run.Schedule, "slot", run.Slot)
		return false
	case errors.Is(err, store.ErrSlotTaken):
		// Someone (an earlier life of this process) had it. Never fire it.
		s.log.Warn("schedule slot already claimed; not firing it again", "schedule", run.Schedule, "slot", run.Slot)
		s.mu.Lock()
		cursor := j.cursor
		s.mu.Unlock()
		if stored, ok, err := s.db.ScheduleState(context.Background(), run.Schedule); err == nil && ok && stored.Cursor.After(cursor) {
			cursor = stored.Cursor
		}
		if !cursor.After(run.Slot) {
			cursor = run.Slot
		}
		s.setCursor(j, cursor)
		return false
	default:
		s.log.Error("claim schedule slot", "schedule", run.Schedule, "slot", run.Slot, "err", err)
		s.retryLater(j, now)
		return false
	}
}

// own makes the caller j's owner, running run. Called with s.mu held, by
// Run's goroutine or while accepting (see wg).
func (s *Scheduler) own(j *job, run store.ScheduleRun) {
	j.running = true
	j.current = run
	s.m.running.WithLabelValues(j.def.Name).Set(1)
	s.wg.Add(1)
}

// disown gives j up after the owner's claim failed: a slot queued behind
// the run that never started goes ahead instead, else the schedule is free.
func (s *Scheduler) disown(ctx context.Context, j *job) {
	s.mu.Lock()
	if j.queued != nil {
		s.mu.Unlock()
		go s.execute(ctx, j, nil)
		return
	}
	s.free(j)
	s.mu.Unlock()
	s.wg.Done()
}

// enqueue puts a claimed slot behind j's run. When that run ended while the
// slot was being claimed, the schedule has no owner and the slot starts now.
func (s *Scheduler) enqueue(ctx context.Context, j *job, run store.ScheduleRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := run
	j.queued = &q
	if !j.running {
		s.own(j, run)
		go s.execute(ctx, j, nil)
	}
}

// free ends j's ownership. Called with s.mu held.
func (s *Scheduler) free(j *job) {
	j.running = false
	s.m.running.WithLabelValues(j.def.Name).Set(0)
}

// execute is j's owner: it performs run (nil: the queued slot), then each
// slot queued behind it, and frees the schedule. After shutdown has begun
// it starts no turn: each run left is recorded as interrupted.
func (s *Scheduler) execute(ctx context.Context, j *job, run *store.ScheduleRun) {
	defer s.wg.Done()
	if run == nil {
		run = s.handOff(j)
	}
	for ; run != nil; run = s.handOff(j) {
		if ctx.Err() != nil {
			r := *run
			r.State, r.FinishedAt = store.RunFailed, s.cfg.Now()
			r.Reason = "interrupted: beachd stopped before the run started"
			s.record(r)
			s.log.Warn("schedule run interrupted before it started", "schedule", r.Schedule, "run_id", r.ID())
			s.m.runs.WithLabelValues(r.Schedule, store.RunFailed).Inc()
			continue
		}
		if run.State == store.RunQueued {
			run.State, run.StartedAt, run.Reason = store.RunRunning, s.cfg.Now(), ""
			s.record(*run)
		}
		s.perform(ctx, j.def, *run, false)
	}
}

// handOff ends the owner's run: the slot queued behind it, if any, becomes
// the owner's run and is returned; otherwise the schedule is freed.
func (s *Scheduler) handOff(j *job) *store.ScheduleRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := j.queued
	j.queued = nil
	if q == nil {
		s.free(j)
		return nil
	}
	j.current = *q
	return q
}

// record rewrites a run, logging a store failure (the run goes on).
func (s *Scheduler) record(run store.ScheduleRun) {
	if err := s.db.UpdateScheduleRun(context.Background(), run); err != nil {
		s.log.Error("record schedule run", "schedule", run.Schedule, "run_id", run.ID(), "err", err)
	}
}

// RunNow fires the schedule at once (a manual run, which takes no cron
// slot) and returns the claimed run; the turn goes on in the background.
// It fails with ErrBusy while the schedule has a run in progress or being
// claimed, so that of simultaneous calls exactly one starts a run.
func (s *Scheduler) RunNow(ctx context.Context, name string) (store.ScheduleRun, error) {
	j, ok := s.byName[name]
	if !ok {
		return store.ScheduleRun{}, fmt.Errorf("%q: %w", name, ErrUnknownSchedule)
	}
	s.mu.Lock()
	if !s.accepting || s.base.Err() != nil {
		s.mu.Unlock()
		return store.ScheduleRun{}, ErrNotRunning
	}
	if j.running {
		id := j.current.ID()
		s.mu.Unlock()
		return store.ScheduleRun{}, fmt.Errorf("%q: %w (%s)", name, ErrBusy, id)
	}
	now := s.cfg.Now()
	run := store.ScheduleRun{Schedule: name, Slot: now, Trigger: store.TriggerManual, State: store.RunRunning,
		ClaimedAt: now, StartedAt: now}
	s.own(j, run)
	base := s.base
	s.mu.Unlock()
	if _, err := s.claimManual(ctx, base, j, run); err != nil {
		s.disown(base, j)
		if errors.Is(err, store.ErrSlotTaken) {
			return store.ScheduleRun{}, fmt.Errorf("%q: %w (a manual run started at this instant)", name, ErrBusy)
		}
		return store.ScheduleRun{}, fmt.Errorf("run %s now: %w", name, err)
	}
	s.log.Info("schedule run started by hand", "schedule", name, "run_id", run.ID())
	go s.execute(base, j, &run)
	return run, nil
}

// claimManual writes a manual run's claim. A panic in the store (bbolt
// panics on some damage) gives the schedule back before it goes on up: the
// HTTP server recovers it, and the schedule must not stay owned for ever.
func (s *Scheduler) claimManual(ctx, base context.Context, j *job, run store.ScheduleRun) (store.ScheduleState, error) {
	defer func() {
		if r := recover(); r != nil {
			s.disown(base, j)
			panic(r)
		}
	}()
	return s.db.ClaimScheduleSlot(ctx, run)
}

// Pause stops the schedule from firing until Resume, and returns its
// status. The flag is stored, so it survives a restart. A cron slot that
// comes due while the schedule is paused is skipped, not caught up when it
// is resumed, and leaves no run record. A run in progress goes on, and a
// manual run (RunNow) still works while the schedule is paused: pausing
// stops the clock, not the operator. by names who paused it (an API key's
// name, "console"); pausing a paused schedule keeps the first since-when and
// by-whom.
func (s *Scheduler) Pause(ctx context.Context, name, by string) (Status, error) {
	return s.setPaused(ctx, name, true, by)
}

// Resume lets a paused schedule fire again from the first slot after now,
// and returns its status. Resuming a schedule that is not paused changes
// nothing.
func (s *Scheduler) Resume(ctx context.Context, name, by string) (Status, error) {
	return s.setPaused(ctx, name, false, by)
}

func (s *Scheduler) setPaused(ctx context.Context, name string, paused bool, by string) (Status, error) {
	j, ok := s.byName[name]
	if !ok {
		return Status{}, fmt.Errorf("%q: %w", name, ErrUnknownSchedule)
	}
	// The write is made without mu; the ticking goroutine learns of it
	// through gen (see job.paused).
	if _, err := s.db.SetSchedulePaused(ctx, name, paused, by, s.cfg.Now()); err != nil {
		return Status{}, err
	}
	s.mu.Lock()
	j.gen++
	s.mu.Unlock()
	if paused {
		s.log.Info("schedule paused", "schedule", name, "by", by)
	} else {
		s.log.Info("schedule resumed", "schedule", name, "by", by)
	}
	s.Wake()
	return s.status(ctx, j, s.cfg.Now())
}

// Status is what List says about a schedule.
type Status struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	TimeZone string `json:"timeZone,omitempty"`
	Agent    string `json:"agent"`
	Enabled  bool   `json:"enabled"`
	CatchUp  string `json:"catchUp"`
	Overlap  string `json:"overlap"`
	Running  bool   `json:"running"`
	// Paused: an operator paused the schedule (Pause); since PausedAt, by
	// PausedBy.
	Paused   bool      `json:"paused"`
	PausedAt time.Time `json:"pausedAt,omitzero"`
	PausedBy string    `json:"pausedBy,omitempty"`
	// Next is the next slot (none for a disabled or paused schedule).
	Next time.Time `json:"next,omitzero"`
	// Last is the latest run record (of any state); LastOutcome the state of
	// the latest finished one.
	Last        *RunView  `json:"last,omitempty"`
	LastOutcome string    `json:"lastOutcome,omitempty"`
	Recent      []RunView `json:"recent"`
}

// RunView is a run record with its id, as the API shows it.
type RunView struct {
	ID string `json:"id"`
	store.ScheduleRun
}

// View returns run with its id.
func View(run store.ScheduleRun) RunView { return RunView{ID: run.ID(), ScheduleRun: run} }

// recentRuns is how many runs List returns per schedule.
const recentRuns = 10

// List returns every schedule with its next slot and recent runs, by name.
func (s *Scheduler) List(ctx context.Context) ([]Status, error) {
	now := s.cfg.Now()
	out := make([]Status, 0, len(s.jobs))
	for _, j := range s.jobs {
		st, err := s.status(ctx, j, now)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, st)
	}
	return out, nil
}

// status reads what List says about j. It reads the store, without mu.
func (s *Scheduler) status(ctx context.Context, j *job, now time.Time) (Status, error) {
	st := Status{Name: j.def.Name, Cron: j.def.Cron, TimeZone: j.def.TimeZone, Agent: j.def.Agent,
		Enabled: !j.def.Disabled, CatchUp: j.def.CatchUp, Overlap: j.def.Overlap}
	if st.TimeZone == "" && j.spec.Location != nil {
		st.TimeZone = j.spec.Location.String()
	}
	s.mu.Lock()
	st.Running = j.running
	cursor := j.cursor
	s.mu.Unlock()
	// The stored flag, not the mirror: Pause has returned once it is written.
	stored, ok, err := s.db.ScheduleState(ctx, j.def.Name)
	if err != nil {
		return Status{}, err
	}
	if ok && stored.Paused {
		st.Paused, st.PausedAt, st.PausedBy = true, stored.PausedAt, stored.PausedBy
	}
	if !j.def.Disabled && !st.Paused {
		n := time.Time{}
		if ok && stored.Cursor.After(cursor) {
			cursor = stored.Cursor
		}
		if !cursor.IsZero() {
			n = j.spec.Next(cursor)
		}
		if n.IsZero() || now.Sub(n) > s.cfg.Grace {
			n = j.spec.Next(now)
		}
		st.Next = n
	}
	runs, err := s.db.ScheduleRuns(ctx, j.def.Name, recentRuns)
	if err != nil {
		return Status{}, err
	}
	st.Recent = make([]RunView, 0, len(runs))
	for _, r := range runs {
		st.Recent = append(st.Recent, View(r))
	}
	if len(runs) > 0 {
		last := st.Recent[0]
		st.Last = &last
	}
	for _, r := range runs {
		if r.Finished() {
			st.LastOutcome = r.State
			break
		}
	}
	return st, nil
}

// Wake makes Run look at the clock now (tests, and after a clock step).
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
