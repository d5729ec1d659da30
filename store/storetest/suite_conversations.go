package storetest

import (
	"slices"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// conversationCases are inbound messages, their conversations and held
// deliveries.
var conversationCases = []testCase{
	{"conversation/an inbound message creates its conversation and turn in one write", inboundCreatesConversation},
	{"conversation/a repeated message id is recorded once", inboundDuplicate},
	{"conversation/a later message joins the open thread", inboundJoinsThread},
	{"conversation/an email is found by its Message-ID", inboundEmailByMessageID},
	{"conversation/attachments are stored beside the record", inboundAttachments},
	{"conversation/held deliveries wait for ReleaseHeld or the person's next message", releaseHeld},
}

// thread is the SMS thread between +15550000001 (ours) and +447700900001.
var thread = store.ThreadKey("sms", "+15550000001", "+447700900001")

// inbound records an SMS from +447700900001 with message id msgID in
// conversation cnv (new: created), queueing a turn. The clock moves on a
// millisecond first, so that records and turns sort as they came.
func (e *env) inbound(msgID, cnv string, isNew bool) (*store.InboundWritten, error) {
	e.advance(time.Millisecond)
	return e.s.RecordInbound(e.ctx, store.InboundWrite{
		Record: store.InboundRecord{ID: e.s.NewID("inb_"), Channel: "sms", From: "+447700900001", To: "+15550000001",
			MessageID: msgID, Text: "hello " + msgID, ReceivedAt: e.now(), Disposition: envelope.DispositionTurn},
		Conversation: &store.Conversation{ID: cnv, Agent: "travel", Channel: "sms", OurAddress: "+15550000001"}, New: isNew,
		Turn:      &store.Turn{ID: e.s.NewID("trn_"), Agent: "travel", MessageID: "a2a-" + msgID},
		ThreadKey: thread, IdleTimeout: time.Hour,
	})
}

func inboundCreatesConversation(e *env) {
	w, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "record inbound")
	if w.Record == nil || w.Conversation == nil || w.Turn == nil {
		e.t.Fatalf("written %+v", w)
	}
	if w.Record.ConversationID != "cnv_1" || w.Record.TurnID != w.Turn.ID || w.Record.Agent != "travel" {
		e.t.Fatalf("record %+v", w.Record)
	}
	if w.Turn.State != store.TurnQueued || w.Turn.ConversationID != "cnv_1" || w.Turn.InboundID != w.Record.ID {
		e.t.Fatalf("turn %+v", w.Turn)
	}
	c, err := e.s.Conversation(e.ctx, "cnv_1")
	e.ok(err, "read conversation")
	if !slices.Equal(c.Participants, []string{"+447700900001"}) || c.LastFrom != "+447700900001" || c.Turns != 1 || c.Agent != "travel" {
		e.t.Fatalf("conversation %+v", c)
	}
	e.sameTime(c.CreatedAt, e.now(), "conversation created")
	rec, err := e.s.InboundRecord(e.ctx, w.Record.ID)
	e.ok(err, "read record")
	if rec.Text != "hello SM1" || rec.TurnID != w.Turn.ID {
		e.t.Fatalf("stored record %+v", rec)
	}
	byMsg, err := e.s.InboundByMessageID(e.ctx, "sms", "SM1")
	e.ok(err, "record by message id")
	if byMsg.ID != w.Record.ID {
		e.t.Fatalf("by message id %s, want %s", byMsg.ID, w.Record.ID)
	}
	_, err = e.s.InboundByMessageID(e.ctx, "whatsapp", "SM1")
	e.is(err, store.ErrNotFound, "message id on another channel")
	byThread, err := e.s.ConversationByThread(e.ctx, thread)
	e.ok(err, "conversation by thread")
	if byThread.ID != "cnv_1" {
		e.t.Fatalf("by thread %s", byThread.ID)
	}
	turn, err := e.s.Turn(e.ctx, w.Turn.ID)
	e.ok(err, "read turn")
	if turn.State != store.TurnQueued || turn.MessageID != "a2a-SM1" {
		e.t.Fatalf("stored turn %+v", turn)
	}
	msgs, err := e.s.ConversationMessages(e.ctx, "cnv_1", 10)
	e.ok(err, "conversation messages")
	if len(msgs) != 1 || msgs[0].Direction != "in" || msgs[0].ID != w.Record.ID {
		e.t.Fatalf("messages %+v", msgs)
	}
	listed, err := e.s.ListConversations(e.ctx, "", 10, 100, nil)
	e.ok(err, "list conversations")
	if len(listed) != 1 || listed[0].ID != "cnv_1" {
		e.t.Fatalf("conversations %+v", listed)
	}
}

