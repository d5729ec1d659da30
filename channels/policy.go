package channels

import (
	"math/rand/v2"
	"time"
)

// Policy is a channel's retry schedule.
type Policy struct {
	// Delays[i] is the wait after attempt i+1 fails; past the end, the last
	// delay repeats.
	Delays []time.Duration
	// Lifetime bounds retries, from the job's creation (or operator retry).
	Lifetime time.Duration
	// Jitter is the ± fraction applied to each delay (0.2 = ±20%).
	Jitter float64
	// Timeout bounds one attempt.
	Timeout time.Duration
}

// Default policies (the retry schedules of docs/architecture.md).
var (
	// EmailPolicy is Postfix-like: 5 min doubling to a little over an hour,
	// for up to 5 days.
	EmailPolicy = Policy{
		Delays:   []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 67 * time.Minute},
		Lifetime: 5 * 24 * time.Hour, Jitter: 0.2, Timeout: 2 * time.Minute,
	}
	// WebhookPolicy follows the Standard Webhooks schedule (immediately, 5 s,
	// 5 min, 30 min, 2 h, 5 h, 10 h, 10 h …) for about three days.
	WebhookPolicy = Policy{
		Delays:   []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour},
		Lifetime: 3 * 24 * time.Hour, Jitter: 0.2, Timeout: 15 * time.Second,
	}
	// MessagingPolicy (SMS, WhatsApp): a message is useful for hours, not days.
	MessagingPolicy = Policy{
		Delays:   []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute},
		Lifetime: 6 * time.Hour, Jitter: 0.2, Timeout: 30 * time.Second,
	}
)

// Delay is the base wait after the given failed attempt (1-based), before
// jitter.
func (p Policy) Delay(attempt int) time.Duration {
	if len(p.Delays) == 0 {
		return time.Minute
	}
	i := attempt - 1
	if i < 0 {
		i = 0
	}
	if i >= len(p.Delays) {
		i = len(p.Delays) - 1
	}
	return p.Delays[i]
}

// Next decides when a failed attempt is tried again. It returns ok=false
// when the job's lifetime (from start) would be over by then. retryAfter,
// when longer than the scheduled delay, wins. r supplies jitter in [0,1).
func (p Policy) Next(attempt int, start, now time.Time, retryAfter time.Duration, r func() float64) (time.Time, bool) {
	d := p.Delay(attempt)
	if p.Jitter > 0 && r != nil {
		d = time.Duration(float64(d) * (1 + p.Jitter*(2*r()-1)))
	}
	if retryAfter > d {
		d = retryAfter
	}
	next := now.Add(d)
	if p.Lifetime > 0 && next.After(start.Add(p.Lifetime)) {
		return time.Time{}, false
	}
	return next, true
}

func defaultJitter() float64 { return rand.Float64() }
