package storetest

import (
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// policyCases are what approval policies ask of the store.
var policyCases = []testCase{
	{"policy/an approval decided at ingest is stored decided, its injection queued, in the ingest's transaction", policyDecidedAtIngest},
	{"policy/quorum: votes are counted per person, a second vote has no effect, the vote that completes the quorum decides", policyQuorumGrants},
	{"policy/quorum: one denial denies; a vote after the decision is ignored", policyQuorumDenialVetoes},
}

// ingestQuorum stores approval id under policy "two" with quorum 2, asked
// of alice by email and SMS (one person) and of bob by email.
func (e *env) ingestQuorum(id string) {
	e.t.Helper()
	_, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "alice@example.org", ApprovalIDs: []string{id}},
			{Channel: "email", To: "bob@example.org", ApprovalIDs: []string{id}}},
		Approvals: []store.NewApproval{{
			Approval: store.Approval{ID: id, Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t",
				ExpiresAt: e.now().Add(time.Hour), Policy: "two", Quorum: 2,
				Recipients: []store.ApprovalRecipient{{Channel: "email", Address: "alice@example.org", Nonce: "n1", Person: "alice"},
					{Channel: "sms", Address: "+447700900123", Nonce: "n2", Person: "alice"},
					{Channel: "email", Address: "bob@example.org", Nonce: "n3", Person: "bob"}}}}}})
	e.ok(err, "ingest "+id)
}

// vote is person's vote on id, by message msgID.
func (e *env) vote(id, person, channel, state, msgID string) (*store.Approval, *store.Injection, error) {
	return e.s.Decide(e.ctx, store.Decision{ApprovalID: id, State: state, DecidedBy: person, Person: person, Channel: channel,
		MessageID: msgID, At: e.now(), InjectionID: "inj-" + msgID,
		Vote: &store.ApprovalEvent{At: e.now(), Kind: store.EventVoted, Actor: person, Channel: channel, Evidence: map[string]string{"messageId": msgID}}})
}

func policyQuorumGrants(e *env) {
	e.ingestQuorum("q1")
	all, err := e.s.ListDeliveries(e.ctx, "", "", 10)
	e.ok(err, "deliveries")
	if len(all) != 2 {
		e.t.Fatalf("%d deliveries, want the request's and the policy's (bob)", len(all))
	}
	a, inj, err := e.vote("q1", "alice", "email", store.ApprovalGranted, "m1")
	e.ok(err, "alice's vote")
	if a.State != store.ApprovalPending || inj != nil {
		e.t.Fatalf("after one of two grants: %+v, %+v", a, inj)
	}
	if g, q := a.Tally(); g != 1 || q != 2 {
		e.t.Fatalf("tally %d of %d", g, q)
	}
	e.advance(time.Second)
	a, inj, err = e.vote("q1", "alice", "sms", store.ApprovalGranted, "m2")
	e.is(err, store.ErrSecondVote, "alice again, on another channel")
	if a == nil || a.State != store.ApprovalPending || inj != nil {
		e.t.Fatalf("a second vote answered %+v, %+v", a, inj)
	}
	e.advance(time.Second)
	a, inj, err = e.vote("q1", "bob", "email", store.ApprovalGranted, "m3")
	e.ok(err, "bob's vote")
	if a.State != store.ApprovalGranted || a.DecidedBy != "policy:two (alice, bob)" || inj == nil || inj.Response.DecidedBy != "policy:two (alice, bob)" {
		e.t.Fatalf("after two grants: %+v, %+v", a, inj)
	}
	stored, err := e.s.Approval(e.ctx, "q1")
	e.ok(err, "approval")
	if len(stored.Votes) != 2 || stored.Votes[0].Person != "alice" || stored.Votes[1].Person != "bob" {
		e.t.Fatalf("votes %+v", stored.Votes)
	}
	if got, want := kinds(e.trail("q1")), []string{"voted:counted", "voted:ignored:second-vote", "voted:decided", "decided"}; !slices.Equal(got, want) {
		e.t.Fatalf("trail %v, want %v", got, want)
	}
	if evs, _, _ := e.s.ApprovalEvents(e.ctx, "q1"); evs[0].Evidence["tally"] != "1 of 2" {
		e.t.Fatalf("counted vote's evidence %v", evs[0].Evidence)
	}
}

func policyQuorumDenialVetoes(e *env) {
	e.ingestQuorum("q2")
	_, _, err := e.vote("q2", "alice", "email", store.ApprovalGranted, "m1")
	e.ok(err, "alice grants")
	a, inj, err := e.vote("q2", "bob", "email", store.ApprovalDenied, "m2")
	e.ok(err, "bob denies")
	if a.State != store.ApprovalDenied || a.DecidedBy != "policy:two (bob)" || inj == nil || inj.Response.Decision != "denied" {
		e.t.Fatalf("after a denial: %+v, %+v", a, inj)
	}
	a, inj, err = e.vote("q2", "carol", "email", store.ApprovalGranted, "m3")
	e.is(err, store.ErrAlreadyDecided, "a vote after the decision")
	if a.State != store.ApprovalDenied || inj != nil {
		e.t.Fatalf("a late vote answered %+v, %+v", a, inj)
	}
	if got, want := kinds(e.trail("q2")), []string{"voted:counted", "voted:decided", "decided", "voted:ignored:already-decided"}; !slices.Equal(got, want) {
		e.t.Fatalf("trail %v, want %v", got, want)
	}
}

func policyDecidedAtIngest(e *env) {
	res, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{"p1"}}},
		Approvals: []store.NewApproval{{
			Approval: store.Approval{ID: "p1", Agent: "travel", Request: []byte(`{}`), Session: "s", Turn: "t",
				ExpiresAt: e.now().Add(time.Hour), Policy: "small"},
			Decision: &store.Decision{State: store.ApprovalGranted, Reason: "decided by policy small", DecidedBy: "policy:small",
				Channel: "policy", At: e.now(), InjectionID: "inj-p1"}}}})
	e.ok(err, "ingest")
	if len(res.Deliveries) != 1 {
		e.t.Fatalf("deliveries %+v", res.Deliveries)
	}
	a, err := e.s.Approval(e.ctx, "p1")
	e.ok(err, "approval")
	if a.State != store.ApprovalGranted || a.DecidedBy != "policy:small" || a.Policy != "small" || a.InjectionID != "inj-p1" || a.EnvelopeID != res.EnvelopeID {
		e.t.Fatalf("approval %+v", a)
	}
	if ids, err := e.s.DueExpiries(e.ctx, e.now().Add(2*time.Hour), 10); err != nil || len(ids) != 0 {
		e.t.Fatalf("due expiries %v, %v: a decided approval has none", ids, err)
	}
	jobs, err := e.s.ClaimInjections(e.ctx, e.now(), 10, time.Minute)
	e.ok(err, "claim injections")
	if len(jobs) != 1 || jobs[0].ApprovalID != "p1" || jobs[0].Response.Decision != "granted" || jobs[0].Response.DecidedBy != "policy:small" ||
		jobs[0].Session != "s" || jobs[0].Turn != "t" {
		e.t.Fatalf("injections %+v", jobs)
	}
	if ev := e.events("p1"); !slices.Equal(ev, []string{"created", "decided"}) {
		e.t.Fatalf("audit %v", ev)
	}
}
