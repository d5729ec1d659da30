package channels

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// At start the dispatcher re-queues every lease a previous process left
// when the store is its own; on a shared store only the leases that ran
// out: another replica's job in flight is not sent a second time.
func TestStartRequeuesOnlyExpiredLeasesOnASharedStore(t *testing.T) {
	for _, shared := range []bool{false, true} {
		c := fakeclock.New(time.Now())
		db := storetest.Open(t, bolt.Options{Now: c.Now})
		ctx := context.Background()
		ingest := func(to string) string {
			res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: to}}})
			if err != nil {
				t.Fatal(err)
			}
			return res.Deliveries[0].ID
		}
		// A replica that died holding a job for a minute, two minutes ago;
		// one that is sending another now, for an hour.
		dead := ingest("dead")
		if got, err := db.Claim(ctx, 10, time.Minute, nil); err != nil || len(got) != 1 {
			t.Fatalf("claim the dead replica's job: %v %v", got, err)
		}
		c.Advance(2 * time.Minute)
		live := ingest("live")
		if got, err := db.Claim(ctx, 10, time.Hour, nil); err != nil || len(got) != 1 || got[0].ID != live {
			t.Fatalf("claim the live replica's job: %v %v", got, err)
		}
		fd := &scripted{}
		d, err := NewDispatcher(DispatcherConfig{Workers: 2, IdleWait: 10 * time.Millisecond, Now: c.Now, Shared: shared}, db,
			map[string]Deliverer{"webhook": fd}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(rctx) }()
		want := map[string]bool{dead: true, live: !shared}
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			n := 0
			for id, sent := range want {
				if del, err := db.Delivery(ctx, id); err == nil && (del.State == store.StateSent) == sent {
					n++
				}
			}
			if n == len(want) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("shared %v: after 10 s, want sent %v", shared, want)
			}
		}
		time.Sleep(50 * time.Millisecond) // a wrongly re-queued job would be sent by now
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if del, _ := db.Delivery(ctx, live); (del.State == store.StateSent) != !shared {
			t.Errorf("shared %v: the live replica's job is %s", shared, del.State)
		}
		if shared {
			if _, err := db.Record(ctx, live, mustLease(t, db, live), store.Outcome{State: store.StateSent}); err != nil {
				t.Errorf("the live replica cannot record its job: %v", err)
			}
		}
	}
}

// mustLease is the lease end of a job in flight.
func mustLease(t *testing.T, db store.Store, id string) time.Time {
	t.Helper()
	del, err := db.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return del.LeaseUntil
}
