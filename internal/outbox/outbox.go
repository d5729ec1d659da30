// Package outbox runs the worker loop that durable outboxes share (approval
// injections, conversation turns): claim due jobs up to a number of
// workers, attempt each in its own goroutine, and sleep until the next job
// is due, a wake-up comes, or a job is handed over directly.
package outbox

import (
	"context"
	"sync"
	"time"
)

// Loop is one outbox's worker loop. Claim, Attempt, Next and Now are
// required.
type Loop[T any] struct {
	// Workers bounds the attempts in flight.
	Workers int
	// Claim leases at most n due jobs.
	Claim func(ctx context.Context, n int) ([]T, error)
	// Attempt handles one claimed job; it records its outcome itself.
	Attempt func(ctx context.Context, job T)
	// Next is when the next job is due, if any is.
	Next func() (time.Time, bool)
	Now  func() time.Time
	// Wake, when it receives, makes the loop look for due jobs at once;
	// Poke sends on it (without blocking) after each attempt, since a slot
	// is free then.
	Wake <-chan struct{}
	Poke func()
	// Handoff, if not nil, delivers jobs already claimed elsewhere.
	Handoff <-chan T
	// ClaimFailed is told of a failed claim (the loop goes on).
	ClaimFailed func(error)
	// MaxWait is the longest sleep between looks (default 1s).
	MaxWait time.Duration
	// Requeue, when set, runs before a claim at most every RequeueEvery
	// (default 10s): on a store shared by replicas it makes due the jobs
	// whose lease ran out in a replica that died.
	Requeue      func(ctx context.Context)
	RequeueEvery time.Duration
}

// Run runs the loop until ctx ends, then waits for the attempts in flight.
// A job claimed but not started when ctx ends stays leased: its lease runs
// out and it is due again.
func (l Loop[T]) Run(ctx context.Context) error {
	maxWait := l.MaxWait
	if maxWait <= 0 {
		maxWait = time.Second
	}
	requeueEvery := l.RequeueEvery
	if requeueEvery <= 0 {
		requeueEvery = 10 * time.Second
	}
	var requeued time.Time
	sem := make(chan struct{}, max(l.Workers, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(job T) {
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.Attempt(ctx, job)
			if l.Poke != nil {
				l.Poke() // a slot is free: look again
			}
		}()
	}
	for {
		free := cap(sem) - len(sem)
		if now := l.Now(); l.Requeue != nil && now.Sub(requeued) >= requeueEvery {
			requeued = now
			l.Requeue(ctx)
		}
		var jobs []T
		if free > 0 {
			var err error
			jobs, err = l.Claim(ctx, free)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if l.ClaimFailed != nil {
					l.ClaimFailed(err)
				}
			}
		}
		for _, job := range jobs {
			sem <- struct{}{}
			start(job)
		}
		if len(jobs) > 0 && len(jobs) == free {
			continue
		}
		wait := maxWait
		if next, ok := l.Next(); ok {
			if d := next.Sub(l.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case job := <-l.Handoff:
			t.Stop()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			start(job)
		case <-l.Wake:
			t.Stop()
		case <-t.C:
		}
	}
}
