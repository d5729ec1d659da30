package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// eventCases are the approvals' hash-chained event trails.
var eventCases = []testCase{
	{"events/ingest starts the trail with who was asked; it verifies and ends at its head", eventsAtIngest},
	{"events/a decision appends its vote and itself; a late vote is kept, ignored and why", eventsOfDecisions},
	{"events/expiry and withdrawal append their own event", eventsExpiredWithdrawn},
	{"events/a vote without effect is noted with its message; the injection the agent took is appended", eventsNotedAndInjected},
	{"events/append refuses an unknown approval and a malformed event", eventsAppendRefuses},
	{"events/concurrent appends form one chain", eventsConcurrentAppends},
}

// asked are the events of an approval asked of a@example.org by email.
func asked(at time.Time) []store.ApprovalEvent {
	return []store.ApprovalEvent{{At: at, Kind: store.EventAsked, Actor: "a@example.org", Channel: "email"}}
}

// ingestAsked stores approval id as ingestApproval does, with its asked
// event.
func (e *env) ingestAsked(id string) {
	e.t.Helper()
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{id}}},
		Approvals: []store.NewApproval{{
			Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t", ExpiresAt: e.now().Add(time.Hour),
				Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "a@example.org", Nonce: "n"}}},
			Tokens: map[string]store.TokenBinding{"h-" + id: {ApprovalID: id, Channel: "email", Recipient: "a@example.org", Kind: "token"}},
			Events: asked(e.now())}}})
	e.ok(err, "ingest approval "+id)
}

// trail reads approval id's trail, checks that it verifies against its
// head, and returns it.
func (e *env) trail(id string) []store.ApprovalEvent {
	e.t.Helper()
	evs, head, err := e.s.ApprovalEvents(e.ctx, id)
	e.ok(err, "events of "+id)
	if err := store.VerifyApprovalTrail(evs, head); err != nil {
		e.t.Fatalf("trail of %s does not verify: %v\n%+v", id, err, evs)
	}
	return evs
}

// kinds are the trail's kinds, each with its disposition and why when it
// has them: "voted:ignored:expired".
func kinds(evs []store.ApprovalEvent) []string {
	var out []string
	for _, ev := range evs {
		k := ev.Kind
		if d := ev.Evidence["disposition"]; d != "" {
			k += ":" + d
		}
		if w := ev.Evidence["why"]; w != "" {
			k += ":" + w
		}
		out = append(out, k)
	}
	return out
}

func vote(decision string, at time.Time) *store.ApprovalEvent {
	return &store.ApprovalEvent{At: at, Kind: store.EventVoted, Actor: "a@example.org", Channel: "email",
		Evidence: map[string]string{"decision": decision, "dmarc": "pass"}}
}

func eventsAtIngest(e *env) {
	e.ingestAsked("a1")
	evs := e.trail("a1")
	if len(evs) != 1 {
		e.t.Fatalf("%d events at ingest, want 1: %+v", len(evs), evs)
	}
	got := evs[0]
	if got.Seq != 1 || got.PrevHash != "" || got.Kind != store.EventAsked || got.Actor != "a@example.org" || got.Channel != "email" ||
		len(got.Hash) != 64 || got.Evidence == nil {
		e.t.Fatalf("first event %+v", got)
	}
	e.sameTime(got.At, start, "asked at")
	// An approval stored without events has an empty trail, which verifies.
	e.ingestApproval("a2", e.now().Add(time.Hour))
	if evs := e.trail("a2"); len(evs) != 0 {
		e.t.Fatalf("trail of an approval ingested without events: %+v", evs)
	}
	_, _, err := e.s.ApprovalEvents(e.ctx, "a-missing")
	e.is(err, store.ErrNotFound, "events of an unknown approval")
}

func eventsOfDecisions(e *env) {
	e.ingestAsked("a1")
	e.advance(time.Minute)
	d := store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Reason: "fine", DecidedBy: "a@example.org",
		Channel: "email", MessageID: "m1", At: e.now(), InjectionID: "inj-a1", Vote: vote("granted", e.now())}
	_, _, err := e.s.Decide(e.ctx, d)
	e.ok(err, "decide")
	e.advance(time.Minute)
	d.MessageID, d.At, d.State, d.Vote, d.InjectionID = "m2", e.now(), store.ApprovalDenied, vote("denied", e.now()), "inj-2"
	_, _, err = e.s.Decide(e.ctx, d)
	e.is(err, store.ErrAlreadyDecided, "second decision")
	evs := e.trail("a1")
	want := []string{"asked", "voted:decided", "decided", "voted:ignored:already-decided"}
	if !slices.Equal(kinds(evs), want) {
		e.t.Fatalf("trail %v, want %v", kinds(evs), want)
	}
	if dec := evs[2]; dec.Evidence["decision"] != store.ApprovalGranted || dec.Evidence["reason"] != "fine" || dec.Actor != "a@example.org" {
		e.t.Fatalf("decided event %+v", dec)
	}
	if v := evs[3]; v.Evidence["decision"] != "denied" || v.Evidence["dmarc"] != "pass" {
		e.t.Fatalf("ignored vote lost its evidence: %+v", v)
	}
	e.sameTime(evs[3].At, e.now(), "late vote at")
	// A vote that says why it is ignored keeps its reason.
	lateVote := vote("granted", e.now())
	lateVote.Evidence["why"] = "late"
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, Channel: "email", MessageID: "m3",
		At: e.now(), InjectionID: "inj-3", Vote: lateVote})
	e.is(err, store.ErrAlreadyDecided, "third decision")
	if k := kinds(e.trail("a1")); k[len(k)-1] != "voted:ignored:late" {
		e.t.Fatalf("trail %v, want a vote ignored as late last", k)
	}
}

