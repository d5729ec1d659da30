package bolt

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
)

func ingestApproval(t *testing.T, db *DB, id string, exp time.Time) {
	t.Helper()
	_, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{id}}},
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t", ExpiresAt: exp},
			Tokens: map[string]store.TokenBinding{"h-" + id: {ApprovalID: id, Channel: "email", Recipient: "a@example.org", Kind: "token"}}}}})
	if err != nil {
		t.Fatal(err)
	}
}

func checkApprovals(t *testing.T, db *DB) {
	t.Helper()
	if err := db.CheckApprovalInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestDecideOnceAndQueueInjection(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestApproval(t, db, "a1", c.Now().Add(time.Hour))
	if tb, err := db.TokenBinding(ctx, "h-a1"); err != nil || tb.ApprovalID != "a1" {
		t.Fatalf("binding %+v %v", tb, err)
	}
	checkApprovals(t, db)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, already := 0, 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := db.Decide(ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, DecidedBy: "x", Channel: "email",
				MessageID: string(rune('a' + i)), At: c.Now(), InjectionID: db.NewID("inj_")})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrAlreadyDecided):
				already++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || already != 19 {
		t.Fatalf("wins %d already %d", wins, already)
	}
	checkApprovals(t, db)
	// The same message again is a duplicate, not "already decided".
	a, _ := db.Approval(ctx, "a1")
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalDenied, Channel: "email", MessageID: a.MessageID, At: c.Now(), InjectionID: "inj_x"}); !errors.Is(err, store.ErrDuplicateInbound) {
		t.Fatalf("replay: %v", err)
	}
	injs, _ := db.ListInjections(ctx, store.InjectionPending, 10)
	if len(injs) != 1 || injs[0].Response.Decision != "granted" || injs[0].Session != "s" || injs[0].Turn != "t" {
		t.Fatalf("injections %+v", injs)
	}
	audit, _ := db.ApprovalAudit(ctx, "a1")
	if len(audit) != 21 || audit[0].Event != "created" {
		t.Fatalf("audit %d entries", len(audit))
	}
}

func TestInjectionLeaseAndOutcomes(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestApproval(t, db, "a1", c.Now().Add(time.Hour))
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalDenied, At: c.Now(), InjectionID: "inj_1"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := db.ClaimInjections(ctx, c.Now(), 10, time.Minute)
	if err != nil || len(jobs) != 1 || jobs[0].Attempts != 1 {
		t.Fatalf("claim %v %v", jobs, err)
	}
	// Leased: not claimable again until the lease ends.
	if again, _ := db.ClaimInjections(ctx, c.Now(), 10, time.Minute); len(again) != 0 {
		t.Fatal("claimed twice within the lease")
	}
	checkApprovals(t, db)
	// The worker died; the lease runs out; another claim takes it.
	c.Advance(2 * time.Minute)
	again, _ := db.ClaimInjections(ctx, c.Now(), 10, time.Minute)
	if len(again) != 1 || again[0].Attempts != 2 {
		t.Fatalf("reclaim %v", again)
	}
	// The first worker's late record loses.
	if _, err := db.RecordInjection(ctx, jobs[0], store.InjectionOutcome{State: store.InjectionDone, At: c.Now()}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late record: %v", err)
	}
	inj, err := db.RecordInjection(ctx, again[0], store.InjectionOutcome{State: store.InjectionPending, NextAt: c.Now().Add(time.Second), Error: "down", At: c.Now()})
	if err != nil || inj.State != store.InjectionPending {
		t.Fatalf("%+v %v", inj, err)
	}
	checkApprovals(t, db)
	c.Advance(time.Second)
	third, _ := db.ClaimInjections(ctx, c.Now(), 10, time.Minute)
	if _, err := db.RecordInjection(ctx, third[0], store.InjectionOutcome{State: store.InjectionDead, Error: "gave up", At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	checkApprovals(t, db)
	if dead, _ := db.ListInjections(ctx, store.InjectionDead, 10); len(dead) != 1 || dead[0].LastError != "gave up" {
		t.Fatalf("dead %+v", dead)
	}
	if _, err := db.RetryInjection(ctx, "inj_1", c.Now()); err != nil {
		t.Fatal(err)
	}
	checkApprovals(t, db)
	if _, err := db.RetryInjection(ctx, "inj_1", c.Now()); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("retry of a pending job: %v", err)
	}
}

func TestExpiryIndex(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestApproval(t, db, "late", c.Now().Add(2*time.Hour))
	ingestApproval(t, db, "soon", c.Now().Add(time.Hour))
	if next, ok := db.NextExpiry(); !ok || !next.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("next %v", next)
	}
	if ids, _ := db.DueExpiries(ctx, c.Now(), 10); len(ids) != 0 {
		t.Fatal(ids)
	}
	c.Advance(90 * time.Minute)
	ids, _ := db.DueExpiries(ctx, c.Now(), 10)
	if len(ids) != 1 || ids[0] != "soon" {
		t.Fatalf("due %v", ids)
	}
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "soon", State: store.ApprovalExpired, DecidedBy: "policy:expired", At: c.Now(), InjectionID: "inj_s"}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := db.DueExpiries(ctx, c.Now(), 10); len(ids) != 0 {
		t.Fatalf("still due %v", ids)
	}
	checkApprovals(t, db)
	// Reopen: the index survives.
	p := db.Path()
	db.Close()
	db2, err := Open(p, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if next, ok := db2.NextExpiry(); !ok || !next.Equal(c.Now().Add(30*time.Minute)) {
		t.Fatalf("after reopen next %v", next)
	}
	if l, _ := db2.ListApprovals(ctx, store.ApprovalPending, "", 10); len(l) != 1 || l[0].ID != "late" {
		t.Fatalf("pending %v", l)
	}
	checkApprovals(t, db2)
}

