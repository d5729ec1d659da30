package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

var dlvCtx = context.Background()

func dlvClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
}

// openDlv opens a store on a fresh schema, whose deliveries are checked
// when the test ends.
func openDlv(t *testing.T, c *fakeclock.Clock) *DB {
	t.Helper()
	db := open(t, c.Now)
	checkDlvAtEnd(t, db)
	return db
}

// openReplicas opens n stores on one fresh schema: replicas sharing it.
func openReplicas(t *testing.T, c *fakeclock.Clock, n int) []*DB {
	t.Helper()
	dsn := pgtest.DSN(t)
	var out []*DB
	for range n {
		db, err := Open(dlvCtx, dsn, Options{Now: c.Now})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		out = append(out, db)
	}
	checkDlvAtEnd(t, out[0])
	return out
}

func checkDlvAtEnd(t *testing.T, db *DB) {
	t.Cleanup(func() {
		if err := db.checkDeliveries(dlvCtx); err != nil {
			t.Errorf("invariants: %v", err)
		}
	})
}

// ingestN ingests one envelope with n webhook deliveries to ep0…
func ingestN(t testing.TB, db *DB, n int) *store.IngestResult {
	t.Helper()
	var ds []store.NewDelivery
	for i := 0; i < n; i++ {
		ds = append(ds, store.NewDelivery{Channel: "webhook", To: fmt.Sprintf("ep%d", i)})
	}
	res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Deliveries: ds})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// ingestTo stores one envelope for one recipient on channel and returns the
// delivery id.
func ingestTo(t *testing.T, db *DB, channel, to string) string {
	t.Helper()
	res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Deliveries: []store.NewDelivery{{Channel: channel, To: to}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Deliveries[0].ID
}

func dlvIDs(ds []*store.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func TestDeliveryStateMachine(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	res := ingestN(t, db, 3)
	if len(res.Deliveries) != 3 {
		t.Fatalf("deliveries = %d", len(res.Deliveries))
	}
	got, err := db.Claim(dlvCtx, 10, time.Minute, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	if again, _ := db.Claim(dlvCtx, 10, time.Minute, nil); len(again) != 0 {
		t.Fatalf("claimed %d jobs twice", len(again))
	}
	if d, _ := db.Delivery(dlvCtx, got[0].ID); d.State != store.StateSending || !d.LeaseUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("claimed job reads %s until %v", d.State, d.LeaseUntil)
	}
	d0, err := db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SM1", Attempt: store.Attempt{Outcome: "sent"}})
	if err != nil || d0.State != store.StateSent || d0.Attempts != 1 || d0.SentAt.IsZero() {
		t.Fatalf("sent: %+v, %v", d0, err)
	}
	if d, err := db.DeliveryByProviderID(dlvCtx, "webhook", "SM1"); err != nil || d.ID != got[0].ID {
		t.Fatalf("by provider id: %v, %v", d, err)
	}
	next := c.Now().Add(5 * time.Minute)
	if _, err := db.Record(dlvCtx, got[1].ID, got[1].LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: next, Error: "503"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Record(dlvCtx, got[2].ID, got[2].LeaseUntil, store.Outcome{State: store.StateDead, DeadReason: "410 gone"}); err != nil {
		t.Fatal(err)
	}
	if due, _ := db.Claim(dlvCtx, 10, time.Minute, nil); len(due) != 0 {
		t.Fatalf("retrying job claimed before its time")
	}
	if at, ok := db.NextDue(); !ok || !at.Equal(next) {
		t.Fatalf("NextDue = %v %v, want %v", at, ok, next)
	}
	c.Advance(5 * time.Minute)
	due, _ := db.Claim(dlvCtx, 10, time.Minute, nil)
	if len(due) != 1 || due[0].ID != got[1].ID || due[0].Attempts != 1 {
		t.Fatalf("due after wait = %+v", due)
	}
	if _, err := db.Record(dlvCtx, due[0].ID, due[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
		t.Fatal(err)
	}
	dead, _ := db.ListDeliveries(dlvCtx, store.StateDead, "", 10)
	if len(dead) != 1 || dead[0].DeadReason != "410 gone" {
		t.Fatalf("dead list = %+v", dead)
	}
	if _, err := db.Retry(dlvCtx, got[0].ID); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("retry of a sent job: %v", err)
	}
	r, err := db.Retry(dlvCtx, got[2].ID)
	if err != nil || r.State != store.StateQueued || r.Extra["retriedAt"] == "" {
		t.Fatalf("retry dead: %+v %v", r, err)
	}
	counts, _ := db.CountByState(dlvCtx)
	if counts[store.StateSent] != 2 || counts[store.StateQueued] != 1 || counts[store.StateDead] != 0 {
		t.Fatalf("counts = %v", counts)
	}
	atts, _ := db.Attempts(dlvCtx, got[1].ID)
	if len(atts) != 2 || atts[0].N != 1 || atts[1].N != 2 {
		t.Fatalf("attempts = %+v", atts)
	}
	env, err := db.Envelope(dlvCtx, res.EnvelopeID)
	if err != nil || string(env.Envelope) != `{"role":"agent"}` || len(env.DeliveryIDs) != 3 {
		t.Fatalf("envelope = %+v, %v", env, err)
	}
	if _, err := db.Envelope(dlvCtx, "env_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown envelope: %v", err)
	}
	if _, err := db.Delivery(dlvCtx, "dlv_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown delivery: %v", err)
	}
}

func TestDeliveryRecordAfterLeaseLost(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	ingestN(t, db, 1)
	first, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	c.Advance(2 * time.Minute)
	if n, err := db.RequeueExpired(dlvCtx, c.Now()); err != nil || n != 1 {
		t.Fatalf("requeue = %d %v", n, err)
	}
	second, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	if len(second) != 1 || !second[0].MaybeSent {
		t.Fatalf("re-claimed job should be marked maybe-sent: %+v", second)
	}
	if _, err := db.Record(dlvCtx, first[0].ID, first[0].LeaseUntil, store.Outcome{State: store.StateSent}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale record: err = %v, want ErrLeaseLost", err)
	}
	if err := db.Release(dlvCtx, first[0].ID, first[0].LeaseUntil, c.Now()); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale release: err = %v, want ErrLeaseLost", err)
	}
	if _, err := db.Record(dlvCtx, second[0].ID, second[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
		t.Fatal(err)
	}
}

// A replica that dies mid-send leaves jobs leased; once the leases run
// out, another replica re-queues and claims them, and nothing is lost.
func TestDeliveryLeaseRunOutIsClaimableByAnotherReplica(t *testing.T) {
	c := dlvClock()
	rs := openReplicas(t, c, 2)
	a, b := rs[0], rs[1]
	res := ingestN(t, a, 5)
	taken, err := a.Claim(dlvCtx, 3, time.Hour, nil)
	if err != nil || len(taken) != 3 {
		t.Fatalf("claim %d, %v", len(taken), err)
	}
	if n, err := b.RequeueExpired(dlvCtx, c.Now()); err != nil || n != 0 {
		t.Fatalf("requeued %d live leases, %v", n, err)
	}
	free, _ := b.Claim(dlvCtx, 10, time.Minute, nil)
	if len(free) != 2 {
		t.Fatalf("the other replica claimed %d; want the 2 not leased", len(free))
	}
	for _, d := range free {
		if _, err := b.Record(dlvCtx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Hour)
	if n, err := b.RequeueExpired(dlvCtx, c.Now()); err != nil || n != 3 {
		t.Fatalf("requeued %d, %v; want the 3 run-out leases", n, err)
	}
	got, err := b.Claim(dlvCtx, 10, time.Minute, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("after the leases ran out the other replica claimed %d, %v", len(got), err)
	}
	ids := map[string]bool{}
	for _, d := range res.Deliveries {
		ids[d.ID] = true
	}
	for _, d := range got {
		if !ids[d.ID] || !d.MaybeSent {
			t.Fatalf("re-claimed %+v", d)
		}
		if _, err := b.Record(dlvCtx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range taken {
		if _, err := a.Record(dlvCtx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent}); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("the dead replica's late record: %v, want ErrLeaseLost", err)
		}
	}
}

func TestDeliveryIdempotency(t *testing.T) {
	db := openDlv(t, dlvClock())
	in := store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}}, IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("body"))}
	first, err := db.Ingest(dlvCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent})
	again, err := db.Ingest(dlvCtx, in)
	if err != nil || !again.Replayed || again.EnvelopeID != first.EnvelopeID || again.Deliveries[0].ID != first.Deliveries[0].ID || again.Deliveries[0].State != store.StateQueued {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	in.RequestHash = store.HashRequest([]byte("other body"))
	if _, err := db.Ingest(dlvCtx, in); !errors.Is(err, store.ErrIdempotencyConflict) {
		t.Fatalf("other body: err = %v", err)
	}
	all, _ := db.ListDeliveries(dlvCtx, "", "", 100)
	if len(all) != 1 {
		t.Fatalf("%d deliveries stored; replays must store nothing", len(all))
	}
}

