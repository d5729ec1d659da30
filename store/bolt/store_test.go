package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

func openTest(t testing.TB, path string, c *fakeclock.Clock) *DB {
	t.Helper()
	db, err := Open(path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if db.bolt != nil {
			if err := db.CheckInvariants(); err != nil && !errors.Is(err, bbolt.ErrDatabaseNotOpen) {
				t.Errorf("invariants: %v", err)
			}
			db.Close()
		}
	})
	return db
}

func newClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
}

var ctx = context.Background()

func ingestOne(t testing.TB, db *DB, n int) *store.IngestResult {
	t.Helper()
	var ds []store.NewDelivery
	for i := 0; i < n; i++ {
		ds = append(ds, store.NewDelivery{Channel: "webhook", To: fmt.Sprintf("ep%d", i)})
	}
	res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Deliveries: ds})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestStateMachine(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	res := ingestOne(t, db, 3)
	if len(res.Deliveries) != 3 {
		t.Fatalf("deliveries = %d", len(res.Deliveries))
	}
	got, err := db.Claim(ctx, 10, time.Minute, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	if again, _ := db.Claim(ctx, 10, time.Minute, nil); len(again) != 0 {
		t.Fatalf("claimed %d jobs twice", len(again))
	}
	// sent
	d0, err := db.Record(ctx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SM1", Attempt: store.Attempt{Outcome: "sent"}})
	if err != nil || d0.State != store.StateSent || d0.Attempts != 1 || d0.SentAt.IsZero() {
		t.Fatalf("sent: %+v, %v", d0, err)
	}
	if d, err := db.DeliveryByProviderID(ctx, "webhook", "SM1"); err != nil || d.ID != got[0].ID {
		t.Fatalf("by provider id: %v, %v", d, err)
	}
	// retrying, due in 5 minutes
	next := c.Now().Add(5 * time.Minute)
	if _, err := db.Record(ctx, got[1].ID, got[1].LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: next, Error: "503"}); err != nil {
		t.Fatal(err)
	}
	// dead
	if _, err := db.Record(ctx, got[2].ID, got[2].LeaseUntil, store.Outcome{State: store.StateDead, DeadReason: "410 gone"}); err != nil {
		t.Fatal(err)
	}
	if due, _ := db.Claim(ctx, 10, time.Minute, nil); len(due) != 0 {
		t.Fatalf("retrying job claimed before its time")
	}
	if at, ok := db.NextDue(); !ok || !at.Equal(next) {
		t.Fatalf("NextDue = %v %v, want %v", at, ok, next)
	}
	c.Advance(5 * time.Minute)
	due, _ := db.Claim(ctx, 10, time.Minute, nil)
	if len(due) != 1 || due[0].ID != got[1].ID || due[0].Attempts != 1 {
		t.Fatalf("due after wait = %+v", due)
	}
	if _, err := db.Record(ctx, due[0].ID, due[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
		t.Fatal(err)
	}
	dead, _ := db.ListDeliveries(ctx, store.StateDead, "", 10)
	if len(dead) != 1 || dead[0].DeadReason != "410 gone" {
		t.Fatalf("dead list = %+v", dead)
	}
	if _, err := db.Retry(ctx, got[0].ID); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("retry of a sent job: %v", err)
	}
	r, err := db.Retry(ctx, got[2].ID)
	if err != nil || r.State != store.StateQueued {
		t.Fatalf("retry dead: %+v %v", r, err)
	}
	counts, _ := db.CountByState(ctx)
	if counts[store.StateSent] != 2 || counts[store.StateQueued] != 1 || counts[store.StateDead] != 0 {
		t.Fatalf("counts = %v", counts)
	}
	atts, _ := db.Attempts(ctx, got[1].ID)
	if len(atts) != 2 || atts[0].N != 1 || atts[1].N != 2 {
		t.Fatalf("attempts = %+v", atts)
	}
}

func TestRecordAfterLeaseLost(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	ingestOne(t, db, 1)
	first, _ := db.Claim(ctx, 1, time.Minute, nil)
	c.Advance(2 * time.Minute)
	if n, err := db.RequeueExpired(ctx, c.Now()); err != nil || n != 1 {
		t.Fatalf("requeue = %d %v", n, err)
	}
	second, _ := db.Claim(ctx, 1, time.Minute, nil)
	if len(second) != 1 || !second[0].MaybeSent {
		t.Fatalf("re-claimed job should be marked maybe-sent: %+v", second)
	}
	if _, err := db.Record(ctx, first[0].ID, first[0].LeaseUntil, store.Outcome{State: store.StateSent}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale record: err = %v, want ErrLeaseLost", err)
	}
	if _, err := db.Record(ctx, second[0].ID, second[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
		t.Fatal(err)
	}
}

// A process that dies mid-send leaves jobs leased; the next
// process re-queues them all at start and nothing acknowledged is lost.
func TestCrashRecovery(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := Open(path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	res := ingestOne(t, db, 5)
	if _, err := db.Claim(ctx, 3, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	db.Close() // the "crash": leases still held
	db = openTest(t, path, c)
	n, err := db.RequeueExpired(ctx, c.Now().Add(100*365*24*time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("requeued %d, %v", n, err)
	}
	got, _ := db.Claim(ctx, 10, time.Minute, nil)
	if len(got) != 5 {
		t.Fatalf("after restart %d of 5 jobs are due", len(got))
	}
	ids := map[string]bool{}
	for _, d := range res.Deliveries {
		ids[d.ID] = true
	}
	for _, d := range got {
		if !ids[d.ID] {
			t.Fatalf("unknown job %s", d.ID)
		}
		db.Record(ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent})
	}
}

func TestIdempotency(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	in := store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "a"}}, IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("body"))}
	first, err := db.Ingest(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// the job moves on; the replay still answers what the first request did
	got, _ := db.Claim(ctx, 1, time.Minute, nil)
	db.Record(ctx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent})
	again, err := db.Ingest(ctx, in)
	if err != nil || !again.Replayed || again.EnvelopeID != first.EnvelopeID || again.Deliveries[0].ID != first.Deliveries[0].ID || again.Deliveries[0].State != store.StateQueued {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	in.RequestHash = store.HashRequest([]byte("other body"))
	if _, err := db.Ingest(ctx, in); !errors.Is(err, store.ErrIdempotencyConflict) {
		t.Fatalf("other body: err = %v", err)
	}
	all, _ := db.ListDeliveries(ctx, "", "", 100)
	if len(all) != 1 {
		t.Fatalf("%d deliveries stored; replays must store nothing", len(all))
	}
}

func TestDuplicateApprovalStoresNothing(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	ap := []store.NewApproval{{Approval: store.Approval{ID: "ap_1"}}}
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "email", To: "a@b.c"}}, Approvals: ap}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "email", To: "a@b.c"}}, Approvals: ap}); !errors.Is(err, store.ErrDuplicateApproval) {
		t.Fatalf("err = %v", err)
	}
	all, _ := db.ListDeliveries(ctx, "", "", 100)
	if len(all) != 1 {
		t.Fatalf("a rejected ingest left %d deliveries", len(all)-1)
	}
}

