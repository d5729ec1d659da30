package webhook

import (
	"sync"
	"time"
)

// BreakerConfig tunes the per-endpoint circuit breaker. The zero value
// means the defaults.
type BreakerConfig struct {
	// Threshold is the number of consecutive temporary failures that opens
	// the circuit; default 5. Negative disables the breaker.
	Threshold int
	// Cooldown is the first open period; default 30 s. Each failed probe
	// doubles it, up to MaxCooldown (default 10 min).
	Cooldown    time.Duration
	MaxCooldown time.Duration
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Threshold == 0 {
		c.Threshold = 5
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 30 * time.Second
	}
	if c.MaxCooldown <= 0 {
		c.MaxCooldown = 10 * time.Minute
	}
	if c.MaxCooldown < c.Cooldown {
		c.MaxCooldown = c.Cooldown
	}
	return c
}

// BreakerState is where an endpoint's circuit is.
type BreakerState int

const (
	Closed   BreakerState = iota // attempts flow
	Open                         // attempts fail fast until the cool-down ends
	HalfOpen                     // one probe is in flight or may go
)

// MarshalText writes the state's name.
func (s BreakerState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s BreakerState) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// breaker is one endpoint's circuit. Every method takes now so that tests
// drive it with an exact clock.
type breaker struct {
	cfg BreakerConfig

	mu       sync.Mutex
	state    BreakerState
	failures int           // consecutive temporary failures while closed
	openedAt time.Time     // when the circuit last opened
	cooldown time.Duration // current open period
	probing  bool          // a half-open probe is in flight
	gen      uint64        // incremented whenever the circuit opens
}

// ticket identifies an allowed attempt, so that the report of an attempt
// that started before the circuit last opened is not mistaken for the probe.
type ticket struct {
	gen   uint64
	probe bool
}

func newBreaker(cfg BreakerConfig) *breaker {
	cfg = cfg.withDefaults()
	return &breaker{cfg: cfg, cooldown: cfg.Cooldown}
}

// mayAttempt reports, without changing anything, whether allow would let an
// attempt through now. The dispatcher's Admit uses it to leave jobs for an
// open endpoint unclaimed.
func (b *breaker) mayAttempt(now time.Time) bool {
	if b.cfg.Threshold < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		return !now.Before(b.openedAt.Add(b.cooldown))
	case HalfOpen:
		return !b.probing
	}
	return true
}

// closed reports whether the circuit is closed (not open, not probing).
func (b *breaker) closed() bool {
	if b.cfg.Threshold < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == Closed
}

// allow decides whether an attempt may go to the network now. When it may
// not, wait is how long until the circuit lets a probe through. A true
// result must be followed by exactly one report with the ticket.
func (b *breaker) allow(now time.Time) (t ticket, ok bool, wait time.Duration) {
	if b.cfg.Threshold < 0 {
		return ticket{}, true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		until := b.openedAt.Add(b.cooldown)
		if now.Before(until) {
			return ticket{}, false, until.Sub(now)
		}
		b.state = HalfOpen
		b.probing = true
		return ticket{gen: b.gen, probe: true}, true, 0
	case HalfOpen:
		if b.probing {
			// Another attempt is probing; ask to come back shortly.
			return ticket{}, false, time.Second
		}
		b.probing = true
		return ticket{gen: b.gen, probe: true}, true, 0
	}
	return ticket{gen: b.gen}, true, 0
}

// report records an allowed attempt's outcome: failed is true for
// temporary failures (the endpoint is unwell), false for any answer that
// shows the endpoint alive (2xx, 4xx other than 429).
func (b *breaker) report(t ticket, now time.Time, failed bool) {
	if b.cfg.Threshold < 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		// Allowed before the circuit last opened and finished late: its
		// outcome says nothing about the endpoint now.
		return
	}
	switch {
	case b.state == HalfOpen && t.probe:
		b.probing = false
		if failed {
			b.cooldown = min(2*b.cooldown, b.cfg.MaxCooldown)
			b.state, b.openedAt = Open, now
			b.gen++
			return
		}
		b.state, b.failures, b.cooldown = Closed, 0, b.cfg.Cooldown
	case b.state == Closed:
		if !failed {
			b.failures = 0
			return
		}
		b.failures++
		if b.failures >= b.cfg.Threshold {
			b.state, b.openedAt, b.failures = Open, now, 0
			b.gen++
		}
	}
}

// abandon ends an allowed attempt that says nothing about the endpoint
// (cancelled by shutdown): a probe's slot is freed, nothing else changes.
func (b *breaker) abandon(t ticket) {
	if b.cfg.Threshold < 0 || !t.probe {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen == b.gen && b.state == HalfOpen {
		b.probing = false
	}
}

// snapshot returns the state and, when open, the time it allows a probe.
func (b *breaker) snapshot() (BreakerState, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open {
		return Open, b.openedAt.Add(b.cooldown)
	}
	return b.state, time.Time{}
}
