package bolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/internal/cpubusy"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// inOneGroup runs fns as one group commit: a first call holds the commit
// loop until all of fns are queued behind it. It returns each fn's result.
func inOneGroup(t *testing.T, db *DB, fns ...func(*bbolt.Tx) error) []error {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	go db.write(func(*bbolt.Tx) error { close(held); <-hold; return nil })
	<-held // the commit loop is inside the holding transaction
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = db.write(fn) }()
	}
	for {
		db.group.mu.Lock()
		n := len(db.group.pending)
		db.group.mu.Unlock()
		if n == len(fns) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	return errs
}

func putKV(key string) func(*bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return tx.Bucket(bKV).Put([]byte(key), []byte("v")) }
}

func hasKV(t *testing.T, db *DB, key string) bool {
	t.Helper()
	var ok bool
	db.bolt.View(func(tx *bbolt.Tx) error { ok = tx.Bucket(bKV).Get([]byte(key)) != nil; return nil })
	return ok
}

// A refusal answers its own caller only; the rest of the group commits.
func TestGroupRefusalSparesOthers(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	errs := inOneGroup(t, db, putKV("a"), func(*bbolt.Tx) error { return refuse(store.ErrLeaseLost) }, putKV("c"))
	if errs[0] != nil || !errors.Is(errs[1], store.ErrLeaseLost) || errs[2] != nil {
		t.Fatalf("results = %v", errs)
	}
	var r *refusal
	if errors.As(errs[1], &r) {
		t.Fatal("the refusal wrapper leaked to the caller")
	}
	if !hasKV(t, db, "a") || !hasKV(t, db, "c") {
		t.Fatal("the refusal cost the others their writes")
	}
}

// A failure after writing aborts the whole transaction: every caller gets
// the error and nothing of the group is stored. A panic is such a failure.
func TestGroupFailureAbortsAll(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	boom := errors.New("boom")
	errs := inOneGroup(t, db, putKV("a"), func(tx *bbolt.Tx) error {
		tx.Bucket(bKV).Put([]byte("b"), []byte("half"))
		return boom
	}, putKV("c"))
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("call %d: err = %v, want boom", i, err)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		if hasKV(t, db, k) {
			t.Fatalf("%s was stored by an aborted group", k)
		}
	}
	errs = inOneGroup(t, db, putKV("d"), func(*bbolt.Tx) error { panic("bad") })
	if errs[0] == nil || errs[1] == nil || hasKV(t, db, "d") {
		t.Fatalf("panic: results %v, d stored %v", errs, hasKV(t, db, "d"))
	}
	// The writer goes on after both.
	if err := db.write(putKV("e")); err != nil || !hasKV(t, db, "e") {
		t.Fatalf("after the failures: %v", err)
	}
}

// afterBusyCommit queues fn behind a commit of lingerBusy calls and lets
// that commit end; fn's result comes on the channel.
func afterBusyCommit(t *testing.T, db *DB, fn func(*bbolt.Tx) error) <-chan error {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	busy := []func(*bbolt.Tx) error{func(*bbolt.Tx) error { close(held); <-hold; return nil }}
	for i := 1; i < lingerBusy; i++ {
		busy = append(busy, putKV(fmt.Sprintf("busy-%d", i)))
	}
	var busyDone sync.WaitGroup
	busyDone.Go(func() { inOneGroup(t, db, busy...) })
	<-held
	done := make(chan error, 1)
	go func() { done <- db.write(fn) }()
	poll.Eventually(t, 20*time.Second, "the call queued", func() bool {
		db.group.mu.Lock()
		defer db.group.mu.Unlock()
		return len(db.group.pending) == 1
	})
	close(hold)
	busyDone.Wait()
	return done
}

// With processors to spare, a call after a busy commit commits at once:
// waiting for company would only lengthen its turn.
func TestGroupDoesNotWaitWithProcessorsToSpare(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	db.group.linger = time.Minute
	db.group.cpu = cpubusy.Fixed(false)
	select {
	case err := <-afterBusyCommit(t, db, putKV("first")):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call after a busy commit waited for company with the processors idle")
	}
	if !hasKV(t, db, "first") {
		t.Fatal("not stored")
	}
}

// Under load (the previous commit carried lingerBusy calls or more, and
// the processors are saturated) the commit loop waits for company, until
// lingerFill calls are pending; a lone call after the loop went idle
// commits at once.
func TestGroupWaitsForCompanyUnderLoad(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), newClock())
	db.group.linger = time.Minute // only lingerFill calls end the wait
	db.group.cpu = cpubusy.Fixed(true)
	var mu sync.Mutex
	txOf := map[string]int{}
	put := func(key string) func(*bbolt.Tx) error {
		return func(tx *bbolt.Tx) error {
			mu.Lock()
			txOf[key] = tx.ID()
			mu.Unlock()
			return tx.Bucket(bKV).Put([]byte(key), []byte("v"))
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { <-afterBusyCommit(t, db, put("first")) })
	poll.Eventually(t, 20*time.Second, "the commit loop waiting for company", func() bool {
		db.group.mu.Lock()
		defer db.group.mu.Unlock()
		return db.group.filled != nil
	})
	if hasKV(t, db, "first") {
		t.Fatal("the call after a busy commit committed without waiting for company")
	}
	for i := 1; i < lingerFill; i++ {
		wg.Go(func() { db.write(put(fmt.Sprintf("more-%d", i))) })
	}
	wg.Wait()
	if len(txOf) != lingerFill {
		t.Fatalf("%d calls ran, want %d", len(txOf), lingerFill)
	}
	for i := 1; i < lingerFill; i++ {
		if k := fmt.Sprintf("more-%d", i); txOf[k] != txOf["first"] {
			t.Fatalf("%s committed in transaction %d, the first waiting call in %d: want one commit of %d", k, txOf[k], txOf["first"], lingerFill)
		}
	}
	// Idle again: a lone call does not wait (the wait is a minute).
	poll.Eventually(t, 20*time.Second, "the commit loop idle", func() bool {
		db.group.mu.Lock()
		defer db.group.mu.Unlock()
		return !db.group.running
	})
	done := make(chan error, 1)
	go func() { done <- db.write(put("lone")) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a lone call after the loop went idle waited for company")
	}
}
