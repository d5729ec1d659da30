package bolt

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/internal/cpubusy"
)

// Group commit for the outbox's hot path.
//
// Ingest, Claim, Record and Release share one writer: a caller queues its
// transaction function and waits; a commit loop takes everything queued,
// runs it in one bbolt write transaction, commits (one fsync pair for all)
// and answers every caller. The next transaction carries whatever queued
// during this one, so the batch grows with the load and a lone call commits
// at once, without the fixed wait of bbolt's Batch timer. Under load (the
// previous commit carried at least lingerBusy calls) the loop waits up to
// lingerMax for lingerFill calls before it commits: a commit rewrites every
// page its calls touched, so fewer, larger commits cost less CPU and fewer
// fsyncs an envelope. It waits only while the machine's processors are
// saturated (package cpubusy): with processors to spare the wait saves nothing
// another caller needs and lengthens every caller's turn. Because claims
// and outcome records ride in the same commits as ingests, one delivery
// costs a share of a commit rather than three commits.
//
// A function either refuses (returns refuse(err) before writing anything:
// a stale lease, an idempotency conflict) — only its caller gets the error
// and the others commit — or fails after writing, which aborts the whole
// transaction: every caller in it gets the error, nothing of it is stored,
// and none is run again.
type group struct {
	mu      sync.Mutex
	pending []groupCall
	running bool
	max     int
	// last is the number of calls the previous commit carried; filled,
	// while the loop waits for company, is closed by the call that brings
	// the pending calls to fill().
	last   int
	filled chan struct{}
	// linger is the longest wait for company (lingerMax; tests change it).
	linger time.Duration
	// cpu says whether the processors are saturated, the other condition
	// of the wait.
	cpu *cpubusy.Gauge
}

// The commit loop's wait for company under load (see above): measured with
// beachd-bench's default run (docs/performance.md).
const (
	lingerBusy = 16
	lingerFill = 256
	lingerMax  = time.Millisecond
)

// fill is how many pending calls end the wait for company: lingerFill, or
// the most one commit carries when that is fewer.
func (g *group) fill() int { return min(lingerFill, g.max) }

type groupCall struct {
	fn   func(*bbolt.Tx) error
	done chan error
}

// refusal is an error returned before a function wrote anything.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refuse marks err as returned before any write.
func refuse(err error) error { return &refusal{err} }

// write runs fn in a write transaction shared with concurrent callers and
// returns once it is committed (or refused, or the transaction failed).
func (s *DB) write(fn func(*bbolt.Tx) error) error {
	c := groupCall{fn: fn, done: make(chan error, 1)}
	s.enqueue(c)
	return unrefuse(<-c.done)
}

func (s *DB) enqueue(c groupCall) {
	g := &s.group
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if g.filled != nil && len(g.pending) >= g.fill() {
		close(g.filled)
		g.filled = nil
	}
	if !g.running {
		g.running = true
		go s.commitLoop()
	}
	g.mu.Unlock()
}

func unrefuse(err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return r.err
	}
	return err
}

func (s *DB) commitLoop() {
	g := &s.group
	for {
		// (Read outside the lock: sampling reads /proc/stat.)
		saturated := g.cpu.Saturated(time.Now())
		g.mu.Lock()
		if len(g.pending) == 0 {
			g.running, g.last = false, 0
			g.mu.Unlock()
			return
		}
		if saturated && g.last >= lingerBusy && len(g.pending) < g.fill() {
			filled := make(chan struct{})
			g.filled = filled
			g.mu.Unlock()
			t := time.NewTimer(g.linger)
			select {
			case <-filled:
			case <-t.C:
			}
			t.Stop()
			g.mu.Lock()
			g.filled = nil
		}
		n := min(len(g.pending), g.max)
		calls := g.pending[:n:n]
		g.pending = append([]groupCall(nil), g.pending[n:]...)
		g.last = n
		g.mu.Unlock()
		s.commitGroup(calls)
	}
}

func (s *DB) commitGroup(calls []groupCall) {
	results := make([]error, len(calls))
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		for i, c := range calls {
			if err := safeCall(c.fn, tx); err != nil {
				var r *refusal
				if !errors.As(err, &r) {
					return err
				}
				results[i] = err
			}
		}
		return nil
	})
	for i, c := range calls {
		r := results[i]
		if err != nil {
			r = err
		}
		c.done <- r
	}
}

func safeCall(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a store transaction: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(tx)
}
