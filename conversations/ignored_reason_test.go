package conversations

import (
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

// A message a channel could not read whole (an oversize mail by its
// header, an unreadable mail), handed on with IgnoredBecause, passes the
// real approvals service and is recorded as ignored with the channel's
// reason, starting no turn: even from an allowed sender to the agent's
// address, carrying a token.
func TestChannelReasonIsRecorded(t *testing.T) {
	h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true})
	for _, c := range []struct{ id, reason string }{
		{"<big@x>", "message of 38.1 MiB is over the limit of 10 MiB (email.imap.max_message_bytes)"},
		{"<bad@x>", "unreadable: unreadable message header: message: malformed MIME header line: no colon"},
	} {
		in := mail("ann@example.org", c.id, "The scans", "")
		in.Token, in.TokenSource, in.IgnoredBecause = "abcdefghijklmnop", "in-reply-to", c.reason
		if res := h.in(in); res.Outcome != envelope.DispositionIgnored || res.Conversation != "" {
			t.Fatalf("%s: %+v", c.id, res)
		}
		rec, err := h.db.InboundByMessageID(h.ctx, "email", c.id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Disposition != envelope.DispositionIgnored || rec.Reason != c.reason || rec.TurnID != "" || rec.ApprovalID != "" ||
			rec.From != "ann@example.org" || rec.Subject != "The scans" {
			t.Errorf("record %+v", rec)
		}
	}
	if turns, _ := h.db.ListTurns(h.ctx, "", 10); len(turns) != 0 {
		t.Fatalf("%d turns queued", len(turns))
	}
}
