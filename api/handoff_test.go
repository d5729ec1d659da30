package api

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// recorder is a Deliverer that notes the deliveries it is asked to send.
type recorder struct {
	mu   sync.Mutex
	sent []string
}

func (r *recorder) Deliver(_ context.Context, j *channels.Job) (*channels.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, j.Delivery.ID)
	return &channels.Result{}, nil
}

// claimCounter counts the jobs claims returned.
type claimCounter struct {
	channels.Outbox
	mu      sync.Mutex
	claimed []string
}

func (c *claimCounter) ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) ([]*store.Delivery, error) {
	got, err := c.Outbox.ClaimAdmitting(ctx, max, lease, admit)
	c.mu.Lock()
	for _, d := range got {
		c.claimed = append(c.claimed, d.ID)
	}
	c.mu.Unlock()
	return got, err
}

// An accepted delivery goes straight to a free dispatch worker: the 202
// says queued, the envelope is sent, and no claim ever took it. A replay
// of the request hands nothing off and holds no place.
func TestAcceptHandsOffToAFreeWorker(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	rec := &recorder{}
	out := &claimCounter{Outbox: db}
	disp, err := channels.NewDispatcher(channels.DispatcherConfig{Workers: 4, IdleWait: 10 * time.Millisecond}, out,
		map[string]channels.Deliverer{"webhook": rec}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- disp.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"webhook": true},
		Endpoints: map[string]bool{"ops": true}, HandOff: disp}, db, nil, disp.Notify, nil)
	body := []byte(request(`[{"channel":"webhook","endpoint":"ops"}]`))
	// Until Run has opened its buffer, and whenever a claim that began
	// before the ingest is quicker, a delivery is queued and claimed; the
	// claim counter learns of a claim only after its transaction, so
	// whether a delivery was claimed is read once it is sent.
	var id string
	deadline := time.Now().Add(5 * time.Second)
	for {
		a, _, err := ing.Accept(ctx, body, "", "test")
		if err != nil {
			t.Fatal(err)
		}
		if a.Deliveries[0].Status != "queued" {
			t.Fatalf("202 status %q, want queued", a.Deliveries[0].Status)
		}
		waitSent(t, db, a.Deliveries[0].ID)
		out.mu.Lock()
		claimedIt := slices.Contains(out.claimed, a.Deliveries[0].ID)
		out.mu.Unlock()
		if !claimedIt {
			id = a.Deliveries[0].ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery was handed off within 5 s: each was claimed")
		}
	}
	rec.mu.Lock()
	sent := slices.Contains(rec.sent, id)
	rec.mu.Unlock()
	if !sent {
		t.Fatalf("delivery %s is sent but the deliverer never saw it", id)
	}
	// A replay hands nothing off and keeps no place.
	a1, _, err := ing.Accept(ctx, body, "k1", "test")
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, db, a1.Deliveries[0].ID)
	a2, replayed, err := ing.Accept(ctx, body, "k1", "test")
	if err != nil || !replayed || a2.Deliveries[0].ID != a1.Deliveries[0].ID || a2.Deliveries[0].Status != "queued" {
		t.Fatalf("replay: %+v replayed=%v err=%v", a2, replayed, err)
	}
	// (A claim in progress holds places for a moment: try again then.)
	for try := 0; ; try++ {
		var rs []*channels.Reservation
		for range 4 {
			if r, ok := disp.Reserve("webhook", "ops"); ok {
				rs = append(rs, r)
			}
		}
		for _, r := range rs {
			disp.Unreserve(r)
		}
		if len(rs) == 2 {
			break
		}
		if try == 1000 {
			t.Fatalf("%d hand-off places free after the replay, want 2 (half of 4 workers): a reservation was kept", len(rs))
		}
		time.Sleep(time.Millisecond) // a claim may hold places, briefly
	}
}

func waitSent(t *testing.T, db store.Deliveries, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := db.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == store.StateSent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s is %s after 5 s, want sent", id, d.State)
		}
		time.Sleep(time.Millisecond) // polling for the outcome, with a deadline
	}
}
