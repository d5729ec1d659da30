package conversations

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Lists page newest first with a cursor and filter; unknown ids are
// ErrNotFound; transports come from the configuration.
func TestQueries(t *testing.T) {
	h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true})
	for i := range 5 {
		h.in(mail("ann@example.org", fmt.Sprintf("<q%d@x>", i), "S", "t"))
	}
	h.in(mail("eve@evil.example", "<qe@x>", "S", "t"))
	page, next, err := h.r.ListInbound(h.ctx, InboundFilter{Disposition: envelope.DispositionTurn, Limit: 3})
	if err != nil || len(page) != 3 || next == "" || page[0].MessageID != "<q4@x>" {
		t.Fatalf("first page %d %q %v", len(page), next, err)
	}
	rest, next2, _ := h.r.ListInbound(h.ctx, InboundFilter{Disposition: envelope.DispositionTurn, Limit: 3, After: next})
	if len(rest) != 2 || next2 != "" || rest[0].MessageID != "<q1@x>" {
		t.Fatalf("second page %+v %q", rest, next2)
	}
	if rej, _, _ := h.r.ListInbound(h.ctx, InboundFilter{Disposition: envelope.DispositionRejected}); len(rej) != 1 {
		t.Fatalf("rejected %d", len(rej))
	}
	first, _ := h.db.InboundByMessageID(h.ctx, "email", "<q0@x>")
	h.clock.Advance(time.Second)
	follow := mail("ann@example.org", "<q0b@x>", "Re: S", "more")
	follow.InReplyTo = "<q0@x>"
	h.in(follow)
	cs, next3, _ := h.r.ListConversations(h.ctx, ConversationFilter{Agent: "travel", Channel: "email", Limit: 2})
	if len(cs) != 2 || cs[0].ID != first.ConversationID || next3 == "" {
		t.Fatalf("conversations %+v, want the latest active (%s) first", cs, first.ConversationID)
	}
	more, next4, err := h.r.ListConversations(h.ctx, ConversationFilter{Agent: "travel", Limit: 10, After: next3})
	if err != nil || len(more) != 3 || next4 != "" {
		t.Fatalf("second page %d %q %v", len(more), next4, err)
	}
	for _, c := range more {
		if c.ID == cs[0].ID || c.ID == cs[1].ID {
			t.Fatalf("conversation %s on both pages", c.ID)
		}
	}
	if cs2, _, _ := h.r.ListConversations(h.ctx, ConversationFilter{Agent: "other"}); len(cs2) != 0 {
		t.Fatal("filter by agent")
	}
	if _, err := h.r.Conversation(h.ctx, "cnv_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing conversation: %v", err)
	}
	if _, err := h.r.Resolve(h.ctx, "cnv_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("resolve missing: %v", err)
	}
	want := []Transport{{"smtp", "mailto:travel@example.org"}, {"sms", "sms:+15550001111"}, {"whatsapp", "whatsapp:+15550002222"}}
	if got := h.r.Transports("travel"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transports %v", got)
	}
	if h.r.Transports("nobody") != nil {
		t.Fatal("transports of an unknown agent")
	}
}

// The stored message is bounded: text 64 KiB, 20 attachments, 25 MiB of
// attachment bytes (beyond, listed with a note and no bytes).
func TestInboundBounds(t *testing.T) {
	h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true})
	in := mail("ann@example.org", "<big@x>", "S", strings.Repeat("é", 40<<10))
	for i := range 25 {
		in.Attachments = append(in.Attachments, envelope.InboundAttachment{Filename: fmt.Sprint(i), Data: []byte("x")})
	}
	in.Attachments[0].Data = bytes.Repeat([]byte("a"), 20<<20)
	in.Attachments[1].Data = bytes.Repeat([]byte("b"), 6<<20)
	h.in(in)
	rec, _ := h.db.InboundByMessageID(h.ctx, "email", "<big@x>")
	if len(rec.Text) > store.MaxInboundText || len(rec.Attachments) != store.MaxInboundAttachments {
		t.Fatalf("text %d bytes, %d attachments", len(rec.Text), len(rec.Attachments))
	}
	if !rec.Attachments[0].Stored || rec.Attachments[1].Stored || rec.Attachments[1].Note == "" || rec.Attachments[1].Size != 6<<20 ||
		!rec.Attachments[2].Stored {
		t.Fatalf("attachments %+v", rec.Attachments[:3])
	}
	if _, err := h.db.InboundAttachment(h.ctx, rec.ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("bytes over the bound were stored")
	}
}
