package approvals

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

func slackTo(addr string) envelope.Recipient {
	return envelope.Recipient{Channel: "slack", Address: addr}
}

// A Slack button decides only for the person asked: the user the request
// was sent to (by id, or by the email address the channel resolved to
// them), or, for a request posted to a channel, one of the agent's
// approvers. Each decision, on any channel, is reported once to OnDecided.
func TestSlackButtonsDecideForThePersonAsked(t *testing.T) {
	var mu sync.Mutex
	var decided []string
	h := newHarness(t, harnessOpt{cfg: func(c *Config) {
		c.Approvers = map[string]map[string]bool{"travel": {"slack:U0APPROVER": true, "email:carol@example.org": true, "slack:C0OPS": true}}
		c.OnDecided = func(_ context.Context, a *store.Approval) {
			mu.Lock()
			defer mu.Unlock()
			decided = append(decided, a.ID+"="+a.State+" by "+a.DecidedBy)
		}
	}})
	click := func(d *store.Delivery, from string, deny bool, aliases ...string) envelope.InboundResult {
		hd := h.handle(d)
		if len(hd.Buttons) != 2 {
			t.Fatalf("slack handle %+v: no buttons", hd)
		}
		b := hd.Buttons[0]
		if deny {
			b = hd.Buttons[1]
		}
		return h.inbound(envelope.Inbound{Channel: "slack", From: from, To: d.To, ButtonPayload: b.Payload,
			MessageID: "slack-click:" + from + ":" + d.ID + ":" + b.Title, SenderAliases: aliases})
	}

	// To a user: only that user.
	ds := h.ingest(h.suspend("apr_u"), slackTo("U012AB3CD"), sms("+447700900123"))
	if res := click(ds[0], "U0MALLORY", false); res.Outcome != OutcomeWrongSender {
		t.Fatalf("another user: %+v", res)
	}
	if res := click(ds[0], "U012AB3CD", true); res.Outcome != OutcomeDecided || res.Decision != "denied" {
		t.Fatalf("the user asked: %+v", res)
	}
	if a := h.approval("apr_u"); a.State != store.ApprovalDenied || a.DecidedBy != "U012AB3CD" || a.Channel != "slack" {
		t.Fatalf("approval %+v", a)
	}
	// The SMS code is void now.
	code := h.handle(ds[1]).Code
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: "+447700900123", MessageID: "SM1", Text: "YES " + code}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("sms after the slack decision: %+v", res)
	}

	// To an email address: the user it resolved to.
	ds = h.ingest(h.suspend("apr_e"), slackTo("alice@example.org"))
	if res := click(ds[0], "U0BOB", false, "bob@example.org"); res.Outcome != OutcomeWrongSender {
		t.Fatalf("a user of another address: %+v", res)
	}
	if res := click(ds[0], "U0ALICE", false, "Alice@Example.org"); res.Outcome != OutcomeDecided {
		t.Fatalf("the user of the address: %+v", res)
	}
	if a := h.approval("apr_e"); a.DecidedBy != "U0ALICE" {
		t.Fatalf("decided by %q, want the user who clicked", a.DecidedBy)
	}

	// To a channel: the agent's approvers, by Slack id or email.
	ds = h.ingest(h.suspend("apr_c"), slackTo("C0OPS"))
	if res := click(ds[0], "U0MEMBER", false); res.Outcome != OutcomeWrongSender {
		t.Fatalf("a channel member who is no approver: %+v", res)
	}
	if res := click(ds[0], "U0CAROL", false, "carol@example.org"); res.Outcome != OutcomeDecided {
		t.Fatalf("an approver by email: %+v", res)
	}
	if a := h.approval("apr_c"); a.DecidedBy != "U0CAROL" {
		t.Fatalf("decided by %q", a.DecidedBy)
	}
	ds = h.ingest(h.suspend("apr_c2"), slackTo("C0OPS"))
	if res := click(ds[0], "U0APPROVER", false); res.Outcome != OutcomeDecided {
		t.Fatalf("an approver by id: %+v", res)
	}
	// A button of one recipient's message does not work for another's.
	ds = h.ingest(h.suspend("apr_x"), slackTo("U012AB3CD"), envelope.Recipient{Channel: "whatsapp", Address: "+447700900124"})
	wa := h.handle(ds[1]).Buttons[0].Payload
	if res := h.inbound(envelope.Inbound{Channel: "slack", From: "U012AB3CD", ButtonPayload: wa, MessageID: "x"}); res.Outcome != OutcomeUnknownToken {
		t.Fatalf("a WhatsApp payload pressed on Slack: %+v", res)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{"apr_u=denied by U012AB3CD", "apr_e=granted by U0ALICE", "apr_c=granted by U0CAROL", "apr_c2=granted by U0APPROVER"}
	if strings.Join(decided, "; ") != strings.Join(want, "; ") {
		t.Errorf("OnDecided got %q, want %q", decided, want)
	}
}

// Without approvers, nobody can decide a request posted to a channel.
func TestSlackChannelWithoutApprovers(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	ds := h.ingest(h.suspend("apr_n"), slackTo("C0OPS"))
	hd := h.handle(ds[0])
	res := h.inbound(envelope.Inbound{Channel: "slack", From: "U012AB3CD", ButtonPayload: hd.Buttons[0].Payload, MessageID: "m"})
	if res.Outcome != OutcomeWrongSender {
		t.Fatalf("%+v", res)
	}
	if a := h.approval("apr_n"); a.State != store.ApprovalPending {
		t.Fatalf("state %s", a.State)
	}
}
