// Package singleton runs the parts of beachd that must run in one process
// at a time when several replicas share a store: the scheduler, each IMAP
// mailbox's intake, the approval expiry sweeper and retention.
//
// A Runner keeps one lease per named singleton (store.Leases) for its
// process. It runs the singleton's function only while it holds the lease:
// it takes the lease, starts the function, renews the lease every TTL/3,
// and cancels the function's context as soon as a renewal is refused or
// when renewals have failed until Margin before the lease's end, so that
// the function has stopped acting before another replica can take the
// lease. A replica whose holder died (no release) takes over once the
// lease has run out; one that stopped cleanly releases its lease, and the
// next replica to look takes it at once.
//
// On the embedded store (one process per file) the lease is always this
// process's: Config.Exclusive ends a lease a previous process left behind
// instead of waiting for it to run out.
package singleton

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/cool-ai/beachd/store"
)

// DefaultTTL is a lease's length when Config.TTL is zero.
const DefaultTTL = 15 * time.Second

// Clock is the time a Runner reads and waits on (tests pass a fake one).
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Runner. Leases is required.
type Config struct {
	// Leases is the store the leases live in.
	Leases store.Leases
	// Exclusive says no other process can use the store (the embedded
	// file): a lease of another holder is then a previous process's, and
	// is ended at once rather than waited out.
	Exclusive bool
	// Holder names this process in the leases; default NewHolderID().
	Holder string
	// TTL is a lease's length; default DefaultTTL. The lease is renewed
	// every TTL/3.
	TTL time.Duration
	// Margin is how long before its lease's end a holder whose renewals
	// keep failing stops its singletons; default TTL/5. It must leave the
	// function time to stop, and cover the clock difference between
	// replicas.
	Margin time.Duration
	// Clock defaults to the real time.
	Clock Clock
	// Log receives takes, losses and failed renewals; default discarded.
	Log *slog.Logger
}

// Held is a singleton this process holds.
type Held struct {
	Name string `json:"name"`
	// Generation is the lease's fencing generation: it goes up at every
	// change of holder.
	Generation uint64 `json:"generation"`
	// Since is when this process took the lease.
	Since time.Time `json:"since"`
}

// Runner runs singletons under leases. Its methods may be called from any
// goroutine.
type Runner struct {
	cfg Config

	mu    sync.Mutex
	names map[string]*state
}

// state is what the Runner knows of one singleton.
type state struct {
	// settled: the first attempt to take the lease has been answered.
	settled bool
	held    bool
	gen     uint64
	since   time.Time
	// taken is closed when this process first holds the lease.
	taken    chan struct{}
	wasTaken bool
}

