package storetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// limitCases are the flood limits across conversations (store.TurnLimit)
// and the release of a held message.
var limitCases = []testCase{
	{"limits/a sender's turns are counted across conversations", senderLimitAcrossConversations},
	{"limits/the hour's limit, and the minute's turns leaving the window", senderLimitHour},
	{"limits/a held turn is counted by no limit", heldTurnCountsNowhere},
	{"limits/the agent's ceiling counts every sender", agentCeiling},
	{"limits/a held message released by an operator queues its turn", releaseHeldInbound},
	{"limits/PruneInbound removes the counters of senders gone quiet", pruneIdleLimits},
}

// limited records a mail from `from` that starts a new conversation and
// asks for a turn under the sender limit (perMinute, perHour) and the
// agent limit (agentMinute, agentHour) of agent "travel". The clock moves
// on a millisecond first.
func (e *env) limited(from string, perMinute, perHour, agentMinute, agentHour int) *store.InboundWritten {
	e.t.Helper()
	e.advance(time.Millisecond)
	w, err := e.s.RecordInbound(e.ctx, e.limitedWrite(from, perMinute, perHour, agentMinute, agentHour))
	e.ok(err, "record inbound from "+from)
	return w
}

func (e *env) limitedWrite(from string, perMinute, perHour, agentMinute, agentHour int) store.InboundWrite {
	id := e.s.NewID("inb_")
	return store.InboundWrite{
		Record: store.InboundRecord{ID: id, Channel: "email", From: from, To: "travel@example.org",
			MessageID: "<" + id + "@example.org>", ReceivedAt: e.now(), Disposition: envelope.DispositionTurn},
		Conversation: &store.Conversation{ID: e.s.NewID("cnv_"), Agent: "travel", Channel: "email", OurAddress: "travel@example.org"},
		New:          true,
		Turn:         &store.Turn{ID: e.s.NewID("trn_"), Agent: "travel"},
		PerMinute:    10, PerHour: 100,
		Limits: []store.TurnLimit{
			{Key: store.SenderLimitKey("travel", from), PerMinute: perMinute, PerHour: perHour, Name: "sender limit"},
			{Key: store.AgentLimitKey("travel"), PerMinute: agentMinute, PerHour: agentHour, Name: "agent limit"},
		},
	}
}

// dispositions lists the written records' dispositions, comma-separated.
func dispositions(ws ...*store.InboundWritten) string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Record.Disposition)
	}
	return strings.Join(out, ",")
}

func senderLimitAcrossConversations(e *env) {
	var ws []*store.InboundWritten
	for i := range 5 {
		ws = append(ws, e.limited("ann@example.org", 3, 30, 100, 1000))
		if i == 0 {
			e.advance(10 * time.Millisecond)
		}
	}
	if got := dispositions(ws...); got != "turn,turn,turn,held,held" {
		e.t.Fatalf("five mails in five conversations: %s, want three turns", got)
	}
	for _, w := range ws[3:] {
		if w.Turn != nil || w.Record.TurnID != "" || w.Record.Reason != "sender limit: 3 turns a minute" {
			e.t.Fatalf("held record %+v, turn %v", w.Record, w.Turn)
		}
		c, err := e.s.Conversation(e.ctx, w.Record.ConversationID)
		e.ok(err, "a held message's conversation")
		if c.Turns != 0 {
			e.t.Fatalf("a held message's conversation counts %d turns", c.Turns)
		}
	}
	// Another sender has a budget of their own.
	if w := e.limited("bob@example.org", 3, 30, 100, 1000); w.Record.Disposition != envelope.DispositionTurn {
		e.t.Fatalf("another sender: %s (%s)", w.Record.Disposition, w.Record.Reason)
	}
	turns, err := e.s.ListTurns(e.ctx, "", 100)
	e.ok(err, "list turns")
	if len(turns) != 4 {
		e.t.Fatalf("%d turns queued, want 4", len(turns))
	}
	// A minute after the first turn (at 1 ms; the others at 12 and 13 ms),
	// the sender may start one more, at 60.005 s, and no other.
	e.advance(time.Minute - 12*time.Millisecond)
	if w := e.limited("ann@example.org", 3, 30, 100, 1000); w.Record.Disposition != envelope.DispositionTurn {
		e.t.Fatalf("a minute later: %s (%s)", w.Record.Disposition, w.Record.Reason)
	}
	if w := e.limited("ann@example.org", 3, 30, 100, 1000); w.Record.Disposition != envelope.DispositionHeld {
		e.t.Fatalf("then: %s, want held", w.Record.Disposition)
	}
}

