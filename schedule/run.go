package schedule

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// maxReason bounds a recorded failure reason (and the error notice's text).
const maxReason = 500

// perform runs the turn of one claimed slot with its retries, records every
// step, and returns the final record. A panic anywhere in it is recovered
// and recorded as a failed run. With resume, run is a run a previous
// process left in flight: its first attempt starts no turn but waits for
// the task it recorded (run.TaskID), from attempt run.Attempts on.
func (s *Scheduler) perform(ctx context.Context, def Definition, run store.ScheduleRun, resume bool) (out store.ScheduleRun) {
	start := s.cfg.Now()
	log := s.log.With("schedule", def.Name, "run_id", run.ID())
	defer func() {
		if p := recover(); p != nil {
			log.Error("schedule run panicked", "panic", p, "stack", string(debug.Stack()))
			run.State, run.FinishedAt = store.RunFailed, s.cfg.Now()
			run.Reason = truncate(fmt.Sprintf("panic: %v", p))
			s.record(run)
			out = run
		}
		if out.State == store.RunRunning {
			return // left in flight at shutdown: the next start resumes it
		}
		s.m.runs.WithLabelValues(def.Name, out.State).Inc()
		s.m.lastRun.WithLabelValues(def.Name).Set(float64(out.FinishedAt.Unix()))
		s.m.duration.WithLabelValues(def.Name).Observe(out.FinishedAt.Sub(start).Seconds())
	}()
	first := 1
	if resume {
		first = max(run.Attempts, 1)
	}
	for attempt := first; ; attempt++ {
		run.Attempts, run.State = attempt, store.RunRunning
		resumed := resume && attempt == first
		if !resumed {
			// The task id is recorded only while the attempt's turn is in
			// flight: a restart resumes that turn, never an earlier one.
			run.ContextID, run.TaskID, run.PushID = "", "", ""
		}
		if attempt > first {
			s.record(run)
		}
		res := s.attempt(ctx, def, run, resumed)
		envID, err := res.envID, res.err
		run.ContextID, run.TaskID, run.PushID, run.AnsweredBy = res.contextID, res.taskID, res.pushID, res.answeredBy
		if err == nil {
			run.State, run.EnvelopeID, run.Reason = store.RunSucceeded, envID, ""
			log.Info("schedule run succeeded", "attempt", attempt, "envelope_id", envID, "answered_by", res.answeredBy)
			break
		}
		run.Reason = truncate(err.Error())
		if ctx.Err() != nil && res.inflight && res.envID == "" {
			// beachd stops while the agent works on the task: the run stays
			// running with its task, and the next start resumes it, as
			// after a crash.
			run.State, run.Reason = store.RunRunning, ""
			s.record(run)
			log.Info("schedule run left in flight at shutdown; the next start resumes it", "attempt", attempt, "task_id", run.TaskID)
			return run
		}
		if ctx.Err() != nil {
			run.State = store.RunFailed
			run.Reason = truncate("interrupted: beachd is shutting down (" + err.Error() + ")")
			break
		}
		if attempt > def.Retries || agent.IsPermanent(err) || errors.Is(err, agent.ErrUnknownAgent) {
			run.State = store.RunFailed
			log.Warn("schedule run failed", "attempt", attempt, "err", err)
			break
		}
		run.State = store.RunRetrying
		// Without the failed attempt's task: a restart during the wait
		// must not take it for a turn in flight.
		waiting := run
		waiting.TaskID, waiting.PushID = "", ""
		s.record(waiting)
		log.Warn("schedule run attempt failed; retrying", "attempt", attempt, "retry_in", def.RetryDelay, "err", err)
		if !sleep(ctx, def.RetryDelay) {
			run.State = store.RunFailed
			run.Reason = truncate("interrupted: beachd is shutting down (" + run.Reason + ")")
			break
		}
	}
	run.FinishedAt = s.cfg.Now()
	if run.State == store.RunFailed && def.ErrorNotice && ctx.Err() == nil {
		id, err := s.enq.Enqueue(ctx, errorNotice(def, run), def.To, def.Agent, "schedule:"+def.Name)
		if err != nil {
			log.Error("enqueue schedule error notice", "err", err)
		} else {
			run.ErrorNoticeID = id
		}
	}
	s.record(run)
	return run
}

type attemptResult struct {
	envID, contextID, taskID string
	pushID                   string // the turn's push id (agent.Turn.PushID)
	answeredBy               string // agent.AnsweredBy*
	// inflight: the turn's task was recorded (or resumed) as in flight at
	// the agent.
	inflight bool
	err      error
}

// attempt starts the turn, waits for it within the schedule's timeout and
// enqueues its result. An agent call that ignores its context is abandoned
// AbandonAfter past the timeout, so that one stuck agent cannot hold its
// schedule for ever.
func (s *Scheduler) attempt(ctx context.Context, def Definition, run store.ScheduleRun, resumed bool) attemptResult {
	contextID := def.Session
	if resumed {
		contextID = run.ContextID
	} else if contextID == "" {
		contextID = fmt.Sprintf("beachd-%s-%d-%d", def.Name, run.Slot.UnixNano(), run.Attempts)
		if run.Trigger == store.TriggerManual {
			contextID += "-manual"
		}
	}
	actx, cancel := context.WithTimeout(ctx, def.Timeout)
	defer cancel()
	ch := make(chan attemptResult, 1)
	go func() {
		var r attemptResult
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("schedule attempt panicked", "schedule", def.Name, "panic", p, "stack", string(debug.Stack()))
				r.err = fmt.Errorf("panic: %v", p)
			}
			ch <- r
		}()
		r = s.turn(actx, def, run, contextID, resumed)
	}()
	t := time.NewTimer(def.Timeout + s.cfg.AbandonAfter)
	defer t.Stop()
	var r attemptResult
	select {
	case r = <-ch:
	case <-t.C:
		return attemptResult{contextID: contextID,
			err: fmt.Errorf("%w after %s (the agent call did not return; abandoned)", ErrTimeout, def.Timeout)}
	}
	if r.contextID == "" {
		r.contextID = contextID
	}
	if r.err != nil && errors.Is(r.err, context.DeadlineExceeded) && ctx.Err() == nil {
		r.err = fmt.Errorf("%w after %s: %v", ErrTimeout, def.Timeout, r.err)
	}
	return r
}

