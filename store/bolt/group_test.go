package bolt

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

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
