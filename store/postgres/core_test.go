package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLeasesAcrossReplicas(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	a := open(t, clk.Now)
	ctx := context.Background()
	la, ok, err := a.AcquireLease(ctx, "scheduler", "a", 0, 15*time.Second)
	if err != nil || !ok || la.Generation != 1 {
		t.Fatalf("first take: %+v %v %v", la, ok, err)
	}
	if _, ok, _ := a.AcquireLease(ctx, "scheduler", "b", 0, 15*time.Second); ok {
		t.Fatal("b took a running lease")
	}
	clk.Add(10 * time.Second)
	if l, ok, _ := a.AcquireLease(ctx, "scheduler", "a", la.Generation, 15*time.Second); !ok || l.Generation != 1 || !l.Until.Equal(clk.Now().Add(15*time.Second)) {
		t.Fatalf("renew: %+v %v", l, ok)
	}
	clk.Add(16 * time.Second)
	lb, ok, err := a.AcquireLease(ctx, "scheduler", "b", 0, 15*time.Second)
	if err != nil || !ok || lb.Generation != 2 {
		t.Fatalf("takeover: %+v %v %v", lb, ok, err)
	}
	if _, ok, _ := a.AcquireLease(ctx, "scheduler", "a", la.Generation, 15*time.Second); ok {
		t.Fatal("the old holder renewed at its old generation")
	}
	if err := a.ReleaseLease(ctx, "scheduler", "b", lb.Generation); err != nil {
		t.Fatal(err)
	}
	if l, ok, _ := a.AcquireLease(ctx, "scheduler", "a", 0, 15*time.Second); !ok || l.Generation != 3 {
		t.Fatalf("take after release: %+v %v", l, ok)
	}
	ls, err := a.ListLeases(ctx)
	if err != nil || len(ls) != 1 || ls[0].Holder != "a" {
		t.Fatalf("list: %+v %v", ls, err)
	}
}

func TestLeaseRaceHasOneWinner(t *testing.T) {
	db := open(t, time.Now)
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := db.AcquireLease(context.Background(), "retention", string(rune('a'+i)), 0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d holders, want 1", won.Load())
	}
}

func TestScheduleSlotOnceAcrossReplicas(t *testing.T) {
	db := open(t, time.Now)
	ctx := context.Background()
	start := time.Unix(1_800_000_000, 0).UTC()
	if _, err := db.InitScheduleState(ctx, "digest", start); err != nil {
		t.Fatal(err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := store.ScheduleRun{Schedule: "digest", Slot: start.Add(time.Minute), Trigger: store.TriggerCron, State: store.RunRunning, ClaimedAt: start}
			_, err := db.ClaimScheduleSlot(ctx, run)
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, store.ErrSlotTaken):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("slot claimed %d times, want 1", won.Load())
	}
	// A manual run of the same slot has its own identity; an earlier cron
	// slot is behind the cursor.
	if _, err := db.ClaimScheduleSlot(ctx, store.ScheduleRun{Schedule: "digest", Slot: start.Add(time.Minute), Trigger: store.TriggerManual, State: store.RunRunning}); err != nil {
		t.Fatalf("manual run: %v", err)
	}
	if _, err := db.ClaimScheduleSlot(ctx, store.ScheduleRun{Schedule: "digest", Slot: start.Add(30 * time.Second), Trigger: store.TriggerCron}); !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("slot behind the cursor: %v", err)
	}
	runs, err := db.ScheduleRuns(ctx, "digest", 10)
	if err != nil || len(runs) != 2 || runs[0].Trigger != store.TriggerManual {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	got, err := db.InterruptScheduleRuns(ctx, start.Add(time.Hour), "interrupted")
	if err != nil || len(got) != 2 || got[0].State != store.RunFailed {
		t.Fatalf("interrupt: %+v %v", got, err)
	}
	if err := db.UpdateScheduleRun(ctx, store.ScheduleRun{Schedule: "digest", Slot: start.Add(5 * time.Minute), Trigger: store.TriggerCron}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of a run never claimed: %v", err)
	}
	if _, err := db.SetSchedulePaused(ctx, "digest", true, "ops", start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimScheduleSlot(ctx, store.ScheduleRun{Schedule: "digest", Slot: start.Add(2 * time.Hour), Trigger: store.TriggerCron}); !errors.Is(err, store.ErrSchedulePaused) {
		t.Fatalf("claim while paused: %v", err)
	}
	st, err := db.SetSchedulePaused(ctx, "digest", false, "ops", start.Add(3*time.Hour))
	if err != nil || st.Paused || !st.Cursor.Equal(start.Add(3*time.Hour)) {
		t.Fatalf("resume: %+v %v", st, err)
	}
}

func TestKVAndSeen(t *testing.T) {
	db := open(t, time.Now)
	ctx := context.Background()
	if _, ok, err := db.GetKV(ctx, "imap/INBOX"); ok || err != nil {
		t.Fatalf("absent: %v %v", ok, err)
	}
	if err := db.PutKV(ctx, "imap/INBOX", []byte("42")); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := db.GetKV(ctx, "imap/INBOX"); !ok || string(v) != "42" {
		t.Fatalf("get: %q %v", v, ok)
	}
	if err := db.DeleteKV(ctx, "imap/INBOX"); err != nil {
		t.Fatal(err)
	}
	if first, _ := db.MarkSeen(ctx, "SM1"); !first {
		t.Fatal("first mark not first")
	}
	if first, _ := db.MarkSeen(ctx, "SM1"); first {
		t.Fatal("second mark first")
	}
	if err := db.ForgetSeen(ctx, "SM1"); err != nil {
		t.Fatal(err)
	}
	if first, _ := db.MarkSeen(ctx, "SM1"); !first {
		t.Fatal("mark after forget not first")
	}
	if n, err := db.PruneRecords(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
}
