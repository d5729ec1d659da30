package postgres

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

// decided stores approval id and decides it as state, queueing inj-<id>.
func decided(t *testing.T, db *DB, c *fakeclock.Clock, id, state string, claimFor time.Duration) *store.Injection {
	t.Helper()
	mustPut(t, db, emailApproval(id, c.Now().Add(time.Hour)))
	_, job, err := db.Decide(apprCtx, store.Decision{ApprovalID: id, State: state, At: c.Now(), InjectionID: "inj-" + id, ClaimFor: claimFor})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func TestInjectionLeaseAndOutcomes(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	decided(t, db, c, "a1", store.ApprovalDenied, 0)
	if at, ok := db.NextInjection(); !ok || !at.Equal(c.Now()) {
		t.Fatalf("next injection %v %v", at, ok)
	}
	jobs, err := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute)
	if err != nil || len(jobs) != 1 || jobs[0].Attempts != 1 || !jobs[0].LeasedUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("claim %+v %v", jobs, err)
	}
	// Leased: not claimable again until the lease ends.
	if again, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute); len(again) != 0 {
		t.Fatal("claimed twice within the lease")
	}
	if at, _ := db.NextInjection(); !at.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("a claimed job is due again at %v, want its lease's end", at)
	}
	mustCheck(t, db)
	// The worker died; the lease runs out; another claim takes it.
	c.Advance(2 * time.Minute)
	again, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute)
	if len(again) != 1 || again[0].Attempts != 2 {
		t.Fatalf("reclaim %v", again)
	}
	// The first worker's late record loses.
	if _, err := db.RecordInjection(apprCtx, jobs[0], store.InjectionOutcome{State: store.InjectionDone, At: c.Now()}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late record: %v", err)
	}
	inj, err := db.RecordInjection(apprCtx, again[0], store.InjectionOutcome{State: store.InjectionPending, NextAt: c.Now().Add(time.Second), Error: "down", At: c.Now()})
	if err != nil || inj.State != store.InjectionPending || !inj.LeasedUntil.IsZero() || inj.LastError != "down" {
		t.Fatalf("%+v %v", inj, err)
	}
	mustCheck(t, db)
	if got, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute); len(got) != 0 {
		t.Fatal("a retry was claimed before its time")
	}
	c.Advance(time.Second)
	third, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute)
	if len(third) != 1 {
		t.Fatalf("third claim %+v", third)
	}
	if _, err := db.RecordInjection(apprCtx, third[0], store.InjectionOutcome{State: store.InjectionDead, Error: "gave up", At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	if _, ok := db.NextInjection(); ok {
		t.Fatal("NextInjection reports a dead job")
	}
	if dead, _ := db.ListInjections(apprCtx, store.InjectionDead, 10); len(dead) != 1 || dead[0].LastError != "gave up" {
		t.Fatalf("dead %+v", dead)
	}
	if _, err := db.RetryInjection(apprCtx, "inj-a1", c.Now()); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	if _, err := db.RetryInjection(apprCtx, "inj-a1", c.Now()); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("retry of a pending job: %v", err)
	}
	if _, err := db.RetryInjection(apprCtx, "inj-missing", c.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retry of an unknown job: %v", err)
	}
	last, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute)
	if len(last) != 1 {
		t.Fatalf("claim after the retry %+v", last)
	}
	done, err := db.RecordInjection(apprCtx, last[0], store.InjectionOutcome{State: store.InjectionDone, At: c.Now()})
	if err != nil || done.State != store.InjectionDone || !done.DoneAt.Equal(c.Now()) {
		t.Fatalf("done %+v %v", done, err)
	}
	if _, err := db.RecordInjection(apprCtx, last[0], store.InjectionOutcome{State: store.InjectionDone, At: c.Now()}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("record of a done job: %v", err)
	}
	want := []string{"created", "decided", "injection-failed", "injection-dead", "injection-retry", "injected"}
	if ev := apprEvents(t, db, "a1"); !slices.Equal(ev, want) {
		t.Fatalf("audit %v, want %v", ev, want)
	}
	mustCheck(t, db)
}

