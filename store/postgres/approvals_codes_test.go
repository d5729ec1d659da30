package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

func codeAttempt(hash string, now time.Time) store.CodeAttempt {
	return store.CodeAttempt{Channel: "sms", Number: apprGuardNum, Hash: hash, At: now, Max: 5, Window: time.Hour, LockFor: 24 * time.Hour}
}

// Concurrent wrong codes on two replicas cannot slip past the lock: the
// lock check, the lookup and the count hold the guard rows, so exactly
// Max-1 wrong codes are answered "unknown" and the rest (and then the
// right code) are locked.
func TestApprovalTryCodeConcurrentGuessesStopAtTheLimit(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	mustPut(t, dbs[0], codeApproval("a1", c.Now().Add(48*time.Hour)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	evaluated, locked := 0, 0
	for i := range 30 {
		wg.Go(func() {
			r, err := dbs[i%2].TryCode(apprCtx, codeAttempt(fmt.Sprint("wrong-", i), c.Now()))
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
		})
	}
	wg.Wait()
	if evaluated != 4 || locked != 26 {
		t.Fatalf("evaluated %d, locked %d; want 4 and 26", evaluated, locked)
	}
	g, ok, err := dbs[1].CodeGuard(apprCtx, "sms", apprGuardNum, "a1")
	if err != nil || !ok || g.Count != 5 || !g.LockedUntil.Equal(c.Now().Add(24*time.Hour)) {
		t.Fatalf("guard %+v %v %v", g, ok, err)
	}
	r, err := dbs[0].TryCode(apprCtx, codeAttempt("code-a1", c.Now()))
	if err != nil || !r.Locked || r.Binding != nil || r.Approval == nil || r.Approval.ID != "a1" {
		t.Fatalf("right code while locked: %+v %v", r, err)
	}
}

// With no limit, every one of many concurrent wrong codes from replicas is
// counted against every approval pending for the number.
func TestApprovalTryCodeConcurrentCountsEveryWrongCode(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	mustPut(t, dbs[0], codeApproval("a1", c.Now().Add(48*time.Hour)), codeApproval("a2", c.Now().Add(48*time.Hour)))
	const tries = 40
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			at := codeAttempt(fmt.Sprint("wrong-", i), c.Now())
			at.Max = 0
			if r, err := dbs[i%2].TryCode(apprCtx, at); err != nil || r.Locked || r.Binding != nil {
				t.Errorf("wrong code %d: %+v %v", i, r, err)
			}
		})
	}
	wg.Wait()
	for _, id := range []string{"a1", "a2"} {
		if g, ok, err := dbs[0].CodeGuard(apprCtx, "sms", apprGuardNum, id); err != nil || !ok || g.Count != tries {
			t.Fatalf("guard of %s %+v %v %v; want %d wrong codes", id, g, ok, err, tries)
		}
	}
}

// The right code among 30 concurrent guesses matches only if it comes
// before the lock: at most Max codes (Max-1 wrong and the right one) are
// answered other than "locked".
func TestApprovalTryCodeConcurrentGuessesWithTheRightCode(t *testing.T) {
	for round := range 3 {
		c := fakeclock.New(apprStart)
		dbs := openApprReplicas(t, c, 2)
		mustPut(t, dbs[0], codeApproval("a1", c.Now().Add(48*time.Hour)))
		var wg sync.WaitGroup
		var mu sync.Mutex
		unknown, matched, locked := 0, 0, 0
		for i := range 30 {
			hash := fmt.Sprint("wrong-", i)
			if i == 15 {
				hash = "code-a1"
			}
			wg.Go(func() {
				r, err := dbs[i%2].TryCode(apprCtx, codeAttempt(hash, c.Now()))
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
			})
		}
		wg.Wait()
		if unknown != 4 || matched+locked != 26 {
			t.Fatalf("round %d: unknown %d, matched %d, locked %d; want 4 unknown and the rest locked or (the right code) matched", round, unknown, matched, locked)
		}
	}
}

