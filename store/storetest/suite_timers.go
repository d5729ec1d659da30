package storetest

import (
	"slices"
	"sync"
	"time"

	"github.com/cool-ai/beachd/store"
)

// timerCases are the durable timers of approvals under a policy.
var timerCases = []testCase{
	{"timers/an approval's timers are stored with it and come due in order", timersDueInOrder},
	{"timers/firing sends to who has not voted, adds the escalation's people, and the next timers, once", timersFireOnce},
	{"timers/a timer of an approval no longer pending is removed and does nothing", timersOfDecidedApproval},
	{"timers/racing firings of one timer: exactly one fires", timersRace},
	{"timers/a decision with a follow-up writes its timer in its transaction; a decision that changes nothing writes none", timersFollowUp},
	{"timers/a message recorded sent after its approval's decision gets a follow-up naming it; one recorded before, or without FollowDecision, none", timersLateMessage},
}

// ingestLadder stores approval id (quorum 2, alice and bob asked by email)
// with a reminder of step 0 due in 1m and its escalation in 2m.
func (e *env) ingestLadder(id string) {
	e.t.Helper()
	e.ingestQuorum(id)
	// ingestQuorum stores no timers: they come with a second approval
	// written the same way, so that both paths are exercised.
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "alice@example.org", ApprovalIDs: []string{id + "-l"}}},
		Approvals: []store.NewApproval{{
			Approval: store.Approval{ID: id + "-l", Agent: "travel", Request: []byte(`{}`), ExpiresAt: e.now().Add(time.Hour), Policy: "ladder", Quorum: 2,
				Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "alice@example.org", Nonce: "n1", Person: "alice"},
					{Channel: "email", Address: "bob@example.org", Nonce: "n3", Person: "bob"}}},
			Timers: []store.ApprovalTimer{{ApprovalID: id + "-l", Kind: store.TimerEscalate, Step: 0, Due: e.now().Add(2 * time.Minute)},
				{ApprovalID: id + "-l", Kind: store.TimerRemind, Step: 0, Due: e.now().Add(time.Minute)}}}}})
	e.ok(err, "ingest "+id+"-l")
}

func timersDueInOrder(e *env) {
	e.ingestLadder("t1")
	due, err := e.s.DueApprovalTimers(e.ctx, e.now(), 10)
	e.ok(err, "due now")
	if len(due) != 0 {
		e.t.Fatalf("due before their time: %+v", due)
	}
	all, err := e.s.ApprovalTimersOf(e.ctx, "t1-l")
	e.ok(err, "timers of t1-l")
	if len(all) != 2 || all[0].Kind != store.TimerRemind || all[1].Kind != store.TimerEscalate {
		e.t.Fatalf("timers %+v", all)
	}
	e.advance(2 * time.Minute)
	due, err = e.s.DueApprovalTimers(e.ctx, e.now(), 10)
	e.ok(err, "due after 2m")
	if len(due) != 2 || due[0].Kind != store.TimerRemind || !due[0].Due.Equal(start.Add(time.Minute)) {
		e.t.Fatalf("due %+v", due)
	}
	if due, _ := e.s.DueApprovalTimers(e.ctx, e.now(), 1); len(due) != 1 {
		e.t.Fatalf("max 1 answered %d", len(due))
	}
}

// reminder is the firing of t1-l's reminder: to alice and to bob.
func reminder(id string, due time.Time) store.TimerFire {
	send := func(to, person string) store.TimerSend {
		return store.TimerSend{Delivery: store.NewDelivery{Channel: "email", To: to, ApprovalIDs: []string{id}, Extra: map[string]string{"approvalNotice": "reminder"}},
			Person: person, Event: store.ApprovalEvent{Kind: store.EventReminded, Actor: to, Channel: "email"}}
	}
	return store.TimerFire{Timer: store.ApprovalTimer{ApprovalID: id, Kind: store.TimerRemind, Step: 0, Due: due},
		Sends: []store.TimerSend{send("alice@example.org", "alice"), send("bob@example.org", "bob")}}
}