func TestInjectionDecideClaimedAndRelease(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	job := decided(t, db, c, "a1", store.ApprovalGranted, time.Minute)
	if job == nil || job.Attempts != 1 || !job.LeasedUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("%+v", job)
	}
	mustCheck(t, db)
	if got, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute); len(got) != 0 {
		t.Fatal("a job claimed by Decide was claimed again")
	}
	if err := db.ReleaseInjection(apprCtx, job, c.Now()); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	got, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute)
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("after release: %+v", got)
	}
	if err := db.ReleaseInjection(apprCtx, job, c.Now()); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale release: %v", err)
	}
}

func TestInjectionRequeueClaimed(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	old := decided(t, db, c, "old", store.ApprovalGranted, time.Hour)
	start := c.Now().Add(time.Second)
	c.Advance(2 * time.Second)
	// Claimed by the new process after it started: left alone.
	decided(t, db, c, "new", store.ApprovalGranted, time.Hour)
	n, err := db.RequeueClaimedInjections(apprCtx, start, c.Now())
	if err != nil || n != 1 {
		t.Fatalf("requeued %d, %v", n, err)
	}
	mustCheck(t, db)
	if _, err := db.RecordInjection(apprCtx, old, store.InjectionOutcome{State: store.InjectionDone, At: c.Now()}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("record of a requeued claim: %v", err)
	}
	got, _ := db.ClaimInjections(apprCtx, c.Now(), 10, time.Minute)
	if len(got) != 1 || got[0].ID != "inj-old" {
		t.Fatalf("claimed %+v", got)
	}
	if n, _ := db.RequeueClaimedInjections(apprCtx, start, c.Now()); n != 0 {
		t.Fatalf("requeued %d claims taken after the start", n)
	}
}

func TestInjectionListOrderAndLimit(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	for _, id := range []string{"b", "a", "B"} {
		decided(t, db, c, id, store.ApprovalGranted, 0)
	}
	list := func(st string, limit int) []string {
		got, err := db.ListInjections(apprCtx, st, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, inj := range got {
			out = append(out, inj.ID)
		}
		return out
	}
	if got := list("", 0); !slices.Equal(got, []string{"inj-B", "inj-a", "inj-b"}) {
		t.Fatalf("all %v", got)
	}
	if got := list(store.InjectionPending, 2); !slices.Equal(got, []string{"inj-B", "inj-a"}) {
		t.Fatalf("two pending %v", got)
	}
	if got := list(store.InjectionDone, 10); len(got) != 0 {
		t.Fatalf("done %v", got)
	}
	if _, err := db.Injection(apprCtx, "inj-missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown injection: %v", err)
	}
	// Claims take due order: the jobs were decided at one time, so id order.
	got, _ := db.ClaimInjections(apprCtx, c.Now(), 2, time.Minute)
	if len(got) != 2 || got[0].ID != "inj-B" || got[1].ID != "inj-a" {
		t.Fatalf("claimed %+v", got)
	}
	if got, _ := db.ClaimInjections(apprCtx, c.Now(), 0, time.Minute); len(got) != 0 {
		t.Fatalf("a claim of none took %+v", got)
	}
}

// Replicas claiming at once never take one job twice, and together take
// every due job.
func TestInjectionConcurrentClaimsAcrossReplicas(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	const jobs = 60
	var as []store.NewApproval
	for i := range jobs {
		as = append(as, emailApproval(fmt.Sprintf("a%02d", i), c.Now().Add(time.Hour)))
	}
	mustPut(t, dbs[0], as...)
	for i := range jobs {
		id := fmt.Sprintf("a%02d", i)
		if _, _, err := dbs[i%2].Decide(apprCtx, store.Decision{ApprovalID: id, State: store.ApprovalGranted, At: c.Now(), InjectionID: "inj-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for {
				got, err := dbs[w%2].ClaimInjections(apprCtx, c.Now(), 3, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, inj := range got {
					claimed[inj.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != jobs {
		t.Fatalf("%d jobs claimed, want %d", len(claimed), jobs)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("job %s claimed %d times", id, n)
		}
	}
}

// A decision queues its job and wakes the other replicas' injectors.
func TestInjectionDecisionWakesReplicas(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	deadline := time.After(10 * time.Second)
	// The listener may not have subscribed yet: decide until it hears one.
	for i := 0; ; i++ {
		decided(t, dbs[0], c, fmt.Sprint("a", i), store.ApprovalGranted, 0)
		select {
		case got := <-dbs[1].Wakeups():
			if got != store.WakeInjections {
				t.Fatalf("wake-up %q, want %q", got, store.WakeInjections)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake-up reached the other replica")
		}
	}
}