// An ingest whose approval is refused stores nothing of its envelope.
func TestDeliveryDuplicateApprovalStoresNothing(t *testing.T) {
	db := openDlv(t, dlvClock())
	ap := []store.NewApproval{{Approval: store.Approval{ID: "ap_1"}}}
	if _, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "email", To: "a@b.c"}}, Approvals: ap}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "email", To: "a@b.c"}}, Approvals: ap}); !errors.Is(err, store.ErrDuplicateApproval) {
		t.Fatalf("err = %v", err)
	}
	all, _ := db.ListDeliveries(dlvCtx, "", "", 100)
	if len(all) != 1 {
		t.Fatalf("a rejected ingest left %d deliveries", len(all)-1)
	}
}

// Eight replicas' ingests with one idempotency key at once store one
// envelope; every one answers it.
func TestDeliveryConcurrentIngestsOneKey(t *testing.T) {
	c := dlvClock()
	rs := openReplicas(t, c, 8)
	in := store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}},
		IdempotencyKey: "same", RequestHash: store.HashRequest([]byte("body"))}
	type answer struct {
		res *store.IngestResult
		err error
	}
	answers := make(chan answer, len(rs))
	start := make(chan struct{})
	for _, db := range rs {
		go func() {
			<-start
			res, err := db.Ingest(dlvCtx, in)
			answers <- answer{res, err}
		}()
	}
	close(start)
	envs := map[string]bool{}
	replayed := 0
	for range rs {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		envs[a.res.EnvelopeID] = true
		if a.res.Replayed {
			replayed++
		}
	}
	if len(envs) != 1 || replayed != len(rs)-1 {
		t.Fatalf("%d envelopes, %d replays; want 1 envelope and %d replays", len(envs), replayed, len(rs)-1)
	}
	if all, _ := rs[0].ListDeliveries(dlvCtx, "", "", 100); len(all) != 1 {
		t.Fatalf("%d deliveries stored", len(all))
	}
}

// Two replicas claiming at once never take one job.
func TestDeliveryConcurrentClaimersNeverShareAJob(t *testing.T) {
	c := dlvClock()
	rs := openReplicas(t, c, 2)
	const n = 600
	var ins []store.Ingest
	for i := range n {
		ins = append(ins, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{
			{Channel: []string{"webhook", "sms", "email"}[i%3], To: fmt.Sprintf("r%d", i%17)}}})
	}
	if _, err := rs[0].IngestBulk(dlvCtx, ins); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan []string, 2)
	errs := make(chan error, 2)
	for _, db := range rs {
		go func() {
			var mine []string
			for {
				ds, err := db.Claim(dlvCtx, 7, time.Minute, nil)
				if err != nil {
					errs <- err
					return
				}
				if len(ds) == 0 {
					break
				}
				mine = append(mine, dlvIDs(ds)...)
			}
			errs <- nil
			claimed <- mine
		}()
	}
	seen := map[string]bool{}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		for _, id := range <-claimed {
			if seen[id] {
				t.Fatalf("job %s claimed twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("claimed %d of %d jobs", len(seen), n)
	}
	if counts, _ := rs[1].CountByState(dlvCtx); counts[store.StateSending] != n || len(counts) != 1 {
		t.Fatalf("counts %v", counts)
	}
}

// Many claims of one job each at once all find one while jobs are due:
// a claim locks no more than it may take.
func TestDeliveryConcurrentClaimsFindFreeJobs(t *testing.T) {
	db := openDlv(t, dlvClock())
	var ins []store.Ingest
	for range 400 {
		ins = append(ins, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "x"}}})
	}
	if _, err := db.IngestBulk(dlvCtx, ins); err != nil {
		t.Fatal(err)
	}
	const claimers, each = 16, 20 // 320 of the 400
	var mu sync.Mutex
	empty := 0
	var wg sync.WaitGroup
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ds, err := db.Claim(dlvCtx, 1, time.Minute, func(*store.Delivery) bool { return true })
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				empty += 1 - len(ds)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if empty != 0 {
		t.Fatalf("%d claims found nothing with jobs due", empty)
	}
}

func TestDeliveryAdmitLeavesRefusedJobsDue(t *testing.T) {
	db := openDlv(t, dlvClock())
	ingestN(t, db, 4)
	got, err := db.Claim(dlvCtx, 10, time.Minute, func(d *store.Delivery) bool { return d.To != "ep1" })
	if err != nil || len(got) != 3 {
		t.Fatalf("claimed %d, %v", len(got), err)
	}
	rest, _ := db.Claim(dlvCtx, 10, time.Minute, nil)
	if len(rest) != 1 || rest[0].To != "ep1" {
		t.Fatalf("refused job: %+v", rest)
	}
}

func TestDeliveryListPagination(t *testing.T) {
	db := openDlv(t, dlvClock())
	ingestN(t, db, 5)
	p1, _ := db.ListDeliveries(dlvCtx, store.StateQueued, "", 2)
	p2, _ := db.ListDeliveries(dlvCtx, store.StateQueued, p1[1].ID, 2)
	p3, _ := db.ListDeliveries(dlvCtx, store.StateQueued, p2[1].ID, 2)
	if len(p1) != 2 || len(p2) != 2 || len(p3) != 1 || p2[0].ID == p1[1].ID {
		t.Fatalf("pages %d %d %d", len(p1), len(p2), len(p3))
	}
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	sending, _ := db.ListDeliveries(dlvCtx, store.StateSending, "", 10)
	queued, _ := db.ListDeliveries(dlvCtx, store.StateQueued, "", 10)
	if !slices.Equal(dlvIDs(sending), dlvIDs(got)) || len(queued) != 4 {
		t.Fatalf("in flight listed as %v, queued %d", dlvIDs(sending), len(queued))
	}
}

// A record that does not decode does not stop the jobs behind it, takes no
// admit slot, and the invariant check names it.
func TestDeliveryClaimPassesOverABrokenRecord(t *testing.T) {
	db := open(t, dlvClock().Now)
	res := ingestN(t, db, 3)
	corrupt := res.Deliveries[0].ID
	if _, err := db.pool.Exec(dlvCtx, `UPDATE deliveries SET doc = '{"id": 7}' WHERE id = $1`, corrupt); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	got, err := db.Claim(dlvCtx, 10, time.Minute, func(*store.Delivery) bool { admitted++; return true })
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(dlvIDs(got))), slices.Sorted(slices.Values(dlvIDs(res.Deliveries[1:])))) || admitted != 2 {
		t.Fatalf("claim = %v, %v, admit asked %d times; want the 2 sound jobs", dlvIDs(got), err, admitted)
	}
	if err := db.checkDeliveries(dlvCtx); err == nil || !strings.Contains(err.Error(), corrupt) {
		t.Errorf("checkDeliveries = %v; want it to name the unreadable delivery %s", err, corrupt)
	}
}

