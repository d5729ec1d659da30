package storetest

import (
	"time"

	"github.com/cool-ai/beachd/store"
)

// handOffCases are deliveries handed off at ingest (NewDelivery.LeaseUntil):
// stored as a claim leaves a job, with no claim of their own.
var handOffCases = []testCase{
	{"handoff/a handed-off delivery is stored leased: answered sending, never claimed, recorded under its lease", handOffLeased},
	{"handoff/a handed-off delivery whose lease runs out is due again, maybe sent", handOffExpires},
	{"handoff/deliveries of one envelope may be handed off or queued each", handOffMixed},
	{"handoff/a held or later-due delivery cannot be handed off, and bulk ingest refuses hand-offs", handOffRefused},
	{"handoff/a replayed ingest hands nothing off", handOffReplay},
}

// handed is a webhook delivery to ep handed off until `until`.
func handed(ep string, until time.Time) store.NewDelivery {
	d := to("webhook", ep)
	d.LeaseUntil = until
	return d
}

func handOffLeased(e *env) {
	until := e.now().Add(time.Minute)
	res := e.ingest(handed("ops", until))
	d := res.Deliveries[0]
	if d.State != store.StateSending {
		e.t.Fatalf("handed-off delivery answered in state %q, want sending", d.State)
	}
	e.sameTime(d.LeaseUntil, until, "answered lease")
	stored := e.delivery(d.ID)
	if stored.State != store.StateSending || stored.Attempts != 0 {
		e.t.Fatalf("stored handed-off delivery %+v, want sending with no attempt", stored)
	}
	e.sameTime(stored.LeaseUntil, until, "stored lease")
	if at, ok := e.s.NextDue(); ok {
		e.t.Fatalf("NextDue %v while the only job is handed off", at)
	}
	e.noneDue("a handed-off job")
	_, err := e.s.Record(e.ctx, d.ID, until.Add(time.Second), store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "record under another lease")
	got := e.record(d, store.Outcome{State: store.StateSent, Attempt: store.Attempt{N: 1, At: e.now(), Outcome: "sent"}})
	if got.State != store.StateSent || got.Attempts != 1 {
		e.t.Fatalf("recorded handed-off delivery %+v", got)
	}
	if n := e.counts()[store.StateSent]; n != 1 {
		e.t.Fatalf("%d sent by state, want 1", n)
	}
}

func handOffExpires(e *env) {
	res := e.ingest(handed("ops", e.now().Add(time.Minute)))
	first := res.Deliveries[0]
	e.advance(2 * time.Minute)
	n, err := e.s.RequeueExpired(e.ctx, e.now())
	e.ok(err, "requeue expired")
	if n != 1 {
		e.t.Fatalf("re-queued %d, want the handed-off job", n)
	}
	_, err = e.s.Record(e.ctx, first.ID, first.LeaseUntil, store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "record under the expired hand-off lease")
	got := e.claim(1)
	if len(got) != 1 || got[0].ID != first.ID || !got[0].MaybeSent {
		e.t.Fatalf("claimed %+v, want the handed-off job, maybe sent", got)
	}
	e.record(got[0], store.Outcome{State: store.StateSent})
}

func handOffMixed(e *env) {
	until := e.now().Add(time.Minute)
	res := e.ingest(handed("ep-a", until), to("webhook", "ep-b"))
	if res.Deliveries[0].State != store.StateSending || res.Deliveries[1].State != store.StateQueued {
		e.t.Fatalf("answered %q and %q, want sending and queued", res.Deliveries[0].State, res.Deliveries[1].State)
	}
	got := e.claim(10)
	if len(got) != 1 || got[0].ID != res.Deliveries[1].ID {
		e.t.Fatalf("claimed %v, want only the queued delivery %s", ids(got), res.Deliveries[1].ID)
	}
	e.record(got[0], store.Outcome{State: store.StateSent})
	e.record(res.Deliveries[0], store.Outcome{State: store.StateRetrying, NextAttemptAt: e.now().Add(time.Second)})
	e.advance(time.Second)
	if again := e.claimIDs(10); len(again) != 1 || again[0] != res.Deliveries[0].ID {
		e.t.Fatalf("after a retry outcome claimed %v, want the handed-off delivery", again)
	}
}

func handOffRefused(e *env) {
	until := e.now().Add(time.Minute)
	held := handed("ops", until)
	held.Held = true
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{held}})
	e.is(err, store.ErrBadState, "ingest a held hand-off")
	_, err = e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), NotBefore: e.now().Add(time.Hour),
		Deliveries: []store.NewDelivery{handed("ops", until)}})
	e.is(err, store.ErrBadState, "ingest a hand-off due later")
	if _, err := e.s.IngestBulk(e.ctx, []store.Ingest{{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{handed("ops", until)}}}); err == nil {
		e.t.Fatal("bulk ingest accepted a hand-off")
	}
	if n := e.counts(); len(n) != 0 {
		e.t.Fatalf("refused ingests stored deliveries: %v", n)
	}
}

func handOffReplay(e *env) {
	in := store.Ingest{Envelope: []byte(`{}`), IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("b")),
		Deliveries: []store.NewDelivery{handed("ops", e.now().Add(time.Minute))}}
	first, err := e.s.Ingest(e.ctx, in)
	e.ok(err, "first ingest")
	e.record(first.Deliveries[0], store.Outcome{State: store.StateSent})
	in.Deliveries[0].LeaseUntil = e.now().Add(2 * time.Minute)
	again, err := e.s.Ingest(e.ctx, in)
	e.ok(err, "replayed ingest")
	if !again.Replayed || again.Deliveries[0].ID != first.Deliveries[0].ID || again.Deliveries[0].State == store.StateSending {
		e.t.Fatalf("replay answered %+v (state %q), want the first delivery, not leased again", again, again.Deliveries[0].State)
	}
	_, err = e.s.Record(e.ctx, first.Deliveries[0].ID, in.Deliveries[0].LeaseUntil, store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "record under the replay's lease")
}

// counts is CountByState without the states that count nothing.
func (e *env) counts() map[store.State]int {
	e.t.Helper()
	n, err := e.s.CountByState(e.ctx)
	e.ok(err, "count by state")
	for st, c := range n {
		if c == 0 {
			delete(n, st)
		}
	}
	return n
}
