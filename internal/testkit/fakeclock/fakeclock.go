// Package fakeclock is the one settable clock the tests share. A Clock is
// injected where production code takes a `Now func() time.Time` (and, for
// pacing, a `Sleep func(ctx, d) error`), so a test decides exactly what
// time it is. It is safe for concurrent use. Production code never imports
// this package.
package fakeclock

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock. A Clock from New stands still until the test moves
// it; one from NewOffset follows real time plus an offset the test moves.
type Clock struct {
	mu     sync.Mutex
	t      time.Time     // the reading, for a standing clock
	offset time.Duration // added to time.Now, for an offset clock
	real   bool          // an offset clock
	step   time.Duration // added after every reading
}

// New returns a clock that reads t until it is moved.
func New(t time.Time) *Clock { return &Clock{t: t} }

// NewOffset returns a clock that reads real time plus an offset, for tests
// whose code under test also compares against time.Now (timeouts, bbolt
// batching) but that must jump ahead to expire something.
func NewOffset() *Clock { return &Clock{real: true} }

// Now returns the clock's time. With a step set (Step), every reading moves
// the clock on by that step, as a real clock moves between two calls.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		now := time.Now().Add(c.offset)
		c.offset += c.step
		return now
	}
	now := c.t
	c.t = c.t.Add(c.step)
	return now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		c.offset += d
		return
	}
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		c.offset = time.Until(t)
		return
	}
	c.t = t
}

// Step makes every later reading move the clock on by d; zero stops it.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

// Sleep advances the clock by d at once and returns ctx.Err(): a sleeper on
// a fake clock never waits, so a pacing test runs in no real time.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}
