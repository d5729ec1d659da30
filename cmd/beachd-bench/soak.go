package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cool-ai/beachd/stress"
)

// soakSample is one interval of the soak.
type soakSample struct {
	AtSec  float64 `json:"atSec"`
	RSSMiB float64 `json:"rssMiB"`
	// RSSAnonMiB is the anonymous part (heap, stacks); the rest of RSS is
	// file pages, mostly bbolt's memory map of the store.
	RSSAnonMiB  float64 `json:"rssAnonMiB"`
	Accepted    int     `json:"accepted"`
	Delivered   int     `json:"delivered"`
	Backlog     int     `json:"backlog"`
	Errors      int     `json:"errors"`
	IngestP50ms float64 `json:"ingestP50ms"`
	IngestP99ms float64 `json:"ingestP99ms"`
	E2EP50ms    float64 `json:"ingestToDeliveredP50ms"`
	E2EP99ms    float64 `json:"ingestToDeliveredP99ms"`
}

// soakResult sums a soak up.
type soakResult struct {
	Duration     string  `json:"duration"`
	Rate         int     `json:"targetPerSec"`
	AchievedRate float64 `json:"acceptedPerSec"`
	Accepted     int     `json:"accepted"`
	Delivered    int     `json:"delivered"`
	// Undelivered: acknowledged but not at the sink when the drain ended
	// (everything delivered, or no progress for a minute).
	Undelivered int     `json:"undeliveredAtEnd"`
	DrainSec    float64 `json:"drainSeconds"`
	Errors      int     `json:"errors"`
	RSSFirstMiB float64 `json:"rssFirstQuarterMiB"`
	RSSLastMiB  float64 `json:"rssLastQuarterMiB"`
	PeakRSSMiB  float64 `json:"beachdPeakRSSMiB"`
	E2EP99First float64 `json:"e2eP99FirstQuarterMs"`
	E2EP99Last  float64 `json:"e2eP99LastQuarterMs"`
	E2EP99Max   float64 `json:"e2eP99MaxMs"`
	// Stable: delivery kept up (all delivered, target rate reached) and the
	// ingest→delivered p99 of the last quarter is within 3× the first's.
	Stable bool `json:"stable"`
	// AnonFirstMiB/AnonLastMiB: anonymous RSS (heap) in the first and last
	// quarter; total RSS also holds bbolt's file map, which grows with the
	// store and drops at each remap.
	AnonFirstMiB float64      `json:"anonRSSFirstQuarterMiB"`
	AnonLastMiB  float64      `json:"anonRSSLastQuarterMiB"`
	StableWhy    string       `json:"stability"`
	Plot         string       `json:"plot,omitempty"`
	SamplesFile  string       `json:"samplesFile,omitempty"`
	Samples      []soakSample `json:"samples"`
}

// soakSink records first arrivals by webhook-id.
type soakSink struct {
	mu      sync.Mutex
	arrived []arrival
	seen    map[string]bool
}

type arrival struct {
	id string
	at time.Time
}