func inboundDuplicate(e *env) {
	first, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "first")
	again, err := e.inbound("SM1", "cnv_1", false)
	e.is(err, store.ErrDuplicateMessage, "same message id")
	if again == nil || again.Record == nil || again.Record.ID != first.Record.ID || again.Turn != nil {
		e.t.Fatalf("duplicate answered %+v, want the first record and no turn", again)
	}
	turns, err := e.s.ListTurns(e.ctx, "", 10)
	e.ok(err, "list turns")
	if len(turns) != 1 {
		e.t.Fatalf("%d turns after a duplicate", len(turns))
	}
	recs, err := e.s.ListInboundRecords(e.ctx, "", 10, 100, nil)
	e.ok(err, "list records")
	if len(recs) != 1 {
		e.t.Fatalf("%d records after a duplicate", len(recs))
	}
	if c, _ := e.s.Conversation(e.ctx, "cnv_1"); c.Turns != 1 {
		e.t.Fatalf("conversation counts %d turns after a duplicate", c.Turns)
	}
}

func inboundJoinsThread(e *env) {
	_, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "first")
	w, err := e.inbound("SM2", "cnv_2", true)
	e.ok(err, "second")
	if w.Conversation.ID != "cnv_1" || w.Record.ConversationID != "cnv_1" {
		e.t.Fatalf("second message in %s, want the open cnv_1", w.Conversation.ID)
	}
	_, err = e.s.Conversation(e.ctx, "cnv_2")
	e.is(err, store.ErrNotFound, "a second conversation on an open thread")
	if c, _ := e.s.Conversation(e.ctx, "cnv_1"); c.Turns != 2 {
		e.t.Fatalf("conversation counts %d turns, want 2", c.Turns)
	}
	// Once the thread was idle for its timeout, a new conversation starts.
	e.advance(2 * time.Hour)
	w, err = e.inbound("SM3", "cnv_3", true)
	e.ok(err, "after the idle timeout")
	if w.Conversation.ID != "cnv_3" {
		e.t.Fatalf("after the idle timeout the message joined %s", w.Conversation.ID)
	}
	if c, _ := e.s.ConversationByThread(e.ctx, thread); c == nil || c.ID != "cnv_3" {
		e.t.Fatalf("thread finds %+v, want cnv_3", c)
	}
}

func inboundEmailByMessageID(e *env) {
	w, err := e.s.RecordInbound(e.ctx, store.InboundWrite{
		Record: store.InboundRecord{ID: e.s.NewID("inb_"), Channel: "email", From: "a@example.org", To: "agent@example.com",
			MessageID: "<m2@example.org>", Subject: "Trip", ReceivedAt: e.now(), Disposition: envelope.DispositionTurn},
		Conversation: &store.Conversation{ID: "cnv_1", Agent: "travel", Channel: "email", OurAddress: "agent@example.com"}, New: true,
		Turn:       &store.Turn{ID: e.s.NewID("trn_"), Agent: "travel"},
		References: []string{"m1@example.org"},
	})
	e.ok(err, "record email")
	c, err := e.s.ConversationByMessageID(e.ctx, "m2@example.org")
	e.ok(err, "conversation by Message-ID")
	if c.ID != "cnv_1" || c.Subject != "Trip" || c.LastInboundMessageID != "m2@example.org" ||
		!slices.Equal(c.MessageIDs, []string{"m1@example.org", "m2@example.org"}) {
		e.t.Fatalf("conversation %+v", c)
	}
	if w.Conversation.ID != "cnv_1" {
		e.t.Fatalf("written in %s", w.Conversation.ID)
	}
	_, err = e.s.ConversationByMessageID(e.ctx, "m9@example.org")
	e.is(err, store.ErrNotFound, "unknown Message-ID")
}

