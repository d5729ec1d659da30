package approvals

import (
	"errors"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

func withPolicies(t testing.TB, defs ...policy.Definition) func(*Config) {
	set, err := policy.New(defs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.Policies = set }
}

// A policy that decides at ingest: the approval is decided in the ingest's
// transaction and injected once with decidedBy policy:<name>; nobody gets
// a token, code, link or button, and the delivery's recipients are told
// it was decided by the policy.
func TestPolicyDecidesAtIngest(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: withPolicies(t,
		policy.Definition{Name: "small-groups", Agent: "travel", Tool: "book_flight", When: "args.seats <= 6", Decide: policy.DecideGranted},
		policy.Definition{Name: "never-cancel", Agent: "travel", Tool: "cancel", Decide: policy.DecideDenied})})
	env := h.suspend("p1")
	ds := h.ingest(env, email("alice@example.org"), sms("+447700900123"))
	a := h.approval("p1")
	if a.State != store.ApprovalGranted || a.DecidedBy != "policy:small-groups" || a.Policy != "small-groups" || len(a.Recipients) != 0 {
		t.Fatalf("approval %+v: want granted by policy:small-groups, asked of nobody", a)
	}
	got := h.waitReceived(1)
	h.settle()
	if got = h.agent.Received(); len(got) != 1 || got[0].Response.Decision != envelope.DecisionGranted || got[0].Response.DecidedBy != "policy:small-groups" {
		t.Fatalf("agent received %+v, want one grant by policy:small-groups", got)
	}
	r, err := render.New(render.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		hs, err := h.svc.Handles(h.ctx, d, env)
		if err != nil || len(hs) != 1 {
			t.Fatalf("%s: handles %+v, %v", d.Channel, hs, err)
		}
		hd := hs[0]
		if hd.Token != "" || hd.Code != "" || hd.LinkURL != "" || len(hd.Buttons) > 0 || !hd.Decided {
			t.Fatalf("%s: handle %+v: a way to answer went out for an approval decided by policy", d.Channel, hd)
		}
		in := render.Input{Envelope: env, Approvals: hs, Recipient: render.Recipient{Channel: d.Channel, Address: d.To}, Now: h.clock.Now()}
		var text string
		if d.Channel == envelope.ChannelEmail {
			m, err := r.Email(in)
			if err != nil {
				t.Fatal(err)
			}
			text = m.Text + m.HTML + m.Subject
		} else {
			m, err := r.SMS(in)
			if err != nil {
				t.Fatal(err)
			}
			text = m.Body
		}
		if !strings.Contains(text, "Approved automatically by policy small-groups") || strings.Contains(text, "Reply YES") ||
			strings.Contains(text, "[approval:") || strings.Contains(text, "/a/") {
			t.Errorf("%s rendition:\n%s\nwant the policy's decision and no way to answer", d.Channel, text)
		}
	}
	evs, head, err := h.db.ApprovalEvents(h.ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyHead(evs, head); err != nil {
		t.Fatalf("trail: %v", err)
	}
	if len(evs) < 1 || evs[0].Kind != store.EventDecided || evs[0].Actor != "policy:small-groups" || evs[0].Channel != ChannelPolicy {
		t.Fatalf("trail %+v: want the policy's decision first, and nobody asked", evs)
	}
	for _, e := range evs {
		if e.Kind == store.EventAsked {
			t.Errorf("trail has %+v: nobody is asked under a deciding policy", e)
		}
	}
}

// A request that no policy matches is asked exactly as without policies:
// every recipient gets a token, the first answer wins.
func TestNoPolicyMatchIsTodaysBehaviour(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: withPolicies(t,
		policy.Definition{Name: "tiny", Agent: "travel", Tool: "book_flight", When: "args.seats <= 2", Decide: policy.DecideGranted},
		policy.Definition{Name: "other-agent", Agent: "billing", Decide: policy.DecideGranted})})
	env := h.suspend("p2")
	ds := h.ingest(env, email("alice@example.org"))
	a := h.approval("p2")
	if a.State != store.ApprovalPending || a.Policy != "" || len(a.Recipients) != 1 {
		t.Fatalf("approval %+v: want pending, no policy, asked of alice", a)
	}
	hd := h.handle(ds[0])
	if hd.Token == "" || hd.Decided || hd.Note != "" {
		t.Fatalf("handle %+v: want a token as without policies", hd)
	}
}

// handleFor is the handle of the delivery to (channel, addr) among ds.
func (h *harness) handleFor(ds []*store.Delivery, channel, addr string) render.ApprovalHandle {
	h.t.Helper()
	for _, d := range ds {
		if d.Channel == channel && d.To == addr {
			return h.handle(d)
		}
	}
	h.t.Fatalf("no delivery to %s %s among %d", channel, addr, len(ds))
	return render.ApprovalHandle{}
}

func twoOfThree(t testing.TB) func(*Config) {
	return withPolicies(t, policy.Definition{Name: "two-of-three", Agent: "travel", Tool: "book_flight", Quorum: 2,
		Steps: []policy.Step{{People: []policy.Person{
			{Channels: []envelope.Recipient{email("alice@example.org")}},
			{Channels: []envelope.Recipient{sms("+447700900123")}},
			{Name: "carol", Channels: []envelope.Recipient{email("carol@example.org"), sms("+447700900789")}},
		}}}})
}

