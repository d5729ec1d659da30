package channels

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// readCounting counts the envelope reads a dispatcher makes.
type readCounting struct {
	Outbox
	fail bool

	mu      sync.Mutex
	one     int
	batches [][]string
}

func (r *readCounting) Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error) {
	r.mu.Lock()
	r.one++
	r.mu.Unlock()
	return r.Outbox.Envelope(ctx, id)
}

func (r *readCounting) Envelopes(ctx context.Context, ids []string) ([]*store.EnvelopeRecord, error) {
	r.mu.Lock()
	r.batches = append(r.batches, append([]string(nil), ids...))
	r.mu.Unlock()
	if r.fail {
		return nil, errors.New("store unreachable")
	}
	return r.Outbox.Envelopes(ctx, ids)
}

// A claimed batch's envelopes that the cache does not hold are read in one
// store call, each once, and every job gets its own envelope; when that
// read fails, each job reads its own.
func TestDispatcherReadsClaimedEnvelopesTogether(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "together", true: "batch read fails"}[fail], func(t *testing.T) {
			db := storetest.Open(t, bolt.Options{})
			ctx := context.Background()
			turnOf := map[string]string{} // delivery id → the turn of its envelope
			var cachedID string
			for i := range 31 {
				to := []store.NewDelivery{{Channel: "webhook", To: "ep"}}
				if i == 7 {
					to = append(to, store.NewDelivery{Channel: "webhook", To: "ep2"})
				}
				res, err := db.Ingest(ctx, store.Ingest{Envelope: fmt.Appendf(nil, `{"role":"agent","parts":[],"meta":{"sessionId":"s","turnId":"t%d","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`, i),
					Deliveries: to})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range res.Deliveries {
					turnOf[d.ID] = fmt.Sprintf("t%d", i)
				}
				if i == 3 {
					cachedID = res.EnvelopeID
				}
			}
			cache := NewEnvelopeCache(1 << 20)
			cache.Put(cachedID, &envelope.Envelope{Role: "agent", Meta: envelope.Meta{TurnID: "t3"}}, 100)
			fd := &scripted{}
			out := &readCounting{Outbox: db, fail: fail}
			d, err := NewDispatcher(DispatcherConfig{Workers: 64, Envelopes: cache, Policies: map[string]Policy{"webhook": testPolicy}},
				out, map[string]Deliverer{"webhook": fd}, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			runUntilSent(t, d, fd, 32, 10*time.Second)
			for _, j := range fd.calls {
				if j.Envelope.Meta.TurnID != turnOf[j.Delivery.ID] {
					t.Errorf("delivery %s got the envelope of turn %s, not %s", j.Delivery.ID, j.Envelope.Meta.TurnID, turnOf[j.Delivery.ID])
				}
			}
			read := map[string]int{}
			for _, b := range out.batches {
				for _, id := range b {
					read[id]++
				}
			}
			switch {
			case len(out.batches) == 0:
				t.Fatal("the claimed jobs' envelopes were not read together")
			case read[cachedID] > 0:
				t.Errorf("the cached envelope was read from the store")
			case !fail && (len(read) != 30 || out.one != 0):
				t.Errorf("%d envelopes read in %d batches (%v) and %d alone; want 30 in batches, none alone", len(read), len(out.batches), read, out.one)
			case fail && (out.one < 30 || out.one > 31):
				// (The two jobs of one envelope may read it at once.)
				t.Errorf("after a failed batch read, %d envelopes read alone; want 30, or 31", out.one)
			}
			for id, n := range read {
				if n > 1 && !fail {
					t.Errorf("envelope %s read %d times", id, n)
				}
			}
		})
	}
}

// nextDueCounting counts claims and NextDue calls.
type nextDueCounting struct {
	Outbox
	claims, nextDue atomic.Int64
}

func (c *nextDueCounting) ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) ([]*store.Delivery, error) {
	c.claims.Add(1)
	return c.Outbox.ClaimAdmitting(ctx, max, lease, admit)
}

func (c *nextDueCounting) NextDue() (time.Time, bool) {
	c.nextDue.Add(1)
	return c.Outbox.NextDue()
}

// slowSender takes a moment per send, so that workers finish one at a time while
// the buffer is too full to claim.
type slowSender struct {
	scripted
}

func (s *slowSender) Deliver(ctx context.Context, job *Job) (*Result, error) {
	time.Sleep(200 * time.Microsecond)
	return s.scripted.Deliver(ctx, job)
}

// The dispatcher asks the store when the next job is due only after a
// claim: a worker finishing a job while the buffer is too full to claim
// wakes the loop, which must not query the store for it (on PostgreSQL a
// query per job).
func TestDispatcherAsksNextDueOnlyAfterAClaim(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	ctx := context.Background()
	const n = 200
	for range n {
		if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{"role":"agent","parts":[],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`),
			Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}); err != nil {
			t.Fatal(err)
		}
	}
	fd := &slowSender{}
	out := &nextDueCounting{Outbox: db}
	d, err := NewDispatcher(DispatcherConfig{Workers: 8, Policies: map[string]Policy{"webhook": testPolicy}},
		out, map[string]Deliverer{"webhook": fd}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runUntilSent(t, d, &fd.scripted, n, 20*time.Second)
	if c, q := out.claims.Load(), out.nextDue.Load(); q > c {
		t.Fatalf("%d claims, %d NextDue calls: the store was asked when no claim was made", c, q)
	} else {
		t.Logf("%d claims, %d NextDue calls for %d jobs", c, q, n)
	}
}

// runUntilSent runs d until fd has been given n jobs, then stops it.
func runUntilSent(t *testing.T, d *Dispatcher, fd *scripted, n int, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(within)
	for {
		fd.mu.Lock()
		got := len(fd.calls)
		fd.mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("%d of %d sent", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