func timersFireOnce(e *env) {
	e.ingestLadder("t2")
	e.advance(time.Minute)
	_, _, err := e.vote("t2-l", "alice", "email", store.ApprovalGranted, "m1")
	e.ok(err, "alice's vote")
	before, err := e.s.Envelope(e.ctx, mustApproval(e, "t2-l").EnvelopeID)
	e.ok(err, "envelope")
	fired, err := e.s.FireApprovalTimer(e.ctx, reminder("t2-l", start.Add(time.Minute)))
	e.ok(err, "fire the reminder")
	if !fired.Fired || fired.Skipped != 1 || len(fired.Deliveries) != 1 || fired.Deliveries[0].To != "bob@example.org" {
		e.t.Fatalf("reminder fired %+v", fired)
	}
	d, err := e.s.Delivery(e.ctx, fired.Deliveries[0].ID)
	e.ok(err, "the reminder's delivery")
	if d.State != store.StateQueued || d.Extra["approvalNotice"] != "reminder" || !slices.Equal(d.ApprovalIDs, []string{"t2-l"}) || d.Agent != "travel" {
		e.t.Fatalf("reminder delivery %+v", d)
	}
	after, err := e.s.Envelope(e.ctx, before.ID)
	e.ok(err, "envelope")
	if !slices.Equal(after.DeliveryIDs, append(slices.Clone(before.DeliveryIDs), d.ID)) {
		e.t.Fatalf("envelope deliveries %v, then %v", before.DeliveryIDs, after.DeliveryIDs)
	}
	again, err := e.s.FireApprovalTimer(e.ctx, reminder("t2-l", start.Add(time.Minute)))
	e.ok(err, "fire the reminder again")
	if again.Fired || again.Why != store.TimerWhyGone || len(again.Deliveries) != 0 {
		e.t.Fatalf("second firing %+v", again)
	}
	// The escalation asks carol by SMS (a code guard, a token) and an
	// hour-later quiet-hours send by SMS, and sets the next step's timer.
	e.advance(time.Minute)
	quietEnd := e.now().Add(time.Hour)
	esc := store.TimerFire{Timer: store.ApprovalTimer{ApprovalID: "t2-l", Kind: store.TimerEscalate, Step: 0, Due: start.Add(2 * time.Minute)},
		Recipients: []store.ApprovalRecipient{{Channel: "sms", Address: "+447700900789", Nonce: "n9", Person: "carol", Step: 1}},
		Tokens:     map[string]store.TokenBinding{"h-carol": {ApprovalID: "t2-l", Channel: "sms", Recipient: "+447700900789", Kind: "code"}},
		Sends: []store.TimerSend{{Delivery: store.NewDelivery{Channel: "sms", To: "+447700900789", ApprovalIDs: []string{"t2-l"}}, NotBefore: quietEnd,
			Event: store.ApprovalEvent{Kind: store.EventAsked, Actor: "+447700900789", Channel: "sms"}}},
		Events: []store.ApprovalEvent{{Kind: store.EventEscalated, Actor: "policy:ladder", Evidence: map[string]string{"step": "2"}}},
		Timers: []store.ApprovalTimer{{ApprovalID: "t2-l", Kind: store.TimerRemind, Step: 1, Due: e.now().Add(time.Minute)}}}
	fired, err = e.s.FireApprovalTimer(e.ctx, esc)
	e.ok(err, "fire the escalation")
	if !fired.Fired || len(fired.Deliveries) != 1 || !fired.Deliveries[0].NextAttemptAt.Equal(quietEnd) {
		e.t.Fatalf("escalation fired %+v", fired)
	}
	a := mustApproval(e, "t2-l")
	if len(a.Recipients) != 3 || a.Recipients[2].Person != "carol" || a.Recipients[2].Step != 1 {
		e.t.Fatalf("recipients after the escalation %+v", a.Recipients)
	}
	if b, err := e.s.TokenBinding(e.ctx, "h-carol"); err != nil || b.Recipient != "+447700900789" {
		e.t.Fatalf("carol's token: %+v %v", b, err)
	}
	if ts, _ := e.s.ApprovalTimersOf(e.ctx, "t2-l"); len(ts) != 1 || ts[0].Step != 1 {
		e.t.Fatalf("timers after the escalation %+v", ts)
	}
	evs := e.trail("t2-l")
	if got, want := kinds(evs), []string{"voted:counted", "reminded", "asked", "escalated"}; !slices.Equal(got, want) {
		e.t.Fatalf("trail %v, want %v", got, want)
	}
	if evs[1].Evidence["delivery"] != d.ID || evs[2].Evidence["due"] == "" {
		e.t.Fatalf("sends' evidence %v, %v", evs[1].Evidence, evs[2].Evidence)
	}
	// Carol can answer: her vote completes the quorum.
	a, inj, err := e.vote("t2-l", "carol", "sms", store.ApprovalGranted, "m2")
	e.ok(err, "carol's vote")
	if a.State != store.ApprovalGranted || inj == nil {
		e.t.Fatalf("after carol: %+v %+v", a, inj)
	}
}

