package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// ingestTrail stores approval a1 asked of two recipients and decides it by
// a vote, so that its trail has four events.
func ingestTrail(t *testing.T, db *DB, now time.Time) {
	t.Helper()
	_, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "travel",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{"a1"}}},
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: "a1", Request: []byte(`{}`), ExpiresAt: now.Add(time.Hour)},
			Events: []store.ApprovalEvent{{Kind: store.EventAsked, Actor: "a@example.org", Channel: "email"},
				{Kind: store.EventAsked, Actor: "+15550001111", Channel: "sms"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = db.Decide(ctx, store.Decision{ApprovalID: "a1", State: store.ApprovalGranted, DecidedBy: "+15550001111", Channel: "sms",
		MessageID: "SM1", At: now, InjectionID: "inj-a1",
		Vote: &store.ApprovalEvent{Kind: store.EventVoted, Actor: "+15550001111", Channel: "sms", Evidence: map[string]string{"twilioSignature": "valid"}}})
	if err != nil {
		t.Fatal(err)
	}
}

// A schema-7 file opens at the current schema with the trail buckets, and its
// approvals have empty trails that verify and take new events.
func TestMigrate7to8CreatesTheTrailBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	c := newClock()
	db := openTest(t, path, c)
	if _, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: []string{"a1"}}},
		Approvals: []store.NewApproval{{Approval: store.Approval{ID: "a1", Request: []byte(`{}`), ExpiresAt: c.Now().Add(time.Hour)}}}}); err != nil {
		t.Fatal(err)
	}
	db.bolt.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bApprovalEvents, bApprovalEventHeads} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 7)
		return tx.Bucket(bMeta).Put(keySchema, v[:])
	})
	db.Close()
	db = openTest(t, path, c)
	db.bolt.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(keySchema); binary.BigEndian.Uint64(v) != SchemaVersion {
			t.Errorf("schema %d, want %d", binary.BigEndian.Uint64(v), SchemaVersion)
		}
		return nil
	})
	evs, head, err := db.ApprovalEvents(ctx, "a1")
	if err != nil || len(evs) != 0 || head.Seq != 0 {
		t.Fatalf("trail of an approval from schema 7: %v %v %v", evs, head, err)
	}
	if e, err := db.AppendApprovalEvent(ctx, "a1", store.ApprovalEvent{Kind: store.EventExpired, Actor: "policy:expired"}); err != nil || e.Seq != 1 || e.PrevHash != "" {
		t.Fatalf("first event after the migration: %+v %v", e, err)
	}
}

// Editing one stored event in the file (its evidence, leaving its hash) is
// reported by verification at that event's position; removing one is
// reported where it is missing; removing the last at the end.
func TestTamperedTrailIsReported(t *testing.T) {
	for _, c := range []struct {
		name   string
		edit   func(t *testing.T, tx *bbolt.Tx)
		pos    int
		reason string
	}{
		{"evidence of event 3 changed", func(t *testing.T, tx *bbolt.Tx) {
			b := tx.Bucket(bApprovalEvents)
			var e store.ApprovalEvent
			if err := json.Unmarshal(b.Get(eventKey("a1", 3)), &e); err != nil {
				t.Fatal(err)
			}
			e.Evidence["twilioSignature"] = "absent"
			raw, _ := json.Marshal(e)
			if err := b.Put(eventKey("a1", 3), raw); err != nil {
				t.Fatal(err)
			}
		}, 3, "changed"},
		{"bytes of event 2 changed", func(t *testing.T, tx *bbolt.Tx) {
			b := tx.Bucket(bApprovalEvents)
			raw := strings.Replace(string(b.Get(eventKey("a1", 2))), "+15550001111", "+15550009999", 1)
			if err := b.Put(eventKey("a1", 2), []byte(raw)); err != nil {
				t.Fatal(err)
			}
		}, 2, "changed"},
		{"event 2 removed", func(t *testing.T, tx *bbolt.Tx) {
			if err := tx.Bucket(bApprovalEvents).Delete(eventKey("a1", 2)); err != nil {
				t.Fatal(err)
			}
		}, 2, "event 2 was removed"},
		{"last event removed", func(t *testing.T, tx *bbolt.Tx) {
			if err := tx.Bucket(bApprovalEvents).Delete(eventKey("a1", 4)); err != nil {
				t.Fatal(err)
			}
		}, 4, "removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newClock()
			db, err := Open(filepath.Join(t.TempDir(), "b.db"), Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ingestTrail(t, db, clock.Now())
			evs, head, err := db.ApprovalEvents(ctx, "a1")
			if err != nil || len(evs) != 4 {
				t.Fatalf("trail: %d events, %v", len(evs), err)
			}
			if err := store.VerifyApprovalTrail(evs, head); err != nil {
				t.Fatalf("untouched trail: %v", err)
			}
			if err := db.bolt.Update(func(tx *bbolt.Tx) error { c.edit(t, tx); return nil }); err != nil {
				t.Fatal(err)
			}
			evs, head, err = db.ApprovalEvents(ctx, "a1")
			if err != nil {
				t.Fatal(err)
			}
			err = store.VerifyApprovalTrail(evs, head)
			var ce *store.ChainError
			if !errors.As(err, &ce) || ce.Position != c.pos || !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("verify: %v; want %q at position %d", err, c.reason, c.pos)
			}
		})
	}
}

// An event overwritten with bytes that are not an event is reported at
// its position, as a ChainError, not as a failure of the store.
func TestUnreadableEventIsReportedByPosition(t *testing.T) {
	clock := newClock()
	db, err := Open(filepath.Join(t.TempDir(), "b.db"), Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ingestTrail(t, db, clock.Now())
	if err := db.bolt.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bApprovalEvents).Put(eventKey("a1", 2), []byte(`{"seq": "two"`))
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err = db.ApprovalEvents(ctx, "a1")
	var ce *store.ChainError
	if !errors.As(err, &ce) || ce.Position != 2 || !strings.Contains(ce.Reason, "unreadable") {
		t.Fatalf("ApprovalEvents: %v; want a ChainError at 2", err)
	}
}
