package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// A held delivery is stored but not due; ReleaseHeld queues it now, and
// ingest lists a conversation's deliveries among its messages.
func TestHeldDeliveryAndReleaseHeld(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
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
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A person's message releases the held answers of its conversation and of
// the thread's previous conversation, closed by idleness, in the inbound
// message's transaction; an answer ingested moves its conversation.
func TestRecordInboundReleasesHeld(t *testing.T) {
	ctx := context.Background()
	c := newConvClock()
	db := open(t, c.Now)
	first, err := db.RecordInbound(ctx, smsWrite(db, c, "m1", true, "cnv_old"))
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{
		{Channel: "sms", To: "+44", Extra: map[string]string{envelope.ExtraConversation: "cnv_old"}, Held: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if cv, _ := db.Conversation(ctx, "cnv_old"); !cv.UpdatedAt.Equal(c.Now()) {
		t.Fatalf("the answer did not move its conversation: %v", cv.UpdatedAt)
	}
	// Two hours later the thread is idle: a new conversation opens.
	c.Advance(2 * time.Hour)
	w := smsWrite(db, c, "m2", true, "cnv_new")
	w.ReleaseHeld = true
	second, err := db.RecordInbound(ctx, w)
	if err != nil || second.Conversation.ID != "cnv_new" || second.Released != 1 {
		t.Fatalf("second message %+v %v", second, err)
	}
	if d, _ := db.Delivery(ctx, res.Deliveries[0].ID); d.State != store.StateQueued || !d.NextAttemptAt.Equal(c.Now()) {
		t.Fatalf("the old conversation's answer %+v", d)
	}
	if got, _ := db.ConversationByThread(ctx, store.ThreadKey("sms", "+1", "+44")); got.ID != "cnv_new" || first.Conversation.ID != "cnv_old" {
		t.Fatalf("thread → %s", got.ID)
	}
	// An answer held in the new conversation goes with the next message.
	held, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{
		{Channel: "sms", To: "+44", Extra: map[string]string{envelope.ExtraConversation: "cnv_new"}, Held: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	w = smsWrite(db, c, "m3", false, "cnv_new")
	w.ReleaseHeld, w.PerMinute = true, 0
	third, err := db.RecordInbound(ctx, w)
	if err != nil || third.Released != 1 {
		t.Fatalf("third message %+v %v", third, err)
	}
	if d, _ := db.Delivery(ctx, held.Deliveries[0].ID); d.State != store.StateQueued {
		t.Fatalf("the new conversation's answer %+v", d)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
