package bolt

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
)

// BenchmarkPipeline measures the store's share of the daemon's hot path:
// 64 callers ingest (each waiting for its commit, as an HTTP client waits
// for its 202) while a dispatcher-like loop claims up to 64 jobs at a time
// and 64 workers record each job's outcome, all sharing the group writer.
// One op is one envelope ingested, claimed and recorded.
// With fsync off (nosync) it measures the CPU the store spends on an
// envelope, apart from the disk's latency.
func BenchmarkPipeline(b *testing.B) {
	for _, mode := range []string{"fsync", "nosync", "fsync-wait"} {
		b.Run(mode, func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{NoSync: mode == "nosync"})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var think time.Duration
			if mode == "fsync-wait" {
				think = 500 * time.Microsecond
			}
			runPipeline(b, db, think)
		})
	}
}

func runPipeline(b *testing.B, db *DB, think time.Duration) {
	env := []byte(`{"role":"agent","parts":[{"text":"Two direct flights found, 15 August 2026 LGW to CFU. Cheapest is easyJet EJ4521 at 94 GBP per person.","metadata":{"partType":"response"}}]}`)
	const clients, workers = 64, 64
	jobs := make(chan *store.Delivery, workers)
	var recorded atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				if think > 0 {
					time.Sleep(think)
				}
				o := store.Outcome{State: store.StateSent, Attempt: store.Attempt{At: time.Now(), Outcome: "sent", Receipt: []byte(`{"data":{"status":204}}`)}}
				if _, err := db.Record(ctx, d.ID, d.LeaseUntil, o); err != nil {
					b.Error(err)
				}
				recorded.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	claimDone := make(chan struct{})
	go func() {
		defer close(claimDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			room := cap(jobs) - len(jobs)
			if room < cap(jobs)/2 {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			ds, err := db.Claim(ctx, room, time.Hour, nil)
			if err != nil {
				b.Error(err)
				return
			}
			if len(ds) == 0 {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			for _, d := range ds {
				jobs <- d
			}
		}
	}()
	b.ResetTimer()
	var next atomic.Int64
	var cw sync.WaitGroup
	for range clients {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for next.Add(1) <= int64(b.N) {
				if think > 0 {
					time.Sleep(think)
				}
				if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	cw.Wait()
	for recorded.Load() < int64(b.N) && !b.Failed() {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	close(stop)
	<-claimDone
	close(jobs)
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
	if testing.Verbose() {
		st := db.bolt.Stats()
		ts := st.TxStats
		b.Logf("txN=%d pages alloc=%d spill=%d spillT=%s split=%d rebalance=%d write=%d writeT=%s freePages=%d pending=%d",
			st.TxN, ts.GetPageCount(), ts.GetSpill(), ts.GetSpillTime(), ts.GetSplit(), ts.GetRebalance(), ts.GetWrite(), ts.GetWriteTime(), st.FreePageN, st.PendingPageN)
	}
}