// Times the store would never reach and over-long keys are refused before
// anything is written.
func TestDeliveryRefusesUnreachableTimesAndHugeKeys(t *testing.T) {
	db := openDlv(t, dlvClock())
	ingestN(t, db, 1)
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	if _, err := db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateRetrying}); !errors.Is(err, store.ErrBadState) {
		t.Errorf("retrying without a time: %v", err)
	}
	if _, err := db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: strings.Repeat("x", 2000)}); err == nil {
		t.Error("a 2000-byte provider id was accepted")
	}
	if err := db.Release(dlvCtx, got[0].ID, got[0].LeaseUntil, time.Time{}); !errors.Is(err, store.ErrBadState) {
		t.Errorf("release to the zero time: %v", err)
	}
	if d, _ := db.Delivery(dlvCtx, got[0].ID); d.State != store.StateSending {
		t.Errorf("refused calls changed the job: %+v", d)
	}
	if _, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}},
		IdempotencyKey: strings.Repeat("k", 2000)}); err == nil {
		t.Error("a 2000-byte idempotency key was accepted")
	}
	if _, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "web hook", To: "k"}}}); !errors.Is(err, store.ErrBadState) {
		t.Errorf("a channel name with a space: %v", err)
	}
	if _, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}},
		Approvals: []store.NewApproval{{Approval: store.Approval{}}}}); err == nil {
		t.Error("an approval without an id was accepted")
	}
	if all, _ := db.ListDeliveries(dlvCtx, "", "", 10); len(all) != 1 {
		t.Errorf("refused ingests stored %d deliveries", len(all)-1)
	}
}

// Release puts a claimed job back, due at the time given, without counting
// an attempt.
func TestDeliveryRelease(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	ingestN(t, db, 1)
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	at := c.Now().Add(time.Second)
	if err := db.Release(dlvCtx, got[0].ID, got[0].LeaseUntil, at); err != nil {
		t.Fatal(err)
	}
	if d, _ := db.Delivery(dlvCtx, got[0].ID); d.State != store.StateQueued || d.Attempts != 0 || !d.NextAttemptAt.Equal(at) {
		t.Fatalf("released job %+v", d)
	}
	if next, ok := db.NextDue(); !ok || !next.Equal(at) {
		t.Fatalf("NextDue %v %v, want %v", next, ok, at)
	}
	if again, _ := db.Claim(dlvCtx, 1, time.Minute, nil); len(again) != 0 {
		t.Fatal("released job claimed before its time")
	}
	c.Advance(time.Second)
	if again, _ := db.Claim(dlvCtx, 1, time.Minute, nil); len(again) != 1 || again[0].MaybeSent {
		t.Fatalf("released job: %+v", again)
	}
}

// A held answer is not due until its conversation's ReleaseHeld.
func TestDeliveryReleaseHeld(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	// Without a conversation, a held delivery waits in conversation "".
	res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "x", Held: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Deliveries[0]; d.State != store.StateHeld || !d.NextAttemptAt.IsZero() {
		t.Fatalf("held delivery %+v", d)
	}
	if got, _ := db.Claim(dlvCtx, 10, time.Minute, nil); len(got) != 0 {
		t.Fatal("held delivery claimed")
	}
	if _, ok := db.NextDue(); ok {
		t.Fatal("held delivery due")
	}
	if n, err := db.ReleaseHeld(dlvCtx, "cnv_other"); err != nil || n != 0 {
		t.Fatalf("release of another conversation: %d, %v", n, err)
	}
	c.Advance(time.Second)
	if n, err := db.ReleaseHeld(dlvCtx, ""); err != nil || n != 1 {
		t.Fatalf("release held: %d, %v", n, err)
	}
	got, _ := db.Claim(dlvCtx, 10, time.Minute, nil)
	if len(got) != 1 || got[0].ID != res.Deliveries[0].ID || !got[0].NextAttemptAt.Equal(c.Now()) {
		t.Fatalf("after release claimed %+v", got)
	}
}

// UpdateProviderStatus decides with the delivery's row locked and changes
// neither its state nor its lease.
func TestDeliveryUpdateProviderStatus(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	ingestN(t, db, 1)
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	d, changed, err := db.UpdateProviderStatus(dlvCtx, got[0].ID, func(d *store.Delivery) (string, string, bool) {
		return "", "", d.State != store.StateSending
	})
	if err != nil || changed || d.State != store.StateSending {
		t.Fatalf("left alone: %+v %v %v", d, changed, err)
	}
	d, err = db.SetProviderStatus(dlvCtx, got[0].ID, "delivered", "")
	if err != nil || d.ProviderStatus != "delivered" || d.State != store.StateSending || !d.LeaseUntil.Equal(got[0].LeaseUntil) {
		t.Fatalf("status while in flight: %+v, %v", d, err)
	}
	r, err := db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent})
	if err != nil || r.ProviderStatus != "delivered" {
		t.Fatalf("record after the status: %+v, %v", r, err)
	}
	if _, err := db.SetProviderStatus(dlvCtx, "dlv_none", "failed", "30003"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown delivery: %v", err)
	}
	if _, err := db.DeliveryByProviderID(dlvCtx, "webhook", "none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown provider id: %v", err)
	}
}

// A channel that admits nothing now (RefuseChannel) is asked once per
// claim, and its backlog does not keep another channel's job from being
// claimed.
func TestDeliveryClaimPassesOverARefusedChannel(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	var ins []store.Ingest
	for i := range 7000 {
		ins = append(ins, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "sms", To: fmt.Sprintf("+4477009%05d", i)}}})
	}
	if _, err := db.IngestBulk(dlvCtx, ins); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Millisecond)
	hook := ingestTo(t, db, "webhook", "ops")
	asked := map[string]int{}
	got, err := db.ClaimAdmitting(dlvCtx, 10, time.Minute, func(d *store.Delivery) store.Admission {
		asked[d.Channel]++
		if d.Channel == "sms" {
			return store.RefuseChannel
		}
		return store.Admit
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dlvIDs(got), []string{hook}) || asked["sms"] != 1 {
		t.Fatalf("claimed %v, sms asked %d times; want the webhook, sms asked once", dlvIDs(got), asked["sms"])
	}
	// Refused per recipient instead, the backlog is walked (in pages) up to
	// the scan limit, and still does not stop the other channel.
	c.Advance(time.Millisecond)
	hook2 := ingestTo(t, db, "webhook", "ops")
	asked = map[string]int{}
	got, err = db.ClaimAdmitting(dlvCtx, 10, time.Minute, func(d *store.Delivery) store.Admission {
		asked[d.Channel]++
		if d.Channel == "sms" {
			return store.RefuseRecipient
		}
		return store.Admit
	})
	if err != nil || !slices.Equal(dlvIDs(got), []string{hook2}) {
		t.Fatalf("claimed %v, %v; want the second webhook", dlvIDs(got), err)
	}
	if want := 64*10 + 4096; asked["sms"] != want {
		t.Fatalf("sms asked %d times; want the scan limit %d", asked["sms"], want)
	}
}

// Jobs of several channels are claimed earliest first, across channels.
func TestDeliveryClaimTakesChannelsInDueOrder(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	var want []string
	for i, ch := range []string{"email", "sms", "email", "webhook", "sms"} {
		want = append(want, ingestTo(t, db, ch, fmt.Sprintf("r%d", i)))
		c.Advance(time.Millisecond)
	}
	got, err := db.Claim(dlvCtx, 3, time.Minute, nil)
	if err != nil || !slices.Equal(dlvIDs(got), want[:3]) {
		t.Fatalf("first claim %v, %v; want %v", dlvIDs(got), err, want[:3])
	}
	got, err = db.Claim(dlvCtx, 3, time.Minute, nil)
	if err != nil || !slices.Equal(dlvIDs(got), want[3:]) {
		t.Fatalf("second claim %v, %v; want %v", dlvIDs(got), err, want[3:])
	}
	if t0, ok := db.NextDue(); ok {
		t.Fatalf("NextDue %v with nothing due", t0)
	}
}

