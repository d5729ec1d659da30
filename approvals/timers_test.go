package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// ladder is a policy whose first step (alice by email) is reminded after
// 30m and escalated after 2h to bob (SMS) and carol (email and SMS),
// under quiet hours q.
func ladder(t testing.TB, q *policy.QuietHours) func(*Config) {
	return withPolicies(t, policy.Definition{Name: "ladder", Agent: "travel", Tool: "book_flight", Quorum: 2, QuietHours: q,
		Steps: []policy.Step{
			{People: []policy.Person{{Channels: []envelope.Recipient{email("alice@example.org")}}}, RemindAfter: 30 * time.Minute, EscalateAfter: 2 * time.Hour},
			{People: []policy.Person{{Channels: []envelope.Recipient{sms("+447700900123")}},
				{Name: "carol", Channels: []envelope.Recipient{email("carol@example.org"), sms("+447700900789")}}}, RemindAfter: time.Hour},
		}})
}

// quietAround is a quiet window in UTC that holds now+2h (the escalation)
// and ends at about now+3h.
func quietAround(t testing.TB, now time.Time) *policy.QuietHours {
	hm := func(t time.Time) string { return fmt.Sprintf("%02d:%02d", t.UTC().Hour(), t.UTC().Minute()) }
	q, errs := policy.ParseQuietHours("UTC", hm(now.Add(90*time.Minute)), hm(now.Add(3*time.Hour)))
	if errs != nil {
		t.Fatal(errs)
	}
	return q
}