// Two of three people must grant, across SMS and email; a person asked on
// two channels counts once; the customer the agent answers is told, not
// asked; exactly one approval-response, naming the policy and the deciders.
func TestPolicyQuorumTwoOfThree(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: twoOfThree(t)})
	env := h.suspend("q1")
	ds := h.ingest(env, email("customer@example.org"))
	if len(ds) != 5 {
		t.Fatalf("%d deliveries, want the customer's and four for the three people", len(ds))
	}
	if hd := h.handleFor(ds, "email", "customer@example.org"); hd.Token != "" || hd.Decided || !strings.Contains(hd.Note, "awaits approval") {
		t.Fatalf("customer's handle %+v: want told, not asked", hd)
	}
	carolMail := h.handleFor(ds, "email", "carol@example.org")
	carolSMS := h.handleFor(ds, "sms", "+447700900789")
	bobSMS := h.handleFor(ds, "sms", "+447700900123")

	res := h.inbound(envelope.Inbound{Channel: "email", From: "carol@example.org", MessageID: "<c1@mail>", Token: carolMail.Token, Text: "approve"})
	if res.Outcome != OutcomeCounted {
		t.Fatalf("carol's grant: %+v", res)
	}
	if got := h.enq.To("carol@example.org"); len(got) != 1 || !strings.HasPrefix(got[0], "Recorded: 1 of 2 approvals; waiting for the others.") {
		t.Fatalf("carol was told %q", got)
	}
	res = h.inbound(envelope.Inbound{Channel: "sms", From: "+447700900789", MessageID: "SMc2", Text: "YES " + carolSMS.Code})
	if res.Outcome != OutcomeSecondVote {
		t.Fatalf("carol's second vote, by SMS: %+v", res)
	}
	if got := h.enq.To("+447700900789"); len(got) != 1 || !strings.Contains(got[0], "already recorded") || !strings.Contains(got[0], "1 of 2 approvals") {
		t.Fatalf("carol's SMS was answered %q", got)
	}
	if a := h.approval("q1"); a.State != store.ApprovalPending || len(h.agent.Received()) != 0 {
		t.Fatalf("after one person's two votes: %+v, agent got %d", a, len(h.agent.Received()))
	}
	res = h.inbound(envelope.Inbound{Channel: "sms", From: "+447700900123", MessageID: "SMb1", Text: "YES " + bobSMS.Code})
	if res.Outcome != OutcomeDecided {
		t.Fatalf("bob's grant: %+v", res)
	}
	h.waitReceived(1)
	h.settle()
	got := h.agent.Received()
	if len(got) != 1 || got[0].Response.Decision != envelope.DecisionGranted || got[0].Response.DecidedBy != "policy:two-of-three (carol, +447700900123)" {
		t.Fatalf("agent received %+v", got)
	}
	// Alice comes too late.
	aliceMail := h.handleFor(ds, "email", "alice@example.org")
	if res := h.inbound(envelope.Inbound{Channel: "email", From: "alice@example.org", MessageID: "<a1@mail>", Token: aliceMail.Token, Text: "no"}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("alice after the decision: %+v", res)
	}
	kinds := h.trailKinds("q1")
	want := "asked asked asked asked voted:counted voted:ignored:second-vote voted:decided decided injected voted:ignored:already-decided"
	if kinds != want {
		t.Errorf("trail %v\nwant %s", kinds, want)
	}
}

// One denial denies, whatever the grants before it.
func TestPolicyQuorumDenialVetoes(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: twoOfThree(t)})
	env := h.suspend("q2")
	ds := h.ingest(env, email("customer@example.org"))
	aliceMail := h.handleFor(ds, "email", "alice@example.org")
	bobSMS := h.handleFor(ds, "sms", "+447700900123")
	if res := h.inbound(envelope.Inbound{Channel: "email", From: "alice@example.org", MessageID: "<a1@mail>", Token: aliceMail.Token, Text: "yes"}); res.Outcome != OutcomeCounted {
		t.Fatalf("alice: %+v", res)
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: "+447700900123", MessageID: "SMb1", Text: "NO " + bobSMS.Code + " too dear"}); res.Outcome != OutcomeDecided {
		t.Fatalf("bob's denial: %+v", res)
	}
	h.waitReceived(1)
	h.settle()
	got := h.agent.Received()
	if len(got) != 1 || got[0].Response.Decision != envelope.DecisionDenied || got[0].Response.DecidedBy != "policy:two-of-three (+447700900123)" {
		t.Fatalf("agent received %+v", got)
	}
}

// A request whose policy asks its own recipients cannot be stored when
// they are too few for the quorum: 400 naming the policy, nothing stored.
func TestPolicyQuorumUnreachableAtIngest(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: withPolicies(t, policy.Definition{Name: "two-of-envelope", Agent: "travel", Quorum: 2})})
	env := h.suspend("q3")
	_, _, err := h.svc.Prepare(h.ctx, env, []envelope.Recipient{email("alice@example.org")}, "travel")
	var ve *envelope.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "approval policy two-of-envelope needs 2 people") {
		t.Fatalf("Prepare: %v; want a validation error naming the policy", err)
	}
	as, _, err := h.svc.Prepare(h.ctx, env, []envelope.Recipient{email("alice@example.org"), sms("+447700900123")}, "travel")
	if err != nil || len(as) != 1 || as[0].Approval.Quorum != 2 || len(as[0].Approval.Recipients) != 2 || as[0].Approval.Recipients[1].Person != "+447700900123" {
		t.Fatalf("two recipients: %+v, %v", as, err)
	}
}