// TestDeliveryBulkScale10k loads 10,000 queued deliveries with IngestBulk,
// then claims and records them all, as the embedded store's scale test.
func TestDeliveryBulkScale10k(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	const n, batch = 10000, 1000
	db := open(t, nil)
	env := json.RawMessage(`{"role":"agent","parts":[{"text":"scale","metadata":{"partType":"response"}}]}`)
	start := time.Now()
	for i := 0; i < n; i += batch {
		ins := make([]store.Ingest, batch)
		for j := range ins {
			ins[j] = store.Ingest{Envelope: env, Source: "bulk", Deliveries: []store.NewDelivery{{Channel: "webhook", To: fmt.Sprintf("ep%d", (i+j)%7)}}}
		}
		res, err := db.IngestBulk(dlvCtx, ins)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != batch || len(res[0].Deliveries) != 1 {
			t.Fatalf("bulk ingest answered %d results", len(res))
		}
	}
	loadTook := time.Since(start)
	if c, err := db.CountByState(dlvCtx); err != nil || c[store.StateQueued] != n {
		t.Fatalf("queued %d, %v; want %d", c[store.StateQueued], err, n)
	}
	if err := db.checkDeliveries(dlvCtx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IngestBulk(dlvCtx, []store.Ingest{{Envelope: env, IdempotencyKey: "k"}}); err == nil {
		t.Error("bulk ingest accepted an idempotency key")
	}
	start = time.Now()
	var all []*store.Delivery
	for {
		ds, err := db.Claim(dlvCtx, 64, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		all = append(all, ds...)
	}
	took := time.Since(start)
	if len(all) != n {
		t.Fatalf("claimed %d of %d", len(all), n)
	}
	start = time.Now()
	work := make(chan *store.Delivery)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			var first error
			for d := range work {
				if _, err := db.Record(dlvCtx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent, Attempt: store.Attempt{At: time.Now(), Outcome: "sent"}}); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, d := range all {
		work <- d
	}
	close(work)
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	recTook := time.Since(start)
	if c, _ := db.CountByState(dlvCtx); c[store.StateSent] != n {
		t.Fatalf("sent %d of %d", c[store.StateSent], n)
	}
	if err := db.checkDeliveries(dlvCtx); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d in %s (%.0f/s); claimed all in %s (%.0f claims/s); recorded all in %s (%.0f records/s)",
		n, loadTook.Round(time.Millisecond), float64(n)/loadTook.Seconds(), took.Round(time.Millisecond), float64(n)/took.Seconds(),
		recTook.Round(time.Millisecond), float64(n)/recTook.Seconds())
}

func TestDeliveryConsoleQueries(t *testing.T) {
	c := fakeclock.New(time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC))
	db := openDlv(t, c)
	env := json.RawMessage(`{"role":"agent","parts":[],"meta":{}}`)
	var ids []string
	for i, ch := range []string{"email", "webhook", "webhook", "sms", "webhook"} {
		res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: env, Agent: []string{"a", "b"}[i%2], Deliveries: []store.NewDelivery{{Channel: ch, To: "to-" + ch}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Deliveries[0].ID)
		c.Advance(10 * time.Minute)
	}
	// The three webhooks die, at 01:50, then 02:00 (after another hour).
	claimed, err := db.Claim(dlvCtx, 10, time.Minute, func(d *store.Delivery) bool { return d.Channel == "webhook" })
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim %d %v", len(claimed), err)
	}
	for i, d := range claimed {
		if i == 2 {
			c.Advance(61 * time.Minute)
		}
		if _, err := db.Record(dlvCtx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateDead, Error: "410", Attempt: store.Attempt{N: 1, At: c.Now(), Outcome: "dead"}}); err != nil {
			t.Fatal(err)
		}
	}
	got, more, err := db.QueryDeliveries(dlvCtx, store.DeliveryFilter{}, 2)
	if err != nil || !more || len(got) != 2 || got[0].ID != ids[4] || got[1].ID != ids[3] {
		t.Fatalf("first page: %v %v %v", ids, got, err)
	}
	got, more, _ = db.QueryDeliveries(dlvCtx, store.DeliveryFilter{Before: got[1].ID}, 10)
	if more || len(got) != 3 || got[0].ID != ids[2] || got[2].ID != ids[0] {
		t.Fatalf("second page: %v", got)
	}
	got, _, _ = db.QueryDeliveries(dlvCtx, store.DeliveryFilter{Channel: "webhook", Agent: "a", State: store.StateDead}, 10)
	if len(got) != 2 || got[0].ID != ids[4] || got[1].ID != ids[2] {
		t.Fatalf("webhook, agent a, dead: %v", got)
	}
	start := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	got, _, _ = db.QueryDeliveries(dlvCtx, store.DeliveryFilter{Since: start.Add(10 * time.Minute), Until: start.Add(30 * time.Minute), To: "TO-WEB"}, 10)
	if len(got) != 2 || got[0].ID != ids[2] || got[1].ID != ids[1] {
		t.Fatalf("time window: %v", got)
	}
	st, err := db.DeliveryStats(dlvCtx, c.Now())
	if err != nil || st.Dead != 3 || st.Dead1h != 1 || st.Dead24h != 3 || st.ByState[store.StateQueued] != 2 || st.Created1h != 0 || st.Created24 != 5 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if len(st.Channels) != 3 || st.Channels[2].Channel != "webhook" || st.Channels[2].Dead24h != 3 || st.Channels[2].LastError != "410" {
		t.Fatalf("channel stats %+v", st.Channels)
	}
	dead, _, _ := db.DeadSince(dlvCtx, start.Add(55*time.Minute), "")
	if len(dead) != 1 {
		t.Fatalf("dead since: %v", dead)
	}
	if n, err := db.RetryDeadSince(dlvCtx, start.Add(55*time.Minute), "webhook"); n != 1 || err != nil {
		t.Fatalf("retry: %d %v", n, err)
	}
	if dead, _, _ := db.DeadSince(dlvCtx, start, "webhook"); len(dead) != 2 {
		t.Fatalf("after the retry: %v", dead)
	}
	if dead, _, _ := db.DeadSince(dlvCtx, start, "email"); len(dead) != 0 {
		t.Fatalf("dead email: %v", dead)
	}
}

func TestDeliveryPruneRemovesOnlyOldFinishedWork(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	old := ingestN(t, db, 2) // will be sent and dead
	oldPending := ingestN(t, db, 1)
	oldHeld, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "h", Held: true}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := db.Claim(dlvCtx, 10, time.Minute, nil)
	for _, j := range jobs {
		switch j.ID {
		case old.Deliveries[0].ID:
			db.Record(dlvCtx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SMold", Attempt: store.Attempt{Outcome: "sent"}})
		case old.Deliveries[1].ID:
			db.Record(dlvCtx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateDead, DeadReason: "410"})
		default: // oldPending stays retrying
			db.Record(dlvCtx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: c.Now().Add(time.Hour)})
		}
	}
	c.Advance(8 * 24 * time.Hour)
	fresh := ingestN(t, db, 1)
	n, err := db.Prune(dlvCtx, c.Now().Add(-7*24*time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the finished old envelope", n, err)
	}
	if _, err := db.Envelope(dlvCtx, old.EnvelopeID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old finished envelope still there: %v", err)
	}
	if _, err := db.Delivery(dlvCtx, old.Deliveries[1].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delivery of a pruned envelope still there: %v", err)
	}
	if _, err := db.DeliveryByProviderID(dlvCtx, "webhook", "SMold"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("provider id of a pruned delivery still resolves: %v", err)
	}
	if atts, _ := db.Attempts(dlvCtx, old.Deliveries[0].ID); len(atts) != 0 {
		t.Errorf("%d attempts of a pruned delivery left", len(atts))
	}
	for _, keep := range []string{oldPending.EnvelopeID, oldHeld.EnvelopeID, fresh.EnvelopeID} {
		if _, err := db.Envelope(dlvCtx, keep); err != nil {
			t.Errorf("envelope %s removed: %v", keep, err)
		}
	}
	if n, _ := db.Prune(dlvCtx, c.Now().Add(-7*24*time.Hour), 100); n != 0 {
		t.Errorf("second prune removed %d", n)
	}
}

