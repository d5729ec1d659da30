package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// concurrencyCases are the races several workers or replicas run into:
// every one has exactly one winner.
var concurrencyCases = []testCase{
	{"concurrency/concurrent claims never return the same job", concurrentClaims},
	{"concurrency/8 ingests with one idempotency key store one envelope", concurrentIdempotentIngest},
	{"concurrency/8 decisions at once: exactly one wins", concurrentDecide},
	{"concurrency/8 claims of one schedule slot: exactly one wins", concurrentSlotClaim},
	{"concurrency/8 takes of one lease: exactly one holder", concurrentLeaseTake},
	{"concurrency/8 MarkSeen of one key: exactly one first", concurrentMarkSeen},
	{"concurrency/concurrent injection and turn claims never return the same job", concurrentOutboxClaims},
	{"concurrency/8 messages at once from one sender: the sender limit is not overshot", concurrentSenderLimit},
	{"concurrency/8 messages at once from 8 senders: the agent limit is not overshot", concurrentAgentLimit},
}

func concurrentSenderLimit(e *env) {
	ws := make([]store.InboundWrite, workers)
	for i := range ws {
		ws[i] = e.limitedWrite("ann@example.org", 3, 30, 100, 1000)
	}
	e.raceLimited(ws, 3, "sender limit: 3 turns a minute")
}

func concurrentAgentLimit(e *env) {
	ws := make([]store.InboundWrite, workers)
	for i := range ws {
		ws[i] = e.limitedWrite(fmt.Sprintf("p%d@example.org", i), 3, 30, 5, 1000)
	}
	e.raceLimited(ws, 5, "agent limit: 5 turns a minute")
}

// raceLimited records ws at once and checks that exactly want of them
// queued a turn and the others were held for reason.
func (e *env) raceLimited(ws []store.InboundWrite, want int, reason string) {
	e.t.Helper()
	out := make([]*store.InboundWritten, len(ws))
	errs := parallel(len(ws), func(i int) error {
		var err error
		out[i], err = e.s.RecordInbound(e.ctx, ws[i])
		return err
	})
	if n := count(errs, nil); n != len(ws) {
		e.t.Fatalf("records failed: %v", errs)
	}
	turns := 0
	for _, w := range out {
		switch {
		case w.Record.Disposition == "turn" && w.Turn != nil:
			turns++
		case w.Record.Disposition == "held" && w.Record.Reason == reason:
		default:
			e.t.Fatalf("record %s (%s), turn %v", w.Record.Disposition, w.Record.Reason, w.Turn)
		}
	}
	queued, err := e.s.ListTurns(e.ctx, "", 100)
	e.ok(err, "list turns")
	if turns != want || len(queued) != want {
		e.t.Fatalf("%d turns (%d queued) from %d messages at once, want %d", turns, len(queued), len(ws), want)
	}
}

// workers is how many goroutines race in a concurrency case.
const workers = 8

