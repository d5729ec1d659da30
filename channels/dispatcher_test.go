package channels

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// scripted is a hand-written Deliverer that answers from a script, per
// attempt, and records what it was asked.
type scripted struct {
	mu      sync.Mutex
	answers []error
	calls   []*Job
	panicOn int
}

func (s *scripted) Deliver(ctx context.Context, job *Job) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, job)
	n := len(s.calls)
	if n == s.panicOn {
		panic("boom")
	}
	if n-1 < len(s.answers) && s.answers[n-1] != nil {
		return nil, s.answers[n-1]
	}
	return &Result{ProviderID: fmt.Sprintf("p%d", n), Receipt: Receipt{Data: map[string]any{"status": 200}, Meta: map[string]any{"source": "http"}}}, nil
}

func setup(t *testing.T, d Deliverer, policy Policy) (*bolt.DB, *Dispatcher, *fakeclock.Clock, string) {
	t.Helper()
	c := fakeclock.New(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	db := storetest.Open(t, bolt.Options{Now: c.Now})
	disp, err := NewDispatcher(DispatcherConfig{Workers: 2, Now: c.Now, Jitter: func() float64 { return 0.5 },
		Policies: map[string]Policy{"webhook": policy}}, db, map[string]Deliverer{"webhook": d}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{"role":"agent","parts":[],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`),
		Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}})
	if err != nil {
		t.Fatal(err)
	}
	return db, disp, c, res.Deliveries[0].ID
}

// step claims and works every due job once, synchronously.
func step(t *testing.T, db *bolt.DB, d *Dispatcher) int {
	t.Helper()
	jobs, err := db.ClaimAdmitting(context.Background(), 10, d.lease, d.admit)
	if err != nil {
		t.Fatal(err)
	}
	recs := d.prefetch(context.Background(), jobs)
	for i, j := range jobs {
		d.work(context.Background(), j, recs[i])
	}
	return len(jobs)
}

var testPolicy = Policy{Delays: []time.Duration{time.Minute, 10 * time.Minute}, Lifetime: time.Hour, Jitter: 0.2, Timeout: time.Second}

func TestDispatchRetryThenSent(t *testing.T) {
	fd := &scripted{answers: []error{errors.New("connection refused"), &Error{Err: errors.New("503"), RetryAfter: 30 * time.Minute}}}
	db, d, c, id := setup(t, fd, testPolicy)
	step(t, db, d)
	del, _ := db.Delivery(context.Background(), id)
	if del.State != store.StateRetrying || !del.NextAttemptAt.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("after 1st failure: %s next %v", del.State, del.NextAttemptAt)
	}
	if step(t, db, d) != 0 {
		t.Fatal("retried before its time")
	}
	c.Advance(time.Minute)
	step(t, db, d)
	del, _ = db.Delivery(context.Background(), id)
	// Retry-After (30 min) is longer than the schedule's 10 min: it wins.
	if want := c.Now().Add(30 * time.Minute); del.State != store.StateRetrying || !del.NextAttemptAt.Equal(want) {
		t.Fatalf("after 2nd failure: %s next %v want %v", del.State, del.NextAttemptAt, want)
	}
	c.Advance(30 * time.Minute)
	step(t, db, d)
	del, _ = db.Delivery(context.Background(), id)
	if del.State != store.StateSent || del.Attempts != 3 || del.ProviderID != "p3" {
		t.Fatalf("final: %+v", del)
	}
	atts, _ := db.Attempts(context.Background(), id)
	if len(atts) != 3 || atts[0].Outcome != "retry" || atts[2].Outcome != "sent" || len(atts[2].Receipt) == 0 {
		t.Fatalf("attempts: %+v", atts)
	}
}

func TestDispatchPermanentIsDeadAtOnce(t *testing.T) {
	fd := &scripted{answers: []error{Permanent(errors.New("410 Gone"))}}
	db, d, _, id := setup(t, fd, testPolicy)
	step(t, db, d)
	del, _ := db.Delivery(context.Background(), id)
	if del.State != store.StateDead || del.DeadReason != "permanent failure: 410 Gone" {
		t.Fatalf("got %s %q", del.State, del.DeadReason)
	}
}

func TestDispatchLifetimeEnds(t *testing.T) {
	fail := errors.New("timeout")
	fd := &scripted{answers: []error{fail, fail, fail, fail, fail, fail, fail, fail, fail, fail}}
	db, d, c, id := setup(t, fd, testPolicy)
	for i := 0; i < 10; i++ {
		step(t, db, d)
		c.Advance(10 * time.Minute)
	}
	del, _ := db.Delivery(context.Background(), id)
	// 1 min, then 10 min each: attempts at 0, 1, 11, 21, 31, 41, 51; the
	// next would be at 61 min > 1 h lifetime.
	if del.State != store.StateDead || del.Attempts != 7 {
		t.Fatalf("got %s after %d attempts (%q)", del.State, del.Attempts, del.DeadReason)
	}
}

func TestDispatchPanicCostsARetry(t *testing.T) {
	fd := &scripted{panicOn: 1}
	db, d, _, id := setup(t, fd, testPolicy)
	step(t, db, d)
	del, _ := db.Delivery(context.Background(), id)
	if del.State != store.StateRetrying || del.LastError == "" {
		t.Fatalf("after panic: %+v", del)
	}
}

func TestUnconfiguredChannelIsDead(t *testing.T) {
	db, d, _, _ := setup(t, &scripted{}, testPolicy)
	res, _ := db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "sms", To: "+447700900123"}}})
	step(t, db, d)
	del, _ := db.Delivery(context.Background(), res.Deliveries[0].ID)
	if del.State != store.StateDead {
		t.Fatalf("sms without a deliverer: %s", del.State)
	}
}

func TestRunDeliversAndStops(t *testing.T) {
	fd := &scripted{}
	c := fakeclock.New(time.Now())
	db := storetest.Open(t, bolt.Options{})
	_ = c
	d, _ := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: 20 * time.Millisecond}, db, map[string]Deliverer{"webhook": fd}, nil, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	var ds []store.NewDelivery
	for i := 0; i < 50; i++ {
		ds = append(ds, store.NewDelivery{Channel: "webhook", To: fmt.Sprint(i)})
	}
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: ds}); err != nil {
		t.Fatal(err)
	}
	d.Notify()
	deadline := time.Now().Add(10 * time.Second)
	for {
		counts, _ := db.CountByState(ctx)
		if counts[store.StateSent] == 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all sent: %v", counts)
		}
		time.Sleep(5 * time.Millisecond) // polling for the outcome, with a deadline
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyDelays(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		p       Policy
		attempt int
		want    time.Duration
	}{
		{WebhookPolicy, 1, 5 * time.Second}, {WebhookPolicy, 2, 5 * time.Minute}, {WebhookPolicy, 3, 30 * time.Minute},
		{WebhookPolicy, 4, 2 * time.Hour}, {WebhookPolicy, 5, 5 * time.Hour}, {WebhookPolicy, 6, 10 * time.Hour}, {WebhookPolicy, 9, 10 * time.Hour},
		{EmailPolicy, 1, 5 * time.Minute}, {EmailPolicy, 2, 10 * time.Minute}, {EmailPolicy, 5, 67 * time.Minute}, {EmailPolicy, 40, 67 * time.Minute},
		{MessagingPolicy, 1, 30 * time.Second}, {MessagingPolicy, 4, 30 * time.Minute},
	} {
		// r = 0.5 means no jitter
		next, ok := tt.p.Next(tt.attempt, start, start, 0, func() float64 { return 0.5 })
		if !ok || next.Sub(start) != tt.want {
			t.Errorf("attempt %d: got %v %v, want %v", tt.attempt, next.Sub(start), ok, tt.want)
		}
	}
	// jitter stays within ±20%
	lo, _ := EmailPolicy.Next(1, start, start, 0, func() float64 { return 0 })
	hi, _ := EmailPolicy.Next(1, start, start, 0, func() float64 { return 0.999999 })
	if lo.Sub(start) != 4*time.Minute || hi.Sub(start) < 5*time.Minute+59*time.Second {
		t.Errorf("jitter range %v..%v", lo.Sub(start), hi.Sub(start))
	}
	// Email gives up after five days
	if _, ok := EmailPolicy.Next(3, start, start.Add(5*24*time.Hour-time.Minute), 0, func() float64 { return 0.5 }); ok {
		t.Error("email retried past its 5-day lifetime")
	}
}

// refusing always refuses, counting how often it was asked.
type refusing struct {
	scripted
	asked atomic.Int64
}

func (r *refusing) Admit(*store.Delivery) bool { r.asked.Add(1); return false }
func (r *refusing) Done(*store.Delivery)       {}

// A Deliverer that refuses every due job (an open circuit) must not make
// the dispatcher claim in a tight loop.
func TestRefusedJobsDoNotSpin(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	r := &refusing{}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: time.Second}, db, map[string]Deliverer{"webhook": r}, nil, nil, nil)
	db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	d.Run(ctx)
	// 1.5 s at one claim per 200 ms is ~8 claims; a spin makes thousands.
	if n := r.asked.Load(); n > 30 {
		t.Fatalf("Admit asked %d times in 1.5 s: the dispatcher spins on refused jobs", n)
	}
	if len(r.calls) != 0 {
		t.Fatal("a refused job was delivered")
	}
}

// slow is a Deliverer whose send takes a while and honours its context.
type slow struct {
	took    time.Duration
	started chan struct{}
}

func (s *slow) Deliver(ctx context.Context, job *Job) (*Result, error) {
	close(s.started)
	select {
	case <-time.After(s.took):
		return &Result{ProviderID: "p"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A send in flight when the dispatcher stops finishes within the grace
// period instead of being cut off (which would leave a maybe-sent message).
func TestShutdownLetsSendsInFlightFinish(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	sd := &slow{took: 300 * time.Millisecond, started: make(chan struct{})}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 2, ShutdownGrace: 5 * time.Second}, db, map[string]Deliverer{"webhook": sd}, nil, nil, nil)
	res, _ := db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	<-sd.started
	cancel()
	<-done
	del, _ := db.Delivery(context.Background(), res.Deliveries[0].ID)
	if del.State != store.StateSent {
		t.Fatalf("a send in flight at shutdown ended %s (%s)", del.State, del.LastError)
	}
}

// A send cut off by shutdown after the grace period is due again at once.
func TestSendCutOffByShutdownIsDueAtOnce(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	sd := &slow{took: time.Hour, started: make(chan struct{})}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 2, ShutdownGrace: 50 * time.Millisecond,
		Policies: map[string]Policy{"webhook": EmailPolicy}}, db, map[string]Deliverer{"webhook": sd}, nil, nil, nil)
	res, _ := db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	<-sd.started
	cancel()
	<-done
	del, _ := db.Delivery(context.Background(), res.Deliveries[0].ID)
	if del.State != store.StateRetrying || time.Until(del.NextAttemptAt) > time.Second {
		t.Fatalf("cut off by shutdown: %s, next attempt in %v (the 5-minute email delay must not apply)", del.State, time.Until(del.NextAttemptAt))
	}
}

// blocking holds every send until its context ends.
type blocking struct{ sends atomic.Int64 }

func (b *blocking) Deliver(ctx context.Context, job *Job) (*Result, error) {
	b.sends.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// With every worker busy and the buffer full, due jobs wait for a worker:
// the loop does not wake every millisecond to find it cannot claim.
func TestFullBufferDoesNotSpin(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	var nows atomic.Int64
	now := func() time.Time { nows.Add(1); return time.Now() }
	b := &blocking{}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 2, IdleWait: time.Second, Now: now, ShutdownGrace: time.Millisecond},
		db, map[string]Deliverer{"webhook": b}, nil, nil, nil)
	for i := 0; i < 20; i++ {
		db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	d.Run(ctx)
	if b.sends.Load() != 2 {
		t.Fatalf("%d sends started, want the 2 workers' worth", b.sends.Load())
	}
	// A spin reads the clock ~1,000 times a second; waiting, a few times.
	if n := nows.Load(); n > 100 {
		t.Fatalf("the clock was read %d times in 1.5 s: the loop spins while the buffer is full", n)
	}
}
