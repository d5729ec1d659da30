package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// lateAfter is how far behind its scheduled moment a send may start before
// it counts as late: the client could not keep up with the offered rate.
const lateAfter = 10 * time.Millisecond

// steadyResult is a steady-rate run: envelopes offered at a fixed rate,
// open loop, and the ingest→delivered latency at that rate.
type steadyResult struct {
	Rate     int    `json:"targetPerSec"`
	Duration string `json:"duration"`
	// Offered is the envelopes the ticker scheduled; Sent the requests that
	// started (all of them, unless the run failed); OfferedRate is Sent over
	// the time from the first scheduled send to the last actual one.
	Offered     int     `json:"offered"`
	Sent        int     `json:"sent"`
	OfferedRate float64 `json:"achievedOfferedPerSec"`
	// Late counts sends that started more than LateAfterMs after their
	// scheduled moment (the sender could not keep up); MaxLateMs is the
	// worst. Many late sends mean the offered rate was not held and the
	// latencies below are for a lower rate.
	Late        int     `json:"lateSends"`
	LateAfterMs float64 `json:"lateAfterMs"`
	MaxLateMs   float64 `json:"maxLateMs"`
	Accepted    int     `json:"accepted"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"firstError,omitempty"`
	Delivered   int     `json:"delivered"`
	Undelivered int     `json:"undeliveredAtEnd"`
	Duplicates  int     `json:"duplicates"`
	IngestP50ms float64 `json:"ingestP50ms"`
	IngestP99ms float64 `json:"ingestP99ms"`
	// E2E*: from the moment the ingest request was sent to the sink's first
	// arrival of its webhook-id (as the throughput run measures them).
	E2EP50ms float64 `json:"ingestToDeliveredP50ms"`
	E2EP90ms float64 `json:"ingestToDeliveredP90ms"`
	E2EP99ms float64 `json:"ingestToDeliveredP99ms"`
	E2EMaxms float64 `json:"ingestToDeliveredMaxMs"`
	// E2EFromScheduleP99ms: the same p99 measured from the scheduled send
	// moment, so that time a late send waited counts too.
	E2EFromScheduleP99ms float64 `json:"ingestToDeliveredFromScheduleP99ms"`
	PeakRSSMiB           float64 `json:"beachdPeakRSSMiB"`
	CPUPerEnvelopeUs     float64 `json:"beachdCPUPerEnvelopeUs"`
}

