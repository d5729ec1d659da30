package channels

import (
	"math/rand/v2"
	"time"

	"github.com/cool-ai/beachd/envelope"
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

// Default policies (the retry schedules of docs/architecture.md), from the
// channels' delivery profiles in envelope.ChannelSpecs.
var (
	// EmailPolicy is Postfix-like: 5 min doubling to a little over an hour,
	// for up to 5 days.
	EmailPolicy = mustDefaultPolicy(envelope.ChannelEmail)
	// WebhookPolicy follows the Standard Webhooks schedule (immediately, 5 s,
	// 5 min, 30 min, 2 h, 5 h, 10 h, 10 h …) for about three days.
	WebhookPolicy = mustDefaultPolicy(envelope.ChannelWebhook)
	// MessagingPolicy (SMS, WhatsApp): a message is useful for hours, not days.
	MessagingPolicy = mustDefaultPolicy(envelope.ChannelSMS)
)

// PolicyOf converts a channel's delivery profile.
func PolicyOf(p envelope.DeliveryProfile) Policy {
	return Policy{Delays: append([]time.Duration(nil), p.Delays...), Lifetime: p.Lifetime, Jitter: p.Jitter, Timeout: p.Timeout}
}

// DefaultPolicy is the retry policy of the named channel's spec; an
// unknown channel is an error naming it.
func DefaultPolicy(channel string) (Policy, error) {
	spec, err := envelope.LookupChannel(channel)
	if err != nil {
		return Policy{}, err
	}
	return PolicyOf(spec.Profile), nil
}

func mustDefaultPolicy(channel string) Policy {
	p, err := DefaultPolicy(channel)
	if err != nil {
		panic(err)
	}
	return p
}

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
