package storetest

import (
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// injectionCases are the outbox of decisions to agents.
var injectionCases = []testCase{
	{"injection/claim leases, a failed attempt retries at its time, done ends it", injectionClaimRecordRetry},
	{"injection/a claim whose lease ran out is claimed again and the first record is lost", injectionLeaseExpiry},
	{"injection/a dead injection retried is due again", injectionDeadRetry},
	{"injection/requeue of claims taken before a time makes them due and their records lost", injectionRequeue},
	{"injection/a decision may hand its injection out claimed, and release it", injectionClaimedByDecide},
}

// decided stores approval a1 and grants it, which queues injection inj-a1.
func (e *env) decided() {
	e.t.Helper()
	e.ingestApproval("a1", e.now().Add(time.Hour))
	e.advance(time.Second)
	_, _, err := e.decide("a1", store.ApprovalGranted, "m1")
	e.ok(err, "decide a1")
}

// claimInjections claims due injections now with a one-minute lease.
func (e *env) claimInjections() []*store.Injection {
	e.t.Helper()
	got, err := e.s.ClaimInjections(e.ctx, e.now(), 10, time.Minute)
	e.ok(err, "claim injections")
	return got
}

func (e *env) recordInjection(claimed *store.Injection, o store.InjectionOutcome) *store.Injection {
	e.t.Helper()
	out, err := e.s.RecordInjection(e.ctx, claimed, o)
	e.ok(err, "record injection "+o.State)
	return out
}

func injectionClaimRecordRetry(e *env) {
	e.decided()
	at, ok := e.s.NextInjection()
	if !ok {
		e.t.Fatal("NextInjection reports nothing after a decision")
	}
	e.sameTime(at, e.now(), "NextInjection")
	got := e.claimInjections()
	if len(got) != 1 || got[0].ID != "inj-a1" || got[0].Attempts != 1 || got[0].State != store.InjectionPending {
		e.t.Fatalf("claimed %+v", got)
	}
	e.sameTime(got[0].LeasedUntil, e.now().Add(time.Minute), "leased until")
	if again := e.claimInjections(); len(again) != 0 {
		e.t.Fatalf("claimed a leased injection again: %+v", again)
	}
	e.advance(time.Second)
	retryAt := e.now().Add(5 * time.Minute)
	failed := e.recordInjection(got[0], store.InjectionOutcome{State: store.InjectionPending, NextAt: retryAt, Error: "503", At: e.now()})
	if failed.State != store.InjectionPending || failed.LastError != "503" || !failed.LeasedUntil.IsZero() {
		e.t.Fatalf("after a failed attempt %+v", failed)
	}
	at, _ = e.s.NextInjection()
	e.sameTime(at, retryAt, "NextInjection after a failure")
	e.advance(5 * time.Minute)
	got2 := e.claimInjections()
	if len(got2) != 1 || got2[0].Attempts != 2 {
		e.t.Fatalf("second claim %+v", got2)
	}
	done := e.recordInjection(got2[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	if done.State != store.InjectionDone {
		e.t.Fatalf("done %+v", done)
	}
	e.sameTime(done.DoneAt, e.now(), "done at")
	if _, ok := e.s.NextInjection(); ok {
		e.t.Fatal("NextInjection reports a done injection")
	}
	listed, err := e.s.ListInjections(e.ctx, store.InjectionDone, 10)
	e.ok(err, "list done")
	if len(listed) != 1 || listed[0].ID != "inj-a1" {
		e.t.Fatalf("done injections %+v", listed)
	}
	_, err = e.s.RecordInjection(e.ctx, got2[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	e.is(err, store.ErrLeaseLost, "record of a done injection")
	if ev := e.events("a1"); !slices.Equal(ev, []string{"created", "decided", "injection-failed", "injected"}) {
		e.t.Fatalf("audit %v", ev)
	}
}

func injectionLeaseExpiry(e *env) {
	e.decided()
	first := e.claimInjections()[0]
	e.advance(time.Minute)
	second := e.claimInjections()
	if len(second) != 1 || second[0].Attempts != 2 {
		e.t.Fatalf("after the lease claimed %+v, want the job again", second)
	}
	_, err := e.s.RecordInjection(e.ctx, first, store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	e.is(err, store.ErrLeaseLost, "record under the expired claim")
	e.recordInjection(second[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
}

func injectionDeadRetry(e *env) {
	e.decided()
	claimed := e.claimInjections()[0]
	e.advance(time.Second)
	dead := e.recordInjection(claimed, store.InjectionOutcome{State: store.InjectionDead, Error: "404", At: e.now()})
	if dead.State != store.InjectionDead {
		e.t.Fatalf("dead %+v", dead)
	}
	if _, ok := e.s.NextInjection(); ok {
		e.t.Fatal("NextInjection reports a dead injection")
	}
	e.advance(time.Hour)
	r, err := e.s.RetryInjection(e.ctx, "inj-a1", e.now())
	e.ok(err, "retry dead injection")
	if r.State != store.InjectionPending {
		e.t.Fatalf("retried %+v", r)
	}
	e.advance(time.Second)
	got := e.claimInjections()
	if len(got) != 1 || got[0].ID != "inj-a1" {
		e.t.Fatalf("claimed %+v after the retry", got)
	}
	_, err = e.s.RetryInjection(e.ctx, "inj-a1", e.now())
	e.is(err, store.ErrBadState, "retry of a pending injection")
	e.recordInjection(got[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	if ev := e.events("a1"); !slices.Equal(ev, []string{"created", "decided", "injection-dead", "injection-retry", "injected"}) {
		e.t.Fatalf("audit %v", ev)
	}
}

func injectionRequeue(e *env) {
	e.decided()
	got, err := e.s.ClaimInjections(e.ctx, e.now(), 10, time.Hour)
	e.ok(err, "claim")
	e.advance(time.Millisecond)
	n, err := e.s.RequeueClaimedInjections(e.ctx, e.now(), e.now())
	e.ok(err, "requeue")
	if n != 1 {
		e.t.Fatalf("re-queued %d, want 1", n)
	}
	_, err = e.s.RecordInjection(e.ctx, got[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	e.is(err, store.ErrLeaseLost, "record of a re-queued claim")
	again := e.claimInjections()
	if len(again) != 1 || again[0].ID != "inj-a1" {
		e.t.Fatalf("claimed %+v after the requeue", again)
	}
	if n, _ := e.s.RequeueClaimedInjections(e.ctx, e.now(), e.now()); n != 0 {
		e.t.Fatalf("re-queued %d claims taken at the requeue's time", n)
	}
	e.recordInjection(again[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
}

func injectionClaimedByDecide(e *env) {
	e.ingestApproval("a1", e.now().Add(time.Hour))
	_, job, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalDenied, Channel: "email", MessageID: "m1",
		At: e.now(), InjectionID: "inj-a1", ClaimFor: time.Minute})
	e.ok(err, "decide, claimed")
	if job.Attempts != 1 {
		e.t.Fatalf("injection handed out %+v, want one attempt counted", job)
	}
	e.sameTime(job.LeasedUntil, e.now().Add(time.Minute), "handed-out lease")
	if got := e.claimInjections(); len(got) != 0 {
		e.t.Fatalf("claimed a handed-out injection: %+v", got)
	}
	e.ok(e.s.ReleaseInjection(e.ctx, job, e.now()), "release")
	e.is(e.s.ReleaseInjection(e.ctx, job, e.now()), store.ErrLeaseLost, "second release")
	got := e.claimInjections()
	if len(got) != 1 || got[0].Attempts != 1 {
		e.t.Fatalf("claimed %+v after the release, want the job with one attempt", got)
	}
	_, err = e.s.RecordInjection(e.ctx, job, store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	e.is(err, store.ErrLeaseLost, "record under the released claim")
	e.recordInjection(got[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
}
