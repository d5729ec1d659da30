package storetest

import (
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// policyCases are what approval policies ask of the store.
var policyCases = []testCase{
	{"policy/an approval decided at ingest is stored decided, its injection queued, in the ingest's transaction", policyDecidedAtIngest},
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