func TestOnce(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	if first, _ := db.Once(ctx, "o", c.Now()); !first {
		t.Fatal("first Once")
	}
	if first, _ := db.Once(ctx, "o", c.Now()); first {
		t.Fatal("second Once")
	}
}

func TestDuplicateTokenHashRejected(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestApproval(t, db, "a1", c.Now().Add(time.Hour))
	_, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Approvals: []store.NewApproval{{Approval: store.Approval{ID: "a2", ExpiresAt: c.Now().Add(time.Hour)},
		Tokens: map[string]store.TokenBinding{"h-a1": {ApprovalID: "a2"}}}}})
	if !errors.Is(err, store.ErrDuplicateApproval) {
		t.Fatalf("err %v", err)
	}
	if _, err := db.Approval(ctx, "a2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("half-stored approval")
	}
}

func TestDecideClaimedAndRelease(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestApproval(t, db, "a1", c.Now().Add(time.Hour))
	_, job, err := db.Decide(ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, At: c.Now(), InjectionID: "inj_1", ClaimFor: time.Minute})
	if err != nil || job == nil || job.Attempts != 1 {
		t.Fatalf("%+v %v", job, err)
	}
	checkApprovals(t, db)
	if got, _ := db.ClaimInjections(ctx, c.Now(), 10, time.Minute); len(got) != 0 {
		t.Fatal("a job claimed by Decide was claimed again")
	}
	if err := db.ReleaseInjection(ctx, job, c.Now()); err != nil {
		t.Fatal(err)
	}
	checkApprovals(t, db)
	got, _ := db.ClaimInjections(ctx, c.Now(), 10, time.Minute)
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("after release: %+v", got)
	}
	if err := db.ReleaseInjection(ctx, job, c.Now()); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale release: %v", err)
	}
}

func TestRequeueClaimedInjections(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestApproval(t, db, "old", c.Now().Add(time.Hour))
	ingestApproval(t, db, "new", c.Now().Add(time.Hour))
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "old", State: store.ApprovalGranted, At: c.Now(), InjectionID: "inj_old", ClaimFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	start := c.Now().Add(time.Second)
	c.Advance(2 * time.Second)
	// Claimed by the new process after it started: left alone.
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "new", State: store.ApprovalGranted, At: c.Now(), InjectionID: "inj_new", ClaimFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	n, err := db.RequeueClaimedInjections(ctx, start, c.Now())
	if err != nil || n != 1 {
		t.Fatalf("requeued %d, %v", n, err)
	}
	checkApprovals(t, db)
	got, _ := db.ClaimInjections(ctx, c.Now(), 10, time.Minute)
	if len(got) != 1 || got[0].ID != "inj_old" {
		t.Fatalf("claimed %+v", got)
	}
}
