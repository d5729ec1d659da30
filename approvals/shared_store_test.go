package approvals

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// On a shared store a starting injector leaves alone a job another replica
// claimed in its decision's transaction and still holds: it is injected
// once, by whoever takes it after its lease runs out — not at once, as a
// process alone on its store does with a previous process's claims
// (TestDecisionSurvivesCrashAndRestart).
func TestStartLeavesLiveClaimsOnASharedStore(t *testing.T) {
	ag := agenttest.Start()
	defer ag.Close()
	client, err := agent.New(map[string]agent.Target{"travel": {URL: ag.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := fakeclock.New(time.Now())
	db := storetest.Open(t, bolt.Options{Now: c.Now})
	cfg := Config{Secret: []byte(strings.Repeat("k", 32)), PublicURL: "http://x", Now: c.Now}
	// The replica that decides claims the job for an hour, and is alive.
	svc, err := New(cfg, db, nil, dropHandoff{lease: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	turn, _ := client.StartTurn(ctx, "travel", "approve:appr-shared", "")
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
	if r, err := svc.HandleInbound(ctx, envelope.Inbound{Channel: "email", From: alice, MessageID: "<s>", Token: hs[0].Token, Text: "approve"}); err != nil || r.Outcome != OutcomeDecided {
		t.Fatalf("%+v %v", r, err)
	}
	c.Advance(time.Minute)

	// Another replica's injector starts.
	inj := NewInjector(InjectorConfig{MinBackoff: 5 * time.Millisecond, Permanent: agent.IsPermanent, Now: c.Now, Lease: 2 * time.Minute, Shared: true},
		db, func(string) Sender { return client }, nil)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { inj.Run(rctx) })
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	if n := len(ag.Received()); n != 0 {
		t.Fatalf("the injector sent a job another replica holds: %d injections", n)
	}
	c.Advance(time.Hour) // the deciding replica died: its claim runs out
	deadline := time.Now().Add(10 * time.Second)
	for len(ag.Received()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the decision was not injected once its claim ran out")
		}
		inj.Wake()
		select {
		case <-ag.Notify():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if r := ag.Received()[0]; r.Response.ApprovalID != "appr-shared" || r.Response.Decision != "granted" {
		t.Fatalf("%+v", r)
	}
}
