package storetest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cool-ai/beachd/store"
)

// approvalCases are approvals, their decisions, audit, token bindings and
// short codes.
var approvalCases = []testCase{
	{"approval/ingest stores the approval, its token bindings and its created entry", approvalIngest},
	{"approval/ingest refuses an approval id already stored, writing nothing", approvalDuplicate},
	{"approval/the first decision wins, a later one is told it was already decided", approvalFirstDecisionWins},
	{"approval/a message is processed once: Decide and Note refuse its id again", approvalMessageOnce},
	{"approval/expiries are due at their time and leave with the pending state", approvalExpiries},
	{"approval/codes: wrong codes count and lock the code out, the lock ends", approvalCodesLockOut},
	{"approval/codes: the right code matches, counts restart after the window, guards leave with pending", approvalCodesMatch},
	{"approval/codes: a wrong code lists the approvals pending for the number", approvalCodesPending},
	{"approval/once is true only the first time for a key", approvalOnce},
}

// guardNum is the number the code approvals are asked of.
const guardNum = "+15550001111"

// ingestApproval stores an envelope asking approval id of a@example.org by
// email, with the token hash "h-<id>", expiring at exp.
func (e *env) ingestApproval(id string, exp time.Time) {
	e.t.Helper()
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{id}}},
		Approvals: []store.NewApproval{{
			Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{"action":"book"}`), Session: "s", Turn: "t", ExpiresAt: exp,
				Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "a@example.org", Nonce: "n"}}},
			Tokens: map[string]store.TokenBinding{"h-" + id: {ApprovalID: id, Channel: "email", Recipient: "a@example.org", Kind: "token"}}}}})
	e.ok(err, "ingest approval "+id)
}

// ingestCodeApproval stores an approval asked of guardNum by SMS, whose
// code hashes to "code-<id>".
func (e *env) ingestCodeApproval(id string) {
	e.t.Helper()
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "sms", To: guardNum, ApprovalIDs: []string{id}}},
		Approvals: []store.NewApproval{{
			Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t", ExpiresAt: e.now().Add(48 * time.Hour),
				Recipients: []store.ApprovalRecipient{{Channel: "sms", Address: guardNum, Nonce: "n"}}},
			Tokens: map[string]store.TokenBinding{"code-" + id: {ApprovalID: id, Channel: "sms", Recipient: guardNum, Kind: store.TokenKindCode}}}}})
	e.ok(err, "ingest code approval "+id)
}

// decide decides approval id as state, by message msgID on email, queueing
// the injection "inj-<id>".
func (e *env) decide(id, state, msgID string) (*store.Approval, *store.Injection, error) {
	return e.s.Decide(e.ctx, store.Decision{ApprovalID: id, State: state, Reason: "ok", DecidedBy: "a@example.org",
		Channel: "email", MessageID: msgID, At: e.now(), InjectionID: "inj-" + id})
}

// events are the events of an approval's audit trail, oldest first.
func (e *env) events(id string) []string {
	e.t.Helper()
	audit, err := e.s.ApprovalAudit(e.ctx, id)
	e.ok(err, "audit of "+id)
	var out []string
	for _, a := range audit {
		out = append(out, a.Event)
	}
	return out
}

func approvalIngest(e *env) {
	e.ingestApproval("a1", e.now().Add(time.Hour))
	a, err := e.s.Approval(e.ctx, "a1")
	e.ok(err, "read approval")
	if a.State != store.ApprovalPending || a.EnvelopeID == "" || a.Agent != "travel" || a.Session != "s" ||
		!sameJSON(a.Request, []byte(`{"action":"book"}`)) || len(a.Recipients) != 1 {
		e.t.Fatalf("approval %+v", a)
	}
	e.sameTime(a.CreatedAt, start, "created")
	tb, err := e.s.TokenBinding(e.ctx, "h-a1")
	e.ok(err, "token binding")
	if *tb != (store.TokenBinding{ApprovalID: "a1", Channel: "email", Recipient: "a@example.org", Kind: "token"}) {
		e.t.Fatalf("binding %+v", tb)
	}
	_, err = e.s.TokenBinding(e.ctx, "h-other")
	e.is(err, store.ErrNotFound, "unknown token")
	for hash, want := range map[string]bool{"h-a1": true, "h-other": false} {
		ok, err := e.s.TokenExists(e.ctx, hash)
		e.ok(err, "token exists")
		if ok != want {
			e.t.Fatalf("TokenExists(%s) = %v", hash, ok)
		}
	}
	pending, err := e.s.ListApprovals(e.ctx, store.ApprovalPending, "", 10)
	e.ok(err, "list pending")
	if len(pending) != 1 || pending[0].ID != "a1" {
		e.t.Fatalf("pending approvals %+v", pending)
	}
	if ev := e.events("a1"); !slices.Equal(ev, []string{"created"}) {
		e.t.Fatalf("audit %v", ev)
	}
	_, err = e.s.Approval(e.ctx, "a-missing")
	e.is(err, store.ErrNotFound, "unknown approval")
}

func approvalDuplicate(e *env) {
	e.ingestApproval("a1", e.now().Add(time.Hour))
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: hooks(1),
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: "a1", Request: []byte(`{}`)}}}})
	e.is(err, store.ErrDuplicateApproval, "second approval a1")
	all, err := e.s.ListDeliveries(e.ctx, "", "", 10)
	e.ok(err, "list deliveries")
	if len(all) != 1 {
		e.t.Fatalf("%d deliveries after a refused ingest, want the first one only", len(all))
	}
}

func approvalFirstDecisionWins(e *env) {
	e.ingestApproval("a1", e.now().Add(time.Hour))
	e.advance(time.Minute)
	a, inj, err := e.decide("a1", store.ApprovalGranted, "m1")
	e.ok(err, "first decision")
	if a.State != store.ApprovalGranted || a.DecidedBy != "a@example.org" || a.MessageID != "m1" || a.InjectionID != "inj-a1" {
		e.t.Fatalf("decided %+v", a)
	}
	e.sameTime(a.DecidedAt, e.now(), "decided at")
	if inj == nil || inj.ID != "inj-a1" || inj.State != store.InjectionPending || inj.Response.Decision != "granted" ||
		inj.Session != "s" || inj.Turn != "t" {
		e.t.Fatalf("injection %+v", inj)
	}
	e.advance(time.Minute)
	a, inj, err = e.decide("a1", store.ApprovalDenied, "m2")
	e.is(err, store.ErrAlreadyDecided, "second decision")
	if a == nil || a.State != store.ApprovalGranted || inj != nil {
		e.t.Fatalf("second decision answered %+v, %+v; want the approval as granted and no injection", a, inj)
	}
	if stored, _ := e.s.Approval(e.ctx, "a1"); stored.State != store.ApprovalGranted {
		e.t.Fatalf("stored state %s after the second decision", stored.State)
	}
	granted, err := e.s.ListApprovals(e.ctx, store.ApprovalGranted, "", 10)
	e.ok(err, "list granted")
	if len(granted) != 1 {
		e.t.Fatalf("granted approvals %+v", granted)
	}
	if ev := e.events("a1"); !slices.Equal(ev, []string{"created", "decided", "already-decided"}) {
		e.t.Fatalf("audit %v", ev)
	}
	injs, err := e.s.ListInjections(e.ctx, "", 10)
	e.ok(err, "list injections")
	if len(injs) != 1 {
		e.t.Fatalf("%d injections after two decisions", len(injs))
	}
	_, _, err = e.decide("a-missing", store.ApprovalGranted, "m3")
	e.is(err, store.ErrNotFound, "decision on an unknown approval")
}

func approvalMessageOnce(e *env) {
	e.ingestApproval("a1", e.now().Add(time.Hour))
	e.advance(time.Second)
	e.ok(e.s.Note(e.ctx, store.AuditEntry{At: e.now(), ApprovalID: "a1", Event: "wrong-sender", Channel: "email", MessageID: "m0"}), "note")
	e.is(e.s.Note(e.ctx, store.AuditEntry{At: e.now(), ApprovalID: "a1", Event: "wrong-sender", Channel: "email", MessageID: "m0"}),
		store.ErrDuplicateInbound, "note of the same message")
	_, _, err := e.decide("a1", store.ApprovalGranted, "m0")
	e.is(err, store.ErrDuplicateInbound, "decision by a noted message")
	e.advance(time.Second)
	_, _, err = e.decide("a1", store.ApprovalGranted, "m1")
	e.ok(err, "decision")
	_, _, err = e.decide("a1", store.ApprovalDenied, "m1")
	e.is(err, store.ErrDuplicateInbound, "the deciding message again")
	for msg, want := range map[string]bool{"m0": true, "m1": true, "m2": false} {
		seen, err := e.s.InboundSeen(e.ctx, "email", msg)
		e.ok(err, "inbound seen")
		if seen != want {
			e.t.Fatalf("InboundSeen(%s) = %v", msg, seen)
		}
	}
	if seen, _ := e.s.InboundSeen(e.ctx, "sms", "m1"); seen {
		e.t.Fatal("a message id is seen on another channel")
	}
	// Without an approval, Note records the message id alone.
	e.ok(e.s.Note(e.ctx, store.AuditEntry{At: e.now(), Event: "ignored", Channel: "email", MessageID: "m9"}), "note without approval")
	if seen, _ := e.s.InboundSeen(e.ctx, "email", "m9"); !seen {
		e.t.Fatal("a note without approval did not record its message")
	}
	if ev := e.events("a1"); !slices.Equal(ev, []string{"created", "wrong-sender", "decided"}) {
		e.t.Fatalf("audit %v", ev)
	}
}

func approvalExpiries(e *env) {
	e.ingestApproval("a1", start.Add(time.Hour))
	e.ingestApproval("a2", start.Add(2*time.Hour))
	at, ok := e.s.NextExpiry()
	if !ok {
		e.t.Fatal("NextExpiry reports nothing with two pending approvals")
	}
	e.sameTime(at, start.Add(time.Hour), "NextExpiry")
	for _, c := range []struct {
		at   time.Time
		want []string
	}{{start, nil}, {start.Add(time.Hour), []string{"a1"}}, {start.Add(3 * time.Hour), []string{"a1", "a2"}}} {
		got, err := e.s.DueExpiries(e.ctx, c.at, 10)
		e.ok(err, "due expiries")
		if !slices.Equal(got, c.want) {
			e.t.Fatalf("due at %v: %v, want %v", c.at, got, c.want)
		}
	}
	e.advance(time.Hour)
	_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalExpired, DecidedBy: "beachd", At: e.now(), InjectionID: "inj-a1"})
	e.ok(err, "expire a1")
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "a2", State: store.ApprovalVoid, DecidedBy: "operator", At: e.now()})
	e.ok(err, "void a2")
	if due, _ := e.s.DueExpiries(e.ctx, start.Add(3*time.Hour), 10); len(due) != 0 {
		e.t.Fatalf("decided approvals still due to expire: %v", due)
	}
	if at, ok := e.s.NextExpiry(); ok {
		e.t.Fatalf("NextExpiry %v with nothing pending", at)
	}
	if inj, err := e.s.Injection(e.ctx, "inj-a1"); err != nil || inj.Response.Decision != "denied" {
		e.t.Fatalf("expiry's injection %+v, %v; want a denial", inj, err)
	}
	injs, _ := e.s.ListInjections(e.ctx, "", 10)
	if len(injs) != 1 {
		e.t.Fatalf("%d injections; a void decision queues none", len(injs))
	}
	if ev := e.events("a2"); !slices.Equal(ev, []string{"created", "voided"}) {
		e.t.Fatalf("audit of the void approval %v", ev)
	}
}

// codeTry is a code from guardNum now: 3 wrong codes within an hour lock
// the code for a day.
func (e *env) codeTry(hash string) store.CodeResult {
	e.t.Helper()
	r, err := e.s.TryCode(e.ctx, store.CodeAttempt{Channel: "sms", Number: guardNum, Hash: hash, At: e.now(),
		Max: 3, Window: time.Hour, LockFor: 24 * time.Hour})
	e.ok(err, "try code "+hash)
	return r
}

func approvalCodesLockOut(e *env) {
	e.ingestCodeApproval("a1")
	for i, hash := range []string{"wrong-1", "wrong-2"} {
		if r := e.codeTry(hash); r.Locked || r.Binding != nil || r.Wrong != i+1 {
			e.t.Fatalf("wrong code %d: %+v", i+1, r)
		}
		g, ok, err := e.s.CodeGuard(e.ctx, "sms", guardNum, "a1")
		e.ok(err, "code guard")
		if !ok || g.Count != i+1 {
			e.t.Fatalf("guard after %d wrong codes: %+v, %v", i+1, g, ok)
		}
	}
	r := e.codeTry("wrong-3")
	if !r.Locked || r.Wrong != 3 {
		e.t.Fatalf("third wrong code: %+v, want locked", r)
	}
	e.sameTime(r.LockedUntil, e.now().Add(24*time.Hour), "locked until")
	if ev := e.events("a1"); !slices.Contains(ev, "code-locked") {
		e.t.Fatalf("audit without code-locked: %v", ev)
	}
	r = e.codeTry("code-a1")
	if !r.Locked || r.Binding != nil || r.Approval == nil || r.Approval.ID != "a1" {
		e.t.Fatalf("right code while locked: %+v", r)
	}
	e.advance(24*time.Hour + time.Second)
	r = e.codeTry("code-a1")
	if r.Locked || r.Binding == nil || r.Binding.ApprovalID != "a1" {
		e.t.Fatalf("right code after the lock: %+v", r)
	}
}

func approvalCodesMatch(e *env) {
	e.ingestCodeApproval("a1")
	r := e.codeTry("code-a1")
	if r.Locked || r.Binding == nil || r.Binding.Kind != store.TokenKindCode || r.Approval == nil || r.Approval.State != store.ApprovalPending || r.Wrong != 0 {
		e.t.Fatalf("right code: %+v", r)
	}
	// The right code from another number is a wrong code of that number.
	other, err := e.s.TryCode(e.ctx, store.CodeAttempt{Channel: "sms", Number: "+15559999999", Hash: "code-a1", At: e.now(), Max: 3, Window: time.Hour, LockFor: time.Hour})
	e.ok(err, "code from another number")
	if other.Binding != nil {
		e.t.Fatalf("a code matched from another number: %+v", other)
	}
	e.codeTry("wrong-1")
	e.codeTry("wrong-2")
	e.advance(time.Hour + time.Second)
	if r := e.codeTry("wrong-3"); r.Locked || r.Wrong != 1 {
		e.t.Fatalf("wrong code after the window: %+v, want a new count of 1", r)
	}
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "sms", MessageID: "SM1", At: e.now(), InjectionID: "inj-a1"})
	e.ok(err, "decide")
	if _, ok, err := e.s.CodeGuard(e.ctx, "sms", guardNum, "a1"); err != nil || ok {
		e.t.Fatalf("guard of a decided approval: ok %v, %v", ok, err)
	}
}

func approvalCodesPending(e *env) {
	if r := e.codeTry("wrong-0"); r.Binding != nil || r.Locked || len(r.Pending) != 0 {
		e.t.Fatalf("a wrong code from a number without approvals: %+v", r)
	}
	e.ingestCodeApproval("a2")
	e.ingestCodeApproval("a1")
	pending := func(r store.CodeResult) string {
		var out []string
		for _, p := range r.Pending {
			s := fmt.Sprintf("%s:%d", p.ApprovalID, p.Counter.Count)
			if p.Counter.LockedUntil.After(e.now()) {
				s += ":locked"
			}
			if p.LockedNow {
				s += ":now"
			}
			out = append(out, s)
		}
		return strings.Join(out, ",")
	}
	if r := e.codeTry("wrong-1"); pending(r) != "a1:1,a2:1" {
		e.t.Fatalf("first wrong code: pending %s", pending(r))
	}
	e.codeTry("wrong-2")
	if r := e.codeTry("wrong-3"); pending(r) != "a1:3:locked:now,a2:3:locked:now" || !r.Locked {
		e.t.Fatalf("third wrong code: pending %s, locked %v", pending(r), r.Locked)
	}
	if r := e.codeTry("wrong-4"); pending(r) != "a1:3:locked,a2:3:locked" || !r.Locked {
		e.t.Fatalf("a wrong code while locked: pending %s", pending(r))
	}
	if r := e.codeTry("code-a1"); r.Pending != nil {
		e.t.Fatalf("the right code lists pending approvals: %+v", r.Pending)
	}
}

func approvalOnce(e *env) {
	for _, c := range []struct {
		key  string
		want bool
	}{{"reply/a@example.org/2026-11-21", true}, {"reply/a@example.org/2026-11-21", false}, {"reply/a@example.org/2026-11-22", true}} {
		first, err := e.s.Once(e.ctx, c.key, e.now())
		e.ok(err, "once")
		if first != c.want {
			e.t.Fatalf("Once(%s) = %v, want %v", c.key, first, c.want)
		}
	}
}