func inboundAttachments(e *env) {
	w, err := e.s.RecordInbound(e.ctx, store.InboundWrite{
		Record: store.InboundRecord{ID: e.s.NewID("inb_"), Channel: "email", From: "a@example.org", MessageID: "<m1@example.org>",
			ReceivedAt: e.now(), Disposition: envelope.DispositionIgnored,
			Attachments: []store.AttachmentInfo{{Filename: "a.txt", Size: 3}, {Filename: "b.pdf", URL: "https://example.org/b"}}},
		Data: [][]byte{[]byte("abc"), nil},
	})
	e.ok(err, "record with attachments")
	if !w.Record.Attachments[0].Stored || w.Record.Attachments[1].Stored {
		e.t.Fatalf("attachments %+v", w.Record.Attachments)
	}
	data, err := e.s.InboundAttachment(e.ctx, w.Record.ID, 0)
	e.ok(err, "attachment 0")
	if string(data) != "abc" {
		e.t.Fatalf("attachment 0 = %q", data)
	}
	_, err = e.s.InboundAttachment(e.ctx, w.Record.ID, 1)
	e.is(err, store.ErrNotFound, "attachment not stored")
	e.ok(e.s.PutInboundAttachment(e.ctx, w.Record.ID, 1, []byte("%PDF")), "put attachment 1")
	data, err = e.s.InboundAttachment(e.ctx, w.Record.ID, 1)
	e.ok(err, "attachment 1")
	if string(data) != "%PDF" {
		e.t.Fatalf("attachment 1 = %q", data)
	}
	rec, _ := e.s.InboundRecord(e.ctx, w.Record.ID)
	if !rec.Attachments[1].Stored || rec.Attachments[1].Size != 4 {
		e.t.Fatalf("record after put %+v", rec.Attachments)
	}
	e.is(e.s.PutInboundAttachment(e.ctx, w.Record.ID, 2, []byte("x")), store.ErrNotFound, "attachment beyond the record's")
	// A failed fetch is counted; one that will not be retried says why.
	e.ok(e.s.NoteInboundAttachment(e.ctx, w.Record.ID, 0, 1, ""), "note a failed fetch")
	rec, _ = e.s.InboundRecord(e.ctx, w.Record.ID)
	if a := rec.Attachments[0]; a.FetchFailures != 1 || a.Note != "" || !a.Stored {
		e.t.Fatalf("attachment 0 after a failed fetch %+v", a)
	}
	e.ok(e.s.NoteInboundAttachment(e.ctx, w.Record.ID, 0, 2, "could not be fetched: HTTP 403"), "note a refused fetch")
	rec, _ = e.s.InboundRecord(e.ctx, w.Record.ID)
	if a := rec.Attachments[0]; a.FetchFailures != 2 || a.Note != "could not be fetched: HTTP 403" {
		e.t.Fatalf("attachment 0 after a refused fetch %+v", a)
	}
	e.is(e.s.NoteInboundAttachment(e.ctx, w.Record.ID, 2, 1, "x"), store.ErrNotFound, "note beyond the record's attachments")
	e.is(e.s.NoteInboundAttachment(e.ctx, "inb_nope", 0, 1, "x"), store.ErrNotFound, "note of no record")
}

