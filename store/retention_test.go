package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestPruneRemovesOnlyOldFinishedWork(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	old := ingestOne(t, db, 2) // will be sent and dead
	oldPending := ingestOne(t, db, 1)
	key, _ := db.Ingest(ctx, Ingest{Envelope: []byte(`{}`), Deliveries: []NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: HashRequest([]byte("b"))})
	jobs, _ := db.Claim(ctx, 10, time.Minute, nil)
	for _, j := range jobs {
		switch j.ID {
		case old.Deliveries[0].ID:
			db.Record(ctx, j.ID, j.LeaseUntil, Outcome{State: StateSent, ProviderID: "SMold", Attempt: Attempt{Outcome: "sent"}})
		case old.Deliveries[1].ID, key.Deliveries[0].ID:
			db.Record(ctx, j.ID, j.LeaseUntil, Outcome{State: StateDead, DeadReason: "410"})
		default: // oldPending stays retrying
			db.Record(ctx, j.ID, j.LeaseUntil, Outcome{State: StateRetrying, NextAttemptAt: c.Now().Add(time.Hour)})
		}
	}
	c.Add(8 * 24 * time.Hour)
	fresh := ingestOne(t, db, 1)
	n, err := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want the two finished old envelopes", n, err)
	}
	if _, err := db.Envelope(ctx, old.EnvelopeID); !errors.Is(err, ErrNotFound) {
		t.Errorf("old finished envelope still there: %v", err)
	}
	if _, err := db.DeliveryByProviderID(ctx, "webhook", "SMold"); !errors.Is(err, ErrNotFound) {
		t.Errorf("provider id of a pruned delivery still resolves: %v", err)
	}
	if atts, _ := db.Attempts(ctx, old.Deliveries[0].ID); len(atts) != 0 {
		t.Errorf("%d attempts of a pruned delivery left", len(atts))
	}
	for _, keep := range []string{oldPending.EnvelopeID, fresh.EnvelopeID} {
		if _, err := db.Envelope(ctx, keep); err != nil {
			t.Errorf("envelope %s removed: %v", keep, err)
		}
	}
	if n, err := db.PruneRecords(ctx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d records, %v; want the one old idempotency key", n, err)
	}
	// The idempotency key is gone: the same key is a new request now.
	again, err := db.Ingest(ctx, Ingest{Envelope: []byte(`{}`), Deliveries: []NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: HashRequest([]byte("other"))})
	if err != nil || again.Replayed {
		t.Errorf("expired idempotency key: %+v %v", again, err)
	}
	if n, _ := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100); n != 0 {
		t.Errorf("second prune removed %d", n)
	}
}

// Records of handled inbound messages and Twilio webhooks are kept for the
// retention period, then pruned.
func TestPruneForgetsOldInboundRecords(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	if err := db.Note(ctx, AuditEntry{At: c.Now(), Channel: "email", MessageID: "<old@x>", Event: "ignored"}); err != nil {
		t.Fatal(err)
	}
	if first, err := db.MarkSeen(ctx, "msg/SMold"); !first || err != nil {
		t.Fatal(first, err)
	}
	c.Add(8 * 24 * time.Hour)
	if err := db.Note(ctx, AuditEntry{At: c.Now(), Channel: "email", MessageID: "<new@x>", Event: "ignored"}); err != nil {
		t.Fatal(err)
	}
	if first, err := db.MarkSeen(ctx, "msg/SMnew"); !first || err != nil {
		t.Fatal(first, err)
	}
	if n, err := db.PruneRecords(ctx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("pruned %d records, %v; want the old Message-ID and the old Twilio webhook", n, err)
	}
	for id, want := range map[string]bool{"<old@x>": false, "<new@x>": true} {
		if seen, _ := db.InboundSeen(ctx, "email", id); seen != want {
			t.Errorf("inbound %s seen = %v after pruning, want %v", id, seen, want)
		}
	}
	for key, want := range map[string]bool{"msg/SMold": true, "msg/SMnew": false} {
		if first, _ := db.MarkSeen(ctx, key); first != want {
			t.Errorf("MarkSeen(%s) first = %v after pruning, want %v", key, first, want)
		}
	}
}

// An idempotency key whose envelope retention already removed is expired
// with it: the same key is a new request, not an error.
func TestReplayAfterItsEnvelopeWasPruned(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	in := Ingest{Envelope: []byte(`{}`), Deliveries: []NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: HashRequest([]byte("b"))}
	first, err := db.Ingest(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := db.Claim(ctx, 10, time.Minute, nil)
	db.Record(ctx, jobs[0].ID, jobs[0].LeaseUntil, Outcome{State: StateSent})
	c.Add(8 * 24 * time.Hour)
	if n, _ := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100); n != 1 {
		t.Fatalf("pruned %d envelopes", n)
	}
	again, err := db.Ingest(ctx, in)
	if err != nil || again.Replayed || again.EnvelopeID == first.EnvelopeID {
		t.Fatalf("replay after the envelope was pruned: %+v, %v", again, err)
	}
}