func (s *soakSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	id := r.Header.Get("webhook-id")
	s.mu.Lock()
	if !s.seen[id] {
		s.seen[id] = true
		s.arrived = append(s.arrived, arrival{id, now})
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// soakRun drives a steady rate of envelopes (open loop: a ticker every
// 10 ms releases rate/100 requests to a pool of clients) for d, sampling
// the daemon's RSS and the ingest and ingest→delivered latencies per
// interval, then waits up to a minute for the rest to arrive.
func soakRun(d time.Duration, rate int, interval time.Duration, bin, plotPath, samplesPath string) (*soakResult, error) {
	dir, err := os.MkdirTemp("", "beachd-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if bin, err = buildBeachd(bin, dir); err != nil {
		return nil, err
	}
	sink := &soakSink{seen: map[string]bool{}}
	cfg, stopSink, err := startSink(sink)
	if err != nil {
		return nil, err
	}
	defer stopSink()
	p, err := startDaemon(bin, dir, filepath.Join(dir, "data"), cfg, time.Minute)
	if err != nil {
		return nil, err
	}
	defer p.stop()

	const clients = 128
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	body := []byte(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":` + envelopeJSON + `}`)

	var mu sync.Mutex
	posted := map[string]time.Time{}
	var ingestLat []time.Duration
	errorsN, accepted := 0, 0
	jobs := make(chan struct{}, rate*10)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				req, _ := http.NewRequest("POST", p.base+"/v1/deliveries", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+benchKey)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					mu.Lock()
					errorsN++
					mu.Unlock()
					continue
				}
				var a struct {
					Deliveries []struct{ ID string } `json:"deliveries"`
				}
				derr := json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				took := time.Since(t0)
				mu.Lock()
				if resp.StatusCode != 202 || derr != nil || len(a.Deliveries) != 1 {
					errorsN++
				} else {
					accepted++
					posted[a.Deliveries[0].ID] = t0
					ingestLat = append(ingestLat, took)
				}
				mu.Unlock()
			}
		}()
	}

	res := &soakResult{Duration: d.String(), Rate: rate}
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	sampleAt := start.Add(interval)
	end := start.Add(d)
	perTick := float64(rate) / 100
	owed := 0.0
	arrIdx := 0
	var pending []arrival
	deliveredTotal := 0
	var e2eAll []time.Duration
	takeSample := func(now time.Time) {
		sink.mu.Lock()
		newArr := append(pending, sink.arrived[arrIdx:]...)
		arrIdx = len(sink.arrived)
		sink.mu.Unlock()
		pending = nil
		var e2e []time.Duration
		mu.Lock()
		for _, a := range newArr {
			t0, ok := posted[a.id]
			if !ok {
				pending = append(pending, a) // its 202 is not back yet
				continue
			}
			e2e = append(e2e, a.at.Sub(t0))
			delete(posted, a.id)
		}
		il := ingestLat
		ingestLat = nil
		acc, errs := accepted, errorsN
		backlog := len(posted)
		mu.Unlock()
		deliveredTotal += len(e2e)
		e2eAll = append(e2eAll, e2e...)
		s := soakSample{AtSec: now.Sub(start).Seconds(), RSSMiB: p.RSS(), RSSAnonMiB: stress.ProcStatus(p.cmd.Process.Pid, "RssAnon"), Accepted: acc, Delivered: deliveredTotal,
			Backlog: backlog, Errors: errs, IngestP50ms: pct(il, 50), IngestP99ms: pct(il, 99), E2EP50ms: pct(e2e, 50), E2EP99ms: pct(e2e, 99)}
		res.Samples = append(res.Samples, s)
		fmt.Fprintf(os.Stderr, "soak %6.0fs: rss %.1f MiB (anon %.1f), accepted %d, delivered %d, backlog %d, errors %d, ingest p99 %.1f ms, e2e p50 %.1f p99 %.1f ms\n",
			s.AtSec, s.RSSMiB, s.RSSAnonMiB, s.Accepted, s.Delivered, s.Backlog, s.Errors, s.IngestP99ms, s.E2EP50ms, s.E2EP99ms)
	}
	for now := range tick.C {
		if now.After(end) {
			break
		}
		owed += perTick
		for owed >= 1 {
			owed--
			select {
			case jobs <- struct{}{}:
			default:
				mu.Lock()
				errorsN++ // the generator could not keep up: counted as an error
				mu.Unlock()
			}
		}
		if !now.Before(sampleAt) {
			takeSample(now)
			sampleAt = sampleAt.Add(interval)
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	sendEnd := time.Now()
	// Drain: wait until everything acknowledged has arrived, or until no
	// progress was made for a minute.
	lastProgress, lastDelivered := time.Now(), deliveredTotal
	for {
		time.Sleep(interval / 4)
		takeSample(time.Now())
		mu.Lock()
		left := len(posted)
		mu.Unlock()
		if deliveredTotal > lastDelivered {
			lastProgress, lastDelivered = time.Now(), deliveredTotal
		}
		if left == 0 || time.Since(lastProgress) > time.Minute {
			break
		}
	}
	res.DrainSec = time.Since(sendEnd).Seconds()
	mu.Lock()
	res.Accepted, res.Errors, res.Undelivered = accepted, errorsN, len(posted)
	mu.Unlock()
	res.Delivered = deliveredTotal
	res.AchievedRate = float64(res.Accepted) / sendEnd.Sub(start).Seconds()
	res.PeakRSSMiB = p.PeakRSS()
	// Stability: compare the first and last quarter of the steady part.
	var steady []soakSample
	for _, s := range res.Samples {
		if s.AtSec <= d.Seconds()+0.5 {
			steady = append(steady, s)
		}
	}
	if q := len(steady) / 4; q >= 1 {
		res.RSSFirstMiB = meanOf(steady[:q], func(s soakSample) float64 { return s.RSSMiB })
		res.RSSLastMiB = meanOf(steady[len(steady)-q:], func(s soakSample) float64 { return s.RSSMiB })
		res.AnonFirstMiB = meanOf(steady[:q], func(s soakSample) float64 { return s.RSSAnonMiB })
		res.AnonLastMiB = meanOf(steady[len(steady)-q:], func(s soakSample) float64 { return s.RSSAnonMiB })
		res.E2EP99First = meanOf(steady[:q], func(s soakSample) float64 { return s.E2EP99ms })
		res.E2EP99Last = meanOf(steady[len(steady)-q:], func(s soakSample) float64 { return s.E2EP99ms })
	}
	for _, s := range steady {
		res.E2EP99Max = math.Max(res.E2EP99Max, s.E2EP99ms)
	}
	res.Stable = res.Undelivered == 0 && res.AchievedRate >= 0.95*float64(rate) && res.E2EP99Last < 3*math.Max(res.E2EP99First, 50)
	res.StableWhy = fmt.Sprintf("e2e p99 %.1f→%.1f ms (first vs last quarter, max %.1f), undelivered at end %d, accepted %.0f/s of %d/s, drain after the load %.0f s; anonymous RSS %.1f→%.1f MiB, total RSS %.1f→%.1f MiB (with bbolt's file map)",
		res.E2EP99First, res.E2EP99Last, res.E2EP99Max, res.Undelivered, res.AchievedRate, rate, res.DrainSec, res.AnonFirstMiB, res.AnonLastMiB, res.RSSFirstMiB, res.RSSLastMiB)
	if samplesPath != "" {
		b, _ := json.MarshalIndent(res.Samples, "", "  ")
		if err := os.WriteFile(samplesPath, append(b, '\n'), 0o644); err != nil {
			return nil, err
		}
		res.SamplesFile = samplesPath
	}
	if plotPath != "" {
		if err := plotSoak(plotPath, res); err != nil {
			return nil, err
		}
		res.Plot = plotPath
	}
	return res, nil
}

func meanOf(ss []soakSample, f func(soakSample) float64) float64 {
	if len(ss) == 0 {
		return 0
	}
	t := 0.0
	for _, s := range ss {
		t += f(s)
	}
	return t / float64(len(ss))
}
