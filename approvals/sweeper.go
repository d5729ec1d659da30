package approvals

import (
	"context"
	"errors"
	"time"

	"github.com/cool-ai/beachd/store"
)

// Sweeper denies approvals whose expiry has passed, with decidedBy
// "policy:expired", and queues their injection like any other decision;
// and it fires the approval policies' due timers (reminders and
// escalations), each within MaxWait of its time.
type Sweeper struct {
	svc *Service
	// MaxWait bounds the sleep between sweeps (new approvals may expire
	// sooner than the earliest known one); default 1s.
	MaxWait time.Duration
}

// NewSweeper builds the expiry sweeper of svc.
func NewSweeper(svc *Service) *Sweeper { return &Sweeper{svc: svc, MaxWait: time.Second} }

// Sweep expires every approval due at now, and returns how many it expired.
func (w *Sweeper) Sweep(ctx context.Context) (int, error) {
	n := 0
	for {
		now := w.svc.cfg.Now()
		ids, err := w.svc.db.DueExpiries(ctx, now, 100)
		if err != nil {
			return n, err
		}
		if len(ids) == 0 {
			return n, nil
		}
		for _, id := range ids {
			if _, err := w.svc.expire(ctx, id, now); err != nil && !errors.Is(err, store.ErrAlreadyDecided) {
				return n, err
			}
			n++
		}
	}
}

// Run sweeps until ctx ends.
func (w *Sweeper) Run(ctx context.Context) error {
	for {
		if _, err := w.Sweep(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.svc.log.Error("expiry sweep", "err", err)
		}
		if _, err := w.svc.FireTimers(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.svc.log.Error("approval timers", "err", err)
		}
		wait := w.MaxWait
		if next, ok := w.svc.db.NextExpiry(); ok {
			if d := next.Sub(w.svc.cfg.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
