package conversations

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
)

// On a shared store a starting turn worker leaves alone a turn another
// replica holds; it takes the turn once that replica's lease runs out.
// (Alone on its store it re-queues a previous process's turns at once.)
func TestStartLeavesLiveTurnsOnASharedStore(t *testing.T) {
	h := newHarness(t, opts{noRun: true})
	res := h.in(mail("Ann@Example.org", "<m1@mail.example.org>", "Flights", "Find me a flight"))
	rec, err := h.db.InboundByMessageID(h.ctx, "email", "<m1@mail.example.org>")
	if err != nil || rec.TurnID == "" {
		t.Fatalf("inbound record: %+v %v", rec, err)
	}
	// Another replica claims the turn for an hour and is alive.
	claimed, err := h.db.ClaimTurns(h.ctx, h.clock.Now(), 10, time.Hour)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	h.clock.Advance(time.Minute)
	cfg := h.cfg
	cfg.Shared = true
	r, err := New(cfg, h.db, h.dec, h.ag, h.send, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	if turn, _ := h.db.Turn(h.ctx, rec.TurnID); turn.State != store.TurnSending || turn.Claims != 1 {
		t.Fatalf("another replica's turn after this one started: %s, %d claims", turn.State, turn.Claims)
	}
	if n := len(h.real.messages()); n != 0 {
		t.Fatalf("%d messages sent to the agent for a turn another replica holds", n)
	}
	h.clock.Advance(time.Hour) // that replica died: its lease runs out
	r.Wake()
	if turn := h.waitTurn(res, "<m1@mail.example.org>", "email"); turn.State != store.TurnAnswered {
		t.Fatalf("turn after the lease ran out: %s %s", turn.State, turn.LastError)
	}
}