func releaseHeld(e *env) {
	inCnv := func(cnv string) map[string]string { return map[string]string{envelope.ExtraConversation: cnv} }
	res := e.ingest(
		store.NewDelivery{Channel: "whatsapp", To: "+447700900001", Extra: inCnv("cnv_1"), Held: true},
		store.NewDelivery{Channel: "whatsapp", To: "+447700900002", Extra: inCnv("cnv_2"), Held: true},
		store.NewDelivery{Channel: "whatsapp", To: "+447700900003", Extra: inCnv("cnv_3"), Held: true})
	if res.Deliveries[0].State != store.StateHeld {
		e.t.Fatalf("held delivery stored as %s", res.Deliveries[0].State)
	}
	e.noneDue("every delivery is held")
	counts, err := e.s.CountByState(e.ctx)
	e.ok(err, "count")
	if counts[store.StateHeld] != 3 {
		e.t.Fatalf("counts %v", counts)
	}
	n, err := e.s.ReleaseHeld(e.ctx, "cnv_1")
	e.ok(err, "release held")
	if n != 1 {
		e.t.Fatalf("released %d, want 1", n)
	}
	if d := e.delivery(res.Deliveries[1].ID); d.State != store.StateHeld {
		e.t.Fatalf("another conversation's held delivery is %s", d.State)
	}
	if got := e.claimIDs(10); !slices.Equal(got, ids(res.Deliveries[:1])) {
		e.t.Fatalf("claimed %v after the release, want the released delivery", got)
	}
	// The person writing again releases their conversation's held answers
	// in the same write.
	_, err = e.s.RecordInbound(e.ctx, store.InboundWrite{
		Record: store.InboundRecord{ID: e.s.NewID("inb_"), Channel: "whatsapp", From: "+447700900002", MessageID: "WA1",
			ReceivedAt: e.now(), Disposition: envelope.DispositionTurn},
		Conversation: &store.Conversation{ID: "cnv_2", Agent: "travel", Channel: "whatsapp", OurAddress: "+15550000001"}, New: true,
		ReleaseHeld: true,
	})
	e.ok(err, "inbound releasing held")
	if d := e.delivery(res.Deliveries[1].ID); d.State != store.StateQueued {
		e.t.Fatalf("held delivery after the person wrote: %s", d.State)
	}
	if d := e.delivery(res.Deliveries[2].ID); d.State != store.StateHeld {
		e.t.Fatalf("a third conversation's delivery is %s", d.State)
	}
}

// turnCases are the outbox of agent turns.
var turnCases = []testCase{
	{"turn/claim, task, retry at its time, answered", turnClaimRecordRetry},
	{"turn/one turn per conversation in flight", turnOnePerConversation},
	{"turn/a claim whose lease ran out is claimed again and the first record is lost", turnLeaseExpiry},
	{"turn/a dead turn retried is due again; requeue of old claims", turnDeadRetryRequeue},
}

// claimTurns claims due turns now with a one-minute lease.
func (e *env) claimTurns() []*store.Turn {
	e.t.Helper()
	got, err := e.s.ClaimTurns(e.ctx, e.now(), 10, time.Minute)
	e.ok(err, "claim turns")
	return got
}

func (e *env) recordTurn(claimed *store.Turn, o store.TurnOutcome) *store.Turn {
	e.t.Helper()
	out, err := e.s.RecordTurn(e.ctx, claimed, o)
	e.ok(err, "record turn "+o.State)
	return out
}

