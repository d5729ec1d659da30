package channels

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// countingOutbox counts the jobs claims returned.
type countingOutbox struct {
	Outbox
	claimed atomic.Int64
}

func (c *countingOutbox) ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) ([]*store.Delivery, error) {
	got, err := c.Outbox.ClaimAdmitting(ctx, max, lease, admit)
	c.claimed.Add(int64(len(got)))
	return got, err
}

// admitting is an ID-free Admitter that counts what it holds.
type admitting struct {
	scripted
	refuse bool
	held   atomic.Int64
}

func (a *admitting) Admit(*store.Delivery) bool {
	if a.refuse {
		return false
	}
	a.held.Add(1)
	return true
}
func (a *admitting) Done(*store.Delivery) { a.held.Add(-1) }
func (a *admitting) AdmitsWithoutID()     {}

// idAdmitter admits by job id (as Twilio's rate limit does).
type idAdmitter struct{ scripted }

func (*idAdmitter) Admit(*store.Delivery) bool { return true }
func (*idAdmitter) Done(*store.Delivery)       {}

// running starts d and waits until it takes hand-offs: it returns the
// first reservation and a stop function that waits for Run to return.
func running(t *testing.T, d *Dispatcher) (*Reservation, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, ok := d.Reserve("webhook", "ep"); ok {
			return r, func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the dispatcher took no hand-off within 5 s")
		}
		time.Sleep(time.Millisecond) // waiting for Run to open its buffer, with a deadline
	}
}

// ingestHanded stores one delivery to ep handed off under r.
func ingestHanded(t *testing.T, db store.Deliveries, r *Reservation) *store.Delivery {
	t.Helper()
	res, err := db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`),
		Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep", LeaseUntil: r.Until}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Deliveries[0]
}

func waitState(t *testing.T, db store.Deliveries, id string, want store.State) *store.Delivery {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := db.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == want {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s is %s after 5 s, want %s", id, d.State, want)
		}
		time.Sleep(2 * time.Millisecond) // polling for the outcome, with a deadline
	}
}

// A handed-off delivery is sent by a worker without any claim taking it,
// and its admission is given back when the send ends.
func TestHandOffIsSentWithoutAClaim(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	out := &countingOutbox{Outbox: db}
	a := &admitting{}
	d, err := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: 10 * time.Millisecond}, out, map[string]Deliverer{"webhook": a}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, stop := running(t, d)
	defer stop()
	if a.held.Load() != 1 {
		t.Fatalf("a reservation holds %d admissions, want 1", a.held.Load())
	}
	del := ingestHanded(t, db, r)
	d.Hand(r, del)
	sent := waitState(t, db, del.ID, store.StateSent)
	if sent.Attempts != 1 || out.claimed.Load() != 0 {
		t.Fatalf("sent after %d attempts with %d jobs claimed; want 1 attempt and no claim", sent.Attempts, out.claimed.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.held.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // Done follows the send, with a deadline
	}
	if a.held.Load() != 0 {
		t.Fatalf("%d admissions held after the send", a.held.Load())
	}
}

// Hand-offs hold at most half the buffer, so that due jobs are still
// claimed; Unreserve gives a place and its admission back.
func TestHandOffsHoldAtMostHalfTheBuffer(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	a := &admitting{}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: 10 * time.Millisecond}, db, map[string]Deliverer{"webhook": a}, nil, nil, nil)
	first, stop := running(t, d)
	defer stop()
	second, ok := d.Reserve("webhook", "ep")
	if !ok {
		t.Fatal("a second reservation of a buffer of 4 was refused")
	}
	if _, ok := d.Reserve("webhook", "ep"); ok {
		t.Fatal("a third reservation of a buffer of 4 was granted: hand-offs would hold more than half")
	}
	d.Unreserve(second)
	third, ok := d.Reserve("webhook", "ep")
	if !ok {
		t.Fatal("a reservation was refused after one was given back")
	}
	d.Unreserve(first)
	d.Unreserve(third)
	if a.held.Load() != 0 {
		t.Fatalf("%d admissions held after every reservation was given back", a.held.Load())
	}
	if _, used := d.buf.room(); used != 0 {
		t.Fatalf("%d buffer places in use after every reservation was given back", used)
	}
}

// Channels whose admission needs the job's id, channels that refuse, and
// unknown channels take no hand-offs; a refused reservation holds nothing.
func TestReserveRefusals(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	a := &admitting{refuse: true}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: 10 * time.Millisecond}, db,
		map[string]Deliverer{"webhook": &scripted{}, "sms": &idAdmitter{}, "email": a}, nil, nil, nil)
	r, stop := running(t, d) // webhook: no Admitter, hand-offs taken
	defer stop()
	d.Unreserve(r)
	for _, ch := range []string{"sms", "email", "whatsapp"} {
		if _, ok := d.Reserve(ch, "x"); ok {
			t.Errorf("Reserve on %s granted", ch)
		}
	}
	if _, used := d.buf.room(); used != 0 || a.held.Load() != 0 {
		t.Fatalf("refused reservations hold %d places and %d admissions", used, a.held.Load())
	}
}

// A hand-off that arrives after the dispatcher stopped is released to the
// queue, due at once, and its admission given back.
func TestHandAfterStopReleasesTheJob(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	a := &admitting{}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: 10 * time.Millisecond}, db, map[string]Deliverer{"webhook": a}, nil, nil, nil)
	r, stop := running(t, d)
	stop()
	del := ingestHanded(t, db, r)
	d.Hand(r, del)
	if got := waitState(t, db, del.ID, store.StateQueued); got.Attempts != 0 {
		t.Fatalf("released job has %d attempts", got.Attempts)
	}
	if a.held.Load() != 0 {
		t.Fatalf("%d admissions held after the release", a.held.Load())
	}
	claimed, err := db.Claim(context.Background(), 10, time.Minute, nil)
	if err != nil || len(claimed) != 1 || claimed[0].ID != del.ID {
		t.Fatalf("claimed %v (%v), want the released job", claimed, err)
	}
}

// While a delivery waits to be claimed, no fresh one is handed off past
// it; once claims have taken everything due, hand-offs resume.
func TestNoHandOffPastAWaitingJob(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	a := &admitting{}
	d, _ := NewDispatcher(DispatcherConfig{Workers: 4, IdleWait: 10 * time.Millisecond}, db, map[string]Deliverer{"webhook": a}, nil, nil, nil)
	r, stop := running(t, d)
	defer stop()
	d.Unreserve(r)
	res, err := db.Ingest(context.Background(), store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}})
	if err != nil {
		t.Fatal(err)
	}
	d.Notify()
	if r, ok := d.Reserve("webhook", "ep"); ok {
		d.Unreserve(r)
		t.Fatal("a hand-off was granted while a queued delivery waited to be claimed")
	}
	waitState(t, db, res.Deliveries[0].ID, store.StateSent)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, ok := d.Reserve("webhook", "ep"); ok {
			d.Unreserve(r)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("hand-offs did not resume after the queue drained")
		}
		time.Sleep(time.Millisecond) // the next claim finds nothing due, with a deadline
	}
}
