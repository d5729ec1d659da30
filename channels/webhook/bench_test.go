package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDeliver compares Deliver (filter, encode, sign, POST, read the
// answer, classify) with a raw http.Client.Post loop of the same body to the
// same local sink, in the same run, in interleaved chunks. ns/op counts
// both loops; "ratio" is raw ns/op ÷ Deliver ns/op:
// the fraction of the raw loop's throughput Deliver reaches (1 = as fast).
func BenchmarkDeliver(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(map[int]string{1: "serial", 8: "parallel8"}[par], func(b *testing.B) { benchDeliver(b, par) })
	}
}

func benchDeliver(b *testing.B, par int) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	clk := newClock()
	d := newDeliverer(b, clk, srv.URL)
	j := job(b, "ops", "dlv_bench")
	body, err := d.Payload(j, "ops", clk.Now())
	if err != nil {
		b.Fatal(err)
	}
	raw := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ctx := context.Background()

	run := func(n int, f func() error) time.Duration {
		var next atomic.Int64
		errs := make(chan error, par)
		start := time.Now()
		for range par {
			go func() {
				for next.Add(1) <= int64(n) {
					if err := f(); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range par {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	rawPost := func() error {
		resp, err := raw.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	deliver := func() error {
		_, err := d.Deliver(ctx, j)
		return err
	}
	// Warm both connection pools.
	run(par*4, rawPost)
	run(par*4, deliver)

	// Interleave chunks of both loops so that both see the same machine
	// load (other processes, GC of the previous chunk).
	b.ResetTimer()
	var rawTime, delTime time.Duration
	for done := 0; done < b.N; {
		n := min(256, b.N-done)
		rawTime += run(n, rawPost)
		delTime += run(n, deliver)
		done += n
	}
	b.StopTimer()

	rawNs := float64(rawTime.Nanoseconds()) / float64(b.N)
	delNs := float64(delTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(rawNs, "raw-ns/op")
	b.ReportMetric(delNs, "deliver-ns/op")
	b.ReportMetric(rawNs/delNs, "ratio")
	b.ReportMetric(float64(len(body)), "body-bytes")
}

// BenchmarkSign is the cost of signing a typical body with one secret.
func BenchmarkSign(b *testing.B) {
	s := mustSigner(b, vectorSecret)
	body := bytes.Repeat([]byte("x"), 2048)
	ts := time.Unix(vectorTS, 0)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Sign("dlv_0123456789abcdefghjkmnpqrs", ts, body)
	}
}