// NewHolderID returns a holder id for this process: host name, process
// id and a random part (a restarted process with the same pid is another
// holder).
func NewHolderID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// New builds a Runner. It starts nothing: call Run for each singleton.
func New(cfg Config) (*Runner, error) {
	if cfg.Leases == nil {
		return nil, errors.New("singleton: no lease store")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Margin <= 0 || cfg.Margin >= cfg.TTL-cfg.TTL/3 {
		cfg.Margin = cfg.TTL / 5
	}
	if cfg.Holder == "" {
		cfg.Holder = NewHolderID()
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, names: map[string]*state{}}, nil
}

// Holder is the id this process holds its leases under.
func (r *Runner) Holder() string { return r.cfg.Holder }

// Held lists the singletons this process holds, by name.
func (r *Runner) Held() []Held {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Held
	for name, s := range r.names {
		if s.held {
			out = append(out, Held{Name: name, Generation: s.gen, Since: s.since})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Holds reports whether this process holds the singleton name.
func (r *Runner) Holds(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.names[name]
	return s != nil && s.held
}

// Settled reports whether the first attempt to take name's lease has been
// answered (taken or not): until then this process does not know whether
// the singleton is its own.
func (r *Runner) Settled(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.names[name]
	return s != nil && s.settled
}

// Taken is closed once this process has first held name's lease (it
// stays closed when the lease is lost later). Work that must not begin
// before the lease exists in the store waits for it.
func (r *Runner) Taken(name string) <-chan struct{} {
	var ch chan struct{}
	r.update(name, func(s *state) { ch = s.taken })
	return ch
}

// known lists every singleton Run was called for, held or not.
func (r *Runner) known() map[string]state {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]state, len(r.names))
	for name, s := range r.names {
		out[name] = *s
	}
	return out
}

func (r *Runner) update(name string, f func(*state)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.names[name]
	if s == nil {
		s = &state{taken: make(chan struct{})}
		r.names[name] = s
	}
	f(s)
}

// Run runs fn as the singleton name until ctx ends: whenever this process
// holds name's lease, fn runs with a context that ends when the lease is
// lost (or ctx ends); otherwise Run waits for the lease to come free. When
// ctx ends, fn's context is cancelled, Run waits for fn to return and
// releases the lease. If fn returns by itself while ctx goes on, Run
// releases the lease and returns fn's error. Two Run calls for one name in
// one Runner are a mistake: they share the lease.
func (r *Runner) Run(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if name == "" || fn == nil {
		return errors.New("singleton: a name and a function are required")
	}
	r.update(name, func(*state) {})
	cleared := false
	for ctx.Err() == nil {
		t0 := r.cfg.Clock.Now()
		actx, cancel := r.withTimeout(ctx, r.callTimeout())
		l, ok, err := r.cfg.Leases.AcquireLease(actx, name, r.cfg.Holder, 0, r.cfg.TTL)
		cancel()
		// The answer settles whether this process holds name, except a
		// previous process's lease about to be ended (Exclusive); a taken
		// lease settles it together with held, in hold.
		settle := func() { r.update(name, func(s *state) { s.settled = true }) }
		switch {
		case err != nil:
			settle()
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.Log.Warn("take singleton lease", "singleton", name, "err", err)
			if !r.sleep(ctx, r.cfg.TTL/3) {
				return nil
			}
		case ok:
			cleared = false
			if done, err := r.hold(ctx, name, l, t0, fn); done {
				return err
			}
		case r.cfg.Exclusive && !cleared:
			// No other process uses this store: the lease is a previous
			// process's. End it and take it at once.
			cleared = true
			if err := r.endStale(ctx, name); err != nil {
				r.cfg.Log.Warn("end a previous process's singleton lease", "singleton", name, "err", err)
			}
		default:
			settle()
			if !r.sleep(ctx, r.retryWait(l)) {
				return nil
			}
		}
	}
	return nil
}

// retryWait is how long to wait before trying to take a lease that l (the
// lease as the store refused it; zero if unknown) holds: until it runs
// out, at most TTL/3.
func (r *Runner) retryWait(l store.Lease) time.Duration {
	wait := r.cfg.TTL / 3
	if !l.Until.IsZero() {
		if d := l.Until.Sub(r.cfg.Clock.Now()) + time.Millisecond; d < wait {
			wait = max(d, time.Millisecond)
		}
	}
	return wait
}

// endStale releases every live lease of name, whoever holds it (Exclusive
// only).
func (r *Runner) endStale(ctx context.Context, name string) error {
	ls, err := r.cfg.Leases.ListLeases(ctx)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.Name != name {
			continue
		}
		if err := r.cfg.Leases.ReleaseLease(ctx, name, l.Holder, l.Generation); err != nil {
			return err
		}
		r.cfg.Log.Info("ended a singleton lease a previous process left", "singleton", name, "holder", l.Holder, "generation", l.Generation)
	}
	return nil
}

// callTimeout bounds one lease call: a quarter of the ttl, so that a call
// given up leaves time for another before the renewal interval (ttl/3)
// is over.
func (r *Runner) callTimeout() time.Duration { return r.cfg.TTL / 4 }

// withTimeout is context.WithTimeout on the runner's clock: a store call
// that hangs (a database out of reach) is given up after d.
func (r *Runner) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	timeout := r.cfg.Clock.After(d)
	go func() {
		select {
		case <-c.Done():
		case <-timeout:
			cancel()
		}
	}()
	return c, cancel
}

func (r *Runner) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-r.cfg.Clock.After(d):
		return true
	}
}

// renewal is the answer to one renewal.
type renewal struct {
	at    time.Time // when it was asked
	lease store.Lease
	ok    bool
	err   error
}