func senderLimitHour(e *env) {
	var got []string
	for m := range 5 {
		for range 2 {
			got = append(got, e.limited("ann@example.org", 2, 5, 100, 1000).Record.Disposition)
		}
		if m < 4 {
			e.advance(time.Minute)
		}
	}
	if s := strings.Join(got, ","); s != "turn,turn,turn,turn,turn,held,held,held,held,held" {
		e.t.Fatalf("two mails a minute for five minutes, 5 an hour: %s", s)
	}
	held, err := e.s.InboundRecord(e.ctx, e.lastInbound().ID)
	e.ok(err, "last record")
	if held.Reason != "sender limit: 5 turns an hour" {
		e.t.Fatalf("reason %q", held.Reason)
	}
	// An hour after the first turn, it leaves the window.
	e.advance(time.Hour - 4*time.Minute)
	if w := e.limited("ann@example.org", 2, 5, 100, 1000); w.Record.Disposition != envelope.DispositionTurn {
		e.t.Fatalf("an hour later: %s (%s)", w.Record.Disposition, w.Record.Reason)
	}
}

// lastInbound is the newest inbound record.
func (e *env) lastInbound() *store.InboundRecord {
	e.t.Helper()
	recs, err := e.s.ListInboundRecords(e.ctx, "", 1, 10, nil)
	e.ok(err, "list inbound")
	if len(recs) == 0 {
		e.t.Fatal("no inbound record")
	}
	return recs[0]
}

func heldTurnCountsNowhere(e *env) {
	// The conversation's own limit holds the third message of one thread:
	// the sender and the agent do not count it.
	first := e.limited("ann@example.org", 3, 30, 4, 1000)
	for range 2 {
		e.advance(time.Millisecond)
		w := e.limitedWrite("ann@example.org", 3, 30, 4, 1000)
		w.Conversation, w.New, w.PerMinute = &store.Conversation{ID: first.Conversation.ID}, false, 1
		got, err := e.s.RecordInbound(e.ctx, w)
		e.ok(err, "record in the first conversation")
		if got.Record.Disposition != envelope.DispositionHeld || got.Record.Reason != "more than 1 turns a minute in this conversation" {
			e.t.Fatalf("second message of the conversation: %s (%s)", got.Record.Disposition, got.Record.Reason)
		}
	}
	ws := []*store.InboundWritten{e.limited("ann@example.org", 3, 30, 4, 1000), e.limited("ann@example.org", 3, 30, 4, 1000)}
	if got := dispositions(ws...); got != "turn,turn" {
		e.t.Fatalf("the sender's next two: %s; the held ones were counted", got)
	}
	// The sender limit holds Ann's fourth: the agent does not count it, so
	// Bob still gets the agent's fourth turn.
	if w := e.limited("ann@example.org", 3, 30, 4, 1000); w.Record.Reason != "sender limit: 3 turns a minute" {
		e.t.Fatalf("Ann's fourth: %s (%s)", w.Record.Disposition, w.Record.Reason)
	}
	if w := e.limited("bob@example.org", 3, 30, 4, 1000); w.Record.Disposition != envelope.DispositionTurn {
		e.t.Fatalf("Bob: %s (%s)", w.Record.Disposition, w.Record.Reason)
	}
	if w := e.limited("cat@example.org", 3, 30, 4, 1000); w.Record.Reason != "agent limit: 4 turns a minute" {
		e.t.Fatalf("Cat after the agent's fourth turn: %s (%s)", w.Record.Disposition, w.Record.Reason)
	}
}

