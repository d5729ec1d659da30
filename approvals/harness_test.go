package approvals

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// sent is a confirmation the Service enqueued.
type sent struct {
	To   envelope.Recipient
	Text string
}

type fakeEnqueuer struct {
	mu   sync.Mutex
	sent []sent
}

func (f *fakeEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error) {
	if err := envelope.NewRegistry().Validate(env); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range to {
		f.sent = append(f.sent, sent{To: r, Text: env.Text("response")})
	}
	return "env_x", nil
}

func (f *fakeEnqueuer) To(addr string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.sent {
		if s.To.Address == addr {
			out = append(out, s.Text)
		}
	}
	return out
}

func (f *fakeEnqueuer) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// harness is beachd's approvals path in process: a bbolt store, the
// Service, the injector running against a real a2a-go agent server.
type harness struct {
	t       testing.TB
	ctx     context.Context
	db      *bolt.DB
	clock   *fakeclock.Clock // real time plus an offset tests advance
	svc     *Service
	inj     *Injector
	agent   *agenttest.Server
	client  *agent.Client
	enq     *fakeEnqueuer
	sender  Sender
	reg     *prometheus.Registry
	metrics *Metrics
}

type harnessOpt struct {
	// target, when set, is the agent the harness's client starts turns on
	// (a2ajstest's, say); the a2a-go agent by default.
	target     *agent.Target
	noInjector bool
	sender     func(real Sender) Sender
	cfg        func(*Config)
	lifetime   time.Duration
}