// An idempotency key whose envelope retention already removed is expired
// with it: the same key is a new request, not an error.
func TestDeliveryReplayAfterItsEnvelopeWasPruned(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	in := store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("b"))}
	first, err := db.Ingest(dlvCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := db.Claim(dlvCtx, 10, time.Minute, nil)
	db.Record(dlvCtx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent})
	c.Advance(8 * 24 * time.Hour)
	if n, _ := db.Prune(dlvCtx, c.Now().Add(-7*24*time.Hour), 100); n != 1 {
		t.Fatalf("pruned %d envelopes", n)
	}
	again, err := db.Ingest(dlvCtx, in)
	if err != nil || again.Replayed || again.EnvelopeID == first.EnvelopeID {
		t.Fatalf("replay after the envelope was pruned: %+v, %v", again, err)
	}
	replay, err := db.Ingest(dlvCtx, in)
	if err != nil || !replay.Replayed || replay.EnvelopeID != again.EnvelopeID {
		t.Fatalf("replay of the new request: %+v, %v", replay, err)
	}
}

// ingestAt ingests an envelope with one webhook delivery to `to`, first due
// at notBefore, a millisecond after the previous one.
func ingestAt(t *testing.T, db *DB, c *fakeclock.Clock, to string, notBefore time.Time) *store.IngestResult {
	t.Helper()
	c.Advance(time.Millisecond)
	res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: to}}, NotBefore: notBefore})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// pruneUntilZero calls Prune as beachd's retention loop does, until it
// returns 0, and returns how many envelopes it removed.
func pruneUntilZero(t *testing.T, db *DB, before time.Time, max int) int {
	t.Helper()
	total := 0
	for calls := 1; ; calls++ {
		n, err := db.Prune(dlvCtx, before, max)
		if err != nil {
			t.Fatalf("prune call %d: %v", calls, err)
		}
		if n == 0 {
			return total
		}
		total += n
		if calls == 20 {
			t.Fatalf("prune still removing envelopes after %d calls", calls)
		}
	}
}

// However many unfinished envelopes are older, Prune reaches the finished
// ones behind them, and an envelope that finishes later is reached in the
// next retention cycle.
func TestDeliveryPruneReachesFinishedWorkBehindUnfinished(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	const max = 2
	later := c.Now().Add(24 * time.Hour)
	var stuck []*store.IngestResult
	for i := range 100 {
		stuck = append(stuck, ingestAt(t, db, c, fmt.Sprintf("ep%d", i), later))
	}
	done := []*store.IngestResult{ingestAt(t, db, c, "done0", time.Time{}), ingestAt(t, db, c, "done1", time.Time{})}
	for i := range 5 {
		stuck = append(stuck, ingestAt(t, db, c, fmt.Sprintf("tail%d", i), later))
	}
	jobs, err := db.Claim(dlvCtx, 10, time.Minute, nil)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d jobs, %v; want the 2 due ones", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := db.Record(dlvCtx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(8 * 24 * time.Hour)
	before := c.Now().Add(-7 * 24 * time.Hour)
	if n, err := db.Prune(dlvCtx, before, max); err != nil || n != 2 {
		t.Fatalf("prune removed %d, %v; want the 2 finished envelopes behind 100 unfinished ones", n, err)
	}
	for _, r := range done {
		if _, err := db.Envelope(dlvCtx, r.EnvelopeID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("finished envelope %s behind unfinished ones not pruned: %v", r.EnvelopeID, err)
		}
	}
	first := stuck[0].Deliveries[0].ID
	jobs, err = db.Claim(dlvCtx, 1, time.Minute, func(d *store.Delivery) bool { return d.ID == first })
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim %s: %d jobs, %v", first, len(jobs), err)
	}
	if _, err := db.Record(dlvCtx, first, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
		t.Fatal(err)
	}
	if n := pruneUntilZero(t, db, before, max); n != 1 {
		t.Fatalf("retention cycle removed %d envelopes; want the 1 that finished", n)
	}
	for _, r := range stuck[1:] {
		if _, err := db.Envelope(dlvCtx, r.EnvelopeID); err != nil {
			t.Fatalf("unfinished envelope %s removed: %v", r.EnvelopeID, err)
		}
	}
}

// Prune keeps an envelope whose dead delivery an operator retries while
// the prune looks at it.
func TestDeliveryPruneKeepsWhatARetryRevived(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	res := ingestN(t, db, 1)
	jobs, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	if _, err := db.Record(dlvCtx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateDead}); err != nil {
		t.Fatal(err)
	}
	c.Advance(8 * 24 * time.Hour)
	// The prune has chosen the envelope; the retry comes before it locks.
	tx, err := db.pool.Begin(dlvCtx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(dlvCtx)
	if _, err := db.Retry(dlvCtx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := db.pruneEnvelopes(dlvCtx, tx, []string{res.EnvelopeID}); err != nil || n != 0 {
		t.Fatalf("pruned %d, %v; want the revived envelope kept", n, err)
	}
}

// Every provider id a delivery was given finds it until it is pruned;
// pruning the delivery removes them all.
func TestDeliveryProviderIDsLastAsLongAsTheirDelivery(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "sms", To: "+447700900001"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Deliveries[0].ID
	jobs, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	if _, err := db.Record(dlvCtx, id, jobs[0].LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: c.Now(),
		ProviderID: "SMfirst", MaybeSent: true, Attempt: store.Attempt{Outcome: "retry"}}); err != nil {
		t.Fatal(err)
	}
	jobs, _ = db.Claim(dlvCtx, 1, time.Minute, nil)
	receipt := `{"data":{"sid":"SMsecond"},"meta":{"source":"twilio","sid":"SMsecond","parts":["SMsecond","SMthird"]}}`
	if _, err := db.Record(dlvCtx, id, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SMsecond",
		Attempt: store.Attempt{Outcome: "sent", Receipt: json.RawMessage(receipt)}}); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"SMfirst", "SMsecond", "SMthird"} {
		if d, err := db.DeliveryByProviderID(dlvCtx, "sms", sid); err != nil || d.ID != id {
			t.Errorf("provider id %s finds %v, %v; want delivery %s", sid, d, err, id)
		}
	}
	if atts, _ := db.Attempts(dlvCtx, id); len(atts) != 2 || string(atts[1].Receipt) != receipt {
		t.Errorf("attempts %+v; want the receipt as recorded", atts)
	}
	c.Advance(8 * 24 * time.Hour)
	if n, err := db.Prune(dlvCtx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	var left int
	if err := db.pool.QueryRow(dlvCtx, `SELECT count(*) FROM provider_ids`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d provider-id entries outlived their pruned delivery, %v", left, err)
	}
}

// A provider id can recur: it finds its latest delivery, and pruning an
// older delivery that had it leaves the newer one findable.
func TestDeliveryPruneKeepsAProviderIDTakenOverByALaterDelivery(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	send := func() string {
		t.Helper()
		res := ingestN(t, db, 1)
		jobs, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
		if _, err := db.Record(dlvCtx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "4Xq1kT0Bz"}); err != nil {
			t.Fatal(err)
		}
		return res.Deliveries[0].ID
	}
	send()
	c.Advance(8 * 24 * time.Hour)
	newer := send()
	if n, err := db.Prune(dlvCtx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if d, err := db.DeliveryByProviderID(dlvCtx, "webhook", "4Xq1kT0Bz"); err != nil || d.ID != newer {
		t.Errorf("reused provider id finds %v, %v after the older delivery was pruned; want %s", d, err, newer)
	}
}

// Work made due wakes the replicas.
func TestDeliveryIngestWakesReplicas(t *testing.T) {
	c := dlvClock()
	rs := openReplicas(t, c, 2)
	deadline := time.After(10 * time.Second)
	for {
		ingestN(t, rs[0], 1) // the listener may not have subscribed yet
		select {
		case got := <-rs[1].Wakeups():
			if got != store.WakeDeliveries {
				t.Fatalf("wake-up %q", got)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("an ingest woke no other replica")
		}
	}
}

// Times beyond what nanoseconds reach are kept in order: a job due in the
// year 3000 is not due now, and a filter bound that far selects everything.
func TestDeliveryFarTimes(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	ingestN(t, db, 1)
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: far}); err != nil {
		t.Fatal(err)
	}
	if again, _ := db.Claim(dlvCtx, 1, time.Minute, nil); len(again) != 0 {
		t.Fatal("a job due in the year 3000 was claimed now")
	}
	if n, err := db.RequeueExpired(dlvCtx, far); err != nil || n != 0 {
		t.Fatalf("requeue with a far bound: %d, %v", n, err)
	}
	if ds, _, err := db.QueryDeliveries(dlvCtx, store.DeliveryFilter{Since: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), Until: far}, 10); err != nil || len(ds) != 1 {
		t.Fatalf("query between far bounds: %d, %v", len(ds), err)
	}
}