func eventsExpiredWithdrawn(e *env) {
	e.ingestAsked("a1")
	e.ingestAsked("a2")
	e.advance(time.Hour)
	_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalExpired, Reason: "expired",
		DecidedBy: "policy:expired", Channel: "policy", At: e.now(), InjectionID: "inj-a1"})
	e.ok(err, "expire")
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "a2", State: store.ApprovalVoid, Reason: "not needed",
		DecidedBy: "operator:k1", Channel: "operator", At: e.now()})
	e.ok(err, "withdraw")
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "a2", State: store.ApprovalGranted, DecidedBy: "a@example.org",
		Channel: "email", MessageID: "m1", At: e.now(), InjectionID: "inj-x", Vote: vote("granted", e.now())})
	e.is(err, store.ErrAlreadyDecided, "vote after withdrawal")
	if k := kinds(e.trail("a1")); !slices.Equal(k, []string{"asked", "expired"}) {
		e.t.Fatalf("expired trail %v", k)
	}
	evs := e.trail("a2")
	if k := kinds(evs); !slices.Equal(k, []string{"asked", "withdrawn", "voted:ignored:withdrawn"}) {
		e.t.Fatalf("withdrawn trail %v", k)
	}
	if evs[1].Actor != "operator:k1" || evs[1].Evidence["reason"] != "not needed" {
		e.t.Fatalf("withdrawn event %+v", evs[1])
	}
}

func eventsNotedAndInjected(e *env) {
	e.ingestAsked("a1")
	e.advance(time.Second)
	wrong := store.ApprovalEvent{At: e.now(), Kind: store.EventVoted, Actor: "mallory@example.org", Channel: "email",
		Evidence: map[string]string{"decision": "granted", "disposition": "ignored", "why": "wrong-person"}}
	e.ok(e.s.Note(e.ctx, store.AuditEntry{At: e.now(), ApprovalID: "a1", Event: "wrong-sender", Channel: "email", MessageID: "m1"}, wrong), "note")
	// The message is processed once: its vote is not appended twice.
	e.is(e.s.Note(e.ctx, store.AuditEntry{At: e.now(), ApprovalID: "a1", Event: "wrong-sender", Channel: "email", MessageID: "m1"}, wrong),
		store.ErrDuplicateInbound, "the same message again")
	_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, DecidedBy: "a@example.org",
		Channel: "email", MessageID: "m2", At: e.now(), InjectionID: "inj-a1"})
	e.ok(err, "decide")
	got := e.claimInjections()
	if len(got) != 1 {
		e.t.Fatalf("claimed %d injections", len(got))
	}
	e.advance(time.Second)
	_, err = e.s.RecordInjection(e.ctx, got[0], store.InjectionOutcome{State: store.InjectionDone, At: e.now()})
	e.ok(err, "record injection")
	evs := e.trail("a1")
	if k := kinds(evs); !slices.Equal(k, []string{"asked", "voted:ignored:wrong-person", "decided", "injected"}) {
		e.t.Fatalf("trail %v", k)
	}
	inj := evs[3]
	if inj.Actor != "agent:travel" || inj.Evidence["injection"] != "inj-a1" || inj.Evidence["attempt"] != "1" || inj.Evidence["decision"] != "granted" {
		e.t.Fatalf("injected event %+v", inj)
	}
}

func eventsAppendRefuses(e *env) {
	_, err := e.s.AppendApprovalEvent(e.ctx, "a-missing", store.ApprovalEvent{Kind: store.EventReminded})
	e.is(err, store.ErrNotFound, "append to an unknown approval")
	e.ingestAsked("a1")
	_, err = e.s.AppendApprovalEvent(e.ctx, "a1", store.ApprovalEvent{Kind: "approved-by-magic"})
	e.is(err, store.ErrBadEvent, "unknown kind")
	many := map[string]string{}
	for i := range store.MaxEventKeys + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	_, err = e.s.AppendApprovalEvent(e.ctx, "a1", store.ApprovalEvent{Kind: store.EventReminded, Evidence: many})
	e.is(err, store.ErrBadEvent, "too much evidence")
	// Long values are cut, not refused: the event stays small.
	long := string(make([]byte, 4*store.MaxEventEvidence))
	got, err := e.s.AppendApprovalEvent(e.ctx, "a1", store.ApprovalEvent{Kind: store.EventReminded, Actor: "b@example.org",
		Channel: "sms", Evidence: map[string]string{"ua": long}})
	e.ok(err, "append")
	if got.Seq != 2 || len(got.Evidence["ua"]) != store.MaxEventEvidence {
		e.t.Fatalf("appended %+v", got)
	}
	e.sameTime(got.At, e.now(), "an event without a time is stamped now")
	if evs := e.trail("a1"); len(evs) != 2 || evs[1].Hash != got.Hash {
		e.t.Fatalf("trail %+v, want the appended event second", evs)
	}
}

func eventsConcurrentAppends(e *env) {
	e.ingestAsked("a1")
	errs := parallel(workers, func(i int) error {
		for j := range 3 {
			_, err := e.s.AppendApprovalEvent(e.ctx, "a1", store.ApprovalEvent{At: e.now(), Kind: store.EventReminded,
				Actor: fmt.Sprintf("w%d-%d", i, j), Channel: "sms"})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if count(errs, nil) != workers {
		e.t.Fatalf("appends: %v", errs)
	}
	if evs := e.trail("a1"); len(evs) != 1+3*workers {
		e.t.Fatalf("%d events, want %d", len(evs), 1+3*workers)
	}
}
