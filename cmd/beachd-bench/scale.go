package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/stress"
)

// scaleResult: beachd with a large backlog in its store.
type scaleResult struct {
	Queued        int     `json:"queuedDeliveries"`
	LoadSeconds   float64 `json:"loadSeconds"`
	LoadPerSec    float64 `json:"loadPerSec"`
	FileMiB       float64 `json:"dbFileMiB"`
	LoaderPeakRSS float64 `json:"loaderPeakRSSMiB"`
	StartupMs     float64 `json:"startupToReadyMs"`
	RSSAtReadyMiB float64 `json:"beachdRSSAtReadyMiB"`
	// AnonAtReadyMiB is the anonymous part of RSS (heap, stacks); the rest
	// is file pages of bbolt's memory map, read at open.
	AnonAtReadyMiB  float64 `json:"beachdAnonRSSAtReadyMiB"`
	AnonPeakMiB     float64 `json:"beachdAnonRSSAfterDrainMiB"`
	PeakRSSMiB      float64 `json:"beachdPeakRSSMiB"`
	DrainSeconds    float64 `json:"drainSeconds"`
	DrainedPerSec   float64 `json:"deliveredPerSecWithBacklog"`
	ClaimPerSec     float64 `json:"claimsPerSec"`
	Claimed         int     `json:"claimsMeasured"`
	RestartMs       float64 `json:"restartToReadyMs"`
	RestartRSSMiB   float64 `json:"restartPeakRSSMiB"`
	InvariantsCheck string  `json:"invariants"`
}

// scaleRun loads n queued webhook deliveries into a fresh store with
// store.IngestBulk, starts the daemon on it (start-up to /readyz, RSS),
// lets it deliver to a local sink for drain, stops it, then measures the
// store's claim rate on the same file in-process (Claim, 64 per
// transaction, as the dispatcher does).
func scaleRun(n int, bin string, drain time.Duration) (*scaleResult, error) {
	dir, err := os.MkdirTemp("", "beachd-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if bin, err = buildBeachd(bin, dir); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dataDir, "beachd.db")
	res := &scaleResult{Queued: n}

	// 1. Load.
	db, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	db.SetNoSync(true)
	env := json.RawMessage(envelopeJSON)
	start := time.Now()
	const batch = 10000
	for i := 0; i < n; i += batch {
		m := min(batch, n-i)
		ins := make([]store.Ingest, m)
		for j := range ins {
			ins[j] = store.Ingest{Envelope: env, Source: "bench-scale", Deliveries: []store.NewDelivery{{Channel: "webhook", To: "sink"}}}
		}
		if _, err := db.IngestBulk(ctx, ins); err != nil {
			db.Close()
			return nil, err
		}
		if (i/batch)%20 == 0 {
			fmt.Fprintf(os.Stderr, "scale: loaded %d of %d\n", i+m, n)
		}
	}
	db.SetNoSync(false)
	if err := db.Sync(); err != nil {
		db.Close()
		return nil, err
	}
	res.LoadSeconds = time.Since(start).Seconds()
	res.LoadPerSec = float64(n) / res.LoadSeconds
	if sz, err := db.FileSize(); err == nil {
		res.FileMiB = float64(sz) / (1 << 20)
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	res.LoaderPeakRSS = stress.ProcStatus(os.Getpid(), "VmHWM")
	runtime.GC()

	// 2. The daemon on that file: start-up, RSS, delivery with the backlog.
	var delivered atomic.Int64
	cfg, stopSink, err := startSink(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		return nil, err
	}
	defer stopSink()
	p, err := startDaemon(bin, dir, dataDir, cfg, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	res.StartupMs = float64(p.Ready.Microseconds()) / 1000
	res.RSSAtReadyMiB = p.RSS()
	res.AnonAtReadyMiB = stress.ProcStatus(p.cmd.Process.Pid, "RssAnon")
	d0, t0 := delivered.Load(), time.Now()
	// Deliver for the drain time, but stop at half the backlog so that the
	// claim rate below is measured on a queue that is still there.
	for time.Since(t0) < drain && delivered.Load()-d0 < int64(n/2) {
		time.Sleep(10 * time.Millisecond)
	}
	res.DrainSeconds = time.Since(t0).Seconds()
	res.DrainedPerSec = float64(delivered.Load()-d0) / res.DrainSeconds
	res.PeakRSSMiB = p.PeakRSS()
	res.AnonPeakMiB = stress.ProcStatus(p.cmd.Process.Pid, "RssAnon")
	p.stop()

	// 3. Restart on the file (now with sent and queued deliveries).
	p, err = startDaemon(bin, dir, dataDir, cfg, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	res.RestartMs = float64(p.Ready.Microseconds()) / 1000
	res.RestartRSSMiB = p.PeakRSS()
	p.stop()

	// 4. Claim rate on the same file, in this process.
	db, err = bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	want := min(200000, n)
	start = time.Now()
	for res.Claimed < want {
		ds, err := db.Claim(ctx, 64, time.Hour, nil)
		if err != nil {
			return nil, err
		}
		if len(ds) == 0 {
			break
		}
		res.Claimed += len(ds)
	}
	res.ClaimPerSec = float64(res.Claimed) / time.Since(start).Seconds()
	if n <= 100000 {
		if err := db.CheckInvariants(); err != nil {
			res.InvariantsCheck = err.Error()
		} else {
			res.InvariantsCheck = "ok"
		}
	} else {
		res.InvariantsCheck = "skipped above 100,000 deliveries"
	}
	return res, nil
}
