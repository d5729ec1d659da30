package postgres

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// outbox is the hot path BenchmarkIngestClaimRecord measures, which both
// backends have.
type outbox interface {
	Ingest(ctx context.Context, in store.Ingest) (*store.IngestResult, error)
	Claim(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) bool) ([]*store.Delivery, error)
	Record(ctx context.Context, id string, leaseUntil time.Time, o store.Outcome) (*store.Delivery, error)
}

// BenchmarkIngestClaimRecord measures one envelope with one delivery going
// through the outbox (ingest, claim, record sent) on the embedded bbolt
// store and on PostgreSQL, one caller at a time and with 16 at once.
func BenchmarkIngestClaimRecord(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) outbox
	}{
		{"bbolt", func(b *testing.B) outbox {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "b.db"), bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		}},
		{"postgres", func(b *testing.B) outbox {
			db, err := Open(context.Background(), pgtest.DSN(b), Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db
		}},
	}
	for _, be := range backends {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%d", be.name, callers), func(b *testing.B) {
				db := be.open(b)
				b.ResetTimer()
				if callers == 1 {
					for range b.N {
						cycle(b, db)
					}
				} else {
					b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							cycle(b, db)
						}
					})
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
			})
		}
	}
}

// cycle ingests an envelope with one delivery, claims a due job and records
// it sent (with 16 callers the job claimed may be another caller's).
func cycle(b *testing.B, db outbox) {
	ctx := context.Background()
	_, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{"role":"agent","parts":[{"text":"hello"}]}`),
		Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}})
	if err != nil {
		b.Error(err)
		return
	}
	ds, err := db.Claim(ctx, 1, time.Minute, nil)
	if err != nil {
		b.Error(err)
		return
	}
	for _, d := range ds {
		if _, err := db.Record(ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent,
			Attempt: store.Attempt{At: time.Now(), Outcome: "sent"}}); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkOutcomesAfterTheTableGrew records outcomes, 16 at once (so
// that they share statements), on a store whose two connections first
// ran every statement of the hot path more than five times while the
// deliveries table held a few rows, and which then grew to 50,000 queued
// deliveries: "prepared" runs the statements that find rows by a list of
// ids as prepared statements, whose plan PostgreSQL may make generic and
// keep (made for the small table: a sequential scan of deliveries for
// each statement); "planned-each-time" runs them as beachd does
// (DB.planEach). Run with -benchtime 100x: each iteration claims 16 of the
// 50,000.
func BenchmarkOutcomesAfterTheTableGrew(b *testing.B) {
	for _, m := range []struct {
		name string
		mode pgx.QueryExecMode
	}{{"prepared", pgx.QueryExecModeCacheStatement}, {"planned-each-time", pgx.QueryExecModeCacheDescribe}} {
		b.Run(m.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := Open(ctx, pgtest.DSN(b)+"&pool_max_conns=2", Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.planEach = m.mode
			env := []byte(`{"role":"agent","parts":[{"text":"hello"}]}`)
			group := func() {
				ds, err := db.Claim(ctx, 16, time.Minute, nil)
				if err != nil || len(ds) != 16 {
					b.Fatalf("claim: %d jobs, %v", len(ds), err)
				}
				var wg sync.WaitGroup
				for _, d := range ds {
					wg.Go(func() {
						if _, err := db.Record(ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent,
							Attempt: store.Attempt{At: time.Now(), Outcome: "sent"}}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			for range 12 {
				for range 16 {
					if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}); err != nil {
						b.Fatal(err)
					}
				}
				group()
			}
			for range 50 {
				ins := make([]store.Ingest, 1000)
				for j := range ins {
					ins[j] = store.Ingest{Envelope: env, Source: "bulk", Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}
				}
				if _, err := db.IngestBulk(ctx, ins); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				group()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(16*b.N), "µs/job")
		})
	}
}