// deliveriesOf lists every delivery of the store, by id.
func (h *harness) deliveriesOf() []*store.Delivery {
	h.t.Helper()
	ds, err := h.db.ListDeliveries(h.ctx, "", "", 100)
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

func (h *harness) fire(want int) {
	h.t.Helper()
	n, err := h.svc.FireTimers(h.ctx)
	if err != nil || n != want {
		h.t.Fatalf("FireTimers = %d, %v; want %d fired", n, err, want)
	}
}

// A ladder: the first step's reminder goes once, to who has not answered;
// after escalate_after the second step is asked (email at once, SMS after
// the quiet hours), the first step's people can still answer, and the
// quorum's completion is injected once.
func TestPolicyLadderRemindsAndEscalates(t *testing.T) {
	var q *policy.QuietHours
	h := newHarness(t, harnessOpt{cfg: func(c *Config) {
		q = quietAround(t, c.Now())
		ladder(t, q)(c)
	}})
	start := h.clock.Now()
	env := h.suspend("l1")
	ds := h.ingest(env, email("customer@example.org"))
	if len(ds) != 2 {
		t.Fatalf("%d deliveries at ingest, want the customer's and alice's", len(ds))
	}
	h.fire(0)
	h.clock.Advance(30*time.Minute + time.Second)
	h.fire(1)
	h.fire(0) // a reminder goes once
	all := h.deliveriesOf()
	var reminders []*store.Delivery
	for _, d := range all {
		if d.Extra[envelope.ExtraApprovalNotice] == envelope.NoticeReminder {
			reminders = append(reminders, d)
		}
	}
	if len(reminders) != 1 || reminders[0].To != "alice@example.org" || !slices.Equal(reminders[0].ApprovalIDs, []string{"l1"}) {
		t.Fatalf("reminders %+v, want one to alice", reminders)
	}
	if hd := h.handle(reminders[0]); hd.Token == "" || hd.Token != h.handleFor(ds, "email", "alice@example.org").Token {
		t.Fatalf("the reminder's handle %+v: want alice's token", hd)
	}
	aliceTok := h.handle(reminders[0]).Token
	if res := h.inbound(envelope.Inbound{Channel: "email", From: "alice@example.org", MessageID: "<a1@mail>", Token: aliceTok, Text: "approve"}); res.Outcome != OutcomeCounted {
		t.Fatalf("alice's grant: %+v", res)
	}

	h.clock.Advance(90 * time.Minute)
	h.fire(1)
	var asked []*store.Delivery
	for _, d := range h.deliveriesOf() {
		if d.Extra[envelope.ExtraApprovalNotice] == envelope.NoticeEscalation {
			asked = append(asked, d)
		}
	}
	if len(asked) != 3 {
		t.Fatalf("%d messages for the second step, want bob's SMS and carol's email and SMS", len(asked))
	}
	quietEnd := q.Defer(start.Add(2*time.Hour + 30*time.Second))
	for _, d := range asked {
		due := d.NextAttemptAt
		switch d.Channel {
		case envelope.ChannelSMS:
			if !due.Equal(quietEnd) || !due.After(h.clock.Now()) {
				t.Errorf("SMS to %s due %s, want the end of the quiet hours %s", d.To, due, quietEnd)
			}
		default:
			if due.After(h.clock.Now()) {
				t.Errorf("email to %s due %s: email is not deferred", d.To, due)
			}
		}
	}
	a := h.approval("l1")
	if len(a.Recipients) != 4 {
		t.Fatalf("recipients %+v", a.Recipients)
	}
	// The second step's reminder is set; carol's grant completes the
	// quorum before it, and it then sends nothing.
	var carolMail *store.Delivery
	for _, d := range asked {
		if d.To == "carol@example.org" {
			carolMail = d
		}
	}
	if res := h.inbound(envelope.Inbound{Channel: "email", From: "carol@example.org", MessageID: "<c1@mail>", Token: h.handle(carolMail).Token, Text: "approve"}); res.Outcome != OutcomeDecided {
		t.Fatalf("carol's grant: %+v", res)
	}
	h.waitReceived(1)
	h.settle()
	if got := h.agent.Received(); len(got) != 1 || got[0].Response.DecidedBy != "policy:ladder (alice@example.org, carol)" {
		t.Fatalf("agent received %+v", got)
	}
	// The SMS held by the quiet hours, sent after the decision, says so.
	for _, d := range asked {
		if d.Channel == envelope.ChannelSMS {
			if hd := h.handle(d); !hd.Decided || hd.Code != "" || !strings.Contains(hd.Note, "already decided (granted)") {
				t.Fatalf("the held SMS after the decision: %+v", hd)
			}
		}
	}
	before := len(h.deliveriesOf())
	h.clock.Advance(2 * time.Hour)
	h.fire(0)
	if n := len(h.deliveriesOf()); n != before {
		t.Fatalf("%d deliveries after the decided approval's reminder came due, want %d", n, before)
	}
	if ts, _ := h.db.ApprovalTimersOf(h.ctx, "l1"); len(ts) != 0 {
		t.Fatalf("timers left: %+v", ts)
	}
	kinds := h.trailKinds("l1")
	want := "asked reminded voted:counted asked asked asked escalated voted:decided decided injected"
	if kinds != want {
		t.Errorf("trail %v\nwant %s", kinds, want)
	}
}

// A withdrawn approval's timers send nothing.
func TestPolicyLadderStopsWhenWithdrawn(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: ladder(t, nil)})
	env := h.suspend("l2")
	h.ingest(env, email("customer@example.org"))
	if _, _, err := h.db.Decide(h.ctx, store.Decision{ApprovalID: "l2", State: store.ApprovalVoid, DecidedBy: "operator", Channel: "operator", At: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	n := len(h.deliveriesOf())
	h.clock.Advance(3 * time.Hour)
	h.fire(0)
	if got := len(h.deliveriesOf()); got != n {
		t.Fatalf("%d deliveries after the timers of a withdrawn approval, want %d", got, n)
	}
}

// "Requested by" names the agent the delivery named, whatever handler the
// envelope claims.
func TestRequestedByIsTheConfiguredAgent(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("rb1")
	for i, p := range env.Parts {
		if p.PartType() == envelope.PartApprovalRequest {
			var m map[string]any
			if err := json.Unmarshal(p.Data, &m); err != nil {
				t.Fatal(err)
			}
			m["handler"] = "Your CFO"
			env.Parts[i].Data, _ = json.Marshal(m)
		}
	}
	ds := h.ingest(env, email("alice@example.org"))
	if hd := h.handle(ds[0]); hd.Request.Handler != "travel" {
		t.Fatalf("requested by %q, want the delivery's agent travel", hd.Request.Handler)
	}
}

// The work after a decision (OnDecided: the Slack rewrite) is done once
// by the deciding process, which then removes the decision's follow-up
// timer; a process killed before that leaves the timer, and the sweeper
// does the work a few seconds later.
func TestFollowUpSurvivesACrash(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	h := newHarness(t, harnessOpt{cfg: func(c *Config) {
		c.OnDecided = func(_ context.Context, a *store.Approval) { mu.Lock(); calls = append(calls, a.ID); mu.Unlock() }
	}})
	h.ingest(h.suspend("f1"), email("alice@example.org"))
	if _, err := h.svc.Decide(h.ctx, "f1", "granted", "ok", "key1"); err != nil {
		t.Fatal(err)
	}
	if ts, _ := h.db.ApprovalTimersOf(h.ctx, "f1"); len(ts) != 0 || len(calls) != 1 {
		t.Fatalf("after a decision: follow-up done %d times, timers left %+v", len(calls), ts)
	}
	// A process that dies right after its decision committed.
	h.ingest(h.suspend("f2"), email("alice@example.org"))
	if _, _, err := h.db.Decide(h.ctx, store.Decision{ApprovalID: "f2", State: store.ApprovalGranted, DecidedBy: "operator", Channel: "operator",
		At: h.clock.Now(), InjectionID: "inj-f2", FollowUpAt: h.clock.Now().Add(followUpGrace)}); err != nil {
		t.Fatal(err)
	}
	h.fire(0)
	h.clock.Advance(followUpGrace)
	h.fire(1)
	h.fire(0)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, []string{"f1", "f2"}) {
		t.Fatalf("follow-ups done for %v, want f1 then f2", calls)
	}
}

// trailKinds is approval id's trail, which must verify, as its kinds with
// each vote's disposition and why: "voted:ignored:already-decided".
func (h *harness) trailKinds(id string) string {
	h.t.Helper()
	evs, head, err := h.db.ApprovalEvents(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := VerifyHead(evs, head); err != nil {
		h.t.Fatalf("trail of %s: %v", id, err)
	}
	kinds := trailKinds(evs)
	return strings.Join(kinds, " ")
}