func timersOfDecidedApproval(e *env) {
	e.ingestLadder("t3")
	_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "t3-l", State: store.ApprovalVoid, DecidedBy: "operator", Channel: "operator", At: e.now()})
	e.ok(err, "withdraw")
	e.advance(time.Minute)
	fired, err := e.s.FireApprovalTimer(e.ctx, reminder("t3-l", start.Add(time.Minute)))
	e.ok(err, "fire")
	if fired.Fired || fired.Why != store.ApprovalVoid || len(fired.Deliveries) != 0 {
		e.t.Fatalf("fired on a withdrawn approval: %+v", fired)
	}
	if ts, _ := e.s.ApprovalTimersOf(e.ctx, "t3-l"); len(ts) != 1 || ts[0].Kind != store.TimerEscalate {
		e.t.Fatalf("timers left %+v", ts)
	}
	if got := kinds(e.trail("t3-l")); !slices.Equal(got, []string{"withdrawn"}) {
		e.t.Fatalf("trail %v", got)
	}
}

func timersRace(e *env) {
	e.ingestLadder("t4")
	e.advance(time.Minute)
	var wg sync.WaitGroup
	results := make([]*store.TimerFired, 8)
	for i := range results {
		wg.Go(func() {
			r, err := e.s.FireApprovalTimer(e.ctx, reminder("t4-l", start.Add(time.Minute)))
			if err != nil {
				e.t.Errorf("firing %d: %v", i, err)
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	n, sent := 0, 0
	for _, r := range results {
		if r != nil && r.Fired {
			n++
			sent += len(r.Deliveries)
		}
	}
	if n != 1 || sent != 2 {
		e.t.Fatalf("%d firings fired, %d deliveries; want 1 and 2", n, sent)
	}
}

func mustApproval(e *env, id string) *store.Approval {
	e.t.Helper()
	a, err := e.s.Approval(e.ctx, id)
	e.ok(err, "approval "+id)
	return a
}

func timersFollowUp(e *env) {
	e.ingestQuorum("t5")
	due := e.now().Add(10 * time.Second)
	_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "t5", State: store.ApprovalGranted, DecidedBy: "operator", Channel: "operator",
		At: e.now(), InjectionID: "inj-t5", FollowUpAt: due})
	e.ok(err, "decide")
	ts, err := e.s.ApprovalTimersOf(e.ctx, "t5")
	e.ok(err, "timers")
	if len(ts) != 1 || ts[0].Kind != store.TimerDecided || !ts[0].Due.Equal(due) {
		e.t.Fatalf("follow-up timers %+v", ts)
	}
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "t5", State: store.ApprovalDenied, DecidedBy: "operator", Channel: "operator",
		MessageID: "late", At: e.now(), InjectionID: "inj-t5b", FollowUpAt: due.Add(time.Second)})
	if ts, _ := e.s.ApprovalTimersOf(e.ctx, "t5"); len(ts) != 1 {
		e.t.Fatalf("a decision that changed nothing wrote a follow-up (%v): %+v", err, ts)
	}
	e.advance(10 * time.Second)
	if due, _ := e.s.DueApprovalTimers(e.ctx, e.now(), 10); len(due) != 1 {
		e.t.Fatalf("due %+v", due)
	}
	fired, err := e.s.FireApprovalTimer(e.ctx, store.TimerFire{Timer: ts[0]})
	e.ok(err, "fire the follow-up")
	if !fired.Fired || len(fired.Deliveries) != 0 {
		e.t.Fatalf("follow-up fired %+v", fired)
	}
	if again, _ := e.s.FireApprovalTimer(e.ctx, store.TimerFire{Timer: ts[0]}); again.Fired {
		e.t.Fatalf("fired twice: %+v", again)
	}
}