func agentCeiling(e *env) {
	var ws []*store.InboundWritten
	for i := range 8 {
		ws = append(ws, e.limited(fmt.Sprintf("p%d@example.org", i), 5, 30, 5, 7))
	}
	if got := dispositions(ws...); got != "turn,turn,turn,turn,turn,held,held,held" {
		e.t.Fatalf("eight senders, one mail each, agent limit 5 a minute: %s", got)
	}
	if ws[7].Record.Reason != "agent limit: 5 turns a minute" {
		e.t.Fatalf("reason %q", ws[7].Record.Reason)
	}
	e.advance(time.Minute)
	ws = ws[:0]
	for i := range 3 {
		ws = append(ws, e.limited(fmt.Sprintf("q%d@example.org", i), 5, 30, 5, 7))
	}
	if got := dispositions(ws...); got != "turn,turn,held" || ws[2].Record.Reason != "agent limit: 7 turns an hour" {
		e.t.Fatalf("the next minute, agent limit 7 an hour: %s (%s)", got, ws[2].Record.Reason)
	}
}

func releaseHeldInbound(e *env) {
	e.limited("ann@example.org", 1, 30, 100, 1000)
	held := e.limited("ann@example.org", 1, 30, 100, 1000)
	if held.Record.Disposition != envelope.DispositionHeld {
		e.t.Fatalf("second mail %s", held.Record.Disposition)
	}
	e.advance(time.Second)
	at := e.now()
	out, err := e.s.ReleaseInbound(e.ctx, held.Record.ID, store.Turn{ID: e.s.NewID("trn_"), Agent: "travel", MessageID: "a2a-released"}, at)
	e.ok(err, "release")
	if out.Turn == nil || out.Turn.State != store.TurnQueued || out.Turn.InboundID != held.Record.ID ||
		out.Turn.ConversationID != held.Record.ConversationID {
		e.t.Fatalf("released turn %+v", out.Turn)
	}
	e.sameTime(out.Turn.NextAttemptAt, at, "released turn due")
	rec, err := e.s.InboundRecord(e.ctx, held.Record.ID)
	e.ok(err, "record after release")
	if rec.Disposition != envelope.DispositionTurn || rec.TurnID != out.Turn.ID ||
		rec.Reason != store.ReleasedBy+"; held: sender limit: 1 turns a minute" {
		e.t.Fatalf("record after release %+v", rec)
	}
	c, err := e.s.Conversation(e.ctx, held.Record.ConversationID)
	e.ok(err, "conversation")
	if c.Turns != 1 {
		e.t.Fatalf("conversation counts %d turns", c.Turns)
	}
	claimed := e.claimTurns()
	if len(claimed) != 2 {
		e.t.Fatalf("claimed %d turns, want the first and the released one", len(claimed))
	}
	_, err = e.s.ReleaseInbound(e.ctx, held.Record.ID, store.Turn{ID: e.s.NewID("trn_"), Agent: "travel"}, at)
	e.is(err, store.ErrBadState, "releasing a record that is a turn already")
	_, err = e.s.ReleaseInbound(e.ctx, "inb_nope", store.Turn{ID: e.s.NewID("trn_"), Agent: "travel"}, at)
	e.is(err, store.ErrNotFound, "releasing no record")
}

func pruneIdleLimits(e *env) {
	e.limited("ann@example.org", 1, 30, 100, 1000)
	e.limited("bob@example.org", 1, 30, 100, 1000)
	e.advance(2 * time.Hour)
	e.limited("bob@example.org", 1, 30, 100, 1000)
	// The records' turns are queued, so the records stay; Ann's counter
	// (idle for two hours) goes, Bob's and the agent's stay.
	n, err := e.s.PruneInbound(e.ctx, e.now().Add(-time.Hour), 100)
	e.ok(err, "prune")
	if n != 1 {
		e.t.Fatalf("pruned %d, want Ann's counter", n)
	}
	n, err = e.s.PruneInbound(e.ctx, e.now().Add(-time.Hour), 100)
	e.ok(err, "prune again")
	if n != 0 {
		e.t.Fatalf("pruned %d more", n)
	}
	// Bob's counter still counts his turn of a millisecond ago.
	if w := e.limited("bob@example.org", 1, 30, 100, 1000); w.Record.Disposition != envelope.DispositionHeld {
		e.t.Fatalf("Bob's counter was pruned: %s", w.Record.Disposition)
	}
	if w := e.limited("ann@example.org", 1, 30, 100, 1000); w.Record.Disposition != envelope.DispositionTurn {
		e.t.Fatalf("Ann after the prune: %s", w.Record.Disposition)
	}
}
