package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// A job leased by a replica whose liveness lease ran out is re-queued at
// once; a live replica's job waits for its own lease.
func TestRequeueJobsOfADeadReplica(t *testing.T) {
	c := dlvClock()
	reps := openReplicas(t, c, 2)
	a, b := reps[0], reps[1]
	a.holder, b.holder = "host/1/a", "host/2/b"
	for _, r := range reps {
		if _, ok, err := r.AcquireLease(dlvCtx, store.LivenessLease(r.holder), r.holder, 0, 15*time.Second); err != nil || !ok {
			t.Fatalf("liveness lease of %s: %v %v", r.holder, ok, err)
		}
	}
	ingestN(t, a, 2)
	ja, err := a.Claim(dlvCtx, 1, 5*time.Minute, nil)
	if err != nil || len(ja) != 1 {
		t.Fatalf("claim on a: %v %v", ja, err)
	}
	jb, err := b.Claim(dlvCtx, 1, 5*time.Minute, nil)
	if err != nil || len(jb) != 1 {
		t.Fatalf("claim on b: %v %v", jb, err)
	}
	// Both replicas alive: nothing is re-queued before the leases end.
	c.Advance(10 * time.Second)
	if n, err := b.RequeueExpired(dlvCtx, c.Now()); err != nil || n != 0 {
		t.Fatalf("re-queued %d with both replicas alive: %v", n, err)
	}
	// a stops renewing; b renews. Once a's liveness lease has run out, its
	// job is re-queued (maybe sent), b's is not.
	if _, ok, err := b.AcquireLease(dlvCtx, store.LivenessLease(b.holder), b.holder, 1, 15*time.Second); err != nil || !ok {
		t.Fatalf("renew b: %v %v", ok, err)
	}
	c.Advance(6 * time.Second)
	if n, err := b.RequeueExpired(dlvCtx, c.Now()); err != nil || n != 1 {
		t.Fatalf("re-queued %d after a's liveness ran out, want 1: %v", n, err)
	}
	got, err := b.Delivery(dlvCtx, ja[0].ID)
	if err != nil || got.State == store.StateSending || !got.MaybeSent {
		t.Fatalf("a's job after re-queue: %+v %v", got, err)
	}
	if got, err := b.Delivery(dlvCtx, jb[0].ID); err != nil || got.State != store.StateSending {
		t.Fatalf("b's job: %+v %v", got, err)
	}
	// a's late outcome is refused: its lease is gone.
	if _, err := a.Record(dlvCtx, ja[0].ID, ja[0].LeaseUntil, store.Outcome{State: store.StateSent}); err == nil {
		t.Fatal("a recorded an outcome for a job re-queued after its death")
	}
}

// An injection claimed by a replica whose liveness lease ran out is taken
// by another replica before its own lease ends; a live replica's is not.
func TestInjectionOfADeadReplicaIsClaimedAgain(t *testing.T) {
	c := dlvClock()
	reps := openReplicas(t, c, 2)
	a, b := reps[0], reps[1]
	a.holder, b.holder = "host/1/a", "host/2/b"
	if _, ok, err := a.AcquireLease(dlvCtx, store.LivenessLease(a.holder), a.holder, 0, 15*time.Second); err != nil || !ok {
		t.Fatalf("liveness lease of a: %v %v", ok, err)
	}
	decided(t, a, c, "a1", store.ApprovalGranted, 0)
	got, err := a.ClaimInjections(dlvCtx, c.Now(), 1, 2*time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim on a: %+v %v", got, err)
	}
	c.Advance(10 * time.Second)
	if again, err := b.ClaimInjections(dlvCtx, c.Now(), 1, 2*time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("b took a live replica's injection: %+v %v", again, err)
	}
	c.Advance(10 * time.Second) // a's liveness lease has run out
	again, err := b.ClaimInjections(dlvCtx, c.Now(), 1, 2*time.Minute)
	if err != nil || len(again) != 1 || again[0].ID != got[0].ID {
		t.Fatalf("b did not take the dead replica's injection: %+v %v", again, err)
	}
	if _, err := a.RecordInjection(dlvCtx, got[0], store.InjectionOutcome{State: store.InjectionDone, At: c.Now()}); err == nil {
		t.Fatal("a recorded an injection taken over after its death")
	}
}

// A turn in flight on a replica whose liveness lease ran out is taken by
// another replica before its own lease ends, and no longer keeps its
// conversation busy; a live replica's turn is left alone.
func TestTurnOfADeadReplicaIsClaimedAgain(t *testing.T) {
	c := newConvClock()
	dsn := pgtest.DSN(t)
	var reps []*DB
	for _, h := range []string{"host/1/a", "host/2/b"} {
		db, err := Open(context.Background(), dsn, Options{Now: c.Now, Holder: h})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		reps = append(reps, db)
	}
	a, b := reps[0], reps[1]
	if _, ok, err := a.AcquireLease(dlvCtx, store.LivenessLease(a.holder), a.holder, 0, 15*time.Second); err != nil || !ok {
		t.Fatalf("liveness lease of a: %v %v", ok, err)
	}
	if _, err := a.RecordInbound(dlvCtx, smsWrite(a, c, "m1", true, "cnv_a")); err != nil {
		t.Fatal(err)
	}
	got, err := a.ClaimTurns(dlvCtx, c.Now(), 1, 5*time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim on a: %+v %v", got, err)
	}
	c.Advance(10 * time.Second)
	if again, err := b.ClaimTurns(dlvCtx, c.Now(), 1, 5*time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("b took a live replica's turn: %+v %v", again, err)
	}
	c.Advance(10 * time.Second) // a's liveness lease has run out
	again, err := b.ClaimTurns(dlvCtx, c.Now(), 1, 5*time.Minute)
	if err != nil || len(again) != 1 || again[0].ID != got[0].ID {
		t.Fatalf("b did not take the dead replica's turn: %+v %v", again, err)
	}
	if _, err := a.RecordTurn(dlvCtx, got[0], store.TurnOutcome{State: store.TurnAnswered, At: c.Now()}); err == nil {
		t.Fatal("a recorded a turn taken over after its death")
	}
	checkConv(t, b)
}
