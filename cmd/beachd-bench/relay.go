package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"
)

// The relay ceiling. A daemon that takes an envelope over HTTP and delivers
// it over HTTP pays for two round trips where the raw loop pays for one:
// it serves the ingest request and makes the webhook request, and the
// clients and the sink pay their sides as before. The relay is the least
// such a daemon can be: a separate process (as beachd is) whose handler
// reads the request, POSTs the webhook-sized body to the sink with a fresh
// webhook-id, and answers 202 once the sink has answered. It stores
// nothing, decodes nothing, signs nothing and never retries, so its rate is
// an upper bound for any HTTP-in, HTTP-out design on this machine, and its
// ratio to the raw loop says how much of the target is left for the work
// that makes beachd durable.

// relayEnv, when set, turns this process into the relay: the value is
// "listen-address sink-url".
const relayEnv = "BEACHD_BENCH_RELAY"

// serveRelay runs the relay until killed. It is called from main when
// relayEnv is set.
func serveRelay(spec string) {
	var addr, sinkURL, mode string
	if _, err := fmt.Sscan(spec, &addr, &sinkURL, &mode); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(2)
	}
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	hook := []byte(`{"type":"beach.envelope","timestamp":"2026-04-20T09:50:00Z","data":{"deliveryId":"dlv_0123456789abcdefghjkmnpqrs","envelope":` + envelopeJSON + `}}`)
	var seq atomic.Int64
	async := mode == "queued"
	forward := func(id string) error {
		req, _ := http.NewRequest("POST", sinkURL, bytes.NewReader(hook))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	// The queued relay answers at once and forwards from 64 workers, as
	// beachd does, with an in-memory queue in place of the store.
	queue := make(chan string, 1<<20)
	if async {
		for range 64 {
			go func() {
				for id := range queue {
					for forward(id) != nil {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		id := "msg_relay_" + strconv.FormatInt(seq.Add(1), 10)
		if async {
			queue <- id
		} else if err := forward(id); err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"deliveries":[{"id":"`+id+`"}]}`)
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	http.Serve(l, h)
}

// relayFigures are the fastest of three runs through one relay.
type relayFigures struct {
	Ingest    float64   `json:"ingestPerSec"`
	Delivered float64   `json:"deliveredPerSec"`
	Runs      []float64 `json:"deliveredRunsPerSec"`
	// CPUPerEnvelopeUs is the relay process's CPU time over its three runs
	// divided by the envelopes, in µs.
	CPUPerEnvelopeUs float64 `json:"cpuPerEnvelopeUs"`
}

// relayRun starts the relay ("direct" or "queued") as a child process and
// drives n ingest-sized POSTs through it from c clients, three times,
// waiting each time until the sink has all n; the fastest run counts, as
// for the raw loop.
func relayRun(mode string, n, c int, hc *http.Client, s *sink, sinkURL string, body []byte) (*relayFigures, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), relayEnv+"="+addr+" "+sinkURL+" "+mode)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	defer func() { cancel(); cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("relay did not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	url := "http://" + addr + "/v1/deliveries"
	f := &relayFigures{}
	for run := 0; run < 3; run++ {
		s.expect(n)
		start := time.Now()
		if err := postLoop(n, c, hc, url, body, http.StatusAccepted); err != nil {
			return nil, fmt.Errorf("%s relay: %w", mode, err)
		}
		acked := time.Since(start)
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("%s relay: the sink did not get all %d", mode, n)
		}
		all := time.Since(start)
		f.Ingest = max(f.Ingest, float64(n)/acked.Seconds())
		d := float64(n) / all.Seconds()
		f.Runs = append(f.Runs, d)
		f.Delivered = max(f.Delivered, d)
	}
	f.CPUPerEnvelopeUs = cpuSeconds(cmd.Process.Pid) / float64(3*n) * 1e6
	return f, nil
}
