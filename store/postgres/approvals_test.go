package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

var apprCtx = context.Background()

// apprStart is where the approval tests' clocks start.
var apprStart = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const apprGuardNum = "+15550001111"

// openAppr opens a store on a fresh schema whose clock is c, checked
// (CheckInvariants) when the test ends.
func openAppr(t *testing.T, c *fakeclock.Clock) *DB {
	t.Helper()
	return openApprReplicas(t, c, 1)[0]
}

// openApprReplicas opens n stores on one fresh schema: replicas sharing a
// database.
func openApprReplicas(t *testing.T, c *fakeclock.Clock, n int) []*DB {
	t.Helper()
	dsn := pgtest.DSN(t)
	var out []*DB
	for range n {
		db, err := Open(apprCtx, dsn, Options{Now: c.Now})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		out = append(out, db)
	}
	t.Cleanup(func() {
		if err := out[0].checkApprovals(apprCtx); err != nil {
			t.Errorf("approval invariants at the end of the test: %v", err)
		}
		for _, db := range out {
			db.Close()
		}
	})
	return out
}

// putApprovals stores approvals as an ingest does: checked, then written,
// in one transaction.
func putApprovals(db *DB, as ...store.NewApproval) error {
	return db.tx(apprCtx, func(tx pgx.Tx) error {
		if err := db.checkApprovalsTx(apprCtx, tx, as); err != nil {
			return err
		}
		return db.putApprovalsTx(apprCtx, tx, "env_1", as, db.now())
	})
}

