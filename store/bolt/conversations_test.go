package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// A schema-5 file (no conversation buckets, no turn limit counters) opens
// as the current schema with them.
func TestMigrate5to6CreatesTheConversationBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db := openTest(t, path, newClock())
	db.bolt.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bConversations, bTurns, bTurnDue, bInboundRecords, bTurnLimits} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 5)
		return tx.Bucket(bMeta).Put(keySchema, v[:])
	})
	db.Close()
	db = openTest(t, path, newClock())
	db.bolt.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(keySchema); binary.BigEndian.Uint64(v) != SchemaVersion {
			t.Errorf("schema %d, want %d", binary.BigEndian.Uint64(v), SchemaVersion)
		}
		for _, b := range [][]byte{bConversations, bTurns, bTurnDue, bInboundRecords, bTurnLimits} {
			if tx.Bucket(b) == nil {
				t.Errorf("bucket %s missing", b)
			}
		}
		return nil
	})
	if err := db.CheckConversationInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A held delivery is stored but not due; ReleaseHeld queues it now.
func TestHeldDeliveryAndReleaseHeld(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	extra := map[string]string{envelope.ExtraConversation: "cnv_1"}
	res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{
		{Channel: "whatsapp", To: "+1", Extra: extra, Held: true},
		{Channel: "whatsapp", To: "+1", Extra: map[string]string{envelope.ExtraConversation: "cnv_1", envelope.ExtraTemplate: "window"}},
		{Channel: "whatsapp", To: "+2", Extra: map[string]string{envelope.ExtraConversation: "cnv_2"}, Held: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deliveries[0].State != store.StateHeld {
		t.Fatalf("state %s", res.Deliveries[0].State)
	}
	jobs, _ := db.Claim(ctx, 10, time.Minute, nil)
	if len(jobs) != 1 || jobs[0].ID != res.Deliveries[1].ID {
		t.Fatalf("claimed %d jobs", len(jobs))
	}
	if counts, _ := db.CountByState(ctx); counts[store.StateHeld] != 2 {
		t.Fatalf("counts %v", counts)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	n, err := db.ReleaseHeld(ctx, "cnv_1")
	if err != nil || n != 1 {
		t.Fatalf("released %d %v", n, err)
	}
	d, _ := db.Delivery(ctx, res.Deliveries[0].ID)
	if d.State != store.StateQueued {
		t.Fatalf("released state %s", d.State)
	}
	if d2, _ := db.Delivery(ctx, res.Deliveries[2].ID); d2.State != store.StateHeld {
		t.Fatal("another conversation's held delivery was released")
	}
	msgs, _ := db.ConversationMessages(ctx, "cnv_1", 10)
	if len(msgs) != 2 || msgs[0].Direction != "out" {
		t.Fatalf("conversation index %+v", msgs)
	}
	if !store.StateHeld.Valid() {
		t.Fatal("held is not a valid state")
	}
}

func TestRecordInboundDuplicateFloodAndThread(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	write := func(msgID string, newConv bool, id string) (*store.InboundWritten, error) {
		c.Advance(time.Millisecond) // turns due in the order they came
		w := store.InboundWrite{Record: store.InboundRecord{ID: db.NewID("inb_"), Channel: "sms", From: "+44", MessageID: msgID,
			ReceivedAt: c.Now(), Disposition: envelope.DispositionTurn},
			Conversation: &store.Conversation{ID: id, Agent: "a", Channel: "sms", OurAddress: "+1"}, New: newConv,
			Turn: &store.Turn{ID: db.NewID("trn_"), Agent: "a"}, PerMinute: 2, PerHour: 10,
			ThreadKey: store.ThreadKey("sms", "+1", "+44"), IdleTimeout: time.Hour}
		return db.RecordInbound(ctx, w)
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
	if cv.Turns != 2 || len(cv.Participants) != 1 {
		t.Fatalf("conversation %+v", cv)
	}
	if got, _ := db.ConversationByThread(ctx, store.ThreadKey("sms", "+1", "+44")); got.ID != "cnv_a" {
		t.Fatalf("thread → %s", got.ID)
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
	again, _ := db.ClaimTurns(ctx, c.Now(), 10, time.Minute)
	if len(again) != 1 {
		t.Fatal("requeued turn not claimable")
	}
	db.RecordTurn(ctx, again[0], store.TurnOutcome{State: store.TurnDead, Error: "x", At: c.Now()})
	if _, err := db.RetryTurn(ctx, again[0].ID, c.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RetryTurn(ctx, again[0].ID, c.Now()); !errors.Is(err, store.ErrBadState) {
		t.Fatalf("retry of a queued turn: %v", err)
	}
	if err := db.CheckConversationInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Old inbound records go with their bytes and settled turns; a record
// whose turn is still queued stays, and so does what came after it.
func TestPruneInbound(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
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
	db.RecordTurn(ctx, ts[0], store.TurnOutcome{State: store.TurnAnswered, At: c.Now()})
	c.Advance(time.Hour)
	n, err := db.PruneInbound(ctx, c.Now(), 10)
	if err != nil || n != 1 {
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
	if _, err := db.InboundRecord(ctx, ids[2]); err != nil {
		t.Fatal("a record after a queued turn was pruned")
	}
	if err := db.CheckConversationInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A page of conversations continues after store.ConversationCursor of the
// previous page's last one, without repeating or skipping any.
func TestListConversationsPagesByConversationCursor(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	for i, from := range []string{"+441", "+442", "+443"} {
		c.Advance(time.Second)
		w := store.InboundWrite{Record: store.InboundRecord{ID: db.NewID("inb_"), Channel: "sms", From: from,
			MessageID: fmt.Sprintf("m%d", i), ReceivedAt: c.Now(), Disposition: envelope.DispositionTurn},
			Conversation: &store.Conversation{ID: fmt.Sprintf("cnv_%d", i), Agent: "a", Channel: "sms", OurAddress: "+1",
				CreatedAt: c.Now(), UpdatedAt: c.Now()}, New: true,
			ThreadKey: store.ThreadKey("sms", "+1", from), IdleTimeout: time.Hour}
		if _, err := db.RecordInbound(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	first, err := db.ListConversations(ctx, "", 2, 100, nil)
	if err != nil || len(first) != 2 || first[0].ID != "cnv_2" || first[1].ID != "cnv_1" {
		t.Fatalf("first page %v %v", convIDs(first), err)
	}
	rest, err := db.ListConversations(ctx, store.ConversationCursor(first[1]), 2, 100, nil)
	if err != nil || len(rest) != 1 || rest[0].ID != "cnv_0" {
		t.Fatalf("second page %v %v", convIDs(rest), err)
	}
}

func convIDs(cs []*store.Conversation) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}