func TestAdmitLeavesRefusedJobsDue(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	ingestOne(t, db, 4) // ep0..ep3
	got, err := db.Claim(ctx, 10, time.Minute, func(d *store.Delivery) bool { return d.To != "ep1" })
	if err != nil || len(got) != 3 {
		t.Fatalf("claimed %d, %v", len(got), err)
	}
	rest, _ := db.Claim(ctx, 10, time.Minute, nil)
	if len(rest) != 1 || rest[0].To != "ep1" {
		t.Fatalf("refused job: %+v", rest)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.bolt.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, SchemaVersion+1))
	})
	db.Close()
	before, _ := os.ReadFile(path)
	_, err = Open(path, Options{})
	if !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("err = %v, want ErrNewerSchema", err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Fatal("a refused file was rewritten")
	}
}

func TestOpenRefusesCorruptAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not a bbolt file, just some text that is long enough to matter............................................"), 0o600)
	if _, err := Open(garbage, Options{}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("garbage: err = %v, want ErrCorrupt", err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	b, _ := bbolt.Open(foreign, 0o600, nil)
	b.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err })
	b.Close()
	if _, err := Open(foreign, Options{}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("foreign bbolt file: err = %v, want ErrCorrupt", err)
	}
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db := openTest(t, path, newClock())
	_ = db
	if _, err := Open(path, Options{OpenTimeout: 50 * time.Millisecond}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
}

func TestListPagination(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	ingestOne(t, db, 5)
	p1, _ := db.ListDeliveries(ctx, store.StateQueued, "", 2)
	p2, _ := db.ListDeliveries(ctx, store.StateQueued, p1[1].ID, 2)
	p3, _ := db.ListDeliveries(ctx, store.StateQueued, p2[1].ID, 2)
	if len(p1) != 2 || len(p2) != 2 || len(p3) != 1 || p2[0].ID == p1[1].ID {
		t.Fatalf("pages %d %d %d", len(p1), len(p2), len(p3))
	}
}