// A lock protects the approvals it was earned on; an approval created
// afterwards for the same number answers at once, and the lock goes with
// the approval's pending state.
func TestApprovalTryCodeLockIsPerApproval(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	mustPut(t, db, codeApproval("old", c.Now().Add(48*time.Hour)))
	for i := range 5 {
		if _, err := db.TryCode(apprCtx, codeAttempt(fmt.Sprint("wrong-", i), c.Now())); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, db, codeApproval("new", c.Now().Add(48*time.Hour)))
	r, err := db.TryCode(apprCtx, codeAttempt("code-new", c.Now()))
	if err != nil || r.Locked || r.Binding == nil || r.Binding.ApprovalID != "new" || r.Approval.State != store.ApprovalPending {
		t.Fatalf("new approval's code: %+v %v", r, err)
	}
	// A wrong code now: "old" stays locked, "new" counts 1; not all locked.
	r, err = db.TryCode(apprCtx, codeAttempt("wrong-x", c.Now()))
	if err != nil || r.Locked || r.Wrong != 5 {
		t.Fatalf("wrong code with one of two locked: %+v %v", r, err)
	}
	if g, _, _ := db.CodeGuard(apprCtx, "sms", apprGuardNum, "new"); g.Count != 1 {
		t.Fatalf("new guard %+v", g)
	}
	// The right code from another number is a wrong code of that number.
	other := codeAttempt("code-new", c.Now())
	other.Number = "+15559999999"
	if r, err := db.TryCode(apprCtx, other); err != nil || r.Binding != nil || r.Locked {
		t.Fatalf("a code from another number: %+v %v", r, err)
	}
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "old", State: store.ApprovalGranted, DecidedBy: "op", Channel: "operator",
		At: c.Now(), InjectionID: "inj1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.CodeGuard(apprCtx, "sms", apprGuardNum, "old"); ok {
		t.Fatal("a decided approval kept its code guard")
	}
	if audit, _ := db.ApprovalAudit(apprCtx, "old"); len(audit) < 2 || audit[1].Event != "code-locked" {
		t.Fatalf("audit %+v", audit)
	}
	// A decided approval's code still matches: the caller says it is decided.
	if r, err := db.TryCode(apprCtx, codeAttempt("code-old", c.Now())); err != nil || r.Binding == nil || r.Approval.State != store.ApprovalGranted {
		t.Fatalf("decided approval's code: %+v %v", r, err)
	}
	mustCheck(t, db)
	// The lock ends; counting restarts after the window.
	c.Advance(25 * time.Hour)
	for i := range 4 {
		if r, _ := db.TryCode(apprCtx, codeAttempt(fmt.Sprint("w2-", i), c.Now())); r.Locked || r.Wrong != i+1 {
			t.Fatalf("wrong code %d after the window: %+v", i, r)
		}
	}
}

// Decisions and code attempts on one approval at once neither deadlock nor
// leave a guard behind.
func TestApprovalTryCodeWhileDeciding(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	for round := range 5 {
		id := fmt.Sprint("a", round)
		mustPut(t, dbs[0], codeApproval(id, c.Now().Add(time.Hour)))
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				db := dbs[i%2]
				var err error
				switch i % 3 {
				case 0:
					_, _, err = db.Decide(apprCtx, store.Decision{ApprovalID: id, State: store.ApprovalGranted, Channel: "sms",
						MessageID: fmt.Sprint(id, "-", i), At: c.Now(), InjectionID: fmt.Sprint("inj-", id, "-", i)})
					if errors.Is(err, store.ErrAlreadyDecided) {
						err = nil
					}
				case 1:
					_, err = db.TryCode(apprCtx, codeAttempt("code-"+id, c.Now()))
				default:
					_, err = db.TryCode(apprCtx, codeAttempt(fmt.Sprint("wrong-", i), c.Now()))
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, ok, _ := dbs[0].CodeGuard(apprCtx, "sms", apprGuardNum, id); ok {
			t.Fatalf("round %d: the decided approval kept its guard", round)
		}
	}
	mustCheck(t, dbs[0])
}

// A number listed twice among an approval's recipients has one guard.
func TestApprovalCodeGuardOfARepeatedRecipient(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	na := codeApproval("a1", c.Now().Add(time.Hour))
	na.Approval.Recipients = append(na.Approval.Recipients, na.Approval.Recipients[0],
		store.ApprovalRecipient{Channel: "email", Address: "a@example.org"})
	mustPut(t, db, na)
	mustCheck(t, db)
	r, err := db.TryCode(apprCtx, codeAttempt("wrong", c.Now()))
	if err != nil || r.Wrong != 1 {
		t.Fatalf("wrong code: %+v %v", r, err)
	}
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalVoid, At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.CodeGuard(apprCtx, "sms", apprGuardNum, "a1"); ok {
		t.Fatal("a void approval kept its code guard")
	}
}