// turn starts the attempt's turn — or, resumed, takes the task a previous
// process started (run.TaskID) —, waits for its answer and enqueues it.
func (s *Scheduler) turn(ctx context.Context, def Definition, run store.ScheduleRun, contextID string, resumed bool) attemptResult {
	var r attemptResult
	var t *agent.Turn
	if resumed {
		if ra, ok := s.agents.(resumer); ok {
			// Under the push id the turn started with: the agent's
			// pushes after the restart answer it.
			t = ra.ResumeTurn(ctx, def.Agent, contextID, run.TaskID, run.PushID)
		} else {
			t = &agent.Turn{ContextID: contextID, TaskID: run.TaskID}
		}
		r.inflight = true
	} else {
		var err error
		t, err = s.agents.StartTurn(ctx, def.Agent, def.Message, contextID)
		if err != nil {
			r.err = fmt.Errorf("start turn: %w", err)
			return r
		}
		if t == nil {
			r.err = fmt.Errorf("start turn: %w (no turn)", ErrNoResult)
			return r
		}
		if t.Task != nil && t.TaskID != "" && ctx.Err() == nil {
			// The turn is in flight at the agent: a restart from here on
			// resumes it (waits for this task) instead of losing it.
			inflight := run
			inflight.ContextID, inflight.TaskID, inflight.PushID = t.ContextID, t.TaskID, t.PushID
			s.record(inflight)
			r.inflight = true
		}
	}
	r.contextID, r.taskID, r.pushID = t.ContextID, t.TaskID, t.PushID
	env, err := s.agents.WaitTurn(ctx, def.Agent, t, s.cfg.Poll)
	r.answeredBy = t.AnsweredBy
	if err != nil {
		r.err = fmt.Errorf("wait for turn: %w", err)
		return r
	}
	if env == nil || len(env.Parts) == 0 {
		r.err = ErrNoResult
		return r
	}
	if env.Meta.FinalizedBy == "error" {
		text := ""
		for _, p := range env.Parts {
			if p.Text != nil {
				text += " " + *p.Text
			}
		}
		r.err = fmt.Errorf("%w:%s", ErrAgentFailed, text)
		if text == "" {
			r.err = ErrAgentFailed
		}
		return r
	}
	m := &env.Meta
	if m.SessionID == "" {
		m.SessionID = firstNonEmpty(r.contextID, contextID)
	}
	if m.TurnID == "" {
		m.TurnID = firstNonEmpty(r.taskID, run.ID())
	}
	if m.ProducedAt.IsZero() {
		m.ProducedAt = s.cfg.Now().UTC()
	}
	if m.FinalizedBy == "" {
		m.FinalizedBy = "complete"
	}
	if env.Role == "" {
		env.Role = "agent"
	}
	if err := ctx.Err(); err != nil {
		// Timed out or abandoned meanwhile: the run is already failed, a
		// late answer is not delivered.
		r.err = fmt.Errorf("wait for turn: %w", err)
		return r
	}
	// Keyed by the run and attempt where the enqueuer can: a run resumed
	// after a restart that came between this and the run's record stores
	// its answer once.
	var id string
	if k, ok := s.enq.(keyedEnqueuer); ok {
		id, err = k.EnqueueKeyed(ctx, env, def.To, def.Agent, "schedule:"+def.Name,
			"schedule-run:"+run.ID()+"#"+strconv.Itoa(run.Attempts))
	} else {
		id, err = s.enq.Enqueue(ctx, env, def.To, def.Agent, "schedule:"+def.Name)
	}
	if err != nil {
		r.err = fmt.Errorf("enqueue result: %w", err)
		return r
	}
	r.envID = id
	return r
}

// resumer is an Agents that resumes a turn a previous process left in
// flight under its push id (agent.Client.ResumeTurn).
type resumer interface {
	ResumeTurn(ctx context.Context, agentName, contextID, taskID, pushID string) *agent.Turn
}

var _ resumer = (*agent.Client)(nil)

// keyedEnqueuer is an Enqueuer that stores an envelope once per key (a
// repeat answers the first envelope id): api.Ingester.
type keyedEnqueuer interface {
	EnqueueKeyed(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source, key string) (string, error)
}

// errorNotice is the envelope delivered when a run fails for good: one
// `error` part saying which schedule, which slot and why.
func errorNotice(def Definition, run store.ScheduleRun) *envelope.Envelope {
	slot := run.Slot
	text := fmt.Sprintf("The scheduled run %q for %s failed after %d attempt(s): %s",
		def.Name, slot.UTC().Format(time.RFC3339), run.Attempts, run.Reason)
	session := run.ContextID
	if session == "" {
		session = "schedule:" + def.Name
	}
	return &envelope.Envelope{
		Role:  "agent",
		Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": envelope.PartError}}},
		Meta: envelope.Meta{SessionID: session, TurnID: run.ID(), ProducedAt: run.FinishedAt.UTC(),
			FinalizedBy: "error"},
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func truncate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