func turnClaimRecordRetry(e *env) {
	w, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "inbound")
	at, ok := e.s.NextTurn()
	if !ok {
		e.t.Fatal("NextTurn reports nothing with a queued turn")
	}
	e.sameTime(at, e.now(), "NextTurn")
	got := e.claimTurns()
	if len(got) != 1 || got[0].ID != w.Turn.ID || got[0].State != store.TurnSending || got[0].Attempts != 1 {
		e.t.Fatalf("claimed %+v", got)
	}
	e.sameTime(got[0].LeaseUntil, e.now().Add(time.Minute), "turn lease")
	if again := e.claimTurns(); len(again) != 0 {
		e.t.Fatalf("claimed a turn in flight again: %+v", again)
	}
	e.ok(e.s.SetTurnTask(e.ctx, got[0], "task-1", "push-1"), "set task")
	if t, _ := e.s.Turn(e.ctx, got[0].ID); t.TaskID != "task-1" || t.PushID != "push-1" {
		e.t.Fatalf("task id %q, push id %q", t.TaskID, t.PushID)
	}
	next := e.now().Add(5 * time.Minute)
	queued := e.recordTurn(got[0], store.TurnOutcome{State: store.TurnQueued, NextAt: next, Error: "agent busy", At: e.now()})
	if queued.State != store.TurnQueued || queued.LastError != "agent busy" {
		e.t.Fatalf("retried turn %+v", queued)
	}
	at, _ = e.s.NextTurn()
	e.sameTime(at, next, "NextTurn after a failure")
	if early := e.claimTurns(); len(early) != 0 {
		e.t.Fatalf("claimed a turn before its retry: %+v", early)
	}
	e.advance(5 * time.Minute)
	got2 := e.claimTurns()
	if len(got2) != 1 || got2[0].Attempts != 2 {
		e.t.Fatalf("second claim %+v", got2)
	}
	e.is(e.s.SetTurnTask(e.ctx, got[0], "task-2", ""), store.ErrLeaseLost, "task under an old claim")
	answered := e.recordTurn(got2[0], store.TurnOutcome{State: store.TurnAnswered, AnswerEnvelopeID: "env_1", At: e.now()})
	if answered.State != store.TurnAnswered || answered.AnswerEnvelopeID != "env_1" {
		e.t.Fatalf("answered %+v", answered)
	}
	if _, ok := e.s.NextTurn(); ok {
		e.t.Fatal("NextTurn reports an answered turn")
	}
	listed, err := e.s.ListTurns(e.ctx, store.TurnAnswered, 10)
	e.ok(err, "list answered")
	if len(listed) != 1 {
		e.t.Fatalf("answered turns %+v", listed)
	}
	_, err = e.s.RecordTurn(e.ctx, got2[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
	e.is(err, store.ErrLeaseLost, "second record of one claim")
}

func turnOnePerConversation(e *env) {
	w1, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "first")
	w2, err := e.inbound("SM2", "cnv_1", false)
	e.ok(err, "second")
	got := e.claimTurns()
	if len(got) != 1 || got[0].ID != w1.Turn.ID {
		e.t.Fatalf("claimed %+v, want only the conversation's first turn", got)
	}
	e.recordTurn(got[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
	got = e.claimTurns()
	if len(got) != 1 || got[0].ID != w2.Turn.ID {
		e.t.Fatalf("claimed %+v after the first was answered, want the second", got)
	}
	e.recordTurn(got[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
}

func turnLeaseExpiry(e *env) {
	_, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "inbound")
	first := e.claimTurns()[0]
	e.advance(time.Minute)
	second := e.claimTurns()
	if len(second) != 1 || second[0].ID != first.ID || second[0].Attempts != 2 {
		e.t.Fatalf("after the lease claimed %+v, want the turn again", second)
	}
	_, err = e.s.RecordTurn(e.ctx, first, store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
	e.is(err, store.ErrLeaseLost, "record under the expired claim")
	e.recordTurn(second[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
}

func turnDeadRetryRequeue(e *env) {
	_, err := e.inbound("SM1", "cnv_1", true)
	e.ok(err, "inbound")
	dead := e.recordTurn(e.claimTurns()[0], store.TurnOutcome{State: store.TurnDead, Error: "agent gone", At: e.now()})
	if dead.State != store.TurnDead {
		e.t.Fatalf("dead %+v", dead)
	}
	_, err = e.s.RetryTurn(e.ctx, "trn_missing", e.now())
	e.is(err, store.ErrNotFound, "retry of an unknown turn")
	e.advance(time.Hour)
	r, err := e.s.RetryTurn(e.ctx, dead.ID, e.now())
	e.ok(err, "retry dead turn")
	if r.State != store.TurnQueued {
		e.t.Fatalf("retried %+v", r)
	}
	_, err = e.s.RetryTurn(e.ctx, dead.ID, e.now())
	e.is(err, store.ErrBadState, "retry of a queued turn")
	claimed, err := e.s.ClaimTurns(e.ctx, e.now(), 10, time.Hour)
	e.ok(err, "claim with a long lease")
	if len(claimed) != 1 {
		e.t.Fatalf("claimed %d after the retry", len(claimed))
	}
	// A restart re-queues the claims taken before it.
	e.advance(time.Millisecond)
	n, err := e.s.RequeueClaimedTurns(e.ctx, e.now(), e.now())
	e.ok(err, "requeue")
	if n != 1 {
		e.t.Fatalf("re-queued %d turns, want 1", n)
	}
	_, err = e.s.RecordTurn(e.ctx, claimed[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
	e.is(err, store.ErrLeaseLost, "record of a re-queued claim")
	again := e.claimTurns()
	if len(again) != 1 || again[0].ID != dead.ID {
		e.t.Fatalf("claimed %+v after the requeue", again)
	}
	e.recordTurn(again[0], store.TurnOutcome{State: store.TurnAnswered, At: e.now()})
}