// BenchmarkIngest measures acknowledged (fsync'd) ingests per second with
// many concurrent callers sharing commits (the group writer), against the same
// ingests each committing alone, in the same run.
func BenchmarkIngest(b *testing.B) {
	for _, mode := range []string{"grouped", "one-commit-each"} {
		b.Run(mode, func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if mode == "one-commit-each" {
				db.group.max = 1 // every ingest its own commit
			}
			env := make([]byte, 2048)
			for i := range env {
				env[i] = 'x'
			}
			env[0], env[len(env)-1] = '"', '"'
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := db.Ingest(ctx, store.Ingest{Envelope: env, Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			})
			b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "ingests/s")
		})
	}
}

// A due entry whose record is gone, or a record that does not decode,
// does not stop the jobs behind it; the orphan entry is removed.
func TestClaimPassesOverBrokenEntries(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	res := ingestOne(t, db, 3)
	orphan, corrupt := res.Deliveries[0].ID, res.Deliveries[1].ID
	db.bolt.Update(func(tx *bbolt.Tx) error {
		tx.Bucket(bDeliveries).Delete([]byte(orphan))
		return tx.Bucket(bDeliveries).Put([]byte(corrupt), []byte{0x7f})
	})
	admitted := 0
	got, err := db.Claim(ctx, 10, time.Minute, func(*store.Delivery) bool { admitted++; return true })
	if err != nil || len(got) != 1 || got[0].ID != res.Deliveries[2].ID {
		t.Fatalf("claim = %+v, %v; want the one sound job", got, err)
	}
	if admitted != 1 {
		t.Errorf("admit asked %d times; broken entries must not take a slot", admitted)
	}
	var orphanDue, corruptDue bool
	db.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bDue).ForEach(func(k, _ []byte) error {
			_, _, id, _ := splitDueKey(k)
			orphanDue = orphanDue || string(id) == orphan
			corruptDue = corruptDue || string(id) == corrupt
			return nil
		})
	})
	if orphanDue || !corruptDue {
		t.Errorf("due entries left: orphan %v (want false), corrupt %v (want true)", orphanDue, corruptDue)
	}
	if err := db.CheckInvariants(); err == nil || !strings.Contains(err.Error(), corrupt) {
		t.Errorf("CheckInvariants = %v; want it to name the unreadable delivery %s", err, corrupt)
	}
	// Take the damaged job out, so that the closing check passes.
	db.bolt.Update(func(tx *bbolt.Tx) error {
		tx.Bucket(bDeliveries).Delete([]byte(corrupt))
		tx.Bucket(bByState).Delete(stateKey(store.StateQueued, corrupt))
		c := tx.Bucket(bDue).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if _, _, id, _ := splitDueKey(k); string(id) == corrupt {
				return c.Delete()
			}
		}
		return nil
	})
	db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bByState).Delete(stateKey(store.StateQueued, orphan)) })
}

// Times the store would never reach, and keys bbolt would refuse, are
// refused before anything is written.
func TestRefusesUnreachableTimesAndHugeKeys(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	ingestOne(t, db, 1)
	got, _ := db.Claim(ctx, 1, time.Minute, nil)
	if _, err := db.Record(ctx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateRetrying}); !errors.Is(err, store.ErrBadState) {
		t.Errorf("retrying without a time: %v", err)
	}
	if _, err := db.Record(ctx, got[0].ID, got[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: strings.Repeat("x", 2000)}); err == nil {
		t.Error("a 2000-byte provider id was accepted")
	}
	if err := db.Release(ctx, got[0].ID, got[0].LeaseUntil, time.Time{}); !errors.Is(err, store.ErrBadState) {
		t.Errorf("release to the zero time: %v", err)
	}
	if d, _ := db.Delivery(ctx, got[0].ID); d.State != store.StateSending {
		t.Errorf("refused calls changed the job: %+v", d)
	}
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}},
		IdempotencyKey: strings.Repeat("k", 2000)}); err == nil {
		t.Error("a 2000-byte idempotency key was accepted")
	}
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}},
		Approvals: []store.NewApproval{{Approval: store.Approval{}}}}); err == nil {
		t.Error("an approval without an id was accepted")
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
