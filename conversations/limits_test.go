package conversations

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// backends runs f on the embedded store and on PostgreSQL.
func backends(t *testing.T, f func(t *testing.T, postgres bool)) {
	for _, b := range []struct {
		name     string
		postgres bool
	}{{"bolt", false}, {"postgres", true}} {
		t.Run(b.name, func(t *testing.T) { f(t, b.postgres) })
	}
}

// floodConfig is the attack's configuration: each conversation may take 3
// turns a minute, and so may each sender across their conversations. The
// agent has two numbers on SMS and on WhatsApp, so that one person's texts
// are two conversations on each.
func floodConfig(c *Config) {
	a := c.Agents["travel"]
	a.PerMinute = 3
	a.SMS = []string{"+15550001111", "+15550001113"}
	a.WhatsApp = []string{"+15550002222", "+15550002224"}
	c.Agents["travel"] = a
	c.TurnLimits = map[string]TurnLimits{"travel": {SenderPerMinute: 3}}
}

// floodMessage is the attacker's i-th message on channel: a new mail with
// no threading headers (a conversation of its own), or a text to the
// agent's numbers in turn.
func floodMessage(channel string, i int) envelope.Inbound {
	switch channel {
	case "sms":
		return envelope.Inbound{Channel: "sms", From: "+447700900001", To: []string{"+15550001111", "+15550001113"}[i%2],
			MessageID: fmt.Sprintf("SM%032d", i), Text: fmt.Sprintf("hello %d", i)}
	case "whatsapp":
		return envelope.Inbound{Channel: "whatsapp", From: "whatsapp:+447700900001", To: []string{"whatsapp:+15550002222", "whatsapp:+15550002224"}[i%2],
			MessageID: fmt.Sprintf("SM%032d", i), Text: fmt.Sprintf("hello %d", i)}
	}
	return mail("ann@example.org", fmt.Sprintf("<flood%d@example.org>", i), fmt.Sprintf("Request %d", i), "do something")
}

// One verified sender writing ten messages in a second starts as many
// turns as the sender limit allows, whatever conversations they open: on
// every channel, three turns and seven messages held, each saying which
// limit held it. (Without the sender limit, each conversation's own limit
// let through ten mails and six texts.)
func TestOneSenderCannotFloodAcrossConversations(t *testing.T) {
	backends(t, func(t *testing.T, pg bool) {
		for _, channel := range []string{"email", "sms", "whatsapp"} {
			t.Run(channel, func(t *testing.T) {
				h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true, postgres: pg, cfg: floodConfig})
				var got []string
				conversations := map[string]bool{}
				for i := range 10 {
					res := h.in(floodMessage(channel, i))
					got = append(got, res.Outcome)
					conversations[res.Conversation] = true
					h.clock.Advance(100 * time.Millisecond)
				}
				if want := "turn turn turn held held held held held held held"; strings.Join(got, " ") != want {
					t.Fatalf("ten messages in a second: %v, want %s", got, want)
				}
				if want := map[string]int{"email": 10, "sms": 2, "whatsapp": 2}[channel]; len(conversations) != want {
					t.Errorf("%d conversations, want %d", len(conversations), want)
				}
				turns, err := h.db.ListTurns(h.ctx, "", 100)
				if err != nil || len(turns) != 3 {
					t.Fatalf("%d turns queued (%v), want 3", len(turns), err)
				}
				held, _, err := h.r.ListInbound(h.ctx, InboundFilter{Disposition: envelope.DispositionHeld})
				if err != nil || len(held) != 7 {
					t.Fatalf("%d held records (%v), want 7", len(held), err)
				}
				for _, rec := range held {
					if rec.Reason != "sender limit: 3 turns a minute" || rec.TurnID != "" || rec.ConversationID == "" {
						t.Fatalf("held record %+v", rec)
					}
				}
				if n := counter(t, h.metrics.held.WithLabelValues(channel, "sender")); n != 7 {
					t.Errorf("beachd_conversation_held_total{limit=sender} = %v, want 7", n)
				}
				if n := counter(t, h.metrics.inbound.WithLabelValues(channel, "held")); n != 7 {
					t.Errorf("held inbound metric %v, want 7", n)
				}
				// A minute later the sender may write again.
				h.clock.Advance(time.Minute)
				if res := h.in(floodMessage(channel, 10)); res.Outcome != envelope.DispositionTurn {
					t.Fatalf("a minute later: %+v", res)
				}
			})
		}
	})
}

// With no limits configured the defaults apply: five turns a minute per
// sender.
func TestSenderLimitDefaults(t *testing.T) {
	h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true})
	var got []string
	for i := range 7 {
		got = append(got, h.in(floodMessage("email", i)).Outcome)
	}
	if s := strings.Join(got, " "); s != "turn turn turn turn turn held held" {
		t.Fatalf("seven mails: %s", s)
	}
	rec, err := h.db.InboundByMessageID(h.ctx, "email", "<flood6@example.org>")
	if err != nil || rec.Reason != "sender limit: 5 turns a minute" {
		t.Fatalf("held record %+v %v", rec, err)
	}
	if d := DefaultTurnLimits; d.SenderPerMinute != 5 || d.SenderPerHour != 30 || d.AgentPerMinute != 60 || d.AgentPerHour != 1000 {
		t.Fatalf("defaults %+v", d)
	}
}

