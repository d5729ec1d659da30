package singleton

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// fakeClock is a Clock that moves only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at  time.Time
	ch  chan time.Time
	who string // the replica waiting (tagged)
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time { return c.after(d, "") }

func (c *fakeClock) after(d time.Duration, who string) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch, who: who})
	return ch
}

// tagged is the clock as one replica sees it: its waits carry its name.
type tagged struct {
	*fakeClock
	who string
}

func (c tagged) After(d time.Duration) <-chan time.Time { return c.after(d, c.who) }

// advance moves the clock by d and fires the waits that have come due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

const (
	ttl  = 15 * time.Second
	step = 250 * time.Millisecond
	// slack is how far behind the clock a runner's goroutine may observe
	// a step on a loaded machine.
	slack = 4 * step
)

// run advances the clock in small steps, giving the runners' goroutines a
// moment after each, until cond holds (true) or limit has passed (false).
func run(clk *fakeClock, limit time.Duration, cond func() bool) bool {
	for end := clk.Now().Add(limit); clk.Now().Before(end); {
		if cond() {
			return true
		}
		clk.advance(step)
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

// waiting reports whether who waits on the clock until at.
func (c *fakeClock) waiting(who string, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.who == who && w.at.Equal(at) {
			return true
		}
	}
	return false
}

// renew moves the clock through n renewals of the singleton's lease in
// db, one at a time: it waits (in real time) until the holder waits for
// its next renewal, moves the clock to it, and waits for the renewal to be
// written. However slow the machine, the holder never misses one.
func renew(t *testing.T, clk *fakeClock, db store.Leases, n int) {
	t.Helper()
	for range n {
		l := leaseOf(t, db, "scheduler")
		// The holder renews ttl/3 after its last take or renewal, which the
		// store dated until-ttl (the clock stands still meanwhile).
		next := l.Until.Add(-ttl + ttl/3)
		waitReal(t, "the holder to wait for its renewal", func() bool { return clk.waiting(l.Holder, next) })
		clk.advance(next.Sub(clk.Now()))
		waitReal(t, "a renewal", func() bool { return leaseOf(t, db, "scheduler").Until.After(l.Until) })
	}
}

// advanceTo moves the clock to t in small steps, as run does.
func advanceTo(clk *fakeClock, t time.Time) {
	for now := clk.Now(); now.Before(t); now = clk.Now() {
		clk.advance(min(step, t.Sub(now)))
		time.Sleep(2 * time.Millisecond)
	}
}

// waitReal waits for cond in real time (goroutines, not the clock).
func waitReal(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// flaky is a lease store that can fail, hang or refuse renewals.
type flaky struct {
	store.Leases
	fail   atomic.Bool // every call fails, like an unreachable database
	hang   atomic.Bool // AcquireLease blocks until its ctx ends
	refuse atomic.Bool // renewals are refused, as if another holder had the lease
}

var errDown = errors.New("connection refused")

func (f *flaky) AcquireLease(ctx context.Context, name, holder string, gen uint64, ttl time.Duration) (store.Lease, bool, error) {
	switch {
	case f.hang.Load():
		<-ctx.Done()
		return store.Lease{}, false, ctx.Err()
	case f.fail.Load():
		return store.Lease{}, false, errDown
	case f.refuse.Load() && gen != 0:
		return store.Lease{Name: name, Holder: "other", Generation: gen + 1}, false, nil
	}
	return f.Leases.AcquireLease(ctx, name, holder, gen, ttl)
}

func (f *flaky) ReleaseLease(ctx context.Context, name, holder string, gen uint64) error {
	if f.fail.Load() {
		return errDown
	}
	return f.Leases.ReleaseLease(ctx, name, holder, gen)
}

// replica is one process's runner of the singleton "scheduler", whose
// function counts in shared how many run at once.
type replica struct {
	r       *Runner
	leases  *flaky
	cancel  context.CancelFunc
	done    chan error
	running atomic.Bool
	// stoppedAt is the clock when the function saw its context end.
	stoppedAt atomic.Pointer[time.Time]
	starts    atomic.Int32
}

type shared struct {
	running atomic.Int32
	overlap atomic.Bool
}

func startReplica(t *testing.T, clk *fakeClock, leases store.Leases, holder string, sh *shared, exclusive bool) *replica {
	t.Helper()
	f := &flaky{Leases: leases}
	r, err := New(Config{Leases: f, Holder: holder, TTL: ttl, Clock: tagged{clk, holder}, Exclusive: exclusive})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rep := &replica{r: r, leases: f, cancel: cancel, done: make(chan error, 1)}
	go func() {
		rep.done <- r.Run(ctx, "scheduler", func(ctx context.Context) error {
			if sh.running.Add(1) > 1 {
				sh.overlap.Store(true)
			}
			rep.starts.Add(1)
			rep.running.Store(true)
			<-ctx.Done()
			at := clk.Now()
			rep.stoppedAt.Store(&at)
			rep.running.Store(false)
			sh.running.Add(-1)
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-rep.done
	})
	return rep
}

// stop ends the replica's Run and waits for it.
func (rep *replica) stop(t *testing.T) {
	t.Helper()
	rep.cancel()
	select {
	case err := <-rep.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		rep.done <- nil // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// kill stops the replica as a killed process: nothing reaches the store
// any more, so its lease is not released.
func (rep *replica) kill(t *testing.T) {
	t.Helper()
	rep.leases.fail.Store(true)
	rep.stop(t)
}

func leaseOf(t *testing.T, leases store.Leases, name string) store.Lease {
	t.Helper()
	ls, err := leases.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no lease %q in %v", name, ls)
	return store.Lease{}
}

func openStore(t *testing.T, clk *fakeClock) store.Leases {
	return storetest.Open(t, bolt.Options{Now: clk.Now})
}

// startPair starts replicas a and b of the singleton on one store, b once
// a runs it, and waits for b to settle.
func startPair(t *testing.T) (clk *fakeClock, db store.Leases, sh *shared, a, b *replica) {
	t.Helper()
	clk = newFakeClock()
	db = openStore(t, clk)
	sh = &shared{}
	a = startReplica(t, clk, db, "a", sh, false)
	waitReal(t, "a to run the singleton", a.running.Load)
	b = startReplica(t, clk, db, "b", sh, false)
	waitReal(t, "b to settle", func() bool { return b.r.Settled("scheduler") })
	return clk, db, sh, a, b
}

// Two replicas on one store: exactly one runs the singleton, through
// renewals; when its holder is killed (no release) the other takes over
// once the lease has run out, not before.
func TestOneHolderAtATimeAndTakeoverAfterKill(t *testing.T) {
	clk, db, sh, a, b := startPair(t)
	if b.r.Holds("scheduler") {
		t.Fatal("b holds the singleton a holds")
	}
	renew(t, clk, db, 12)
	if !a.running.Load() || b.running.Load() || a.starts.Load() != 1 || b.starts.Load() != 0 {
		t.Fatalf("after a minute of renewals: a running %v (%d starts), b running %v (%d starts)",
			a.running.Load(), a.starts.Load(), b.running.Load(), b.starts.Load())
	}
	a.kill(t)
	until := leaseOf(t, db, "scheduler").Until
	advanceTo(clk, until.Add(-step))
	time.Sleep(20 * time.Millisecond)
	if b.r.Holds("scheduler") {
		t.Fatal("b took the lease before it ran out")
	}
	// b looks again when the lease runs out.
	advanceTo(clk, until.Add(step))
	waitReal(t, "b to take over", func() bool { return b.r.Holds("scheduler") && b.running.Load() })
	if sh.overlap.Load() {
		t.Error("two replicas ran the singleton at once")
	}
	l := leaseOf(t, db, "scheduler")
	if l.Holder != "b" || l.Generation != 2 || l.Until.Before(until.Add(ttl)) || l.Until.After(until.Add(ttl+step)) {
		t.Errorf("lease after takeover = %+v, want b at generation 2 taken as a's ran out (%s)", l, until)
	}
	if h := b.r.Held(); len(h) != 1 || h[0].Name != "scheduler" || h[0].Generation != 2 || h[0].Since.Before(until.Add(-step)) {
		t.Errorf("b.Held() = %+v, a's lease ran out at %s", h, until)
	}
}

// A replica that stops cleanly releases its lease: the other takes over at
// its next look, within ttl/3, well before the lease would have run out.
func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	clk, db, sh, a, b := startPair(t)
	renew(t, clk, db, 4)
	stoppedAt := clk.Now()
	a.stop(t)
	if a.r.Holds("scheduler") || len(a.r.Held()) != 0 {
		t.Error("a still says it holds the singleton after stopping")
	}
	if l := leaseOf(t, db, "scheduler"); l.Until.After(clk.Now()) {
		t.Errorf("a's lease after a clean stop runs until %s, want ended at %s", l.Until, clk.Now())
	}
	advanceTo(clk, stoppedAt.Add(ttl/3+step))
	waitReal(t, "b to take over within ttl/3", func() bool { return b.r.Holds("scheduler") && b.running.Load() })
	if sh.overlap.Load() {
		t.Error("two replicas ran the singleton at once")
	}
}

// Taken is closed once the process holds the lease, not while another
// holds it, and stays closed once the lease is given up.
func TestTakenOnceHeld(t *testing.T) {
	clk, _, _, a, b := startPair(t)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if !closed(a.r.Taken("scheduler")) || closed(b.r.Taken("scheduler")) {
		t.Fatalf("Taken while a holds the lease: a %v, b %v", closed(a.r.Taken("scheduler")), closed(b.r.Taken("scheduler")))
	}
	stoppedAt := clk.Now()
	a.stop(t)
	advanceTo(clk, stoppedAt.Add(ttl/3+step))
	waitReal(t, "b to take over", func() bool { return b.r.Holds("scheduler") })
	if !closed(a.r.Taken("scheduler")) || !closed(b.r.Taken("scheduler")) {
		t.Fatalf("Taken after b took over: a %v, b %v", closed(a.r.Taken("scheduler")), closed(b.r.Taken("scheduler")))
	}
}

// When renewals fail (the database is unreachable, or does not answer),
// the singleton's context is cancelled before its lease's end; when the
// store answers again, the lease is taken again and the singleton runs
// again.
func TestFailedRenewalsStopBeforeTheLeaseEnds(t *testing.T) {
	for _, mode := range []string{"fail", "hang"} {
		t.Run(mode, func(t *testing.T) {
			clk := newFakeClock()
			db := openStore(t, clk)
			a := startReplica(t, clk, db, "a", &shared{}, false)
			waitReal(t, "a to run the singleton", a.running.Load)
			renew(t, clk, db, 1)
			if mode == "fail" {
				a.leases.fail.Store(true)
			} else {
				a.leases.hang.Store(true)
			}
			until := leaseOf(t, db, "scheduler").Until
			advanceTo(clk, until.Add(-step))
			waitReal(t, "the singleton to stop before its lease's end", func() bool { return !a.running.Load() })
			if stopped := *a.stoppedAt.Load(); until.Sub(stopped) > ttl/5+slack {
				t.Errorf("singleton stopped %s before its lease's end; want the margin, %s", until.Sub(stopped), ttl/5)
			}
			if a.r.Holds("scheduler") {
				t.Error("Holds after the lease was given up")
			}
			a.leases.fail.Store(false)
			a.leases.hang.Store(false)
			if !run(clk, ttl, a.running.Load) {
				t.Fatal("the singleton did not run again once the store answered")
			}
			if l := leaseOf(t, db, "scheduler"); l.Generation != 2 || l.Holder != "a" {
				t.Errorf("lease after recovery = %+v, want a at generation 2", l)
			}
		})
	}
}

// A renewal the store refuses (another holder has the lease) stops the
// singleton at once.
func TestRefusedRenewalStopsAtOnce(t *testing.T) {
	clk := newFakeClock()
	db := openStore(t, clk)
	a := startReplica(t, clk, db, "a", &shared{}, false)
	waitReal(t, "a to run the singleton", a.running.Load)
	a.leases.refuse.Store(true)
	advanceTo(clk, clk.Now().Add(ttl/3+step))
	waitReal(t, "the singleton to stop at the refused renewal", func() bool { return !a.running.Load() && !a.r.Holds("scheduler") })
}

// On the embedded store a lease left by a previous process (killed) is
// ended at once: a restarted beachd runs its singletons without waiting
// for the ttl. A shared store waits the lease out.
func TestExclusiveEndsAPreviousProcessLease(t *testing.T) {
	for _, exclusive := range []bool{true, false} {
		clk := newFakeClock()
		db := openStore(t, clk)
		if _, ok, err := db.AcquireLease(context.Background(), "scheduler", "previous", 0, ttl); err != nil || !ok {
			t.Fatalf("take the previous process's lease: %v %v", ok, err)
		}
		a := startReplica(t, clk, db, "a", &shared{}, exclusive)
		waitReal(t, "a to settle", func() bool { return a.r.Settled("scheduler") })
		if exclusive {
			waitReal(t, "a to run the singleton", a.running.Load)
			if l := leaseOf(t, db, "scheduler"); l.Holder != "a" || l.Generation != 2 {
				t.Errorf("lease = %+v, want a at generation 2", l)
			}
			continue
		}
		if run(clk, ttl-step, a.running.Load) {
			t.Fatal("a shared store's runner took a live lease of another holder")
		}
		if !run(clk, ttl, a.running.Load) {
			t.Fatal("a did not take the lease once it ran out")
		}
	}
}

// A singleton that returns by itself ends Run with its error and releases
// the lease; a panic is an error too.
func TestSingletonErrorEndsRun(t *testing.T) {
	clk := newFakeClock()
	db := openStore(t, clk)
	r, err := New(Config{Leases: db, Holder: "a", TTL: ttl, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := r.Run(context.Background(), "retention", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want boom", err)
	}
	if l := leaseOf(t, db, "retention"); l.Until.After(clk.Now()) {
		t.Errorf("lease after the singleton returned = %+v, want released", l)
	}
	err = r.Run(context.Background(), "retention", func(context.Context) error { panic("bad") })
	if err == nil || !strings.Contains(err.Error(), "panicked: bad") {
		t.Fatalf("Run of a panicking singleton = %v", err)
	}
}

// The metrics say which singletons this replica holds, with the lease's
// generation.
func TestMetrics(t *testing.T) {
	_, _, _, a, b := startPair(t)
	for _, c := range []struct {
		r         *Runner
		held, gen string
	}{{a.r, "1", "1"}, {b.r, "0", "0"}} {
		reg := prometheus.NewRegistry()
		if err := c.r.Register(reg); err != nil {
			t.Fatal(err)
		}
		got := gather(t, reg)
		if want := "beachd_singleton_held{name=scheduler} " + c.held + "\nbeachd_singleton_generation{name=scheduler} " + c.gen; got != want {
			t.Errorf("%s: metrics\n%s\nwant\n%s", c.r.Holder(), got, want)
		}
	}
}

// gather renders reg's gauges as "family{label=value} value" lines, held
// first.
func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			l := m.GetLabel()[0]
			lines = append(lines, fmt.Sprintf("%s{%s=%s} %g", f.GetName(), l.GetName(), l.GetValue(), m.GetGauge().GetValue()))
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(lines)))
	return strings.Join(lines, "\n")
}