// The invariant check finds a row whose columns disagree with its record.
func TestDeliveryCheckFindsRowsThatDisagree(t *testing.T) {
	db := open(t, dlvClock().Now)
	id := ingestN(t, db, 1).Deliveries[0].ID
	for _, damage := range []string{
		`UPDATE deliveries SET due_ns = due_ns + 1 WHERE id = $1`,
		`UPDATE deliveries SET doc = jsonb_set(doc::jsonb, '{state}', '"sent"')::json WHERE id = $1`,
		`UPDATE deliveries SET recipient = 'someone else' WHERE id = $1`,
	} {
		if _, err := db.pool.Exec(dlvCtx, damage, id); err != nil {
			t.Fatal(err)
		}
		if err := db.checkDeliveries(dlvCtx); err == nil || !strings.Contains(err.Error(), id) {
			t.Errorf("after %s: check = %v; want it to name %s", damage, err, id)
		}
		if _, err := db.pool.Exec(dlvCtx, `DELETE FROM envelopes`); err != nil {
			t.Fatal(err)
		}
		id = ingestN(t, db, 1).Deliveries[0].ID
	}
	if err := db.checkDeliveries(dlvCtx); err != nil {
		t.Fatal(err)
	}
}

// An attempt's error may hold a NUL (a peer's reply): the record and the
// attempt keep it as it was.
func TestDeliveryRecordsAnErrorWithANUL(t *testing.T) {
	db := openDlv(t, dlvClock())
	ingestN(t, db, 1)
	got, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	d, err := db.Record(dlvCtx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateDead, Error: "550 \x00bad", DeadReason: "550\x00",
		Attempt: store.Attempt{Outcome: "dead", Error: "550 \x00bad"}})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.Delivery(dlvCtx, d.ID)
	if err != nil || stored.LastError != "550 \x00bad" || stored.DeadReason != "550\x00" {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	if atts, err := db.Attempts(dlvCtx, d.ID); err != nil || len(atts) != 1 || atts[0].Error != "550 \x00bad" {
		t.Fatalf("attempts %+v, %v", atts, err)
	}
}

// Outcomes recorded at the same time are committed in groups, and each
// keeps its own result: a job whose lease is no longer the caller's gets
// store.ErrLeaseLost while the others of its group are recorded; each
// recorded one has its own state, due time and attempt (a group's records
// and attempts are written by one statement each).
func TestDeliveryRecordGroups(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	const n = 200
	jobs := ingestAndClaim(t, db, n)
	stale := map[string]bool{}
	for i := 0; i < n; i += 10 {
		stale[jobs[i].ID] = true
	}
	errs := recordAll(db, jobs, stale, func(i int, j *store.Delivery) store.Outcome { return groupOutcome(i, j.ID, c.Now()) })
	retrying := 0
	for i, j := range jobs {
		d, atts, recorded := recordedJob(t, db, j.ID, errs[i], stale[j.ID])
		if !recorded {
			continue
		}
		want := groupOutcome(i, j.ID, c.Now())
		if errs[i] != nil || d.State != want.State || d.ProviderID != "P"+j.ID || d.LastError != want.Error ||
			!d.NextAttemptAt.Equal(want.NextAttemptAt) || !d.LeaseUntil.IsZero() {
			t.Errorf("%s: %v, state %s, provider id %q, error %q, next %v, lease %v; want %+v", j.ID, errs[i], d.State, d.ProviderID,
				d.LastError, d.NextAttemptAt, d.LeaseUntil, want)
		}
		if len(atts) != 1 || atts[0].N != 1 || atts[0].Outcome != want.Attempt.Outcome || atts[0].Error != want.Attempt.Error {
			t.Errorf("%s: attempts %+v; want %+v", j.ID, atts, want.Attempt)
		}
		if want.State == store.StateRetrying {
			retrying++
		}
		if f, err := db.DeliveryByProviderID(dlvCtx, "webhook", "P"+j.ID); err != nil || f.ID != j.ID {
			t.Errorf("provider id of %s finds %v, %v", j.ID, f, err)
		}
	}
	// The stale ones are still leased by their holder and can be recorded
	// with their true lease.
	for _, j := range jobs {
		if stale[j.ID] {
			if _, err := db.Record(dlvCtx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateSent, Attempt: store.Attempt{N: 1, At: c.Now(), Outcome: "sent"}}); err != nil {
				t.Errorf("%s with its lease: %v", j.ID, err)
			}
		}
	}
	// The retrying ones, and only they, are due again at their time.
	if again, err := db.Claim(dlvCtx, n, time.Minute, nil); err != nil || len(again) != 0 {
		t.Fatalf("claimed %d before the retries were due, %v", len(again), err)
	}
	c.Advance(time.Minute)
	if again, err := db.Claim(dlvCtx, n, time.Minute, nil); err != nil || len(again) != retrying {
		t.Fatalf("claimed %d once due, %v; want the %d retrying", len(again), err, retrying)
	}
}

// len is how many claimed records are kept.
func (c *claimedDocs) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// ingestAndClaim ingests n deliveries and claims them all, leased for a
// minute.
func ingestAndClaim(t *testing.T, db *DB, n int) []*store.Delivery {
	t.Helper()
	ingestN(t, db, n)
	jobs, err := db.Claim(dlvCtx, n, time.Minute, nil)
	if err != nil || len(jobs) != n {
		t.Fatalf("claimed %d, %v", len(jobs), err)
	}
	return jobs
}

// recordAll records outcome(i, job) for every job at once, so that the
// outcomes come in groups; a stale job's is recorded with another holder's
// lease. It answers each Record call's error.
func recordAll(db *DB, jobs []*store.Delivery, stale map[string]bool, outcome func(int, *store.Delivery) store.Outcome) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease := j.LeaseUntil
			if stale[j.ID] {
				lease = lease.Add(-time.Second) // another holder's lease
			}
			_, errs[i] = db.Record(dlvCtx, j.ID, lease, outcome(i, j))
		}()
	}
	wg.Wait()
	return errs
}

// recordedJob reads job id's record and attempts after its Record call
// answered err. A job recorded with a stale lease must have answered
// ErrLeaseLost and be unchanged (recorded false); else recorded is true
// and the caller checks the rest.
func recordedJob(t *testing.T, db *DB, id string, err error, stale bool) (d *store.Delivery, atts []store.Attempt, recorded bool) {
	t.Helper()
	d, derr := db.Delivery(dlvCtx, id)
	if derr != nil {
		t.Fatal(derr)
	}
	atts, aerr := db.Attempts(dlvCtx, id)
	if aerr != nil {
		t.Fatal(aerr)
	}
	if stale {
		if !errors.Is(err, store.ErrLeaseLost) || d.State != store.StateSending || len(atts) != 0 || d.Attempts != 0 {
			t.Errorf("%s with a stale lease: %v, state %s, %d attempts; want ErrLeaseLost and nothing recorded", id, err, d.State, len(atts))
		}
		return d, atts, false
	}
	return d, atts, true
}

// groupOutcome is the i-th outcome of TestDeliveryRecordGroups: sent,
// retrying within a minute or dead, in turn.
func groupOutcome(i int, id string, now time.Time) store.Outcome {
	o := store.Outcome{ProviderID: "P" + id, Attempt: store.Attempt{N: 1, At: now}}
	switch i % 3 {
	case 0:
		o.State, o.Attempt.Outcome = store.StateSent, "sent"
	case 1:
		o.State, o.NextAttemptAt, o.Error = store.StateRetrying, now.Add(time.Duration(1+i%50)*time.Second), "503 later "+id
		o.Attempt.Outcome, o.Attempt.Error = "retry", o.Error
	default:
		o.State, o.Error, o.DeadReason = store.StateDead, "410 gone "+id, "gone"
		o.Attempt.Outcome, o.Attempt.Error = "dead", o.Error
	}
	return o
}