// A number is one sender on SMS and WhatsApp.
func TestSenderLimitSpansChannels(t *testing.T) {
	h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true, cfg: floodConfig})
	var got []string
	for i := range 4 {
		ch := []string{"sms", "whatsapp"}[i%2]
		got = append(got, h.in(floodMessage(ch, i)).Outcome)
	}
	if s := strings.Join(got, " "); s != "turn turn turn held" {
		t.Fatalf("SMS and WhatsApp from one number: %s", s)
	}
}

// The agent's ceiling holds the turns of many senders, each within their
// own limit; the held messages say so.
func TestAgentCeilingWithManySenders(t *testing.T) {
	backends(t, func(t *testing.T, pg bool) {
		h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true, postgres: pg, cfg: func(c *Config) {
			c.TurnLimits = map[string]TurnLimits{"travel": {AgentPerMinute: 4, AgentPerHour: 6}}
		}})
		text := func(i int) envelope.Inbound {
			return envelope.Inbound{Channel: "sms", From: fmt.Sprintf("+4477009001%02d", i), To: "+15550001111",
				MessageID: fmt.Sprintf("SM%032d", i), Text: "hi"}
		}
		var got []string
		for i := range 10 {
			got = append(got, h.in(text(i)).Outcome)
		}
		if s := strings.Join(got, " "); s != "turn turn turn turn held held held held held held" {
			t.Fatalf("ten senders, one text each: %s", s)
		}
		rec, err := h.db.InboundByMessageID(h.ctx, "sms", fmt.Sprintf("SM%032d", 9))
		if err != nil || rec.Reason != "agent limit: 4 turns a minute" {
			t.Fatalf("held record %+v %v", rec, err)
		}
		if n := counter(t, h.metrics.held.WithLabelValues("sms", "agent")); n != 6 {
			t.Errorf("beachd_conversation_held_total{limit=agent} = %v", n)
		}
		h.clock.Advance(time.Minute)
		got = got[:0]
		for i := 10; i < 13; i++ {
			got = append(got, h.in(text(i)).Outcome)
		}
		if s := strings.Join(got, " "); s != "turn turn held" {
			t.Fatalf("the next minute, six an hour: %s", s)
		}
		rec, _ = h.db.InboundByMessageID(h.ctx, "sms", fmt.Sprintf("SM%032d", 12))
		if rec.Reason != "agent limit: 6 turns an hour" {
			t.Fatalf("reason %q", rec.Reason)
		}
	})
}

// Eight messages from one sender at once, on eight goroutines through the
// router, start exactly as many turns as the sender limit allows.
func TestConcurrentMessagesDoNotOvershoot(t *testing.T) {
	backends(t, func(t *testing.T, pg bool) {
		h := newHarness(t, opts{agent: &fakeAgent{}, noRun: true, postgres: pg, cfg: floodConfig})
		var wg sync.WaitGroup
		out := make([]string, 8)
		errs := make([]error, 8)
		for i := range 8 {
			wg.Go(func() {
				res, err := h.r.HandleInbound(h.ctx, floodMessage("email", i))
				out[i], errs[i] = res.Outcome, err
			})
		}
		wg.Wait()
		turns := 0
		for i, o := range out {
			if errs[i] != nil {
				t.Fatalf("message %d: %v", i, errs[i])
			}
			if o == envelope.DispositionTurn {
				turns++
			}
		}
		queued, _ := h.db.ListTurns(h.ctx, "", 100)
		if turns != 3 || len(queued) != 3 {
			t.Fatalf("%d turns (%d queued) from 8 messages at once: %v", turns, len(queued), out)
		}
	})
}

// An operator releases a held message: its turn goes to the agent and is
// answered; its record says it was released and why it was held.
func TestReleaseHeldMessage(t *testing.T) {
	ag := &fakeAgent{}
	h := newHarness(t, opts{agent: ag, cfg: floodConfig})
	for i := range 4 {
		h.in(floodMessage("email", i))
	}
	rec, err := h.db.InboundByMessageID(h.ctx, "email", "<flood3@example.org>")
	if err != nil || rec.Disposition != envelope.DispositionHeld {
		t.Fatalf("fourth mail %+v %v", rec, err)
	}
	got, err := h.r.ReleaseInbound(h.ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Disposition != envelope.DispositionTurn || got.TurnID == "" || got.Reason != "released by an operator; held: sender limit: 3 turns a minute" {
		t.Fatalf("released record %+v", got)
	}
	turn := h.waitTurn(envelope.InboundResult{}, "<flood3@example.org>", "email")
	if turn.State != store.TurnAnswered {
		t.Fatalf("released turn %s: %s", turn.State, turn.LastError)
	}
	if _, err := h.r.ReleaseInbound(h.ctx, rec.ID); !errors.Is(err, ErrNotHeld) || !errors.Is(err, store.ErrBadState) {
		t.Fatalf("releasing it again: %v", err)
	}
	if _, err := h.r.ReleaseInbound(h.ctx, "inb_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("releasing no message: %v", err)
	}
}
