package approvals

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// dropHandoff claims jobs and loses them, as a process that dies right
// after committing a decision would.
type dropHandoff struct{ lease time.Duration }

func (d dropHandoff) Lease() time.Duration         { return d.lease }
func (d dropHandoff) Submit(*store.Injection) bool { return true }

// A decision committed just before a crash is injected after the restart:
// the job claimed in the decision's transaction (for an hour) is requeued
// at once by the injector of the new process on the reopened store.
func TestDecisionSurvivesCrashAndRestart(t *testing.T) {
	ag := agenttest.Start()
	defer ag.Close()
	client, err := agent.New(map[string]agent.Target{"travel": {URL: ag.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "b.db")
	cfg := Config{Secret: []byte(strings.Repeat("k", 32)), PublicURL: "http://x"}

	// First life: the decision commits, the worker never runs.
	db := storetest.OpenAt(t, path, bolt.Options{})
	svc, err := New(cfg, db, nil, dropHandoff{lease: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	turn, _ := client.StartTurn(ctx, "travel", "approve:appr-crash", "")
	env, err := client.WaitTurn(ctx, "travel", turn, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	as, per, err := svc.Prepare(ctx, env, []envelope.Recipient{email(alice)}, "travel")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Ingest(ctx, store.Ingest{Envelope: mustJSON(env), Agent: "travel", Approvals: as,
		Deliveries: []store.NewDelivery{{Channel: "email", To: alice, ApprovalIDs: per[0]}}})
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := svc.Handles(ctx, res.Deliveries[0], env)
	if r, err := svc.HandleInbound(ctx, envelope.Inbound{Channel: "email", From: alice, MessageID: "<c>", Token: hs[0].Token, Text: "approve"}); err != nil || r.Outcome != OutcomeDecided {
		t.Fatalf("%+v %v", r, err)
	}
	db.Close() // the crash

	// Second life.
	db = storetest.OpenAt(t, path, bolt.Options{})
	inj := NewInjector(InjectorConfig{MinBackoff: 5 * time.Millisecond, Permanent: agent.IsPermanent}, db,
		func(string) Sender { return client }, nil)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inj.Run(rctx) }()
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for len(ag.Received()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the decision was not injected after the restart")
		}
		select {
		case <-ag.Notify():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if r := ag.Received()[0]; r.Response.ApprovalID != "appr-crash" || r.Response.Decision != "granted" || r.TaskID != env.Meta.TurnID {
		t.Fatalf("%+v", r)
	}
	cancel()
	wg.Wait()
	if err := db.CheckApprovalInvariants(); err != nil {
		t.Fatal(err)
	}
}
