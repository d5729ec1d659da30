package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// convClock is a test clock that moves only when told.
type convClock struct {
	mu sync.Mutex
	t  time.Time
}

func newConvClock() *convClock {
	return &convClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *convClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *convClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// checkConv fails the test when the conversation invariants are broken.
func checkConv(t *testing.T, db *DB) {
	t.Helper()
	if err := db.checkConversations(context.Background()); err != nil {
		t.Fatalf("invariants: %v", err)
	}
}

// smsWrite is an SMS from +44 to +1 that asks for a turn.
func smsWrite(db *DB, c *convClock, msgID string, newConv bool, cnv string) store.InboundWrite {
	return store.InboundWrite{Record: store.InboundRecord{ID: db.NewID("inb_"), Channel: "sms", From: "+44", MessageID: msgID,
		ReceivedAt: c.Now(), Disposition: envelope.DispositionTurn},
		Conversation: &store.Conversation{ID: cnv, Agent: "a", Channel: "sms", OurAddress: "+1"}, New: newConv,
		Turn: &store.Turn{ID: db.NewID("trn_"), Agent: "a"}, PerMinute: 2, PerHour: 10,
		ThreadKey: store.ThreadKey("sms", "+1", "+44"), IdleTimeout: time.Hour}
}

func TestRecordInboundDuplicateFloodAndThread(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	write := func(msgID string, newConv bool, id string) (*store.InboundWritten, error) {
		c.Advance(time.Millisecond) // turns due in the order they came
		return db.RecordInbound(ctx, smsWrite(db, c, msgID, newConv, id))
	}
	w1, err := write("m1", true, "cnv_a")
	if err != nil || w1.Turn == nil || w1.Conversation.ID != "cnv_a" {
		t.Fatalf("first %+v %v", w1, err)
	}
	// A second "new" conversation on the open thread joins the first.
	w2, err := write("m2", true, "cnv_b")
	if err != nil || w2.Conversation.ID != "cnv_a" || w2.Record.ConversationID != "cnv_a" {
		t.Fatalf("second %+v %v", w2, err)
	}
	if _, err := db.Conversation(ctx, "cnv_b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("a second conversation was created on an open thread")
	}
	w3, err := write("m3", false, "cnv_a")
	if err != nil || w3.Turn != nil || w3.Record.Disposition != envelope.DispositionHeld {
		t.Fatalf("third in a minute %+v %v", w3.Record, err)
	}
	dup, err := write("m1", false, "cnv_a")
	if !errors.Is(err, store.ErrDuplicateMessage) || dup.Record.ID != w1.Record.ID {
		t.Fatalf("duplicate %+v %v", dup, err)
	}
	cv, _ := db.Conversation(ctx, "cnv_a")
	if cv.Turns != 2 || len(cv.Participants) != 1 || len(cv.RecentTurns) != 2 {
		t.Fatalf("conversation %+v", cv)
	}
	if got, _ := db.ConversationByThread(ctx, store.ThreadKey("sms", "+1", "+44")); got == nil || got.ID != "cnv_a" {
		t.Fatalf("thread → %+v", got)
	}
	if msgs, _ := db.ConversationMessages(ctx, "cnv_a", 0); len(msgs) != 3 || msgs[0].ID != w1.Record.ID || msgs[2].ID != w3.Record.ID {
		t.Fatalf("messages %+v", msgs)
	}

	// The turns: one in flight per conversation.
	turns, err := db.ClaimTurns(ctx, c.Now(), 10, time.Minute)
	if err != nil || len(turns) != 1 || turns[0].ID != w1.Turn.ID {
		t.Fatalf("claimed %+v %v", turns, err)
	}
	if more, _ := db.ClaimTurns(ctx, c.Now(), 10, time.Minute); len(more) != 0 {
		t.Fatalf("claimed a second turn of the conversation in flight: %d", len(more))
	}
	if err := db.SetTurnTask(ctx, turns[0], "task-1", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Turn(ctx, turns[0].ID); got.TaskID != "task-1" || got.State != store.TurnSending {
		t.Fatalf("turn after its task %+v", got)
	}
	if _, err := db.RecordTurn(ctx, turns[0], store.TurnOutcome{State: store.TurnAnswered, AnswerEnvelopeID: "env_1", At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordTurn(ctx, turns[0], store.TurnOutcome{State: store.TurnAnswered, At: c.Now()}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second record: %v", err)
	}
	next, _ := db.ClaimTurns(ctx, c.Now(), 10, time.Minute)
	if len(next) != 1 || next[0].ID != w2.Turn.ID {
		t.Fatalf("next claim %+v", next)
	}
	// A restart requeues the claimed turn; the stale claim is then refused.
	c.Advance(time.Second)
	if n, err := db.RequeueClaimedTurns(ctx, c.Now(), c.Now()); err != nil || n != 1 {
		t.Fatalf("requeued %d %v", n, err)
	}
	if _, err := db.RecordTurn(ctx, next[0], store.TurnOutcome{State: store.TurnDead, At: c.Now()}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale claim recorded: %v", err)
	}
	if err := db.SetTurnTask(ctx, next[0], "task-2", ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale claim set its task: %v", err)
	}
	again, _ := db.ClaimTurns(ctx, c.Now(), 10, time.Minute)
	if len(again) != 1 {
		t.Fatal("requeued turn not claimable")
	}
	if _, err := db.RecordTurn(ctx, again[0], store.TurnOutcome{State: store.TurnDead, Error: "x", At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	if dead, _ := db.ListTurns(ctx, store.TurnDead, 0); len(dead) != 1 || dead[0].ID != again[0].ID || dead[0].LastError != "x" {
		t.Fatalf("dead turns %+v", dead)
	}
	if _, err := db.RetryTurn(ctx, again[0].ID, c.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RetryTurn(ctx, again[0].ID, c.Now()); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("retry of a queued turn: %v", err)
	}
	if _, err := db.RetryTurn(ctx, "trn_none", c.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retry of no turn: %v", err)
	}
	if all, _ := db.ListTurns(ctx, "", 0); len(all) != 2 || all[0].ID != w1.Turn.ID || all[1].ID != w2.Turn.ID {
		t.Fatalf("all turns %+v", all)
	}
	checkConv(t, db)
}

// A turn recorded for a retry is due again at its time, not before, and
// its lease is gone; a claim whose lease ran out is taken again.
func TestTurnRetryAndExpiredLease(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	w, err := db.RecordInbound(ctx, smsWrite(db, c, "m1", true, "cnv_a"))
	if err != nil {
		t.Fatal(err)
	}
	if due, ok := db.NextTurn(); !ok || !due.Equal(c.Now()) {
		t.Fatalf("next turn %v %v", due, ok)
	}
	if _, err := db.RecordTurn(ctx, w.Turn, store.TurnOutcome{State: store.TurnQueued}); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("queued without a time: %v", err)
	}
	ts, _ := db.ClaimTurns(ctx, c.Now(), 1, time.Minute)
	if len(ts) != 1 || ts[0].Attempts != 1 || !ts[0].LeaseUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("claimed %+v", ts)
	}
	retryAt := c.Now().Add(10 * time.Second)
	got, err := db.RecordTurn(ctx, ts[0], store.TurnOutcome{State: store.TurnQueued, NextAt: retryAt, Error: "busy", At: c.Now()})
	if err != nil || got.State != store.TurnQueued || !got.LeaseUntil.IsZero() || !got.NextAttemptAt.Equal(retryAt) {
		t.Fatalf("recorded %+v %v", got, err)
	}
	if ts, _ := db.ClaimTurns(ctx, retryAt.Add(-time.Nanosecond), 1, time.Minute); len(ts) != 0 {
		t.Fatal("claimed a turn before its retry time")
	}
	first, _ := db.ClaimTurns(ctx, retryAt, 1, time.Minute)
	if len(first) != 1 {
		t.Fatal("turn not claimable at its retry time")
	}
	// Its worker dies: once the lease ran out another claimer takes it.
	end := retryAt.Add(time.Minute)
	if ts, _ := db.ClaimTurns(ctx, end.Add(-time.Nanosecond), 1, time.Minute); len(ts) != 0 {
		t.Fatal("claimed a turn whose lease holds")
	}
	second, _ := db.ClaimTurns(ctx, end, 1, time.Minute)
	if len(second) != 1 || second[0].Claims != first[0].Claims+1 {
		t.Fatalf("expired claim not taken again: %+v", second)
	}
	if _, err := db.RecordTurn(ctx, first[0], store.TurnOutcome{State: store.TurnAnswered, At: end}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("expired claim recorded: %v", err)
	}
	if _, err := db.RecordTurn(ctx, second[0], store.TurnOutcome{State: store.TurnAnswered, At: end}); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.NextTurn(); ok {
		t.Fatal("an answered turn is still due")
	}
	checkConv(t, db)
}

// An email message threads by Message-ID, joins the References chain and
// stores its attachments; list pages are newest first.
func TestEmailConversationAttachmentsAndLists(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	var recs []*store.InboundRecord
	for i, cnv := range []string{"cnv_1", "cnv_2", "cnv_1"} {
		c.Advance(time.Second)
		w := store.InboundWrite{Record: store.InboundRecord{ID: db.NewID("inb_"), Channel: "email", From: fmt.Sprint("p", i, "@x"),
			MessageID: fmt.Sprintf("<m%d@x>", i), Subject: fmt.Sprint("s", i), Text: "a\x00b", ReceivedAt: c.Now(),
			Disposition: envelope.DispositionIgnored, Attachments: []store.AttachmentInfo{{Filename: "a"}, {Filename: "b", URL: "https://media"}}},
			Data: [][]byte{[]byte("bytes"), nil}, Conversation: &store.Conversation{ID: cnv, Agent: "a", Channel: "email"}, New: i < 2,
			References: []string{"root@x"}}
		out, err := db.RecordInbound(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out.Record)
	}
	if w := recs[2]; w.ConversationID != "cnv_1" || !w.Attachments[0].Stored || w.Attachments[1].Stored {
		t.Fatalf("third record %+v", w)
	}
	cv, err := db.ConversationByMessageID(ctx, "m2@x")
	if err != nil || cv.ID != "cnv_1" || cv.Subject != "s2" || cv.LastInboundMessageID != "m2@x" || cv.LastFrom != "p2@x" ||
		!slices.Equal(cv.MessageIDs, []string{"root@x", "m0@x", "m2@x"}) || !slices.Equal(cv.Participants, []string{"p0@x", "p2@x"}) {
		t.Fatalf("conversation by Message-ID %+v %v", cv, err)
	}
	if _, err := db.ConversationByMessageID(ctx, "none@x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown Message-ID: %v", err)
	}
	if got, err := db.InboundByMessageID(ctx, "email", "<m1@x>"); err != nil || got.ID != recs[1].ID || got.Text != "a\x00b" {
		t.Fatalf("by message id %+v %v", got, err)
	}
	if _, err := db.InboundByMessageID(ctx, "sms", "<m1@x>"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("message id on another channel: %v", err)
	}

	// Attachments: the stored bytes, bytes fetched later, none beyond.
	if b, err := db.InboundAttachment(ctx, recs[0].ID, 0); err != nil || string(b) != "bytes" {
		t.Fatalf("attachment 0: %q %v", b, err)
	}
	if _, err := db.InboundAttachment(ctx, recs[0].ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("attachment 1 before it was fetched: %v", err)
	}
	if err := db.PutInboundAttachment(ctx, recs[0].ID, 1, []byte("fetched")); err != nil {
		t.Fatal(err)
	}
	if err := db.PutInboundAttachment(ctx, recs[0].ID, 2, []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("attachment beyond the record's: %v", err)
	}
	if err := db.PutInboundAttachment(ctx, "inb_none", 0, []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("attachment of no record: %v", err)
	}
	rec, _ := db.InboundRecord(ctx, recs[0].ID)
	if b, _ := db.InboundAttachment(ctx, recs[0].ID, 1); string(b) != "fetched" || !rec.Attachments[1].Stored || rec.Attachments[1].Size != 7 {
		t.Fatalf("fetched attachment %q, record %+v", b, rec.Attachments)
	}

	// Inbound records newest first, in pages.
	page, err := db.ListInboundRecords(ctx, "", 2, 100, nil)
	if err != nil || len(page) != 2 || page[0].ID != recs[2].ID || page[1].ID != recs[1].ID {
		t.Fatalf("first page %+v %v", page, err)
	}
	if page, _ := db.ListInboundRecords(ctx, page[1].ID, 2, 100, nil); len(page) != 1 || page[0].ID != recs[0].ID {
		t.Fatalf("second page %+v", page)
	}
	keep := func(r *store.InboundRecord) bool { return r.ConversationID == "cnv_2" }
	if page, _ := db.ListInboundRecords(ctx, "", 10, 100, keep); len(page) != 1 || page[0].ID != recs[1].ID {
		t.Fatalf("kept %+v", page)
	}
	if page, _ := db.ListInboundRecords(ctx, "", 10, 1, keep); len(page) != 0 {
		t.Fatalf("read more than scan: %+v", page)
	}

	// Conversations most recently active first, in pages by cursor.
	cs, err := db.ListConversations(ctx, "", 1, 100, nil)
	if err != nil || len(cs) != 1 || cs[0].ID != "cnv_1" {
		t.Fatalf("first conversations %+v %v", cs, err)
	}
	if more, _ := db.ListConversations(ctx, store.ConversationCursor(cs[0]), 10, 100, nil); len(more) != 1 || more[0].ID != "cnv_2" {
		t.Fatalf("next conversations %+v", more)
	}
	if _, err := db.ListConversations(ctx, "zz", 10, 100, nil); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("bad cursor: %v", err)
	}
	checkConv(t, db)
}

// A delivery of a conversation is listed among its messages and moves its
// activity, unless it is a window template.
func TestIndexConversationDelivery(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	w, err := db.RecordInbound(ctx, smsWrite(db, c, "m1", true, "cnv_a"))
	if err != nil {
		t.Fatal(err)
	}
	index := func(d *store.Delivery) {
		t.Helper()
		if err := db.tx(ctx, func(tx pgx.Tx) error { return db.indexConversationDeliveryTx(ctx, tx, d) }); err != nil {
			t.Fatal(err)
		}
	}
	at := c.Now().Add(time.Minute)
	index(&store.Delivery{ID: "dlv_tpl", CreatedAt: at, Extra: map[string]string{envelope.ExtraConversation: "cnv_a", envelope.ExtraTemplate: "window"}})
	if cv, _ := db.Conversation(ctx, "cnv_a"); !cv.UpdatedAt.Equal(c.Now()) {
		t.Fatalf("a template moved the conversation to %v", cv.UpdatedAt)
	}
	index(&store.Delivery{ID: "dlv_1", CreatedAt: at, Extra: map[string]string{envelope.ExtraConversation: "cnv_a"}})
	index(&store.Delivery{ID: "dlv_2", CreatedAt: at, Extra: map[string]string{envelope.ExtraConversation: "cnv_gone"}})
	index(&store.Delivery{ID: "dlv_3", CreatedAt: at})
	if cv, _ := db.Conversation(ctx, "cnv_a"); !cv.UpdatedAt.Equal(at) {
		t.Fatalf("the answer did not move the conversation: %v", cv.UpdatedAt)
	}
	msgs, err := db.ConversationMessages(ctx, "cnv_a", 0)
	want := []store.ConversationMessage{{At: c.Now(), Direction: "in", ID: w.Record.ID}, {At: at, Direction: "out", ID: "dlv_1"}, {At: at, Direction: "out", ID: "dlv_tpl"}}
	if err != nil || len(msgs) != 3 {
		t.Fatalf("messages %+v %v", msgs, err)
	}
	for i := range want {
		if !msgs[i].At.Equal(want[i].At) || msgs[i].Direction != want[i].Direction || msgs[i].ID != want[i].ID {
			t.Fatalf("message %d %+v, want %+v", i, msgs[i], want[i])
		}
	}
	if latest, _ := db.ConversationMessages(ctx, "cnv_a", 1); len(latest) != 1 || latest[0].ID != "dlv_tpl" {
		t.Fatalf("latest message %+v", latest)
	}
	if gone, _ := db.ConversationMessages(ctx, "cnv_gone", 10); len(gone) != 1 {
		t.Fatalf("an unknown conversation's answer is not indexed: %+v", gone)
	}
	checkConv(t, db)
}

// Old inbound records go with their bytes and settled turns; a record
// whose turn is still queued stays, and so does what came after it.
func TestPruneInbound(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	var ids []string
	for i := range 3 {
		c.Advance(time.Millisecond)
		w, err := db.RecordInbound(ctx, store.InboundWrite{Record: store.InboundRecord{ID: db.NewID("inb_"), Channel: "email", From: "a@b",
			MessageID: fmt.Sprint(i), ReceivedAt: c.Now(), Disposition: envelope.DispositionTurn,
			Attachments: []store.AttachmentInfo{{Filename: "f"}}}, Data: [][]byte{[]byte("data")},
			Conversation: &store.Conversation{ID: fmt.Sprint("cnv_", i), Agent: "a", Channel: "email"}, New: true,
			Turn: &store.Turn{ID: db.NewID("trn_"), Agent: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.Record.ID)
	}
	ts, _ := db.ClaimTurns(ctx, c.Now(), 1, time.Minute)
	if _, err := db.RecordTurn(ctx, ts[0], store.TurnOutcome{State: store.TurnAnswered, At: c.Now()}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PruneInbound(ctx, c.Now().Add(-time.Millisecond), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d %v before the second message", n, err)
	}
	c.Advance(time.Hour)
	if n, err := db.PruneInbound(ctx, c.Now(), 10); err != nil || n != 0 {
		t.Fatalf("pruned %d %v", n, err)
	}
	if _, err := db.InboundRecord(ctx, ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the first record is still there")
	}
	if _, err := db.InboundAttachment(ctx, ids[0], 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("its bytes are still there")
	}
	if _, err := db.InboundByMessageID(ctx, "email", "0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("its message id still finds it")
	}
	if msgs, _ := db.ConversationMessages(ctx, "cnv_0", 10); len(msgs) != 0 {
		t.Fatalf("conversation index %+v", msgs)
	}
	if _, err := db.Turn(ctx, ts[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("its turn is still there")
	}
	if _, err := db.ConversationByMessageID(ctx, "0"); err != nil {
		t.Fatal("the conversation's Message-ID went with the record")
	}
	for _, id := range ids[1:] {
		if _, err := db.InboundRecord(ctx, id); err != nil {
			t.Fatal("a record at or after a queued turn was pruned")
		}
	}
	checkConv(t, db)
}

// One inbound message delivered by four replicas at once is recorded once
// and queues one turn; the others get the first record as a duplicate.
func TestRecordInboundConcurrentDuplicates(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	const writers = 4
	var wg sync.WaitGroup
	outs := make([]*store.InboundWritten, writers)
	errs := make([]error, writers)
	start := make(chan struct{})
	for i := range writers {
		w := smsWrite(db, c, "same", true, fmt.Sprint("cnv_", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i], errs[i] = db.RecordInbound(ctx, w)
		}()
	}
	close(start)
	wg.Wait()
	firsts := 0
	var first *store.InboundWritten
	for i, err := range errs {
		switch {
		case err == nil:
			firsts++
			first = outs[i]
		case !errors.Is(err, store.ErrDuplicateMessage):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d writers recorded the message", firsts)
	}
	for i, err := range errs {
		if err != nil && outs[i].Record.ID != first.Record.ID {
			t.Fatalf("writer %d's duplicate names %s, not the first record %s", i, outs[i].Record.ID, first.Record.ID)
		}
	}
	if recs, _ := db.ListInboundRecords(ctx, "", 10, 10, nil); len(recs) != 1 {
		t.Fatalf("%d inbound records", len(recs))
	}
	if turns, _ := db.ListTurns(ctx, "", 10); len(turns) != 1 || turns[0].ID != first.Turn.ID {
		t.Fatalf("turns %+v", turns)
	}
	if cs, _ := db.ListConversations(ctx, "", 10, 10, nil); len(cs) != 1 || cs[0].Turns != 1 {
		t.Fatalf("conversations %+v", cs)
	}
	checkConv(t, db)
}

// Different first messages on one thread at once open one conversation.
func TestRecordInboundConcurrentThread(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	const writers = 4
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		w := smsWrite(db, c, fmt.Sprint("m", i), true, fmt.Sprint("cnv_", i))
		w.PerMinute, w.PerHour = 0, 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.RecordInbound(ctx, w)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	cs, _ := db.ListConversations(ctx, "", 10, 10, nil)
	if len(cs) != 1 || cs[0].Turns != writers {
		t.Fatalf("conversations %+v", cs)
	}
	if msgs, _ := db.ConversationMessages(ctx, cs[0].ID, 0); len(msgs) != writers {
		t.Fatalf("messages %+v", msgs)
	}
	checkConv(t, db)
}

// Claimers working at once never take one turn twice, nor put two turns
// of one conversation in flight.
func TestClaimTurnsConcurrent(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	// A conversation's turns are far apart in due order, so that two
	// claimers' candidates hold turns of one conversation.
	const conversations, perConversation = 20, 2
	for j := range perConversation {
		for i := range conversations {
			c.Advance(time.Microsecond)
			w := store.InboundWrite{Record: store.InboundRecord{ID: db.NewID("inb_"), Channel: "email", From: "a@b",
				MessageID: fmt.Sprint(i, "-", j), ReceivedAt: c.Now(), Disposition: envelope.DispositionTurn},
				Conversation: &store.Conversation{ID: fmt.Sprint("cnv_", i), Agent: "a", Channel: "email"}, New: j == 0,
				Turn: &store.Turn{ID: db.NewID("trn_"), Agent: "a"}}
			if _, err := db.RecordInbound(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := c.Now()
	const claimers = 4
	var mu sync.Mutex
	taken := map[string]int{}       // turn → times claimed
	inFlight := map[string]string{} // conversation → claimed turn
	var problems []string
	var wg sync.WaitGroup
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ts, err := db.ClaimTurns(ctx, now, 1, time.Hour)
				mu.Lock()
				if err != nil {
					problems = append(problems, err.Error())
				}
				for _, t := range ts {
					taken[t.ID]++
					if other, ok := inFlight[t.ConversationID]; ok {
						problems = append(problems, fmt.Sprintf("conversation %s has turns %s and %s in flight", t.ConversationID, other, t.ID))
					}
					inFlight[t.ConversationID] = t.ID
				}
				mu.Unlock()
				if len(ts) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	if len(inFlight) != conversations {
		t.Fatalf("%d conversations have a turn in flight, want %d", len(inFlight), conversations)
	}
	for id, n := range taken {
		if n != 1 {
			t.Fatalf("turn %s claimed %d times", id, n)
		}
	}
	checkConv(t, db)
}

// A NUL byte and the text \u0000 (an escaped backslash) both survive the
// doc column as they were.
func TestConvDocKeepsNUL(t *testing.T) {
	doc, err := convDoc(map[string]string{"a": "x\x00y", "b": `x\u0000y`})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"x\u0000y","b":"x\\u0000y"}`; string(doc) != want {
		t.Fatalf("doc %s, want %s", doc, want)
	}
}
