package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
)

// TestBulkScale10k loads 10,000 queued deliveries with IngestBulk, checks
// the outbox invariants, then claims and records them all, measuring the
// claim rate (the 1,000,000 version is `beachd-bench -scale 1000000`).
func TestBulkScale10k(t *testing.T) {
	const n, batch = 10000, 1000
	db, err := Open(filepath.Join(t.TempDir(), "beachd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	env := json.RawMessage(`{"role":"agent","parts":[{"text":"scale","metadata":{"partType":"response"}}]}`)
	start := time.Now()
	for i := 0; i < n; i += batch {
		ins := make([]store.Ingest, batch)
		for j := range ins {
			ins[j] = store.Ingest{Envelope: env, Source: "bulk", Deliveries: []store.NewDelivery{{Channel: "webhook", To: fmt.Sprintf("ep%d", (i+j)%7)}}}
		}
		res, err := db.IngestBulk(ctx, ins)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != batch || len(res[0].Deliveries) != 1 {
			t.Fatalf("bulk ingest answered %d results", len(res))
		}
	}
	loadTook := time.Since(start)
	c, err := db.CountByState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c[store.StateQueued] != n {
		t.Fatalf("queued %d, want %d", c[store.StateQueued], n)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IngestBulk(ctx, []store.Ingest{{Envelope: env, IdempotencyKey: "k"}}); err == nil {
		t.Error("bulk ingest accepted an idempotency key")
	}
	// Claim everything, 64 per transaction (the dispatcher's batch), then
	// record the outcomes from 64 goroutines (they share commits).
	start = time.Now()
	var all []*store.Delivery
	for {
		ds, err := db.Claim(ctx, 64, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		all = append(all, ds...)
	}
	took := time.Since(start)
	if len(all) != n {
		t.Fatalf("claimed %d of %d", len(all), n)
	}
	start = time.Now()
	work := make(chan *store.Delivery)
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		go func() {
			var first error
			for d := range work {
				if _, err := db.Record(ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent, Attempt: store.Attempt{At: time.Now(), Outcome: "sent"}}); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, d := range all {
		work <- d
	}
	close(work)
	for w := 0; w < 64; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	recTook := time.Since(start)
	if c, _ := db.CountByState(ctx); c[store.StateSent] != n {
		t.Fatalf("sent %d of %d", c[store.StateSent], n)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d in %s (%.0f/s); claimed all in %s (%.0f claims/s); recorded all in %s (%.0f records/s)",
		n, loadTook.Round(time.Millisecond), float64(n)/loadTook.Seconds(), took.Round(time.Millisecond), float64(n)/took.Seconds(),
		recTook.Round(time.Millisecond), float64(n)/recTook.Seconds())
}
