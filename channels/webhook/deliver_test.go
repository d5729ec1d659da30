package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

// newClock is the clock a deliverer and its sink share.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2026, 4, 20, 10, 0, 0, 0, time.UTC)) }

func loadEnvelope(t testing.TB, name string) *envelope.Envelope {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.Decode(b, envelope.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.NewRegistry().Validate(env); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return env
}

func job(t testing.TB, endpoint, id string) *channels.Job {
	return &channels.Job{
		Delivery: &store.Delivery{ID: id, Channel: envelope.ChannelWebhook, To: endpoint},
		Envelope: loadEnvelope(t, "mixed.json"),
		Attempt:  1,
	}
}

type deliverOpt func(*Config, *Endpoint)

func newDeliverer(t testing.TB, clk *fakeclock.Clock, url string, opts ...deliverOpt) *Deliverer {
	t.Helper()
	ep := Endpoint{Name: "ops", URL: url, Signer: mustSigner(t, vectorSecret), Timeout: 2 * time.Second}
	cfg := Config{Registry: envelope.NewRegistry(), Version: "1.2.3", Now: clk.Now}
	for _, o := range opts {
		o(&cfg, &ep)
	}
	cfg.Endpoints = append(cfg.Endpoints, ep)
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDeliverSignedBody(t *testing.T) {
	clk := newClock()
	sink := NewSink(SinkConfig{Secrets: mustSigner(t, vectorSecret).Secrets(), Now: clk.Now})
	var got http.Header
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		sink.ServeHTTP(w, r)
	}))
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL, func(_ *Config, ep *Endpoint) {
		ep.Headers = map[string]string{"X-Tenant": "acme"}
	})
	res, err := d.Deliver(context.Background(), job(t, "ops", "dlv_01"))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if res.Receipt.Meta["source"] != "http" || res.Receipt.Meta["status"] != 204 {
		t.Errorf("receipt meta = %v", res.Receipt.Meta)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "beachd/1.2.3", "X-Tenant": "acme",
		"Webhook-Id": "dlv_01", "Webhook-Timestamp": strconv.FormatInt(clk.Now().Unix(), 10),
	} {
		if got.Get(k) != want {
			t.Errorf("header %s = %q, want %q", k, got.Get(k), want)
		}
	}
	recs := sink.Received()
	if len(recs) != 1 || !recs[0].Verified || recs[0].ID != "dlv_01" || recs[0].DeliveryID != "dlv_01" || recs[0].Type != EventType {
		t.Fatalf("sink got %+v", recs)
	}
	var env envelope.Envelope
	if err := json.Unmarshal(recs[0].Envelope, &env); err != nil {
		t.Fatal(err)
	}
	if env.Meta.TurnID != "turn_1" {
		t.Errorf("envelope meta lost: %+v", env.Meta)
	}
}

func TestPayloadShape(t *testing.T) {
	clk := newClock()
	d := newDeliverer(t, clk, "http://127.0.0.1:1/hook")
	b, err := d.Payload(job(t, "ops", "dlv_02"), "ops", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      struct {
			DeliveryID string            `json:"deliveryId"`
			Envelope   envelope.Envelope `json:"envelope"`
		} `json:"data"`
	}
	if err := envelope.StrictUnmarshal(b, &p); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	if p.Type != "beach.envelope" || p.Timestamp != "2026-04-20T10:00:00Z" || p.Data.DeliveryID != "dlv_02" {
		t.Errorf("body = %s", b)
	}
}

func partTypes(env *envelope.Envelope) []string {
	var out []string
	for _, p := range env.Parts {
		out = append(out, p.PartType())
	}
	return out
}

