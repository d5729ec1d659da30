package approvals

import (
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
