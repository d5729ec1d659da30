package approvals

import (
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

// The decider's confirmation says what is true: passed to the agent when
// the agent took it, "not confirmed yet" while it has not, and "no effect"
// when it could not be passed (a turn that is over: the decision is
// dead-lettered). It never says "Approved" for a decision that had no effect.
func TestConfirmationSaysWhatIsTrue(t *testing.T) {
	t.Run("taken", func(t *testing.T) {
		h := newHarness(t, harnessOpt{})
		hd := h.handle(h.ingest(h.suspend("appr-ok"), email(alice))[0])
		h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "yes"})
		got := h.enq.To(alice)
		if len(got) != 1 || !strings.HasPrefix(got[0], "Approved: ") || !strings.Contains(got[0], "was passed to the agent") {
			t.Fatalf("confirmation %q", got)
		}
	})
	t.Run("turn over", func(t *testing.T) {
		h := newHarness(t, harnessOpt{})
		env := h.suspend("appr-gone")
		env.Meta.TurnID = "no-such-task"
		setTurn(t, env, "no-such-task")
		hd := h.handle(h.ingest(env, sms(aliceNum))[0])
		h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "S1", Text: "yes " + hd.Code})
		got := h.enq.To(aliceNum)
		if len(got) != 1 || strings.HasPrefix(got[0], "Approved") || !strings.Contains(got[0], "no effect") {
			t.Fatalf("confirmation %q", got)
		}
	})
	t.Run("not yet", func(t *testing.T) {
		h := newHarness(t, harnessOpt{noInjector: true})
		hd := h.handle(h.ingest(h.suspend("appr-later"), email(alice))[0])
		h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "no"})
		got := h.enq.To(alice)
		if len(got) != 1 || !strings.HasPrefix(got[0], "Denied: ") || !strings.Contains(got[0], "has not confirmed it yet") {
			t.Fatalf("confirmation %q", got)
		}
	})
}

// requestMessageID finds our request's Message-ID (the one carrying the
// reply's token) in the reply's In-Reply-To or References, else the reply.
func TestRequestMessageID(t *testing.T) {
	tok := "aleavkpjj5cr7pftbt65qcwm5y"
	ours := "<dlv_1." + tok + "@beachd.example.org>"
	for _, tc := range []struct {
		in   envelope.Inbound
		want string
	}{
		{envelope.Inbound{Channel: "email", Token: tok, InReplyTo: ours, MessageID: "<r@x>"}, "dlv_1." + tok + "@beachd.example.org"},
		{envelope.Inbound{Channel: "email", Token: tok, InReplyTo: "<other@x>", References: []string{ours, "<other@x>"}, MessageID: "<r@x>"}, "dlv_1." + tok + "@beachd.example.org"},
		{envelope.Inbound{Channel: "email", Token: tok, MessageID: "<r@x>"}, "r@x"},
		{envelope.Inbound{Channel: "sms", Token: tok, InReplyTo: ours}, ""},
	} {
		if got := requestMessageID(tc.in); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.in, got, tc.want)
		}
	}
}