// hold runs fn while the lease l (taken at t0) lasts. done is true when Run
// must return err: ctx ended or fn returned by itself. Otherwise the lease
// was lost and fn has returned.
func (r *Runner) hold(ctx context.Context, name string, l store.Lease, t0 time.Time, fn func(context.Context) error) (done bool, err error) {
	gen := l.Generation
	r.update(name, func(s *state) {
		s.held, s.settled, s.gen, s.since = true, true, gen, t0
		if !s.wasTaken {
			s.wasTaken = true
			close(s.taken)
		}
	})
	r.cfg.Log.Info("singleton taken", "singleton", name, "generation", gen)
	// deadline is when this process stops acting unless a renewal moved it:
	// the store's lease ends no earlier than t0+TTL.
	deadline := t0.Add(r.cfg.TTL - r.cfg.Margin)
	expire := r.cfg.Clock.After(deadline.Sub(r.cfg.Clock.Now()))
	renewAt := r.cfg.Clock.After(r.cfg.TTL / 3)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- call(runCtx, fn) }()
	var renewing chan renewal
	var fnErr error
	fnDone := false
	// finish ends this term: fn's context is cancelled and fn has returned,
	// then a renewal in flight is awaited, so that it cannot take the lease
	// again after the release.
	finish := func(release bool) error {
		cancel()
		r.update(name, func(s *state) { s.held = false })
		if !fnDone {
			fnErr = <-result
		}
		if renewing != nil {
			if rn := <-renewing; rn.err == nil && rn.ok {
				gen = rn.lease.Generation
			}
		}
		if release {
			r.release(ctx, name, gen)
		}
		return fnErr
	}
	for {
		select {
		case fnErr = <-result:
			fnDone = true
			err := finish(true)
			if ctx.Err() != nil {
				return true, nil
			}
			r.cfg.Log.Info("singleton returned; lease released", "singleton", name, "err", err)
			return true, err
		case <-ctx.Done():
			finish(true)
			return true, nil
		case <-renewAt:
			renewAt = nil
			ch := make(chan renewal, 1)
			renewing = ch
			go func() {
				at := r.cfg.Clock.Now()
				rctx, cancel := r.withTimeout(runCtx, r.callTimeout())
				defer cancel()
				l, ok, err := r.cfg.Leases.AcquireLease(rctx, name, r.cfg.Holder, gen, r.cfg.TTL)
				ch <- renewal{at: at, lease: l, ok: ok, err: err}
			}()
		case rn := <-renewing:
			renewing = nil
			switch {
			case rn.err != nil:
				r.cfg.Log.Warn("renew singleton lease", "singleton", name, "generation", gen, "stop_at", deadline, "err", rn.err)
				renewAt = r.cfg.Clock.After(min(r.cfg.TTL/15, max(deadline.Sub(r.cfg.Clock.Now()), 0)))
			case !rn.ok || rn.lease.Generation != gen:
				r.cfg.Log.Warn("singleton lease lost to another holder; stopping", "singleton", name, "generation", gen,
					"holder", rn.lease.Holder, "now_generation", rn.lease.Generation)
				ours := rn.ok
				if ours {
					gen = rn.lease.Generation // a new term of ours, after the old one ran out: give it back
				}
				r.logStopped(name, finish(ours))
				return false, nil
			default:
				deadline = rn.at.Add(r.cfg.TTL - r.cfg.Margin)
				expire = r.cfg.Clock.After(deadline.Sub(r.cfg.Clock.Now()))
				renewAt = r.cfg.Clock.After(r.cfg.TTL / 3)
			}
		case <-expire:
			r.cfg.Log.Error("singleton lease could not be renewed before its end; stopping", "singleton", name, "generation", gen)
			r.logStopped(name, finish(false))
			return false, nil
		}
	}
}

// logStopped logs how fn ended after its lease was lost.
func (r *Runner) logStopped(name string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		r.cfg.Log.Warn("singleton stopped after losing its lease", "singleton", name, "err", err)
	}
}

// release gives the lease back, so that another replica takes it at once.
func (r *Runner) release(ctx context.Context, name string, gen uint64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.cfg.Leases.ReleaseLease(rctx, name, r.cfg.Holder, gen); err != nil {
		r.cfg.Log.Warn("release singleton lease; another replica takes it when it runs out", "singleton", name, "err", err)
		return
	}
	r.cfg.Log.Info("singleton released", "singleton", name, "generation", gen)
}

// call runs fn, turning a panic into an error.
func call(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx)
}
