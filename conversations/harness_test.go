package conversations

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
	"github.com/cool-ai/beachd/store/storetest"
)

// clientAgent is the Agent over the real agent.Client: SendMessage sends
// the message's text with StartTurn (the client's SendMessage carries file
// parts and the messageId too), and it records every message it was given.
type clientAgent struct {
	c    *agent.Client
	mu   sync.Mutex
	msgs []*agent.Message
}

func (a *clientAgent) SendMessage(ctx context.Context, name string, msg *agent.Message) (*agent.Turn, error) {
	a.mu.Lock()
	a.msgs = append(a.msgs, msg)
	a.mu.Unlock()
	text := ""
	for _, p := range msg.Parts {
		if p.Text != nil {
			text += *p.Text
		}
	}
	return a.c.StartTurn(ctx, name, text, msg.ContextID)
}

func (a *clientAgent) WaitTurn(ctx context.Context, name string, t *agent.Turn, poll time.Duration) (*envelope.Envelope, error) {
	return a.c.WaitTurn(ctx, name, t, poll)
}

func (a *clientAgent) messages() []*agent.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*agent.Message(nil), a.msgs...)
}

type notifier struct {
	mu sync.Mutex
	n  int
}

func (n *notifier) Notify() { n.mu.Lock(); n.n++; n.mu.Unlock() }

type harness struct {
	t       *testing.T
	ctx     context.Context
	path    string
	db      store.Store
	clock   *fakeclock.Clock
	r       *Router
	ag      Agent
	real    *clientAgent
	srv     *agenttest.Server
	reg     *prometheus.Registry
	metrics *Metrics
	send    *notifier
	cfg     Config
	dec     Decider
	stop    func()
}

type opts struct {
	agent   Agent   // default: the a2a-go test agent through clientAgent
	dec     Decider // default: the real approvals service
	cfg     func(*Config)
	noRun   bool
	dbPath  string
	clock   *fakeclock.Clock
	noStore bool
	// postgres: the store is PostgreSQL (a schema of its own on the test
	// server) instead of a bbolt file.
	postgres bool
}

const testKey = "0123456789abcdef0123456789abcdef"

func testConfig(clock *fakeclock.Clock) Config {
	return Config{
		Agents: map[string]AgentConfig{"travel": {
			Email: []string{"Travel@Example.org"}, SMS: []string{"+15550001111"}, WhatsApp: []string{"+15550002222"},
			Allow: []string{"*@example.org", "+44*"}, RefuseUnknown: true,
		}},
		OwnAddresses: []string{"beachd@example.org"}, Now: clock.Now, AttachmentInlineMax: 1024,
		AttachmentURLBase: "https://beachd.example.org/", URLKey: []byte(testKey), TurnTimeout: 10 * time.Second,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
	}
}

func newHarness(t *testing.T, o opts) *harness {
	t.Helper()
	h := &harness{t: t, clock: o.clock, send: &notifier{}}
	if h.clock == nil {
		h.clock = fakeclock.NewOffset()
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	h.path = o.dbPath
	if h.path == "" {
		h.path = filepath.Join(t.TempDir(), "beachd.db")
	}
	if o.postgres {
		db, err := postgres.Open(ctx, pgtest.DSN(t), postgres.Options{Now: h.clock.Now})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		t.Cleanup(func() {
			if err := db.CheckInvariants(); err != nil {
				t.Errorf("store invariants at the end of the test: %v", err)
			}
			db.Close()
		})
		h.db = db
	} else {
		h.db = storetest.OpenAt(t, h.path, bolt.Options{Now: h.clock.Now, MaxBatchDelay: time.Millisecond})
	}
	h.ag = o.agent
	if h.ag == nil {
		h.srv = agenttest.Start()
		t.Cleanup(h.srv.Close)
		c, err := agent.New(map[string]agent.Target{"travel": {URL: h.srv.URL, Version: "0.3", Timeout: 5 * time.Second}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.real = &clientAgent{c: c}
		h.ag = h.real
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CONVERSATIONS_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	h.dec = o.dec
	if h.dec == nil {
		svc, err := approvals.New(approvals.Config{Secret: []byte(testKey), PublicURL: "https://beachd.example.org", Now: h.clock.Now},
			h.db, nopEnqueuer{}, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		h.dec = svc
	}
	h.reg = prometheus.NewRegistry()
	var err error
	h.metrics, err = NewMetrics(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.cfg = testConfig(h.clock)
	h.cfg.Metrics = h.metrics
	if o.cfg != nil {
		o.cfg(&h.cfg)
	}
	h.r, err = New(h.cfg, h.db, h.dec, h.ag, h.send, log)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if !o.noRun {
		wg.Go(func() {
			if err := h.r.Run(ctx); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	h.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(h.stop)
	return h
}

type nopEnqueuer struct{}

func (nopEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error) {
	return "env_none", nil
}

// in sends an inbound message through the router and fails on an error.
func (h *harness) in(in envelope.Inbound) envelope.InboundResult {
	h.t.Helper()
	res, err := h.r.HandleInbound(h.ctx, in)
	if err != nil {
		h.t.Fatalf("handle inbound %+v: %v", in, err)
	}
	return res
}

func mail(from, msgID, subject, text string) envelope.Inbound {
	return envelope.Inbound{Channel: "email", From: from, To: "travel@example.org", Recipients: []string{"travel@example.org"},
		MessageID: msgID, Subject: subject, Text: text, FullText: text + "\n\n-- \nsignature"}
}

// waitTurn waits until the turn of an inbound result's record settles
// (answered or dead) and returns it.
func (h *harness) waitTurn(res envelope.InboundResult, msgID, channel string) *store.Turn {
	h.t.Helper()
	rec, err := h.db.InboundByMessageID(h.ctx, channel, msgID)
	if err != nil {
		h.t.Fatalf("inbound record of %s: %v", msgID, err)
	}
	if rec.TurnID == "" {
		h.t.Fatalf("inbound %s (%s) queued no turn", msgID, rec.Disposition)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		t, err := h.db.Turn(h.ctx, rec.TurnID)
		if err != nil {
			h.t.Fatal(err)
		}
		if t.State == store.TurnAnswered || t.State == store.TurnDead {
			return t
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("turn %s of %s did not settle", rec.TurnID, msgID)
	return nil
}

// answerDeliveries are the deliveries of a turn's answer envelope.
func (h *harness) answerDeliveries(t *store.Turn) []*store.Delivery {
	h.t.Helper()
	rec, err := h.db.Envelope(h.ctx, t.AnswerEnvelopeID)
	if err != nil {
		h.t.Fatalf("answer envelope of %s: %v", t.ID, err)
	}
	var out []*store.Delivery
	for _, id := range rec.DeliveryIDs {
		d, err := h.db.Delivery(h.ctx, id)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func (h *harness) answerText(t *store.Turn) string {
	h.t.Helper()
	rec, err := h.db.Envelope(h.ctx, t.AnswerEnvelopeID)
	if err != nil {
		h.t.Fatal(err)
	}
	var env envelope.Envelope
	if err := json.Unmarshal(rec.Envelope, &env); err != nil {
		h.t.Fatal(err)
	}
	return envelopeText(&env)
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
