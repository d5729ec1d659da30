package conversations

import (
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

func slackMsg(user, where, channel, ts, threadTS, text string) envelope.Inbound {
	if threadTS == "" {
		threadTS = ts
	}
	return envelope.Inbound{Channel: envelope.ChannelSlack, From: user, To: SlackThread(channel, threadTS),
		Recipients: []string{where}, MessageID: "slack:" + channel + ":" + ts, Text: text, FullText: text}
}

// A Slack message is routed by where it was written (a direct message,
// a mention in a listed channel, or in any channel) and continues the
// conversation of its thread; the answer is posted into that thread.
func TestSlackThreadRouting(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { slackThreadRouting(t, false) })
	t.Run("postgres", func(t *testing.T) { slackThreadRouting(t, true) })
}

func slackThreadRouting(t *testing.T, pg bool) {
	h := newHarness(t, opts{postgres: pg, cfg: func(c *Config) {
		a := c.Agents["travel"]
		a.Slack = []string{SlackIM}
		a.Allow = append(a.Allow, "U0ANN0001")
		c.Agents["travel"] = a
		c.Agents["desk"] = AgentConfig{Slack: []string{"C0DESK001", SlackAnyChannel}, Allow: []string{"*"}}
	}})
	first := slackMsg("U0ANN0001", SlackIM, "D0ANN0001", "1767225600.000100", "", "hello there")
	res := h.in(first)
	if res.Outcome != envelope.DispositionTurn || res.Conversation == "" {
		t.Fatalf("direct message: %+v", res)
	}
	turn := h.waitTurn(res, first.MessageID, envelope.ChannelSlack)
	if turn.State != "answered" {
		t.Fatalf("turn %+v", turn)
	}
	dels := h.answerDeliveries(turn)
	if len(dels) != 1 || dels[0].Channel != envelope.ChannelSlack || dels[0].To != "D0ANN0001" ||
		dels[0].Extra[envelope.ExtraThreadTS] != "1767225600.000100" || dels[0].Extra[envelope.ExtraConversation] != res.Conversation {
		t.Fatalf("answer deliveries %+v", dels[0])
	}
	// The same message again starts nothing.
	if again := h.in(first); again.Outcome != envelope.DispositionDuplicate {
		t.Fatalf("repeat: %+v", again)
	}
	// A reply in the thread continues the conversation.
	next := slackMsg("U0ANN0001", SlackIM, "D0ANN0001", "1767225700.000200", "1767225600.000100", "and another thing")
	if r2 := h.in(next); r2.Outcome != envelope.DispositionTurn || r2.Conversation != res.Conversation {
		t.Fatalf("thread reply %+v, want conversation %s", r2, res.Conversation)
	}
	// A new top-level message is a new thread: a new conversation.
	other := slackMsg("U0ANN0001", SlackIM, "D0ANN0001", "1767225800.000300", "", "new topic")
	if r3 := h.in(other); r3.Outcome != envelope.DispositionTurn || r3.Conversation == res.Conversation {
		t.Fatalf("new thread %+v", r3)
	}
	// Someone not allowed is rejected, and told so in the thread where
	// they wrote (once a day).
	for _, ts := range []string{"1767225900.000400", "1767225950.000450"} {
		if r := h.in(slackMsg("U0EVE0001", SlackIM, "D0EVE0001", ts, "", "let me in")); r.Outcome != envelope.DispositionRejected {
			t.Fatalf("stranger: %+v", r)
		}
	}
	var refusals []*store.Delivery
	all, _ := h.db.ListDeliveries(h.ctx, "", "", 100)
	for _, d := range all {
		if d.Extra[envelope.ExtraConversation] == "" {
			refusals = append(refusals, d)
		}
	}
	if len(refusals) != 1 || refusals[0].Channel != envelope.ChannelSlack || refusals[0].To != "D0EVE0001" ||
		refusals[0].Extra[envelope.ExtraThreadTS] != "1767225900.000400" {
		t.Fatalf("refusals %+v", refusals)
	}
	// Mentions: in a listed channel, and in another one, go to desk.
	for _, ch := range []string{"C0DESK001", "C0OTHER01"} {
		r := h.in(slackMsg("U0BOB0001", ch, ch, "1767226000.000500", "", "help"))
		if r.Outcome != envelope.DispositionTurn {
			t.Fatalf("mention in %s: %+v", ch, r)
		}
		c, err := h.db.Conversation(h.ctx, r.Conversation)
		if err != nil || c.Agent != "desk" || c.OurAddress != ch+"/1767226000.000500" {
			t.Fatalf("mention in %s: conversation %+v %v", ch, c, err)
		}
	}
	// A reply without a mention in that thread (message.channels: no
	// Recipients) continues its conversation; in a thread that is none,
	// it starts nothing.
	c0, _ := h.db.ConversationByThread(h.ctx, store.ThreadKey(envelope.ChannelSlack, "C0DESK001", "1767226000.000500"))
	plain := slackMsg("U0BOB0001", "", "C0DESK001", "1767226050.000550", "1767226000.000500", "for two, please")
	plain.Recipients = nil
	if r := h.in(plain); r.Outcome != envelope.DispositionTurn || c0 == nil || r.Conversation != c0.ID {
		t.Fatalf("a reply without a mention in the conversation's thread: %+v (conversation %+v)", r, c0)
	}
	stray := slackMsg("U0BOB0001", "", "C0DESK001", "1767226060.000560", "1767220000.000001", "chatter")
	stray.Recipients = nil
	if r := h.in(stray); r.Outcome == envelope.DispositionTurn || r.Conversation != "" {
		t.Fatalf("a reply without a mention in a thread that is no conversation: %+v", r)
	}
	// Another person in that thread is not its participant.
	if r := h.in(slackMsg("U0CAT0001", "C0DESK001", "C0DESK001", "1767226100.000600", "1767226000.000500", "me too")); r.Outcome != envelope.DispositionRejected {
		t.Fatalf("non-participant: %+v", r)
	}
}