func concurrentClaims(e *env) {
	const jobs = 60
	for range jobs / 6 {
		e.ingest(hooks(6)...)
	}
	var claimed [workers][]string
	errs := parallel(workers, func(i int) error {
		for {
			got, err := e.s.Claim(e.ctx, 3, time.Minute, nil)
			if err != nil || len(got) == 0 {
				return err
			}
			claimed[i] = append(claimed[i], ids(got)...)
		}
	})
	if n := count(errs, nil); n != workers {
		e.t.Fatalf("claims failed: %v", errs)
	}
	seen := map[string]bool{}
	for _, c := range claimed {
		for _, id := range c {
			if seen[id] {
				e.t.Fatalf("job %s claimed twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != jobs {
		e.t.Fatalf("claimed %d distinct jobs of %d", len(seen), jobs)
	}
}

func concurrentIdempotentIngest(e *env) {
	body := []byte(`{"role":"agent"}`)
	in := store.Ingest{Envelope: body, Deliveries: hooks(2), IdempotencyKey: "key-1", RequestHash: store.HashRequest(body)}
	var res [workers]*store.IngestResult
	errs := parallel(workers, func(i int) (err error) {
		res[i], err = e.s.Ingest(e.ctx, in)
		return err
	})
	if n := count(errs, nil); n != workers {
		e.t.Fatalf("ingests failed: %v", errs)
	}
	fresh := 0
	for _, r := range res {
		if r.EnvelopeID != res[0].EnvelopeID || !slices.Equal(ids(r.Deliveries), ids(res[0].Deliveries)) {
			e.t.Fatalf("results differ: %+v and %+v", r, res[0])
		}
		if !r.Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		e.t.Fatalf("%d ingests not replayed, want exactly 1", fresh)
	}
	all, err := e.s.ListDeliveries(e.ctx, "", "", 100)
	e.ok(err, "list deliveries")
	if len(all) != 2 {
		e.t.Fatalf("%d deliveries stored, want one envelope's 2", len(all))
	}
}

func concurrentDecide(e *env) {
	e.ingestApproval("a1", e.now().Add(time.Hour))
	errs := parallel(workers, func(i int) error {
		_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "email",
			MessageID: fmt.Sprint("m", i), At: e.now(), InjectionID: fmt.Sprint("inj-", i)})
		return err
	})
	if count(errs, nil) != 1 || count(errs, store.ErrAlreadyDecided) != workers-1 {
		e.t.Fatalf("decisions: %v; want one winner, the rest already decided", errs)
	}
	injs, err := e.s.ListInjections(e.ctx, "", 100)
	e.ok(err, "list injections")
	if len(injs) != 1 {
		e.t.Fatalf("%d injections queued, want 1", len(injs))
	}
}

func concurrentSlotClaim(e *env) {
	_, err := e.s.InitScheduleState(e.ctx, "daily", start)
	e.ok(err, "init")
	errs := parallel(workers, func(int) error {
		_, err := e.s.ClaimScheduleSlot(e.ctx, run(start.Add(time.Minute)))
		return err
	})
	if count(errs, nil) != 1 || count(errs, store.ErrSlotTaken) != workers-1 {
		e.t.Fatalf("slot claims: %v; want one winner, the rest refused", errs)
	}
	if runs, _ := e.s.ScheduleRuns(e.ctx, "daily", 0); len(runs) != 1 {
		e.t.Fatalf("%d runs recorded", len(runs))
	}
}

func concurrentLeaseTake(e *env) {
	var got [workers]bool
	errs := parallel(workers, func(i int) (err error) {
		_, got[i], err = e.s.AcquireLease(e.ctx, "scheduler", fmt.Sprint("replica-", i), 0, time.Minute)
		return err
	})
	if n := count(errs, nil); n != workers {
		e.t.Fatalf("acquisitions failed: %v", errs)
	}
	if n := len(slices.DeleteFunc(got[:], func(ok bool) bool { return !ok })); n != 1 {
		e.t.Fatalf("%d holders of one lease", n)
	}
}

func concurrentMarkSeen(e *env) {
	var first [workers]bool
	errs := parallel(workers, func(i int) (err error) {
		first[i], err = e.s.MarkSeen(e.ctx, "msg/SM1")
		return err
	})
	if n := count(errs, nil); n != workers {
		e.t.Fatalf("MarkSeen failed: %v", errs)
	}
	if n := len(slices.DeleteFunc(first[:], func(ok bool) bool { return !ok })); n != 1 {
		e.t.Fatalf("%d firsts of one key", n)
	}
}

func concurrentOutboxClaims(e *env) {
	for i := range 4 {
		id := fmt.Sprint("a", i)
		e.ingestApproval(id, e.now().Add(time.Hour))
		_, _, err := e.decide(id, store.ApprovalGranted, "m-"+id)
		e.ok(err, "decide "+id)
		_, err = e.inbound(fmt.Sprint("SM", i), fmt.Sprint("cnv_", i), true)
		e.ok(err, "inbound")
		e.advance(2 * time.Hour) // every message starts its own conversation
	}
	var injs, turns [workers][]string
	errs := parallel(workers, func(i int) error {
		gi, err := e.s.ClaimInjections(e.ctx, e.now(), 1, time.Hour)
		if err != nil {
			return err
		}
		gt, err := e.s.ClaimTurns(e.ctx, e.now(), 1, time.Hour)
		if len(gi) > 1 || len(gt) > 1 {
			return fmt.Errorf("claims of at most 1 took %d injections and %d turns", len(gi), len(gt))
		}
		for _, j := range gi {
			injs[i] = append(injs[i], j.ID)
		}
		for _, t := range gt {
			turns[i] = append(turns[i], t.ID)
		}
		return err
	})
	if n := count(errs, nil); n != workers {
		e.t.Fatalf("claims failed: %v", errs)
	}
	for what, claimed := range map[string][workers][]string{"injection": injs, "turn": turns} {
		seen := map[string]bool{}
		for _, c := range claimed {
			for _, id := range c {
				if seen[id] {
					e.t.Fatalf("%s %s claimed twice", what, id)
				}
				seen[id] = true
			}
		}
		if len(seen) != 4 {
			e.t.Fatalf("%d distinct %ss claimed of 4", len(seen), what)
		}
	}
}
