package bolt

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

const guardNum = "+15550001111"

// ingestCodeApproval stores a pending approval asked of guardNum by SMS,
// whose code hashes to "code-<id>".
func ingestCodeApproval(t *testing.T, db *DB, id string, exp time.Time) {
	t.Helper()
	_, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "sms", To: guardNum, ApprovalIDs: []string{id}}},
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t", ExpiresAt: exp,
			Recipients: []store.ApprovalRecipient{{Channel: "sms", Address: guardNum, Nonce: "n"}}},
			Tokens: map[string]store.TokenBinding{"code-" + id: {ApprovalID: id, Channel: "sms", Recipient: guardNum, Kind: store.TokenKindCode}}}}})
	if err != nil {
		t.Fatal(err)
	}
}

func attempt(hash string, now time.Time) store.CodeAttempt {
	return store.CodeAttempt{Channel: "sms", Number: guardNum, Hash: hash, At: now, Max: 5, Window: time.Hour, LockFor: 24 * time.Hour}
}

// Concurrent wrong codes cannot slip past the lock: the lock check, the
// lookup and the count are one transaction, so exactly Max-1 wrong codes
// are answered "unknown" and the rest (and then the right code) are locked.
func TestTryCodeConcurrentGuessesStopAtTheLimit(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestCodeApproval(t, db, "a1", c.Now().Add(48*time.Hour))
	var wg sync.WaitGroup
	var mu sync.Mutex
	evaluated, locked := 0, 0
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := db.TryCode(ctx, attempt(fmt.Sprint("wrong-", i), c.Now()))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case r.Locked:
				locked++
			default:
				evaluated++
			}
		}()
	}
	wg.Wait()
	if evaluated != 4 || locked != 26 {
		t.Fatalf("evaluated %d, locked %d; want 4 and 26", evaluated, locked)
	}
	g, ok, err := db.CodeGuard(ctx, "sms", guardNum, "a1")
	if err != nil || !ok || g.Count != 5 || !g.LockedUntil.Equal(c.Now().Add(24*time.Hour)) {
		t.Fatalf("guard %+v %v %v", g, ok, err)
	}
	r, err := db.TryCode(ctx, attempt("code-a1", c.Now()))
	if err != nil || !r.Locked || r.Binding != nil || r.Approval == nil || r.Approval.ID != "a1" {
		t.Fatalf("right code while locked: %+v %v", r, err)
	}
	checkApprovals(t, db)
}

// The right code among 30 concurrent guesses matches only if it comes
// before the lock: at most Max codes (Max-1 wrong and the right one) are
// answered other than "locked".
func TestTryCodeConcurrentGuessesWithTheRightCode(t *testing.T) {
	for round := range 5 {
		c := newClock()
		db := openTest(t, filepath.Join(t.TempDir(), fmt.Sprint(round, ".db")), c)
		ingestCodeApproval(t, db, "a1", c.Now().Add(48*time.Hour))
		var wg sync.WaitGroup
		var mu sync.Mutex
		unknown, matched, locked := 0, 0, 0
		for i := range 30 {
			hash := fmt.Sprint("wrong-", i)
			if i == 15 {
				hash = "code-a1"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := db.TryCode(ctx, attempt(hash, c.Now()))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case r.Locked:
					locked++
				case r.Binding != nil:
					matched++
				default:
					unknown++
				}
			}()
		}
		wg.Wait()
		if unknown != 4 || matched+locked != 26 {
			t.Fatalf("round %d: unknown %d, matched %d, locked %d; want 4 unknown and the rest locked or (the right code) matched", round, unknown, matched, locked)
		}
		db.Close()
	}
}

// A lock protects the approvals it was earned on; an approval created
// afterwards for the same number answers at once, and the lock goes with
// the approval's pending state.
func TestTryCodeLockIsPerApproval(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"), c)
	ingestCodeApproval(t, db, "old", c.Now().Add(48*time.Hour))
	for i := range 5 {
		if _, err := db.TryCode(ctx, attempt(fmt.Sprint("wrong-", i), c.Now())); err != nil {
			t.Fatal(err)
		}
	}
	ingestCodeApproval(t, db, "new", c.Now().Add(48*time.Hour))
	r, err := db.TryCode(ctx, attempt("code-new", c.Now()))
	if err != nil || r.Locked || r.Binding == nil || r.Binding.ApprovalID != "new" {
		t.Fatalf("new approval's code: %+v %v", r, err)
	}
	// A wrong code now: "old" stays locked, "new" counts 1; not all locked.
	r, err = db.TryCode(ctx, attempt("wrong-x", c.Now()))
	if err != nil || r.Locked || r.Wrong != 5 {
		t.Fatalf("wrong code with one of two locked: %+v %v", r, err)
	}
	if g, _, _ := db.CodeGuard(ctx, "sms", guardNum, "new"); g.Count != 1 {
		t.Fatalf("new guard %+v", g)
	}
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "old", State: store.ApprovalGranted, DecidedBy: "op", Channel: "operator", At: c.Now(), InjectionID: "inj1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.CodeGuard(ctx, "sms", guardNum, "old"); ok {
		t.Fatal("a decided approval kept its code guard")
	}
	if audit, _ := db.ApprovalAudit(ctx, "old"); len(audit) < 2 || audit[1].Event != "code-locked" {
		t.Fatalf("audit %+v", audit)
	}
	checkApprovals(t, db)
	// The lock ends.
	c.Advance(25 * time.Hour)
	for i := range 4 {
		if r, _ := db.TryCode(ctx, attempt(fmt.Sprint("w2-", i), c.Now())); r.Locked {
			t.Fatalf("wrong code %d after the lock window: locked", i)
		}
	}
}

// A schema-4 file (wrong codes counted per number, no code guards) gets a
// guard for each pending approval's SMS recipient at open, and loses its
// per-number counters.
func TestMigrateSchema4CodeGuards(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "v4.db")
	db := openTest(t, path, c)
	ingestCodeApproval(t, db, "p1", c.Now().Add(time.Hour))
	ingestCodeApproval(t, db, "d1", c.Now().Add(time.Hour))
	if _, _, err := db.Decide(ctx, store.Decision{ApprovalID: "d1", State: store.ApprovalDenied, DecidedBy: "op", Channel: "operator", At: c.Now(), InjectionID: "inj1"}); err != nil {
		t.Fatal(err)
	}
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bApprovalCodes); err != nil {
			return err
		}
		if err := tx.Bucket(bApprovalLimits).Put([]byte("code-fail/sms/"+guardNum), []byte(`{"count":9}`)); err != nil {
			return err
		}
		if err := tx.Bucket(bApprovalLimits).Put([]byte("not-understood/x"), []byte(`{"count":1}`)); err != nil {
			return err
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 4)
		return tx.Bucket(bMeta).Put(keySchema, v[:])
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, path, c)
	checkApprovals(t, db)
	if _, ok, _ := db.CodeGuard(ctx, "sms", guardNum, "p1"); !ok {
		t.Fatal("pending approval got no guard")
	}
	_ = db.bolt.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bApprovalLimits).Get([]byte("code-fail/sms/"+guardNum)) != nil {
			t.Error("per-number counter survived the migration")
		}
		if tx.Bucket(bApprovalLimits).Get([]byte("not-understood/x")) == nil {
			t.Error("migration dropped an unrelated marker")
		}
		return nil
	})
}
