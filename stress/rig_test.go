package stress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/email"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
)

// Recipients every envelope of the rig goes to.
const (
	rigSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	rigFrom    = "beachd@example.org"
	rigDomain  = "example.org"
	rigMail    = "alice@example.net"
	rigSMS     = "+447700900123"
	rigWA      = "+447700900124"
	rigSMSFrom = "+15550001111"
	rigWAFrom  = "whatsapp:+15550002222"
)

// rigOptions tune a rig.
type rigOptions struct {
	// Policy for every channel; zero: fastPolicy.
	Policy channels.Policy
	// DBPath: the store's file (default: in t.TempDir()).
	DBPath string
	// WebStatus, when set, answers a webhook before the sink does; a
	// non-zero status is sent instead (with the given headers).
	WebStatus func(n int, r *http.Request) (int, http.Header)
	// Workers of the dispatcher; default 8.
	Workers int
}

// fastPolicy retries within a second or two and gives up after Lifetime.
func fastPolicy(lifetime time.Duration) channels.Policy {
	return channels.Policy{Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
		Lifetime: lifetime, Timeout: time.Second}
}

// Credentials the rig's fake Twilio accepts.
const (
	twilioAccount = "AC0123456789abcdef0123456789abcdef"
	twilioToken   = "0123456789abcdef0123456789abcdef"
)

// rig is beachd's delivery path in one process: bolt.DB, the real
// channels.Dispatcher and the real webhook, email and Twilio deliverers,
// each talking to its peer through a toxiproxy proxy.
type rig struct {
	t   *testing.T
	opt rigOptions

	db     *bolt.DB
	dbPath string

	webSink *webhook.Sink
	webSrv  *httptest.Server
	webN    atomic.Int64
	smtp    *smtptest.Server
	tw      *twiliotest.Server
	twSrv   *httptest.Server

	proxies map[string]*toxiproxy.Proxy // web, smtp, twilio

	webTransport *http.Transport
	twTransport  *http.Transport
	sender       *email.Sender
	deliverers   map[string]channels.Deliverer

	cancel context.CancelFunc
	done   chan error
	disp   *channels.Dispatcher

	mu      sync.Mutex
	markers map[string]string // delivery id → marker text
	acked   []*store.Delivery
}

func newToxiServer() *toxiproxy.ApiServer {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	return srv
}

func startProxy(t *testing.T, srv *toxiproxy.ApiServer, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("proxy %s: %v", name, err)
	}
	return p
}

func newRig(t *testing.T, opt rigOptions) *rig {
	t.Helper()
	if opt.Policy.Timeout == 0 {
		opt.Policy = fastPolicy(30 * time.Second)
	}
	if opt.Workers == 0 {
		opt.Workers = 8
	}
	r := &rig{t: t, opt: opt, markers: map[string]string{}}
	r.dbPath = opt.DBPath
	if r.dbPath == "" {
		r.dbPath = t.TempDir() + "/beachd.db"
	}
	var err error

	// Peers.
	secrets, err := webhook.ParseSecrets([]string{rigSecret})
	if err != nil {
		t.Fatal(err)
	}
	r.webSink = webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 100000})
	r.webSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := int(r.webN.Add(1))
		if opt.WebStatus != nil {
			if code, h := opt.WebStatus(n, req); code != 0 {
				for k, v := range h {
					w.Header()[k] = v
				}
				w.WriteHeader(code)
				return
			}
		}
		r.webSink.ServeHTTP(w, req)
	}))
	r.smtp = &smtptest.Server{}
	if _, err = r.smtp.Listen(smtptest.Plain); err != nil {
		t.Fatal(err)
	}
	r.tw = twiliotest.New(twilioAccount, twilioToken)
	r.twSrv = httptest.NewServer(r.tw)

	ts := newToxiServer()
	r.proxies = map[string]*toxiproxy.Proxy{
		"web":    startProxy(t, ts, "web", r.webSrv.Listener.Addr().String()),
		"smtp":   startProxy(t, ts, "smtp", r.smtp.Addr()),
		"twilio": startProxy(t, ts, "twilio", r.twSrv.Listener.Addr().String()),
	}
	r.open()
	return r
}