// Record after Close answers an error at once.
func TestDeliveryRecordAfterClose(t *testing.T) {
	c := dlvClock()
	db, err := Open(dlvCtx, pgtest.DSN(t), Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	ingestN(t, db, 1)
	jobs, _ := db.Claim(dlvCtx, 1, time.Minute, nil)
	db.Close()
	if _, err := db.Record(dlvCtx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent}); err == nil {
		t.Fatal("Record after Close succeeded")
	}
}

// refuseBoom makes the database refuse a delivery to the recipient "boom"
// ("refused by the test").
func refuseBoom(t *testing.T, db *DB) {
	t.Helper()
	if _, err := db.pool.Exec(dlvCtx, `CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.recipient = 'boom' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_boom BEFORE INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION refuse_boom()`); err != nil {
		t.Fatal(err)
	}
}

// A plain ingest (no key, approvals or conversation) goes without BEGIN
// and COMMIT, and is still all or nothing: when the deliveries' insert
// fails, the envelope's is not kept either.
func TestPlainIngestIsAllOrNothing(t *testing.T) {
	db := open(t, dlvClock().Now)
	refuseBoom(t, db)
	in := store.Ingest{Envelope: []byte(`{"role":"agent"}`), Source: "api",
		Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ok"}, {Channel: "webhook", To: "boom"}}}
	if !plainIngest(&in) {
		t.Fatal("not a plain ingest")
	}
	if _, err := db.Ingest(dlvCtx, in); err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("ingest: %v", err)
	}
	var envs, dels int
	if err := db.pool.QueryRow(dlvCtx, `SELECT (SELECT count(*) FROM envelopes), (SELECT count(*) FROM deliveries)`).Scan(&envs, &dels); err != nil {
		t.Fatal(err)
	}
	if envs != 0 || dels != 0 {
		t.Fatalf("after a failed ingest: %d envelopes, %d deliveries stored", envs, dels)
	}
	in.Deliveries[1].To = "fine"
	res, err := db.Ingest(dlvCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := db.Delivery(dlvCtx, res.Deliveries[1].ID); err != nil || d.To != "fine" || d.EnvelopeID != res.EnvelopeID {
		t.Fatalf("stored %+v, %v", d, err)
	}
}

// TestPlainIngestsCommitInGroups: the plain ingests waiting together are
// one transaction; an ingest the database refuses fails alone, and each of
// the others is stored whole.
func TestPlainIngestsCommitInGroups(t *testing.T) {
	db := open(t, dlvClock().Now)
	refuseBoom(t, db)
	group := func(n int, boom ...int) []*ingestReq {
		rs := make([]*ingestReq, n)
		for i := range rs {
			in := &store.Ingest{Envelope: []byte(`{"role":"agent"}`), Source: "api",
				Deliveries: []store.NewDelivery{{Channel: "webhook", To: fmt.Sprintf("r%d", i)}, {Channel: "email", To: "a@example.org"}}}
			if slices.Contains(boom, i) {
				in.Deliveries[1].To = "boom"
			}
			rs[i] = &ingestReq{w: db.newIngestWrite(in)}
		}
		return rs
	}
	// transactions counts the transactions that wrote the envelopes of rs.
	transactions := func(rs []*ingestReq) int {
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.w.envID)
		}
		var n int
		if err := db.pool.QueryRow(dlvCtx, `SELECT count(DISTINCT xmin::text) FROM envelopes WHERE id = ANY($1)`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rs := group(20)
	db.ingestGroup(rs)
	for i, r := range rs {
		if r.err != nil || r.res == nil || r.res.EnvelopeID != r.w.envID || len(r.res.Deliveries) != 2 {
			t.Fatalf("ingest %d of a group: %+v, %v", i, r.res, r.err)
		}
	}
	if n := transactions(rs); n != 1 {
		t.Fatalf("a group of 20 ingests written in %d transactions, want 1", n)
	}
	rs = group(20, 7, 13)
	db.ingestGroup(rs)
	var stored []*ingestReq
	for i, r := range rs {
		if i == 7 || i == 13 {
			if r.err == nil || !strings.Contains(r.err.Error(), "refused by the test") || r.res != nil {
				t.Fatalf("ingest %d (refused): %+v, %v", i, r.res, r.err)
			}
			continue
		}
		if r.err != nil || r.res == nil {
			t.Fatalf("ingest %d beside refused ones: %v", i, r.err)
		}
		stored = append(stored, r)
		for _, d := range r.res.Deliveries {
			if got, err := db.Delivery(dlvCtx, d.ID); err != nil || got.EnvelopeID != r.w.envID {
				t.Fatalf("ingest %d: delivery %s: %+v, %v", i, d.ID, got, err)
			}
		}
	}
	var envs, dels int
	if err := db.pool.QueryRow(dlvCtx, `SELECT (SELECT count(*) FROM envelopes), (SELECT count(*) FROM deliveries)`).Scan(&envs, &dels); err != nil {
		t.Fatal(err)
	}
	if envs != 38 || dels != 76 {
		t.Fatalf("after 40 ingests of which 2 refused: %d envelopes, %d deliveries, want 38 and 76", envs, dels)
	}
	if n := transactions(stored); n != 18 {
		t.Fatalf("the 18 ingests beside refused ones written in %d transactions, want 18 (one each, after the group failed)", n)
	}

	// Through Ingest, from many callers at once: every one stored.
	var wg sync.WaitGroup
	ids := make([]string, 64)
	errs := make([]error, 64)
	for i := range 64 {
		wg.Go(func() {
			res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Source: "api",
				Deliveries: []store.NewDelivery{{Channel: "webhook", To: fmt.Sprintf("c%d", i)}}})
			if err == nil {
				ids[i] = res.Deliveries[0].ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range 64 {
		if errs[i] != nil {
			t.Fatalf("concurrent ingest %d: %v", i, errs[i])
		}
		if d, err := db.Delivery(dlvCtx, ids[i]); err != nil || d.To != fmt.Sprintf("c%d", i) {
			t.Fatalf("concurrent ingest %d: %+v, %v", i, d, err)
		}
	}
}

// TestKeyedIngestsCommitInGroups: ingests with fresh idempotency keys are
// committed in one group as plain ones are; one whose key is already held,
// by a stored ingest or by another of its group, stores nothing there and
// is answered by its caller: a replay of the first, or a conflict.
func TestKeyedIngestsCommitInGroups(t *testing.T) {
	db := open(t, dlvClock().Now)
	keyed := func(key, body string) *store.Ingest {
		return &store.Ingest{Envelope: []byte(body), Source: "api", IdempotencyKey: key, RequestHash: store.HashRequest([]byte(body)),
			Deliveries: []store.NewDelivery{{Channel: "webhook", To: "hook-" + key}}}
	}
	held, err := db.Ingest(dlvCtx, *keyed("held", `{"role":"agent"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*ingestReq
	for i := range 10 {
		rs = append(rs, &ingestReq{w: db.newIngestWrite(keyed(fmt.Sprintf("k%02d", 9-i), `{"role":"agent"}`))})
	}
	rs = append(rs, &ingestReq{w: db.newIngestWrite(keyed("held", `{"role":"agent"}`))}, // held by a stored ingest
		&ingestReq{w: db.newIngestWrite(keyed("k03", `{"role":"agent"}`))}, // held by ingest 6 of this group
		&ingestReq{w: db.newIngestWrite(&store.Ingest{Envelope: []byte(`{}`), Source: "api",
			Deliveries: []store.NewDelivery{{Channel: "webhook", To: "plain"}}})})
	db.ingestGroup(rs)
	var stored []string
	for i, r := range rs {
		switch {
		case i == 10 || i == 11:
			if r.res != nil || r.err != nil {
				t.Fatalf("ingest %d, its key already held: %+v, %v; want nothing stored and no error", i, r.res, r.err)
			}
			var n int
			if err := db.pool.QueryRow(dlvCtx, `SELECT (SELECT count(*) FROM envelopes WHERE id = $1) + (SELECT count(*) FROM deliveries WHERE envelope_id = $1)`, r.w.envID).Scan(&n); err != nil || n != 0 {
				t.Fatalf("ingest %d, its key already held: %d rows stored (%v)", i, n, err)
			}
		case r.err != nil || r.res == nil || r.res.EnvelopeID != r.w.envID:
			t.Fatalf("ingest %d of a group: %+v, %v", i, r.res, r.err)
		default:
			stored = append(stored, r.w.envID)
			if d, err := db.Delivery(dlvCtx, r.res.Deliveries[0].ID); err != nil || d.EnvelopeID != r.w.envID {
				t.Fatalf("ingest %d: %+v, %v", i, d, err)
			}
		}
	}
	var txs int
	if err := db.pool.QueryRow(dlvCtx, `SELECT count(DISTINCT xmin::text) FROM envelopes WHERE id = ANY($1)`, stored).Scan(&txs); err != nil || txs != 1 {
		t.Fatalf("the 11 new ingests of a group written in %d transactions (%v), want 1", txs, err)
	}
	var keys int
	if err := db.pool.QueryRow(dlvCtx, `SELECT count(*) FROM idempotency WHERE key LIKE 'k%' AND envelope_id = ANY($1)`, stored).Scan(&keys); err != nil || keys != 10 {
		t.Fatalf("%d keys name the group's envelopes (%v), want 10", keys, err)
	}

	// Through Ingest: the held key replays the first answer, another body
	// under it is refused, and a key taken by the group replays it.
	again, err := db.Ingest(dlvCtx, *keyed("held", `{"role":"agent"}`))
	if err != nil || !again.Replayed || again.EnvelopeID != held.EnvelopeID {
		t.Fatalf("the held key again: %+v, %v; want a replay of %s", again, err, held.EnvelopeID)
	}
	if _, err := db.Ingest(dlvCtx, *keyed("held", `{"role":"user"}`)); !errors.Is(err, store.ErrIdempotencyConflict) {
		t.Fatalf("the held key with another body: %v", err)
	}
	if again, err := db.Ingest(dlvCtx, *keyed("k03", `{"role":"agent"}`)); err != nil || !again.Replayed || again.EnvelopeID != rs[6].w.envID {
		t.Fatalf("k03 again: %+v, %v; want a replay of %s", again, err, rs[6].w.envID)
	}

	// Many callers at once, four a key: one envelope a key, and every
	// caller of a key answered with it.
	const keysN, per = 16, 4
	envs := make([]string, keysN*per)
	errs := make([]error, keysN*per)
	var wg sync.WaitGroup
	for i := range keysN * per {
		wg.Go(func() {
			res, err := db.Ingest(dlvCtx, *keyed(fmt.Sprintf("c%02d", i%keysN), `{"role":"agent"}`))
			if err == nil {
				envs[i] = res.EnvelopeID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range keysN * per {
		if errs[i] != nil || envs[i] != envs[i%keysN] {
			t.Fatalf("caller %d of key c%02d: %s, %v; the first caller got %s", i, i%keysN, envs[i], errs[i], envs[i%keysN])
		}
	}
	var n int
	if err := db.pool.QueryRow(dlvCtx, `SELECT count(*) FROM envelopes e JOIN idempotency i ON i.envelope_id = e.id WHERE i.key LIKE 'c%'`).Scan(&n); err != nil || n != keysN {
		t.Fatalf("%d envelopes for %d keys (%v)", n, keysN, err)
	}
	if err := db.pool.QueryRow(dlvCtx, `SELECT count(*) FROM deliveries WHERE recipient LIKE 'hook-c%'`).Scan(&n); err != nil || n != keysN {
		t.Fatalf("%d deliveries for %d keys (%v)", n, keysN, err)
	}
}

// The outcomes of jobs claimed here are written in one statement from the
// records the claim read (recordClaimed), except where that would be
// wrong: a lease that is no longer the caller's (ErrLeaseLost, nothing
// written), a record changed since the claim (a provider's status, kept),
// an outcome with provider ids. Concurrent callers, so that the outcomes
// come in groups.
func TestDeliveryOutcomesOfClaimsInOneStatement(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	const n = 120
	jobs := ingestAndClaim(t, db, n)
	if got := db.claimed.len(); got != n {
		t.Fatalf("%d claimed records kept; want %d", got, n)
	}
	stale, status, pids := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, j := range jobs {
		switch i % 10 {
		case 0:
			stale[j.ID] = true
		case 3:
			status[j.ID] = true
			if _, err := db.SetProviderStatus(dlvCtx, j.ID, "delivered-"+j.ID, ""); err != nil {
				t.Fatal(err)
			}
		case 7:
			pids[j.ID] = true
		}
	}
	errs := recordAll(db, jobs, stale, func(i int, j *store.Delivery) store.Outcome {
		o := groupOutcome(i, j.ID, c.Now())
		if !pids[j.ID] {
			o.ProviderID = ""
		}
		return o
	})
	for i, j := range jobs {
		d, atts, recorded := recordedJob(t, db, j.ID, errs[i], stale[j.ID])
		if !recorded {
			continue
		}
		want := groupOutcome(i, j.ID, c.Now())
		if errs[i] != nil || d.State != want.State || d.LastError != want.Error || d.Attempts != 1 ||
			!d.NextAttemptAt.Equal(want.NextAttemptAt) || !d.LeaseUntil.IsZero() {
			t.Errorf("%s: %v, state %s, error %q, %d attempts, next %v, lease %v; want %+v", j.ID, errs[i], d.State,
				d.LastError, d.Attempts, d.NextAttemptAt, d.LeaseUntil, want)
		}
		if status[j.ID] != (d.ProviderStatus == "delivered-"+j.ID) {
			t.Errorf("%s: provider status %q", j.ID, d.ProviderStatus)
		}
		if pids[j.ID] != (d.ProviderID == "P"+j.ID) {
			t.Errorf("%s: provider id %q", j.ID, d.ProviderID)
		}
		if len(atts) != 1 || atts[0].N != 1 || atts[0].Outcome != want.Attempt.Outcome || atts[0].Error != want.Attempt.Error {
			t.Errorf("%s: attempts %+v; want %+v", j.ID, atts, want.Attempt)
		}
	}
	if got, want := db.claimed.written.Load(), int64(n-len(stale)-len(status)-len(pids)); got != want {
		t.Errorf("%d outcomes written in one statement; want %d (every one but the stale, the changed and those with provider ids)", got, want)
	}
	if got := db.claimed.len(); got != 0 {
		t.Errorf("%d claimed records still kept after every outcome", got)
	}
	// A delivery an ingest hands off is kept as a claim keeps one, and its
	// outcome is written in one statement too.
	before := db.claimed.written.Load()
	lease := c.Now().Add(time.Minute)
	res, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{"role":"agent"}`),
		Deliveries: []store.NewDelivery{{Channel: "webhook", To: "handed", LeaseUntil: lease}}})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Deliveries[0]
	if d, err := db.Record(dlvCtx, h.ID, lease, store.Outcome{State: store.StateSent, Attempt: store.Attempt{N: 1, At: c.Now(), Outcome: "sent"}}); err != nil || d.State != store.StateSent {
		t.Fatalf("record a handed-off delivery: %+v, %v", d, err)
	}
	if got := db.claimed.written.Load() - before; got != 1 {
		t.Errorf("handed-off delivery: %d outcomes written in one statement; want 1", got)
	}
	if d, err := db.Delivery(dlvCtx, h.ID); err != nil || d.State != store.StateSent || d.Attempts != 1 || !d.LeaseUntil.IsZero() {
		t.Errorf("handed-off delivery after its outcome: %+v, %v", d, err)
	}
	// A released job's record is dropped; claimed again, it is kept anew.
	ingestN(t, db, 1)
	again, err := db.Claim(dlvCtx, 1, time.Minute, nil)
	if err != nil || len(again) != 1 {
		t.Fatalf("claimed %d, %v", len(again), err)
	}
	if err := db.Release(dlvCtx, again[0].ID, again[0].LeaseUntil, c.Now()); err != nil {
		t.Fatal(err)
	}
	if got := db.claimed.len(); got != 0 {
		t.Errorf("%d claimed records kept after a release", got)
	}
}
