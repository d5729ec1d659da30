package twilio

import (
	"context"
	"sync"
	"time"
)

// Limiter is a token bucket per sender (From number or Messaging Service
// SID). Twilio queues what it cannot send at once, but a long code is
// limited to about one message per second, and a burst beyond its queue is
// refused with 429/20429; pacing here keeps a burst of envelopes flowing
// instead.
//
// Policy, chosen deliberately: a caller reserves the next free slot. If the
// slot is within its context's deadline (minus the margin the call itself
// needs), it waits for it and sends; otherwise it gives the slot back and
// the attempt ends at once with a RetryAfter equal to the wait, which the
// dispatcher honours without dead-lettering. So a burst is paced, never
// rejected, and no attempt overruns its timeout.
type Limiter struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// LimiterConfig tunes a Limiter. Zero values are defaults.
type LimiterConfig struct {
	// PerSecond is the sustained rate per sender; default 1.
	PerSecond float64
	// Burst is how many messages may go at once after a quiet spell;
	// default 1.
	Burst int
	// Now and Sleep are the clock; defaults time.Now and a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewLimiter builds a limiter.
func NewLimiter(cfg LimiterConfig) *Limiter {
	if cfg.PerSecond <= 0 {
		cfg.PerSecond = 1
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	return &Limiter{rate: cfg.PerSecond, burst: float64(cfg.Burst), now: cfg.Now, sleep: cfg.Sleep, buckets: map[string]*bucket{}}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reserve takes a token for sender and returns how long to wait before
// using it. When the wait would exceed maxWait the token is not taken and
// ok is false.
func (l *Limiter) reserve(sender string, maxWait time.Duration) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[sender]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[sender] = b
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(l.burst, b.tokens+el.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	wait = time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	if wait > maxWait {
		return wait, false
	}
	b.tokens-- // negative: the debt is paid back before the next caller
	return wait, true
}

// cancel gives back a token reserved but not used (the wait was cut short).
func (l *Limiter) cancel(sender string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[sender]; b != nil {
		b.tokens = min(l.burst, b.tokens+1)
	}
}

// Wait blocks until sender may send, within ctx. reserveFor is the part of
// ctx's deadline the caller keeps for the call itself. It returns
// (retryAfter, nil) with retryAfter > 0 when the wait would not fit the
// deadline, and ctx's error when ctx ends while waiting.
func (l *Limiter) Wait(ctx context.Context, sender string, reserveFor time.Duration) (time.Duration, error) {
	maxWait := time.Duration(1<<62 - 1)
	if dl, ok := ctx.Deadline(); ok {
		// Context deadlines are wall-clock time, whatever l.now says.
		maxWait = time.Until(dl) - reserveFor
		if maxWait < 0 {
			maxWait = 0
		}
	}
	wait, ok := l.reserve(sender, maxWait)
	if !ok {
		return wait, nil
	}
	if wait <= 0 {
		return 0, nil
	}
	if err := l.sleep(ctx, wait); err != nil {
		l.cancel(sender)
		return 0, err
	}
	return 0, nil
}