// open opens the store, builds the deliverers and starts the dispatcher.
func (r *rig) open() {
	t := r.t
	t.Helper()
	var err error
	r.db, err = bolt.Open(r.dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := envelope.NewRegistry()
	rend, err := render.New(render.Config{PublicURL: "https://beachd.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.ParseSigner(rigSecret)
	if err != nil {
		t.Fatal(err)
	}
	r.webTransport = webhook.NewTransport()
	wd, err := webhook.New(webhook.Config{
		Endpoints: []webhook.Endpoint{{Name: "sink", URL: "http://" + r.proxies["web"].Listen + "/hook", Signer: signer, Timeout: r.opt.Policy.Timeout}},
		Registry:  reg, Transport: r.webTransport,
		Breaker: webhook.BreakerConfig{Threshold: 5, Cooldown: 100 * time.Millisecond, MaxCooldown: 400 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(r.proxies["smtp"].Listen)
	p, _ := strconv.Atoi(port)
	r.sender, err = email.NewSender(email.SenderConfig{From: rigFrom, Host: "127.0.0.1", Port: p, TLS: email.TLSNone,
		Timeout: r.opt.Policy.Timeout, PoolSize: 4, HELO: "stress.localhost"}, rend, reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.twTransport = http.DefaultTransport.(*http.Transport).Clone()
	client, err := twilio.NewClient(twilio.ClientConfig{AccountSID: twilioAccount, AuthToken: twilioToken,
		APIBaseURL: "http://" + r.proxies["twilio"].Listen, Timeout: r.opt.Policy.Timeout, Transport: r.twTransport})
	if err != nil {
		t.Fatal(err)
	}
	tcfg := twilio.Config{SMSFrom: rigSMSFrom, WhatsAppFrom: rigWAFrom, CallReserve: 100 * time.Millisecond,
		Templates: twilio.Templates{Result: &render.ContentTemplate{ContentSID: "HX0123456789abcdef0123456789abcdef", Variables: map[string]string{"1": "{{.Text}}"}}}}
	deps := twilio.Deps{Client: client, Store: r.db, Limiter: twilio.NewLimiter(twilio.LimiterConfig{PerSecond: 1e9, Burst: 1 << 30}),
		Render: twilio.Renderer(rend, reg, nil)}
	sms, err := twilio.NewSMS(tcfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	wa, err := twilio.NewWhatsApp(tcfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	r.deliverers = map[string]channels.Deliverer{"webhook": wd, "email": r.sender, "sms": sms, "whatsapp": wa}
	pol := map[string]channels.Policy{}
	for ch := range r.deliverers {
		pol[ch] = r.opt.Policy
	}
	r.disp, err = channels.NewDispatcher(channels.DispatcherConfig{Workers: r.opt.Workers, Policies: pol, IdleWait: 50 * time.Millisecond,
		Jitter: func() float64 { return 0.5 }}, r.db, r.deliverers, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- r.disp.Run(ctx) }()
}

// shut stops the dispatcher and closes the deliverers and the store.
func (r *rig) shut() {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("dispatcher: %v", err)
		}
	case <-time.After(20 * time.Second):
		r.t.Fatal("dispatcher did not stop within 20s")
	}
	r.sender.Close()
	r.webTransport.CloseIdleConnections()
	r.twTransport.CloseIdleConnections()
	if err := r.db.Close(); err != nil {
		r.t.Errorf("close store: %v", err)
	}
}

// close tears everything down.
func (r *rig) close() {
	r.shut()
	for _, p := range r.proxies {
		p.Stop()
	}
	r.webSrv.Close()
	r.twSrv.Close()
	r.smtp.Close()
}

// ingest stores n envelopes, each to the four recipients, and remembers
// the acknowledged deliveries. tag distinguishes batches.
func (r *rig) ingest(tag string, n int, to ...store.NewDelivery) ([]*store.Delivery, error) {
	if len(to) == 0 {
		to = []store.NewDelivery{{Channel: "webhook", To: "sink"}, {Channel: "email", To: rigMail},
			{Channel: "sms", To: rigSMS}, {Channel: "whatsapp", To: rigWA}}
	}
	var out []*store.Delivery
	for i := 0; i < n; i++ {
		marker := fmt.Sprintf("mk-%s-%d-%d", tag, i, time.Now().UnixNano())
		env := fmt.Sprintf(`{"role":"agent","parts":[{"text":"%s: your flight BA2043 on 15 August is confirmed. Seat 12A.","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t%d","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`, marker, i)
		res, err := r.db.Ingest(context.Background(), store.Ingest{Envelope: json.RawMessage(env), Source: "stress", Deliveries: to})
		if err != nil {
			return out, err
		}
		r.mu.Lock()
		for _, d := range res.Deliveries {
			r.markers[d.ID] = marker
			r.acked = append(r.acked, d)
		}
		r.mu.Unlock()
		out = append(out, res.Deliveries...)
	}
	r.disp.Notify()
	return out, nil
}

// settle waits until no delivery is queued, sending or retrying.
func (r *rig) settle(within time.Duration) map[store.State]int {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := r.db.CountByState(context.Background())
		if err != nil {
			r.t.Fatal(err)
		}
		if c[store.StateQueued]+c[store.StateSending]+c[store.StateRetrying] == 0 {
			return c
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("deliveries still pending after %s: %v", within, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// arrived is how many times a delivery reached its peer.
func (r *rig) arrived(d *store.Delivery) int {
	r.mu.Lock()
	marker := r.markers[d.ID]
	r.mu.Unlock()
	switch d.Channel {
	case "webhook":
		return r.webSink.Count(d.ID)
	case "email":
		return r.smtp.Count(d.ID + "@" + rigDomain)
	case "sms":
		return len(r.tw.Matching(d.To, marker))
	case "whatsapp":
		return len(r.tw.Matching("whatsapp:"+d.To, marker))
	}
	return 0
}

// outcome is what the scenario expects of one delivery.
type outcome struct {
	state  store.State
	reason string // substring of DeadReason when dead
}

// verdict counts a scenario's results.
type verdict struct {
	Deliveries int `json:"deliveries"`
	Delivered  int `json:"delivered"`
	Dead       int `json:"deadLettered"`
	Duplicates int `json:"duplicates"`
	Attempts   int `json:"attempts"`
}

// check verifies every acknowledged delivery: its final state and reason
// as expected, sent ones at their peer at least once, dead ones not at
// all, duplicates counted.
func (r *rig) check(expect func(d *store.Delivery) outcome) verdict {
	r.t.Helper()
	ctx := context.Background()
	r.mu.Lock()
	acked := append([]*store.Delivery(nil), r.acked...)
	r.mu.Unlock()
	var v verdict
	for _, a := range acked {
		d, err := r.db.Delivery(ctx, a.ID)
		if err != nil {
			r.t.Fatalf("delivery %s: %v", a.ID, err)
		}
		v.Deliveries++
		v.Attempts += d.Attempts
		want := expect(d)
		if d.State != want.state {
			r.t.Errorf("%s %s: state %s (last error %q, dead reason %q), want %s", d.Channel, d.ID, d.State, d.LastError, d.DeadReason, want.state)
			continue
		}
		n := r.arrived(d)
		switch d.State {
		case store.StateSent:
			v.Delivered++
			if n == 0 {
				r.t.Errorf("%s %s recorded as sent but its peer never got it", d.Channel, d.ID)
			}
			if n > 1 {
				v.Duplicates += n - 1
			}
		case store.StateDead:
			v.Dead++
			if !strings.Contains(d.DeadReason, want.reason) {
				r.t.Errorf("%s %s dead with reason %q, want it to contain %q", d.Channel, d.ID, d.DeadReason, want.reason)
			}
			if n != 0 {
				r.t.Errorf("%s %s dead-lettered but its peer got it %d times", d.Channel, d.ID, n)
			}
		}
	}
	if err := r.db.CheckInvariants(); err != nil {
		r.t.Errorf("store invariants: %v", err)
	}
	return v
}

func allSent(*store.Delivery) outcome { return outcome{state: store.StateSent} }

// toxic adds a toxic to a proxy.
func toxic(t *testing.T, p *toxiproxy.Proxy, name, typ, stream string, attrs map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if _, err := p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		t.Fatalf("toxic %s on %s: %v", name, p.Name, err)
	}
}

func untoxic(t *testing.T, p *toxiproxy.Proxy, name string) {
	t.Helper()
	if err := p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s from %s: %v", name, p.Name, err)
	}
}

// attemptsSoFar sums the attempts recorded on the rig's deliveries.
func (r *rig) attemptsSoFar() int {
	r.mu.Lock()
	acked := append([]*store.Delivery(nil), r.acked...)
	r.mu.Unlock()
	n := 0
	for _, a := range acked {
		if d, err := r.db.Delivery(context.Background(), a.ID); err == nil {
			n += d.Attempts
		}
	}
	return n
}

// noLeak measures goroutines and descriptors around f (which builds and
// tears down everything it uses) and fails when they do not come back.
func noLeak(t *testing.T, f func()) (before, after Resources) {
	t.Helper()
	before, _ = Settle(Snapshot(), 0, 0)
	f()
	after, ok := Settle(before, 0, 10*time.Second)
	if !ok {
		t.Errorf("leak: goroutines %d → %d, open descriptors %d → %d\n%s\n%s", before.Goroutines, after.Goroutines, before.FDs, after.FDs, FDList(), Stacks())
	}
	return before, after
}

// faultLog collects the scenarios' figures for the report.
type faultResult struct {
	Scenario string    `json:"scenario"`
	Verdict  verdict   `json:"verdict"`
	Before   Resources `json:"before"`
	After    Resources `json:"after"`
	Took     string    `json:"took"`
}

func writeFaultResult(t *testing.T, fr faultResult) {
	t.Logf("%s: %d deliveries, %d delivered, %d dead-lettered, %d duplicates, %d attempts; goroutines %d→%d, fds %d→%d, %s",
		fr.Scenario, fr.Verdict.Deliveries, fr.Verdict.Delivered, fr.Verdict.Dead, fr.Verdict.Duplicates, fr.Verdict.Attempts,
		fr.Before.Goroutines, fr.After.Goroutines, fr.Before.FDs, fr.After.FDs, fr.Took)
	if p := os.Getenv("BEACHD_FAULTS_JSON"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("faults json: %v", err)
			return
		}
		defer f.Close()
		b, _ := json.Marshal(fr)
		f.Write(append(b, '\n'))
	}
}