func TestFilterByConsumes(t *testing.T) {
	tests := []struct {
		consumes []string
		want     []string
	}{
		{nil, []string{"response", "domain-data", "approval-request"}},
		{[]string{"llm-context"}, []string{"response", "domain-data", "llm-context", "approval-request"}},
		{[]string{"llm-context", "a2ui-surface", "reasoning-trace", "setState", "thinking"},
			[]string{"response", "domain-data", "llm-context", "a2ui-surface", "reasoning-trace", "approval-request"}},
	}
	for _, tt := range tests {
		clk := newClock()
		d := newDeliverer(t, clk, "http://127.0.0.1:1/", func(_ *Config, ep *Endpoint) { ep.Consumes = tt.consumes })
		b, err := d.Payload(job(t, "ops", "dlv_03"), "ops", clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Data struct{ Envelope envelope.Envelope } `json:"data"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if got := partTypes(&p.Data.Envelope); !slices.Equal(got, tt.want) {
			t.Errorf("consumes %v: parts %v, want %v", tt.consumes, got, tt.want)
		}
		// The domain-data part keeps its slot metadata.
		for _, part := range p.Data.Envelope.Parts {
			if part.PartType() == "domain-data" && part.Metadata["slotKey"] != "flights" {
				t.Errorf("domain-data metadata lost: %v", part.Metadata)
			}
		}
		// The registry filter is the reference: same parts in the same order.
		ref := envelope.NewRegistry().Filter(loadEnvelope(t, "mixed.json"), envelope.ChannelWebhook, tt.consumes)
		if !slices.Equal(partTypes(ref), tt.want) {
			t.Errorf("registry filter disagrees: %v", partTypes(ref))
		}
	}
}

// hijack answers raw bytes on the connection and resets it.
func hijack(t *testing.T, w http.ResponseWriter, r *http.Request, raw string) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	if raw != "" {
		_, _ = buf.WriteString(raw)
		_ = buf.Flush()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST
	}
	_ = conn.Close()
}

func TestDeliverClassification(t *testing.T) {
	clk := newClock()
	retryDate := clk.Now().Add(90 * time.Second).Format(http.TimeFormat)
	release := make(chan struct{})
	var redirectHits atomic.Int64
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		url        func(srv *httptest.Server) string
		delivered  bool
		permanent  bool
		maybeSent  bool
		retryAfter time.Duration
		errIs      error
		status     int
	}{
		{name: "200", handler: status(200, "ok"), delivered: true, status: 200},
		{name: "204", handler: status(204, ""), delivered: true, status: 204},
		{name: "301 not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/moved" {
				redirectHits.Add(1)
				w.WriteHeader(200)
				return
			}
			http.Redirect(w, r, "/moved?token=secret", http.StatusMovedPermanently)
		}, permanent: true, errIs: ErrRedirect, status: 301},
		{name: "400", handler: status(400, "bad"), permanent: true, errIs: ErrStatus, status: 400},
		{name: "404", handler: status(404, "nope"), permanent: true, errIs: ErrStatus, status: 404},
		{name: "410", handler: status(410, "gone"), permanent: true, errIs: ErrStatus, status: 410},
		{name: "429 retry-after seconds", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(429)
		}, retryAfter: 120 * time.Second, errIs: ErrStatus, status: 429},
		{name: "429 retry-after date", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", retryDate)
			w.WriteHeader(429)
		}, retryAfter: 90 * time.Second, errIs: ErrStatus, status: 429},
		{name: "500", handler: status(500, "boom"), errIs: ErrStatus, status: 500},
		{name: "503 retry-after", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(503)
		}, retryAfter: 7 * time.Second, errIs: ErrStatus, status: 503},
		{name: "hang past timeout", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, maybeSent: true, errIs: ErrTransport},
		{name: "connection refused", url: func(*httptest.Server) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			return "http://" + addr + "/hook"
		}, errIs: ErrTransport},
		{name: "reset before the answer", handler: func(w http.ResponseWriter, r *http.Request) {
			hijack(t, w, r, "")
		}, maybeSent: true, errIs: ErrTransport},
		{name: "reset mid-body after 200", handler: func(w http.ResponseWriter, r *http.Request) {
			hijack(t, w, r, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
		}, delivered: true, status: 200},
		{name: "reset mid-body after 503", handler: func(w http.ResponseWriter, r *http.Request) {
			hijack(t, w, r, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\npartial")
		}, errIs: ErrStatus, status: 503},
	}
	defer close(release)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.handler
			if h == nil {
				h = status(200, "")
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			url := srv.URL + "/hook"
			if tt.url != nil {
				url = tt.url(srv)
			}
			d := newDeliverer(t, clk, url, func(_ *Config, ep *Endpoint) { ep.Timeout = 300 * time.Millisecond })
			res, err := d.Deliver(context.Background(), job(t, "ops", "dlv_c"))
			if tt.delivered {
				if err != nil {
					t.Fatalf("Deliver = %v, want delivered", err)
				}
				if got := res.Receipt.Data.(map[string]any)["status"]; got != tt.status {
					t.Errorf("receipt status %v, want %d", got, tt.status)
				}
				return
			}
			if err == nil {
				t.Fatalf("Deliver succeeded, want failure")
			}
			ce := channels.AsError(err)
			if ce.Permanent != tt.permanent || ce.MaybeSent != tt.maybeSent || ce.RetryAfter != tt.retryAfter {
				t.Errorf("error %v: permanent=%v maybeSent=%v retryAfter=%v, want %v %v %v",
					err, ce.Permanent, ce.MaybeSent, ce.RetryAfter, tt.permanent, tt.maybeSent, tt.retryAfter)
			}
			if !errors.Is(err, tt.errIs) {
				t.Errorf("error %v, want %v", err, tt.errIs)
			}
			if tt.status != 0 {
				if ce.Receipt == nil || ce.Receipt.Meta["status"] != tt.status {
					t.Errorf("receipt %+v, want status %d", ce.Receipt, tt.status)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error text leaks the redirect's query: %v", err)
			}
		})
	}
	if n := redirectHits.Load(); n != 0 {
		t.Errorf("redirect target was requested %d times; redirects must not be followed", n)
	}
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func TestGoneDisablesEndpoint(t *testing.T) {
	clk := newClock()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusGone)
	}))
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL)
	if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_g1")); !channels.AsError(err).Permanent {
		t.Fatalf("410: %v, want permanent", err)
	}
	_, err := d.Deliver(context.Background(), job(t, "ops", "dlv_g2"))
	if !errors.Is(err, ErrEndpointDisabled) || !channels.AsError(err).Permanent {
		t.Fatalf("after 410: %v, want permanent ErrEndpointDisabled", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("disabled endpoint was called: %d requests", hits.Load())
	}
	if st, _ := d.Status("ops"); !st.Disabled {
		t.Errorf("status %+v, want disabled", st)
	}
	d.Enable("ops")
	_, _ = d.Deliver(context.Background(), job(t, "ops", "dlv_g3"))
	if hits.Load() != 2 {
		t.Fatalf("re-enabled endpoint not called")
	}
}

func TestUnknownEndpointIsPermanent(t *testing.T) {
	d := newDeliverer(t, newClock(), "http://127.0.0.1:1/")
	_, err := d.Deliver(context.Background(), job(t, "nope", "dlv_u"))
	if !errors.Is(err, ErrUnknownEndpoint) || !channels.AsError(err).Permanent {
		t.Fatalf("unknown endpoint: %v", err)
	}
}

func TestBreakerThroughDeliver(t *testing.T) {
	clk := newClock()
	var hits atomic.Int64
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if fail.Load() {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL)
	del := &store.Delivery{ID: "x", Channel: "webhook", To: "ops"}
	for i := range 5 {
		if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_b")); err == nil {
			t.Fatalf("attempt %d succeeded", i)
		}
	}
	if hits.Load() != 5 {
		t.Fatalf("hits %d", hits.Load())
	}
	// Open: fail fast, no request, RetryAfter = cool-down left.
	clk.Advance(10 * time.Second)
	_, err := d.Deliver(context.Background(), job(t, "ops", "dlv_b"))
	ce := channels.AsError(err)
	if !errors.Is(err, ErrCircuitOpen) || ce.Permanent || ce.RetryAfter != 20*time.Second || hits.Load() != 5 {
		t.Fatalf("open circuit: err=%v retryAfter=%v hits=%d", err, ce.RetryAfter, hits.Load())
	}
	if d.Admit(del) {
		t.Fatalf("Admit while open")
	}
	// After the cool-down one probe goes; it fails: open again for 60 s.
	clk.Advance(20 * time.Second)
	if !d.Admit(del) {
		t.Fatalf("Admit refused the probe")
	}
	// Only one job is admitted to probe: the others would fail fast and
	// spend an attempt each.
	if d.Admit(&store.Delivery{ID: "y", Channel: "webhook", To: "ops"}) {
		t.Fatalf("Admit let a second job through while the probe is out")
	}
	d.Done(del)
	if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_b")); errors.Is(err, ErrCircuitOpen) || hits.Load() != 6 {
		t.Fatalf("probe: err=%v hits=%d", err, hits.Load())
	}
	_, err = d.Deliver(context.Background(), job(t, "ops", "dlv_b"))
	if ce := channels.AsError(err); ce.RetryAfter != 60*time.Second {
		t.Fatalf("after failed probe: %v retryAfter=%v, want 60s", err, ce.RetryAfter)
	}
	// Endpoint recovers: the next probe closes the circuit.
	fail.Store(false)
	clk.Advance(60 * time.Second)
	if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_b")); err != nil {
		t.Fatalf("probe after recovery: %v", err)
	}
	if st, _ := d.Status("ops"); st.Breaker != Closed {
		t.Fatalf("breaker %v, want closed", st.Breaker)
	}
}

func TestAdmitConcurrency(t *testing.T) {
	d := newDeliverer(t, newClock(), "http://127.0.0.1:1/", func(_ *Config, ep *Endpoint) { ep.MaxConcurrency = 2 })
	del := &store.Delivery{ID: "a", Channel: "webhook", To: "ops"}
	if !d.Admit(del) || !d.Admit(del) {
		t.Fatal("first two not admitted")
	}
	if d.Admit(del) {
		t.Fatal("third admitted past max_concurrency 2")
	}
	d.Done(del)
	if !d.Admit(del) {
		t.Fatal("slot not released by Done")
	}
	if !d.Admit(&store.Delivery{Channel: "email", To: "a@b"}) {
		t.Fatal("other channels must be admitted")
	}
	if !d.Admit(&store.Delivery{Channel: "webhook", To: "unknown"}) {
		t.Fatal("unknown endpoints are admitted (and fail permanently)")
	}
	if n := d.InFlight("ops"); n != 2 {
		t.Fatalf("in flight %d", n)
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 4, 20, 10, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"":             0,
		"0":            0,
		"-5":           0,
		"30":           30 * time.Second,
		" 30 ":         30 * time.Second,
		"999999999999": MaxRetryAfter,
		"soon":         0,
		now.Add(-time.Hour).Format(http.TimeFormat):      0,
		now.Add(2 * time.Minute).Format(http.TimeFormat): 2 * time.Minute,
		now.Add(48 * time.Hour).Format(http.TimeFormat):  MaxRetryAfter,
	}
	for in, want := range tests {
		if got := retryAfter(in, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	sig := mustSigner(t, vectorSecret)
	for name, ep := range map[string]Endpoint{
		"relative url":    {Name: "a", URL: "/hook", Signer: sig},
		"ftp url":         {Name: "a", URL: "ftp://x/hook", Signer: sig},
		"no signer":       {Name: "a", URL: "https://x/hook"},
		"reserved header": {Name: "a", URL: "https://x/hook", Signer: sig, Headers: map[string]string{"Webhook-Id": "x"}},
	} {
		if _, err := New(Config{Registry: envelope.NewRegistry(), Endpoints: []Endpoint{ep}}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestConnectionReuse checks that consecutive deliveries reuse one
// keep-alive connection (the benchmark relies on it).
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(status(204, ""))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	d := newDeliverer(t, newClock(), srv.URL)
	for range 20 {
		if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_r")); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 sequential deliveries, want 1", n)
	}
}

func TestAdminHandlers(t *testing.T) {
	clk := newClock()
	srv := httptest.NewServer(status(410, ""))
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL)
	_, _ = d.Deliver(context.Background(), job(t, "ops", "dlv_a"))
	mux := http.NewServeMux()
	mux.Handle("GET /v1/webhooks/endpoints", d.StatusHandler())
	mux.Handle("POST /v1/webhooks/endpoints/{endpoint}/enable", d.EnableHandler())
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/webhooks/endpoints", nil))
	if !strings.Contains(rec.Body.String(), `"name":"ops","breaker":"closed"`) || !strings.Contains(rec.Body.String(), `"disabled":true`) {
		t.Fatalf("status listing %s", rec.Body)
	}
	if strings.Contains(rec.Body.String(), srv.URL) {
		t.Fatalf("status listing shows the URL: %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/webhooks/endpoints/ops/enable", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"disabled":false`) {
		t.Fatalf("enable: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/webhooks/endpoints/nope/enable", nil))
	if rec.Code != 404 {
		t.Fatalf("enable unknown: %d", rec.Code)
	}
}

// TestConcurrentDeliveries runs many deliveries at once (under -race in the
// test script) and checks the sink got each exactly once, verified.
func TestConcurrentDeliveries(t *testing.T) {
	clk := newClock()
	sink := NewSink(SinkConfig{Secrets: mustSigner(t, vectorSecret).Secrets(), Now: clk.Now})
	srv := httptest.NewServer(sink)
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL, func(_ *Config, ep *Endpoint) { ep.MaxConcurrency = 4 })
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				del := &store.Delivery{ID: "dlv_" + strconv.Itoa(g) + "_" + strconv.Itoa(i), Channel: "webhook", To: "ops"}
				for !d.Admit(del) {
					runtime.Gosched()
				}
				j := job(t, "ops", del.ID)
				_, err := d.Deliver(context.Background(), j)
				if n := d.InFlight("ops"); n > 4 {
					errs <- fmt.Errorf("%d in flight past max_concurrency 4", n)
				}
				d.Done(del)
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := sink.Stats(); st != (SinkStats{Total: 80, Unique: 80}) {
		t.Fatalf("sink stats %+v", st)
	}
	if d.InFlight("ops") != 0 {
		t.Fatalf("slots leaked: %d", d.InFlight("ops"))
	}
}

// A delivery cancelled by the caller (shutdown) is temporary and does not
// count against the endpoint.
func TestCancelledDeliveryIsNoVerdict(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	// Release the handler before closing the server: Close waits for it,
	// and the server need not notice the client's cancellation.
	defer srv.Close()
	defer close(release)
	d := newDeliverer(t, newClock(), srv.URL, func(c *Config, _ *Endpoint) { c.Breaker.Threshold = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := d.Deliver(ctx, job(t, "ops", "dlv_x"))
		done <- err
	}()
	cancel()
	err := <-done
	if ce := channels.AsError(err); err == nil || ce.Permanent {
		t.Fatalf("cancelled delivery: %v, want temporary", err)
	}
	if st, _ := d.Status("ops"); st.Breaker != Closed {
		t.Fatalf("breaker %v after a cancelled delivery, want closed", st.Breaker)
	}
}
