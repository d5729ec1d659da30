package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// deliveryCases are the outbox's state machine, its leases and its
// idempotency.
var deliveryCases = []testCase{
	{"delivery/ingest stores the envelope and queues its deliveries", ingestStoresEnvelope},
	{"delivery/several envelopes read at once come in the order asked, nil for an unknown id", readEnvelopes},
	{"delivery/state machine: claim, then sent, retrying or dead", deliveryStateMachine},
	{"delivery/a dead delivery retried is due again, its attempts kept", retryDead},
	{"delivery/an outcome that is not sent, retrying with a time, or dead is refused", recordRefusesBadOutcome},
	{"delivery/a claim leases until now+lease and a wrong lease is lost", claimLeases},
	{"delivery/an expired lease re-queued: the job is due again, maybe sent, the old lease lost", requeueExpiredLease},
	{"delivery/crash recovery: a job claimed and never recorded is claimed again after start-up", crashRecovery},
	{"delivery/release puts a claimed job back without an attempt", releaseClaimed},
	{"delivery/idempotency: same key and body replays, another body conflicts", idempotency},
	{"delivery/bulk ingest stores every envelope", ingestBulk},
	{"delivery/not before delays the first attempt", notBefore},
}

func ingestStoresEnvelope(e *env) {
	res, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{"role":"agent","n":1}`), Agent: "travel", Source: "api",
		Deliveries: []store.NewDelivery{to("email", "a@example.org"), to("sms", "+15550001111")}})
	e.ok(err, "ingest")
	if res.EnvelopeID == "" || res.Replayed || len(res.Deliveries) != 2 {
		e.t.Fatalf("ingest result %+v", res)
	}
	rec, err := e.s.Envelope(e.ctx, res.EnvelopeID)
	e.ok(err, "read envelope")
	if string(rec.Envelope) != `{"role":"agent","n":1}` || rec.Agent != "travel" || rec.Source != "api" ||
		!slices.Equal(rec.DeliveryIDs, ids(res.Deliveries)) {
		e.t.Fatalf("envelope %+v (body %s)", rec, rec.Envelope)
	}
	e.sameTime(rec.CreatedAt, start, "envelope created")
	for i, want := range []store.NewDelivery{to("email", "a@example.org"), to("sms", "+15550001111")} {
		d := e.delivery(res.Deliveries[i].ID)
		if d.State != store.StateQueued || d.EnvelopeID != res.EnvelopeID || d.Channel != want.Channel || d.To != want.To ||
			d.Agent != "travel" || d.Attempts != 0 {
			e.t.Fatalf("delivery %d: %+v", i, d)
		}
		e.sameTime(d.NextAttemptAt, start, "first attempt")
	}
	_, err = e.s.Envelope(e.ctx, "env_missing")
	e.is(err, store.ErrNotFound, "unknown envelope")
	_, err = e.s.Delivery(e.ctx, "dlv_missing")
	e.is(err, store.ErrNotFound, "unknown delivery")
}

func readEnvelopes(e *env) {
	var want []string
	for i := range 3 {
		res, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: fmt.Appendf(nil, `{"role":"agent","n":%d}`, i), Agent: "travel", Source: "api",
			Deliveries: []store.NewDelivery{to("email", "a@example.org")}})
		e.ok(err, "ingest")
		want = append(want, res.EnvelopeID)
	}
	ids := []string{want[2], "env_missing", want[0], want[2], want[1]}
	got, err := e.s.Envelopes(e.ctx, ids)
	e.ok(err, "read envelopes")
	if len(got) != len(ids) {
		e.t.Fatalf("%d records for %d ids", len(got), len(ids))
	}
	for i, id := range ids {
		if id == "env_missing" {
			if got[i] != nil {
				e.t.Fatalf("unknown id %d: %+v", i, got[i])
			}
			continue
		}
		one, err := e.s.Envelope(e.ctx, id)
		e.ok(err, "read envelope")
		if got[i] == nil || got[i].ID != id || string(got[i].Envelope) != string(one.Envelope) ||
			!slices.Equal(got[i].DeliveryIDs, one.DeliveryIDs) || got[i].Agent != "travel" {
			e.t.Fatalf("id %d (%s): %+v (body %s), alone %+v", i, id, got[i], got[i].Envelope, one)
		}
	}
	if got, err := e.s.Envelopes(e.ctx, nil); err != nil || len(got) != 0 {
		e.t.Fatalf("no ids: %v %v", got, err)
	}
}

func deliveryStateMachine(e *env) {
	res := e.ingest(hooks(3)...)
	got := e.claim(10)
	if len(got) != 3 {
		e.t.Fatalf("claimed %d of 3", len(got))
	}
	for _, d := range got {
		if d.State != store.StateSending {
			e.t.Fatalf("claimed job in state %s", d.State)
		}
	}
	e.noneDue("all three are in flight")
	if d := e.delivery(got[0].ID); d.State != store.StateSending {
		e.t.Fatalf("job in flight reads as %s", d.State)
	}

	sent := e.record(got[0], store.Outcome{State: store.StateSent, Attempt: store.Attempt{Outcome: "sent"}})
	if sent.State != store.StateSent || sent.Attempts != 1 {
		e.t.Fatalf("sent: %+v", sent)
	}
	e.sameTime(sent.SentAt, start, "sent at")
	next := e.now().Add(5 * time.Minute)
	retrying := e.record(got[1], store.Outcome{State: store.StateRetrying, NextAttemptAt: next, Error: "503",
		Attempt: store.Attempt{Outcome: "retry", Error: "503"}})
	if retrying.State != store.StateRetrying || retrying.LastError != "503" || retrying.Attempts != 1 {
		e.t.Fatalf("retrying: %+v", retrying)
	}
	dead := e.record(got[2], store.Outcome{State: store.StateDead, DeadReason: "410 gone", Attempt: store.Attempt{Outcome: "dead"}})
	if dead.State != store.StateDead || dead.DeadReason != "410 gone" {
		e.t.Fatalf("dead: %+v", dead)
	}

	e.noneDue("the retrying job is due in five minutes")
	at, ok := e.s.NextDue()
	if !ok {
		e.t.Fatal("NextDue reports nothing with a retrying job")
	}
	e.sameTime(at, next, "NextDue")
	e.advance(5 * time.Minute)
	again := e.claim(10)
	if !slices.Equal(ids(again), []string{got[1].ID}) || again[0].Attempts != 1 {
		e.t.Fatalf("after the wait claimed %+v, want the retrying job with 1 attempt", again)
	}
	e.record(again[0], store.Outcome{State: store.StateSent, Attempt: store.Attempt{Outcome: "sent"}})

	atts, err := e.s.Attempts(e.ctx, got[1].ID)
	e.ok(err, "attempts")
	if len(atts) != 2 || atts[0].N != 1 || atts[0].Outcome != "retry" || atts[0].Error != "503" || atts[1].N != 2 || atts[1].Outcome != "sent" {
		e.t.Fatalf("attempts %+v", atts)
	}
	counts, err := e.s.CountByState(e.ctx)
	e.ok(err, "count by state")
	if counts[store.StateSent] != 2 || counts[store.StateDead] != 1 || counts[store.StateQueued] != 0 || counts[store.StateSending] != 0 {
		e.t.Fatalf("counts %v", counts)
	}
	listed, err := e.s.ListDeliveries(e.ctx, store.StateDead, "", 10)
	e.ok(err, "list dead")
	if !slices.Equal(ids(listed), []string{got[2].ID}) {
		e.t.Fatalf("dead deliveries %v", ids(listed))
	}
	all, err := e.s.ListDeliveries(e.ctx, "", "", 10)
	e.ok(err, "list all")
	if len(all) != 3 || !slices.Equal(sortedIDs(all), sortedIDs(res.Deliveries)) {
		e.t.Fatalf("all deliveries %v", ids(all))
	}
}

// sortedIDs are the deliveries' ids in order of id.
func sortedIDs(ds []*store.Delivery) []string {
	out := ids(ds)
	slices.Sort(out)
	return out
}

func retryDead(e *env) {
	e.ingest(hooks(2)...)
	got := e.claim(2)
	e.record(got[0], store.Outcome{State: store.StateDead, DeadReason: "gone", Attempt: store.Attempt{Outcome: "dead"}})
	e.record(got[1], store.Outcome{State: store.StateSent})
	_, err := e.s.Retry(e.ctx, got[1].ID)
	e.is(err, store.ErrBadState, "retry of a sent delivery")
	e.advance(time.Hour)
	r, err := e.s.Retry(e.ctx, got[0].ID)
	e.ok(err, "retry dead")
	if r.State != store.StateQueued || r.Attempts != 1 || r.DeadReason != "" {
		e.t.Fatalf("retried: %+v", r)
	}
	e.sameTime(r.NextAttemptAt, e.now(), "retried job due")
	again := e.claim(10)
	if !slices.Equal(ids(again), []string{got[0].ID}) {
		e.t.Fatalf("claimed %v after retry, want the dead job", ids(again))
	}
	if d := e.record(again[0], store.Outcome{State: store.StateSent}); d.Attempts != 2 {
		e.t.Fatalf("attempts after the retry's send %d, want 2", d.Attempts)
	}
	_, err = e.s.Retry(e.ctx, "dlv_missing")
	e.is(err, store.ErrNotFound, "retry of an unknown delivery")
}

func recordRefusesBadOutcome(e *env) {
	e.ingest(hooks(1)...)
	d := e.claim(1)[0]
	_, err := e.s.Record(e.ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateQueued})
	e.is(err, store.ErrBadState, "outcome queued")
	_, err = e.s.Record(e.ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateRetrying})
	e.is(err, store.ErrBadState, "retrying without a next attempt time")
	// Refused outcomes change nothing: the lease still holds.
	e.record(d, store.Outcome{State: store.StateSent})
}

func claimLeases(e *env) {
	e.ingest(hooks(2)...)
	got, err := e.s.Claim(e.ctx, 10, 90*time.Second, nil)
	e.ok(err, "claim")
	for _, d := range got {
		e.sameTime(d.LeaseUntil, start.Add(90*time.Second), "lease")
		e.sameTime(e.delivery(d.ID).LeaseUntil, start.Add(90*time.Second), "stored lease")
	}
	if _, ok := e.s.NextDue(); ok {
		e.t.Fatal("NextDue reports a job while every job is leased")
	}
	_, err = e.s.Record(e.ctx, got[0].ID, got[0].LeaseUntil.Add(time.Second), store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "record with another lease")
	if d := e.delivery(got[0].ID); d.State != store.StateSending || d.Attempts != 0 {
		e.t.Fatalf("a lost record changed the job: %+v", d)
	}
	n, err := e.s.RequeueExpired(e.ctx, e.now())
	e.ok(err, "requeue before the leases end")
	if n != 0 {
		e.t.Fatalf("re-queued %d leases that had not run out", n)
	}
	e.record(got[0], store.Outcome{State: store.StateSent})
	_, err = e.s.Record(e.ctx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "second record of one claim")
	e.record(got[1], store.Outcome{State: store.StateSent})
}

func requeueExpiredLease(e *env) {
	e.ingest(hooks(1)...)
	first := e.claim(1)[0]
	e.advance(2 * time.Minute)
	n, err := e.s.RequeueExpired(e.ctx, e.now())
	e.ok(err, "requeue expired")
	if n != 1 {
		e.t.Fatalf("re-queued %d, want 1", n)
	}
	d := e.delivery(first.ID)
	if d.State != store.StateQueued || !d.MaybeSent || d.Attempts != 0 {
		e.t.Fatalf("re-queued job %+v", d)
	}
	at, ok := e.s.NextDue()
	if !ok {
		e.t.Fatal("NextDue reports nothing after re-queueing")
	}
	e.sameTime(at, e.now(), "re-queued job due")
	_, err = e.s.Record(e.ctx, first.ID, first.LeaseUntil, store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "record under the expired lease")
	second := e.claim(1)
	if len(second) != 1 || second[0].ID != first.ID || !second[0].MaybeSent {
		e.t.Fatalf("claimed %+v, want the re-queued job marked maybe sent", second)
	}
	e.sameTime(second[0].LeaseUntil, e.now().Add(time.Minute), "new lease")
	_, err = e.s.Record(e.ctx, first.ID, first.LeaseUntil, store.Outcome{State: store.StateSent})
	e.is(err, store.ErrLeaseLost, "record under the first lease after a new claim")
	e.record(second[0], store.Outcome{State: store.StateSent})
}

func crashRecovery(e *env) {
	e.ingest(hooks(2)...)
	claimed := e.claim(1)
	// The process dies here; the next one starts and re-queues the leases
	// it finds (the embedded store every lease, a shared one the expired:
	// both take a lease that ran out).
	e.advance(time.Hour)
	n, err := e.s.RequeueExpired(e.ctx, e.now())
	e.ok(err, "requeue at start-up")
	if n != 1 {
		e.t.Fatalf("re-queued %d, want 1", n)
	}
	got := e.claim(10)
	if len(got) != 2 || got[0].MaybeSent || got[1].ID != claimed[0].ID || !got[1].MaybeSent {
		e.t.Fatalf("after restart claimed %+v; want the other job (due first), then the crashed one, maybe sent", got)
	}
	for _, d := range got {
		e.record(d, store.Outcome{State: store.StateSent})
	}
	if d := e.delivery(claimed[0].ID); d.Attempts != 1 {
		e.t.Fatalf("attempts %d after one recorded send", d.Attempts)
	}
}

func releaseClaimed(e *env) {
	e.ingest(hooks(1)...)
	d := e.claim(1)[0]
	at := e.now().Add(10 * time.Minute)
	e.is(e.s.Release(e.ctx, d.ID, d.LeaseUntil.Add(time.Second), at), store.ErrLeaseLost, "release under another lease")
	e.is(e.s.Release(e.ctx, d.ID, d.LeaseUntil, time.Time{}), store.ErrBadState, "release without a due time")
	e.ok(e.s.Release(e.ctx, d.ID, d.LeaseUntil, at), "release")
	got := e.delivery(d.ID)
	if got.State != store.StateQueued || got.Attempts != 0 {
		e.t.Fatalf("released job %+v", got)
	}
	e.is(e.s.Release(e.ctx, d.ID, d.LeaseUntil, at), store.ErrLeaseLost, "second release")
	e.noneDue("released until later")
	next, ok := e.s.NextDue()
	if !ok {
		e.t.Fatal("NextDue reports nothing after a release")
	}
	e.sameTime(next, at, "NextDue after release")
	e.advance(10 * time.Minute)
	if again := e.claim(1); len(again) != 1 || again[0].ID != d.ID {
		e.t.Fatalf("claimed %v at the release time", ids(again))
	}
}

func idempotency(e *env) {
	body := []byte(`{"role":"agent","parts":[]}`)
	in := store.Ingest{Envelope: body, Deliveries: hooks(2), IdempotencyKey: "key-1", RequestHash: store.HashRequest(body)}
	first, err := e.s.Ingest(e.ctx, in)
	e.ok(err, "first ingest")
	if first.Replayed {
		e.t.Fatal("first ingest reported as replayed")
	}
	e.advance(time.Second)
	again, err := e.s.Ingest(e.ctx, in)
	e.ok(err, "replayed ingest")
	if !again.Replayed || again.EnvelopeID != first.EnvelopeID || !slices.Equal(ids(again.Deliveries), ids(first.Deliveries)) {
		e.t.Fatalf("replay %+v, want the first result %+v", again, first)
	}
	other := in
	other.Envelope = []byte(`{"role":"agent","parts":[1]}`)
	other.RequestHash = store.HashRequest(other.Envelope)
	_, err = e.s.Ingest(e.ctx, other)
	e.is(err, store.ErrIdempotencyConflict, "same key, other body")
	other.IdempotencyKey = "key-2"
	fresh, err := e.s.Ingest(e.ctx, other)
	e.ok(err, "other key")
	if fresh.Replayed || fresh.EnvelopeID == first.EnvelopeID {
		e.t.Fatalf("another key answered %+v", fresh)
	}
	all, err := e.s.ListDeliveries(e.ctx, "", "", 100)
	e.ok(err, "list deliveries")
	if len(all) != 4 {
		e.t.Fatalf("%d deliveries stored, want 4 (two ingests of two)", len(all))
	}
}

func ingestBulk(e *env) {
	var ins []store.Ingest
	for i := range 3 {
		ins = append(ins, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Source: "import", Deliveries: hooks(i + 1)})
	}
	res, err := e.s.IngestBulk(e.ctx, ins)
	e.ok(err, "bulk ingest")
	if len(res) != 3 {
		e.t.Fatalf("%d results for 3 envelopes", len(res))
	}
	envs := map[string]bool{}
	var want []string
	for i, r := range res {
		envs[r.EnvelopeID] = true
		if len(r.Deliveries) != i+1 {
			e.t.Fatalf("envelope %d has %d deliveries, want %d", i, len(r.Deliveries), i+1)
		}
		rec, err := e.s.Envelope(e.ctx, r.EnvelopeID)
		e.ok(err, "read bulk envelope")
		if rec.Source != "import" || !slices.Equal(rec.DeliveryIDs, ids(r.Deliveries)) {
			e.t.Fatalf("bulk envelope %+v", rec)
		}
		want = append(want, ids(r.Deliveries)...)
	}
	if len(envs) != 3 {
		e.t.Fatalf("%d distinct envelope ids for 3 envelopes", len(envs))
	}
	got := e.claimIDs(10)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Fatalf("claimed %v, want every bulk delivery %v", got, want)
	}
}

func notBefore(e *env) {
	later := e.now().Add(time.Hour)
	res, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: hooks(1), NotBefore: later})
	e.ok(err, "ingest not before")
	e.sameTime(res.Deliveries[0].NextAttemptAt, later, "first attempt")
	e.noneDue("not before an hour from now")
	e.advance(time.Hour)
	if got := e.claimIDs(10); !slices.Equal(got, ids(res.Deliveries)) {
		e.t.Fatalf("claimed %v at the not-before time", got)
	}
}