// steadyRun starts a daemon on a fresh store and offers it rate envelopes a
// second for d: a ticker every millisecond releases the envelopes that are
// due (envelope i is due at i/rate seconds) to a pool of clients, whatever
// the answers are doing (open loop). It then waits, polling with a deadline,
// until the sink has every acknowledged envelope.
func steadyRun(rate int, d time.Duration, bin string) (*steadyResult, error) {
	if rate <= 0 || d <= 0 {
		return nil, fmt.Errorf("steady run: rate %d/s for %s: both must be positive", rate, d)
	}
	dir, err := os.MkdirTemp("", "beachd-steady-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if bin, err = buildBeachd(bin, dir); err != nil {
		return nil, err
	}
	s := &sink{first: map[string]time.Time{}, done: make(chan struct{})}
	cfg, stopSink, err := startSink(s)
	if err != nil {
		return nil, err
	}
	defer stopSink()
	p, err := startDaemon(bin, dir, filepath.Join(dir, "data"), cfg, time.Minute)
	if err != nil {
		return nil, err
	}
	defer p.stop()

	total := int(float64(rate) * d.Seconds())
	if total < 1 {
		total = 1
	}
	s.expect(total)
	res := &steadyResult{Rate: rate, Duration: d.String(), Offered: total, LateAfterMs: float64(lateAfter.Microseconds()) / 1000}

	const clients = 256
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	body := []byte(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":` + envelopeJSON + `}`)

	scheduled := make([]time.Time, total)
	posted := make([]time.Time, total)
	acked := make([]time.Duration, total)
	ids := make([]string, total)
	var late, sent atomic.Int64
	var maxLate atomic.Int64
	var errMu sync.Mutex
	errorsN := 0
	firstErr := ""
	fail := func(err error) {
		errMu.Lock()
		errorsN++
		if firstErr == "" {
			firstErr = err.Error()
		}
		errMu.Unlock()
	}
	// The buffer holds every envelope, so the ticker never blocks on slow
	// clients: a send that cannot start in time waits here and counts late.
	jobs := make(chan int, total)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req, _ := http.NewRequest("POST", p.base+"/v1/deliveries", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+benchKey)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				if behind := t0.Sub(scheduled[i]); behind > lateAfter {
					late.Add(1)
					for {
						m := maxLate.Load()
						if int64(behind) <= m || maxLate.CompareAndSwap(m, int64(behind)) {
							break
						}
					}
				}
				posted[i] = t0
				sent.Add(1)
				resp, err := hc.Do(req)
				if err != nil {
					fail(err)
					continue
				}
				var a struct {
					Deliveries []struct{ ID string } `json:"deliveries"`
				}
				derr := json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				took := time.Since(t0)
				switch {
				case resp.StatusCode != http.StatusAccepted:
					fail(fmt.Errorf("ingest: HTTP %d", resp.StatusCode))
				case derr != nil || len(a.Deliveries) != 1:
					fail(fmt.Errorf("ingest answer: %v (%d deliveries)", derr, len(a.Deliveries)))
				default:
					acked[i], ids[i] = took, a.Deliveries[0].ID
				}
			}
		}()
	}

	cpu0 := cpuSeconds(p.cmd.Process.Pid)
	fmt.Fprintf(os.Stderr, "steady: offering %d envelopes/s for %s (%d envelopes)\n", rate, d, total)
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	next := 0
	for next < total {
		now := <-tick.C
		due := min(total, int(now.Sub(start).Seconds()*float64(rate))+1)
		for ; next < due; next++ {
			scheduled[next] = start.Add(time.Duration(float64(next) / float64(rate) * float64(time.Second)))
			jobs <- next
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	var lastSend time.Time
	for _, t := range posted {
		if t.After(lastSend) {
			lastSend = t
		}
	}
	res.Sent = int(sent.Load())
	if span := lastSend.Sub(start).Seconds(); span > 0 && res.Sent > 1 {
		// n sends at a steady rate span (n-1)/rate seconds.
		res.OfferedRate = float64(res.Sent-1) / span
	}
	res.Late = int(late.Load())
	res.MaxLateMs = float64(time.Duration(maxLate.Load()).Microseconds()) / 1000
	errMu.Lock()
	res.Errors, res.FirstError = errorsN, firstErr
	errMu.Unlock()

	// Wait for the acknowledged envelopes at the sink: all of them, or no
	// progress for 30 s.
	accepted := 0
	for _, id := range ids {
		if id != "" {
			accepted++
		}
	}
	res.Accepted = accepted
	lastProgress, lastSeen := time.Now(), -1
	for {
		s.mu.Lock()
		seen := 0
		for _, id := range ids {
			if _, ok := s.first[id]; ok && id != "" {
				seen++
			}
		}
		s.mu.Unlock()
		if seen == accepted {
			break
		}
		if seen > lastSeen {
			lastProgress, lastSeen = time.Now(), seen
		} else if time.Since(lastProgress) > 30*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.CPUPerEnvelopeUs = (cpuSeconds(p.cmd.Process.Pid) - cpu0) / float64(max(accepted, 1)) * 1e6
	res.PeakRSSMiB = p.PeakRSS()

	var ingest, e2e, fromSchedule []time.Duration
	s.mu.Lock()
	for i, id := range ids {
		if id == "" {
			continue
		}
		ingest = append(ingest, acked[i])
		at, ok := s.first[id]
		if !ok {
			res.Undelivered++
			continue
		}
		e2e = append(e2e, at.Sub(posted[i]))
		fromSchedule = append(fromSchedule, at.Sub(scheduled[i]))
	}
	res.Duplicates = s.dups
	s.mu.Unlock()
	res.Delivered = len(e2e)
	res.IngestP50ms, res.IngestP99ms = pct(ingest, 50), pct(ingest, 99)
	res.E2EP50ms, res.E2EP90ms, res.E2EP99ms, res.E2EMaxms = pct(e2e, 50), pct(e2e, 90), pct(e2e, 99), pct(e2e, 100)
	res.E2EFromScheduleP99ms = pct(fromSchedule, 99)
	fmt.Fprintf(os.Stderr, "steady: offered %.0f/s of %d/s (%d late sends > %s, worst %.1f ms), %d accepted, %d delivered, %d errors; ingest→delivered p50 %.1f p90 %.1f p99 %.1f max %.1f ms\n",
		res.OfferedRate, rate, res.Late, lateAfter, res.MaxLateMs, res.Accepted, res.Delivered, res.Errors, res.E2EP50ms, res.E2EP90ms, res.E2EP99ms, res.E2EMaxms)
	return res, nil
}