// emailApproval is approval id asked of a@example.org by email, with the
// token hash "h-<id>".
func emailApproval(id string, exp time.Time) store.NewApproval {
	return store.NewApproval{
		Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{"action":"book"}`), Session: "s", Turn: "t", ExpiresAt: exp,
			Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "a@example.org", Nonce: "n"}}},
		Tokens: map[string]store.TokenBinding{"h-" + id: {ApprovalID: id, Channel: "email", Recipient: "a@example.org", Kind: "token"}}}
}

// codeApproval is approval id asked of apprGuardNum by SMS, whose code
// hashes to "code-<id>".
func codeApproval(id string, exp time.Time) store.NewApproval {
	return store.NewApproval{
		Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t", ExpiresAt: exp,
			Recipients: []store.ApprovalRecipient{{Channel: "sms", Address: apprGuardNum, Nonce: "n"}}},
		Tokens: map[string]store.TokenBinding{"code-" + id: {ApprovalID: id, Channel: "sms", Recipient: apprGuardNum, Kind: store.TokenKindCode}}}
}

func mustPut(t *testing.T, db *DB, as ...store.NewApproval) {
	t.Helper()
	if err := putApprovals(db, as...); err != nil {
		t.Fatal(err)
	}
}

func mustCheck(t *testing.T, db *DB) {
	t.Helper()
	if err := db.checkApprovals(apprCtx); err != nil {
		t.Fatal(err)
	}
}

func apprEvents(t *testing.T, db *DB, id string) []string {
	t.Helper()
	audit, err := db.ApprovalAudit(apprCtx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range audit {
		out = append(out, e.Event)
	}
	return out
}

func TestApprovalStoredWithBindingsAndAudit(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	mustPut(t, db, emailApproval("a1", c.Now().Add(time.Hour)))
	a, err := db.Approval(apprCtx, "a1")
	if err != nil || a.State != store.ApprovalPending || a.EnvelopeID != "env_1" || !a.CreatedAt.Equal(apprStart) || len(a.Recipients) != 1 {
		t.Fatalf("approval %+v %v", a, err)
	}
	if tb, err := db.TokenBinding(apprCtx, "h-a1"); err != nil || *tb != (store.TokenBinding{ApprovalID: "a1", Channel: "email", Recipient: "a@example.org", Kind: "token"}) {
		t.Fatalf("binding %+v %v", tb, err)
	}
	if _, err := db.TokenBinding(apprCtx, "h-other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	for hash, want := range map[string]bool{"h-a1": true, "h-other": false} {
		if ok, err := db.TokenExists(apprCtx, hash); err != nil || ok != want {
			t.Fatalf("TokenExists(%s) = %v, %v", hash, ok, err)
		}
	}
	if _, err := db.Approval(apprCtx, "a-missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
	if ev := apprEvents(t, db, "a1"); !slices.Equal(ev, []string{"created"}) {
		t.Fatalf("audit %v", ev)
	}
}

func TestApprovalDecideOnceAndQueueInjection(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	mustPut(t, db, emailApproval("a1", c.Now().Add(time.Hour)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, already := 0, 0
	for i := range 20 {
		wg.Go(func() {
			_, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, DecidedBy: "x", Channel: "email",
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
		})
	}
	wg.Wait()
	if wins != 1 || already != 19 {
		t.Fatalf("wins %d already %d", wins, already)
	}
	mustCheck(t, db)
	// The same message again is a duplicate, not "already decided".
	a, _ := db.Approval(apprCtx, "a1")
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalDenied, Channel: "email", MessageID: a.MessageID,
		At: c.Now(), InjectionID: "inj_x"}); !errors.Is(err, store.ErrDuplicateInbound) {
		t.Fatalf("replay: %v", err)
	}
	injs, _ := db.ListInjections(apprCtx, store.InjectionPending, 10)
	if len(injs) != 1 || injs[0].Response.Decision != "granted" || injs[0].Session != "s" || injs[0].Turn != "t" || injs[0].ID != a.InjectionID {
		t.Fatalf("injections %+v", injs)
	}
	audit, _ := db.ApprovalAudit(apprCtx, "a1")
	if len(audit) != 21 || audit[0].Event != "created" {
		t.Fatalf("audit %d entries", len(audit))
	}
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a-missing", State: store.ApprovalGranted, Channel: "email", MessageID: "zz",
		At: c.Now(), InjectionID: "inj_y"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("decision on an unknown approval: %v", err)
	}
	// The refused decision left its message unrecorded.
	if seen, _ := db.InboundSeen(apprCtx, "email", "zz"); seen {
		t.Fatal("a decision on an unknown approval recorded its message")
	}
}

// Replicas deciding one approval at once: one decision wins, the others
// are told it was decided, and exactly one injection exists.
func TestApprovalConcurrentDecideAcrossReplicas(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	for round := range 5 {
		id := fmt.Sprint("a", round)
		mustPut(t, dbs[0], emailApproval(id, c.Now().Add(time.Hour)))
		errs := make([]error, 8)
		jobs := make([]*store.Injection, 8)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				state := store.ApprovalGranted
				if i%2 == 1 {
					state = store.ApprovalDenied
				}
				_, jobs[i], errs[i] = dbs[i%2].Decide(apprCtx, store.Decision{ApprovalID: id, State: state, Channel: "email",
					MessageID: fmt.Sprint(id, "-m", i), At: c.Now(), InjectionID: fmt.Sprint("inj-", id, "-", i), ClaimFor: time.Duration(i%2) * time.Minute})
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won < 0:
				won = i
			case err == nil:
				t.Fatalf("round %d: decisions %d and %d both won", round, won, i)
			case !errors.Is(err, store.ErrAlreadyDecided):
				t.Fatalf("round %d: decision %d: %v", round, i, err)
			}
		}
		if won < 0 || jobs[won] == nil {
			t.Fatalf("round %d: no decision won: %v", round, errs)
		}
		var n int
		if err := dbs[0].pool.QueryRow(apprCtx, `SELECT count(*) FROM injections WHERE approval_id = $1`, id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("round %d: %d injections, %v", round, n, err)
		}
		inj, err := dbs[1].Injection(apprCtx, jobs[won].ID)
		a, _ := dbs[1].Approval(apprCtx, id)
		if err != nil || inj.Response.Decision != a.Decision() || a.InjectionID != inj.ID {
			t.Fatalf("round %d: injection %+v of approval %+v, %v", round, inj, a, err)
		}
		if ev := apprEvents(t, dbs[0], id); len(ev) != 9 || ev[0] != "created" || slices.Index(ev, "decided") < 0 {
			t.Fatalf("round %d: audit %v", round, ev)
		}
		mustCheck(t, dbs[0])
	}
}

// A decision that queues an injection names it; one that does not is
// refused and changes nothing.
func TestApprovalDecideNeedsAnInjectionID(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	mustPut(t, db, emailApproval("a1", c.Now().Add(time.Hour)))
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "email", MessageID: "m1",
		At: c.Now()}); err == nil {
		t.Fatal("a grant without an injection id was stored")
	}
	if a, _ := db.Approval(apprCtx, "a1"); a.State != store.ApprovalPending {
		t.Fatalf("approval %s after a refused decision", a.State)
	}
	if seen, _ := db.InboundSeen(apprCtx, "email", "m1"); seen {
		t.Fatal("a refused decision recorded its message")
	}
}

func TestApprovalMessageOnce(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	mustPut(t, db, emailApproval("a1", c.Now().Add(time.Hour)))
	c.Advance(time.Second)
	note := store.AuditEntry{At: c.Now(), ApprovalID: "a1", Event: "wrong-sender", Channel: "email", MessageID: "m0"}
	if err := db.Note(apprCtx, note); err != nil {
		t.Fatal(err)
	}
	if err := db.Note(apprCtx, note); !errors.Is(err, store.ErrDuplicateInbound) {
		t.Fatalf("note of the same message: %v", err)
	}
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "email", MessageID: "m0",
		At: c.Now(), InjectionID: "inj-a1"}); !errors.Is(err, store.ErrDuplicateInbound) {
		t.Fatalf("decision by a noted message: %v", err)
	}
	c.Advance(time.Second)
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "email", MessageID: "m1",
		At: c.Now(), InjectionID: "inj-a1"}); err != nil {
		t.Fatal(err)
	}
	for msg, want := range map[string]bool{"m0": true, "m1": true, "m2": false, "": false} {
		if seen, err := db.InboundSeen(apprCtx, "email", msg); err != nil || seen != want {
			t.Fatalf("InboundSeen(%s) = %v, %v", msg, seen, err)
		}
	}
	if seen, _ := db.InboundSeen(apprCtx, "sms", "m1"); seen {
		t.Fatal("a message id is seen on another channel")
	}
	if err := db.Note(apprCtx, store.AuditEntry{At: c.Now(), Event: "ignored", Channel: "email", MessageID: "m9"}); err != nil {
		t.Fatal(err)
	}
	if seen, _ := db.InboundSeen(apprCtx, "email", "m9"); !seen {
		t.Fatal("a note without approval did not record its message")
	}
	if ev := apprEvents(t, db, "a1"); !slices.Equal(ev, []string{"created", "wrong-sender", "decided"}) {
		t.Fatalf("audit %v", ev)
	}
}

func TestApprovalListPages(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	// Byte order, whatever the database's collation: "B" < "a" < "b".
	for _, id := range []string{"b", "a", "B", "a-2"} {
		mustPut(t, db, emailApproval(id, c.Now().Add(time.Hour)))
	}
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a", State: store.ApprovalDenied, At: c.Now(), InjectionID: "inj-a"}); err != nil {
		t.Fatal(err)
	}
	ids := func(as []*store.Approval) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	for _, tc := range []struct {
		st, after string
		limit     int
		want      []string
	}{
		{"", "", 0, []string{"B", "a", "a-2", "b"}},
		{"", "", 2, []string{"B", "a"}},
		{"", "a", 2, []string{"a-2", "b"}},
		{"", "a-1", 10, []string{"a-2", "b"}},
		{store.ApprovalPending, "", 10, []string{"B", "a-2", "b"}},
		{store.ApprovalDenied, "", 10, []string{"a"}},
		{store.ApprovalPending, "b", 10, nil},
	} {
		got, err := db.ListApprovals(apprCtx, tc.st, tc.after, tc.limit)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Fatalf("ListApprovals(%q, %q, %d) = %v, %v; want %v", tc.st, tc.after, tc.limit, ids(got), err, tc.want)
		}
	}
}

func TestApprovalDuplicateRefused(t *testing.T) {
	c := fakeclock.New(apprStart)
	db := openAppr(t, c)
	mustPut(t, db, emailApproval("a1", c.Now().Add(time.Hour)))
	collide := store.NewApproval{Approval: store.Approval{ID: "a2", ExpiresAt: c.Now().Add(time.Hour)},
		Tokens: map[string]store.TokenBinding{"h-a1": {ApprovalID: "a2"}}}
	for name, as := range map[string][]store.NewApproval{
		"a token already bound": {collide},
		"an id already stored":  {emailApproval("a1", c.Now())},
		"an id twice in one":    {emailApproval("a3", c.Now()), {Approval: store.Approval{ID: "a3"}}},
		"a token twice in one":  {emailApproval("a4", c.Now()), {Approval: store.Approval{ID: "a5"}, Tokens: map[string]store.TokenBinding{"h-a4": {}}}},
	} {
		if err := putApprovals(db, as...); !errors.Is(err, store.ErrDuplicateApproval) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, id := range []string{"a2", "a3", "a4", "a5"} {
		if _, err := db.Approval(apprCtx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("half-stored approval %s: %v", id, err)
		}
	}
	if err := putApprovals(db, store.NewApproval{Approval: store.Approval{ID: ""}}); err == nil {
		t.Fatal("an empty approval id was stored")
	}
	// What the check cannot see (another transaction's), the keys refuse.
	err := db.tx(apprCtx, func(tx pgx.Tx) error {
		return db.putApprovalsTx(apprCtx, tx, "env_2", []store.NewApproval{collide}, c.Now())
	})
	if !errors.Is(err, store.ErrDuplicateApproval) {
		t.Fatalf("put of a bound token without the check: %v", err)
	}
}

// Two replicas ingesting one approval id at once: one stores it, the
// other is refused, whichever check ran first.
func TestApprovalConcurrentPutsOfOneID(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	for round := range 10 {
		id := fmt.Sprint("a", round)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				na := emailApproval(id, c.Now().Add(time.Hour))
				na.Tokens = map[string]store.TokenBinding{fmt.Sprint("h-", id, "-", i): {ApprovalID: id}}
				errs[i] = putApprovals(dbs[i%2], na)
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrDuplicateApproval):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d puts of one id stored, want 1 (%v)", round, ok, errs)
		}
		if ev := apprEvents(t, dbs[0], id); !slices.Equal(ev, []string{"created"}) {
			t.Fatalf("round %d: audit %v", round, ev)
		}
	}
}

func TestApprovalExpiries(t *testing.T) {
	c := fakeclock.New(apprStart)
	dsn := pgtest.DSN(t)
	db, err := Open(apprCtx, dsn, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, emailApproval("late", c.Now().Add(2*time.Hour)), emailApproval("soon", c.Now().Add(time.Hour)),
		emailApproval("never", time.Time{}))
	if next, ok := db.NextExpiry(); !ok || !next.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("next %v %v", next, ok)
	}
	if ids, err := db.DueExpiries(apprCtx, c.Now(), 10); err != nil || len(ids) != 0 {
		t.Fatal(ids, err)
	}
	for _, tc := range []struct {
		at   time.Time
		max  int
		want []string
	}{{apprStart.Add(time.Hour), 10, []string{"soon"}}, {apprStart.Add(3 * time.Hour), 10, []string{"soon", "late"}},
		{apprStart.Add(3 * time.Hour), 1, []string{"soon"}}, {apprStart.Add(3 * time.Hour), 0, nil}} {
		if got, err := db.DueExpiries(apprCtx, tc.at, tc.max); err != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("due at %v max %d: %v, %v; want %v", tc.at, tc.max, got, err, tc.want)
		}
	}
	c.Advance(90 * time.Minute)
	if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "soon", State: store.ApprovalExpired, DecidedBy: "policy:expired",
		At: c.Now(), InjectionID: "inj_s"}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := db.DueExpiries(apprCtx, c.Now(), 10); len(ids) != 0 {
		t.Fatalf("still due %v", ids)
	}
	if inj, err := db.Injection(apprCtx, "inj_s"); err != nil || inj.Response.Decision != "denied" {
		t.Fatalf("expiry's injection %+v, %v", inj, err)
	}
	mustCheck(t, db)
	// Reopen: the expiries are in the rows.
	db.Close()
	db2, err := Open(apprCtx, dsn, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if next, ok := db2.NextExpiry(); !ok || !next.Equal(c.Now().Add(30*time.Minute)) {
		t.Fatalf("after reopen next %v", next)
	}
	if l, _ := db2.ListApprovals(apprCtx, store.ApprovalPending, "", 10); len(l) != 2 || l[0].ID != "late" || l[1].ID != "never" {
		t.Fatalf("pending %v", l)
	}
	if _, _, err := db2.Decide(apprCtx, store.Decision{ApprovalID: "late", State: store.ApprovalVoid, DecidedBy: "operator", At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	if at, ok := db2.NextExpiry(); ok {
		t.Fatalf("NextExpiry %v with nothing due to expire", at)
	}
	if injs, _ := db2.ListInjections(apprCtx, "", 10); len(injs) != 1 {
		t.Fatalf("%d injections; a void decision queues none", len(injs))
	}
	if ev := apprEvents(t, db2, "late"); !slices.Equal(ev, []string{"created", "voided"}) {
		t.Fatalf("audit %v", ev)
	}
	mustCheck(t, db2)
}

func TestApprovalOnce(t *testing.T) {
	c := fakeclock.New(apprStart)
	dbs := openApprReplicas(t, c, 2)
	for _, tc := range []struct {
		key  string
		want bool
	}{{"o", true}, {"o", false}, {"p", true}} {
		if first, err := dbs[0].Once(apprCtx, tc.key, c.Now()); err != nil || first != tc.want {
			t.Fatalf("Once(%s) = %v, %v", tc.key, first, err)
		}
	}
	// Replicas at once: one first.
	firsts := make([]bool, 8)
	var wg sync.WaitGroup
	for i := range firsts {
		wg.Go(func() {
			var err error
			if firsts[i], err = dbs[i%2].Once(apprCtx, "q", c.Now()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(firsts, func(b bool) bool { return !b })); n != 1 {
		t.Fatalf("%d firsts of one key", n)
	}
}

func TestApprovalCheckFindsBrokenRows(t *testing.T) {
	for name, breakIt := range map[string]string{
		"state off its record":  `UPDATE approvals SET state = 'denied' WHERE id = 'a2'`,
		"expiry off its record": `UPDATE approvals SET expires_ns = expires_ns + 1`,
		"stray code guard":      `INSERT INTO approval_code_guards (channel, number, approval_id, doc) VALUES ('sms', '+1', 'x', '{}')`,
		"missing code guard":    `DELETE FROM approval_code_guards`,
		"injection lease off":   `UPDATE injections SET lease_until_ns = 1`,
		"injection due off":     `UPDATE injections SET next_ns = next_ns + 1`,
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeclock.New(apprStart)
			db, err := Open(apprCtx, pgtest.DSN(t), Options{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			mustPut(t, db, codeApproval("a1", c.Now().Add(time.Hour)), emailApproval("a2", c.Now().Add(time.Hour)))
			if _, _, err := db.Decide(apprCtx, store.Decision{ApprovalID: "a2", State: store.ApprovalGranted, At: c.Now(), InjectionID: "inj"}); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
			if _, err := db.pool.Exec(apprCtx, breakIt); err != nil {
				t.Fatal(err)
			}
			if err := db.checkApprovals(apprCtx); err == nil {
				t.Fatal("check passed")
			}
		})
	}
}