func timersLateMessage(e *env) {
	e.ingestQuorum("t6")
	ds := e.claim(10)
	if len(ds) != 2 {
		e.t.Fatalf("claimed %d", len(ds))
	}
	record := func(d *store.Delivery, pid string, follow bool) {
		e.t.Helper()
		_, err := e.s.Record(e.ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: pid, FollowDecision: follow})
		e.ok(err, "record "+d.ID)
	}
	// Recorded while the approval is pending: nothing to follow.
	record(ds[0], "C1/1.1", true)
	if ts, _ := e.s.ApprovalTimersOf(e.ctx, "t6"); len(ts) != 0 {
		e.t.Fatalf("timers of a message recorded before the decision: %+v", ts)
	}
	_, _, err := e.s.Decide(e.ctx, store.Decision{ApprovalID: "t6", State: store.ApprovalDenied, DecidedBy: "operator", Channel: "operator",
		At: e.now(), InjectionID: "inj-t6"})
	e.ok(err, "decide")
	record(ds[1], "C1/1.2", true)
	ts, err := e.s.ApprovalTimersOf(e.ctx, "t6")
	e.ok(err, "timers")
	if len(ts) != 1 || ts[0].Kind != store.TimerDecided || ts[0].Delivery != ds[1].ID || !ts[0].Due.Equal(e.now()) {
		e.t.Fatalf("timers of a message recorded after the decision: %+v", ts)
	}
	due, err := e.s.DueApprovalTimers(e.ctx, e.now(), 10)
	e.ok(err, "due")
	if len(due) != 1 || due[0].Delivery != ds[1].ID {
		e.t.Fatalf("due %+v", due)
	}
	fired, err := e.s.FireApprovalTimer(e.ctx, store.TimerFire{Timer: due[0]})
	e.ok(err, "fire")
	if !fired.Fired || len(fired.Deliveries) != 0 {
		e.t.Fatalf("fired %+v", fired)
	}
	if ts, _ := e.s.ApprovalTimersOf(e.ctx, "t6"); len(ts) != 0 {
		e.t.Fatalf("left %+v", ts)
	}
	// Without FollowDecision (a message that cannot change): none.
	e.ingestQuorum("t7")
	ds = e.claim(10)
	_, _, err = e.s.Decide(e.ctx, store.Decision{ApprovalID: "t7", State: store.ApprovalDenied, DecidedBy: "operator", Channel: "operator",
		At: e.now(), InjectionID: "inj-t7"})
	e.ok(err, "decide")
	for _, d := range ds {
		record(d, "x-"+d.ID, false)
	}
	if ts, _ := e.s.ApprovalTimersOf(e.ctx, "t7"); len(ts) != 0 {
		e.t.Fatalf("timers without FollowDecision: %+v", ts)
	}
}