func newHarness(t testing.TB, opt harnessOpt) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, ctx: ctx, clock: fakeclock.NewOffset(), enq: &fakeEnqueuer{}}
	var err error
	h.db = storetest.Open(t, bolt.Options{Now: h.clock.Now, MaxBatchDelay: time.Millisecond, NoSync: os.Getenv("APPROVALS_NOSYNC") != ""})
	h.agent = agenttest.Start()
	target := agent.Target{URL: h.agent.URL, Timeout: 5 * time.Second}
	if opt.target != nil {
		target = *opt.target
	}
	h.client, err = agent.New(map[string]agent.Target{"travel": target}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.sender = h.client
	if opt.sender != nil {
		h.sender = opt.sender(h.client)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("APPROVALS_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	h.reg = prometheus.NewRegistry()
	h.metrics, err = NewMetrics(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.inj = NewInjector(InjectorConfig{Metrics: h.metrics, Now: h.clock.Now, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Lifetime: opt.lifetime, Permanent: func(err error) bool { return agent.IsPermanent(err) || PermanentHTTP(err) }}, h.db, func(string) Sender { return h.sender }, log)
	cfg := Config{Secret: []byte(strings.Repeat("k", 32)), PublicURL: "https://beachd.example.org", Now: h.clock.Now, Metrics: h.metrics}
	if opt.cfg != nil {
		opt.cfg(&cfg)
	}
	var ho Handoff
	if !opt.noInjector {
		ho = h.inj
	}
	h.svc, err = New(cfg, h.db, h.enq, ho, log)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if !opt.noInjector {
		wg.Add(1)
		go func() { defer wg.Done(); h.inj.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := h.db.CheckApprovalInvariants(); err != nil {
			t.Errorf("store invariants: %v", err)
		}
		h.agent.Close()
		h.db.Close()
	})
	return h
}

// suspend starts a turn on the agent that suspends on approval id, and
// returns the settled envelope the agent produced.
func (h *harness) suspend(id string) *envelope.Envelope {
	h.t.Helper()
	turn, err := h.client.StartTurn(h.ctx, "travel", "approve:"+id, "")
	if err != nil {
		h.t.Fatal(err)
	}
	env, err := h.client.WaitTurn(h.ctx, "travel", turn, 5*time.Millisecond)
	if err != nil {
		h.t.Fatal(err)
	}
	return env
}

// ingest stores env for the recipients as the API would, and returns the
// deliveries.
func (h *harness) ingest(env *envelope.Envelope, to ...envelope.Recipient) []*store.Delivery {
	h.t.Helper()
	as, per, err := h.svc.Prepare(h.ctx, env, to, "travel")
	if err != nil {
		h.t.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	in := store.Ingest{Envelope: raw, Agent: "travel", Approvals: as}
	for i, r := range to {
		in.Deliveries = append(in.Deliveries, store.NewDelivery{Channel: r.Channel, To: r.Target(), ApprovalIDs: per[i]})
	}
	for _, na := range as {
		in.Deliveries = append(in.Deliveries, na.Ask...) // as the API's ingester does
	}
	res, err := h.db.Ingest(h.ctx, in)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Deliveries
}

func (h *harness) handle(d *store.Delivery) render.ApprovalHandle {
	h.t.Helper()
	hs, err := h.svc.Handles(h.ctx, d, nil)
	if err != nil || len(hs) != 1 {
		h.t.Fatalf("handles: %v, %v", hs, err)
	}
	return hs[0]
}

func (h *harness) inbound(in envelope.Inbound) envelope.InboundResult {
	h.t.Helper()
	res, err := h.svc.HandleInbound(h.ctx, in)
	if err != nil {
		h.t.Fatalf("HandleInbound: %v", err)
	}
	return res
}

// waitReceived waits until the agent received n approval-responses.
func (h *harness) waitReceived(n int) []agenttest.Received {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := h.agent.Received()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("agent received %d approval-responses, want %d", len(got), n)
		}
		select {
		case <-h.agent.Notify():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// settle waits until no injection is pending, so that "exactly one" is
// checked after every queued job ran.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := h.db.ListInjections(h.ctx, store.InjectionPending, 10)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(p) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d injections still pending", len(p))
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func (h *harness) approval(id string) *store.Approval {
	h.t.Helper()
	a, err := h.db.Approval(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

func (h *harness) audit(id string) []string {
	h.t.Helper()
	es, err := h.db.ApprovalAudit(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Event)
	}
	return out
}

func email(addr string) envelope.Recipient {
	return envelope.Recipient{Channel: "email", Address: addr}
}
func sms(num string) envelope.Recipient { return envelope.Recipient{Channel: "sms", Address: num} }
func wa(num string) envelope.Recipient  { return envelope.Recipient{Channel: "whatsapp", Address: num} }

// told renders, as the channel would send them, the messages the Service
// stored itself for number (answers to a mistyped code: their deliveries
// carry the approvals they are about, whose handles are rendered at send
// time), oldest first.
func (h *harness) told(number string) []string {
	h.t.Helper()
	r, err := render.New(render.Config{})
	if err != nil {
		h.t.Fatal(err)
	}
	dels, err := h.db.ListDeliveries(h.ctx, "", "", 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, d := range dels { // oldest first
		if d.To != number {
			continue
		}
		rec, err := h.db.Envelope(h.ctx, d.EnvelopeID)
		if err != nil {
			h.t.Fatal(err)
		}
		if rec.Source != "approvals" {
			continue
		}
		var env envelope.Envelope
		if err := json.Unmarshal(rec.Envelope, &env); err != nil {
			h.t.Fatal(err)
		}
		handles, err := h.svc.Handles(h.ctx, d, &env)
		if err != nil {
			h.t.Fatal(err)
		}
		in := render.Input{Envelope: &env, Approvals: handles, Recipient: render.Recipient{Channel: d.Channel, Address: d.To}, Now: h.clock.Now()}
		if d.Channel == envelope.ChannelWhatsApp {
			// As text, the code shown (quick_replies off, or the
			// quick-reply content unavailable): with buttons, the same
			// message asks to tap one instead.
			for i := range in.Approvals {
				in.Approvals[i].Buttons = nil
			}
			w, err := r.WhatsApp(in)
			if err != nil {
				h.t.Fatal(err)
			}
			out = append(out, w.Body)
			continue
		}
		s, err := r.SMS(in)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, s.Body)
	}
	return out
}
