package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
)

func TestPruneRemovesOnlyOldFinishedWork(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	old := ingestOne(t, db, 2) // will be sent and dead
	oldPending := ingestOne(t, db, 1)
	key, _ := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("b"))})
	jobs, _ := db.Claim(ctx, 10, time.Minute, nil)
	for _, j := range jobs {
		switch j.ID {
		case old.Deliveries[0].ID:
			db.Record(ctx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SMold", Attempt: store.Attempt{Outcome: "sent"}})
		case old.Deliveries[1].ID, key.Deliveries[0].ID:
			db.Record(ctx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateDead, DeadReason: "410"})
		default: // oldPending stays retrying
			db.Record(ctx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: c.Now().Add(time.Hour)})
		}
	}
	c.Advance(8 * 24 * time.Hour)
	fresh := ingestOne(t, db, 1)
	n, err := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want the two finished old envelopes", n, err)
	}
	if _, err := db.Envelope(ctx, old.EnvelopeID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old finished envelope still there: %v", err)
	}
	if _, err := db.DeliveryByProviderID(ctx, "webhook", "SMold"); !errors.Is(err, store.ErrNotFound) {
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
	again, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("other"))})
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
	if err := db.Note(ctx, store.AuditEntry{At: c.Now(), Channel: "email", MessageID: "<old@x>", Event: "ignored"}); err != nil {
		t.Fatal(err)
	}
	if first, err := db.MarkSeen(ctx, "msg/SMold"); !first || err != nil {
		t.Fatal(first, err)
	}
	c.Advance(8 * 24 * time.Hour)
	if err := db.Note(ctx, store.AuditEntry{At: c.Now(), Channel: "email", MessageID: "<new@x>", Event: "ignored"}); err != nil {
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
	in := store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "k"}}, IdempotencyKey: "k1", RequestHash: store.HashRequest([]byte("b"))}
	first, err := db.Ingest(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := db.Claim(ctx, 10, time.Minute, nil)
	db.Record(ctx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent})
	c.Advance(8 * 24 * time.Hour)
	if n, _ := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100); n != 1 {
		t.Fatalf("pruned %d envelopes", n)
	}
	again, err := db.Ingest(ctx, in)
	if err != nil || again.Replayed || again.EnvelopeID == first.EnvelopeID {
		t.Fatalf("replay after the envelope was pruned: %+v, %v", again, err)
	}
}

// ingestAt ingests an envelope with one webhook delivery to `to`, first due
// at notBefore, a millisecond after the previous one: ids sort by creation
// time only to the millisecond.
func ingestAt(t *testing.T, db *DB, c *fakeclock.Clock, to string, notBefore time.Time) *store.IngestResult {
	t.Helper()
	c.Advance(time.Millisecond)
	res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: to}}, NotBefore: notBefore})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// pruneUntilZero calls Prune as beachd's retention loop does, until it
// returns 0, and returns how many envelopes it removed.
func pruneUntilZero(t *testing.T, db *DB, before time.Time, max int) int {
	t.Helper()
	total := 0
	for calls := 1; ; calls++ {
		n, err := db.Prune(ctx, before, max)
		if err != nil {
			t.Fatalf("prune call %d: %v", calls, err)
		}
		if n == 0 {
			return total
		}
		total += n
		if calls == 20 {
			t.Fatalf("prune still removing envelopes after %d calls", calls)
		}
	}
}

// The envelopes kept for their unfinished deliveries are the oldest ones:
// however many there are, Prune reaches the finished envelopes behind them,
// and an envelope that finishes later, behind where Prune's walk stands, is
// reached in the next retention cycle.
func TestPruneReachesFinishedWorkBehindUnfinished(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	const max = 2 // a prune transaction reads at most 20*max = 40 envelopes
	later := c.Now().Add(24 * time.Hour)
	var stuck []*store.IngestResult
	for i := range 100 {
		stuck = append(stuck, ingestAt(t, db, c, fmt.Sprintf("ep%d", i), later))
	}
	done := []*store.IngestResult{ingestAt(t, db, c, "done0", time.Time{}), ingestAt(t, db, c, "done1", time.Time{})}
	for i := range 5 {
		stuck = append(stuck, ingestAt(t, db, c, fmt.Sprintf("tail%d", i), later))
	}
	jobs, err := db.Claim(ctx, 10, time.Minute, nil)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d jobs, %v; want the 2 due ones", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := db.Record(ctx, j.ID, j.LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(8 * 24 * time.Hour)
	before := c.Now().Add(-7 * 24 * time.Hour)

	if n, err := db.Prune(ctx, before, max); err != nil || n != 2 {
		t.Fatalf("prune removed %d, %v; want the 2 finished envelopes behind 100 unfinished ones", n, err)
	}
	for _, r := range done {
		if _, err := db.Envelope(ctx, r.EnvelopeID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("finished envelope %s behind unfinished ones not pruned: %v", r.EnvelopeID, err)
		}
	}

	// The oldest job finishes now, behind where the walk stopped.
	first := stuck[0].Deliveries[0].ID
	jobs, err = db.Claim(ctx, 1, time.Minute, func(d *store.Delivery) bool { return d.ID == first })
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim %s: %d jobs, %v", first, len(jobs), err)
	}
	if _, err := db.Record(ctx, first, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
		t.Fatal(err)
	}
	if n := pruneUntilZero(t, db, before, max); n != 1 {
		t.Fatalf("retention cycle removed %d envelopes; want the 1 that finished behind the walk", n)
	}
	if _, err := db.Envelope(ctx, stuck[0].EnvelopeID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("envelope finished behind the walk not pruned in the next cycle: %v", err)
	}
	for _, r := range stuck[1:] {
		if _, err := db.Envelope(ctx, r.EnvelopeID); err != nil {
			t.Fatalf("unfinished envelope %s removed: %v", r.EnvelopeID, err)
		}
	}
}

// countKeys is the number of entries in a bucket.
func countKeys(t *testing.T, db *DB, bucket []byte) int {
	t.Helper()
	n := 0
	if err := db.bolt.View(func(tx *bbolt.Tx) error { n = tx.Bucket(bucket).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Every provider id a delivery was given finds it until it is pruned: a
// status callback may still come for an earlier attempt's message, or for
// the second part of a split SMS. Pruning the delivery removes them all.
func TestProviderIDsLastAsLongAsTheirDelivery(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "sms", To: "+447700900001"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Deliveries[0].ID
	jobs, _ := db.Claim(ctx, 1, time.Minute, nil)
	// The first attempt reached Twilio, then timed out.
	if _, err := db.Record(ctx, id, jobs[0].LeaseUntil, store.Outcome{State: store.StateRetrying, NextAttemptAt: c.Now(),
		ProviderID: "SMfirst", MaybeSent: true, Attempt: store.Attempt{Outcome: "retry"}}); err != nil {
		t.Fatal(err)
	}
	jobs, _ = db.Claim(ctx, 1, time.Minute, nil)
	receipt := `{"data":{"sid":"SMsecond"},"meta":{"source":"twilio","sid":"SMsecond","parts":["SMsecond","SMthird"]}}`
	if _, err := db.Record(ctx, id, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SMsecond",
		Attempt: store.Attempt{Outcome: "sent", Receipt: json.RawMessage(receipt)}}); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"SMfirst", "SMsecond", "SMthird"} {
		if d, err := db.DeliveryByProviderID(ctx, "sms", sid); err != nil || d.ID != id {
			t.Errorf("provider id %s finds %v, %v; want delivery %s", sid, d, err, id)
		}
	}
	c.Advance(8 * 24 * time.Hour)
	if n, err := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if n := countKeys(t, db, bProviderIDs); n != 0 {
		t.Errorf("%d provider-id entries outlived their pruned delivery", n)
	}
}

// A provider id can recur (SMTP queue ids do): it finds its latest delivery,
// and pruning an older delivery that had it leaves the newer one findable.
func TestPruneKeepsAProviderIDTakenOverByALaterDelivery(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	send := func() string {
		t.Helper()
		res := ingestOne(t, db, 1)
		jobs, _ := db.Claim(ctx, 1, time.Minute, nil)
		if _, err := db.Record(ctx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "4Xq1kT0Bz"}); err != nil {
			t.Fatal(err)
		}
		return res.Deliveries[0].ID
	}
	send()
	c.Advance(8 * 24 * time.Hour)
	newer := send()
	if n, err := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if d, err := db.DeliveryByProviderID(ctx, "webhook", "4Xq1kT0Bz"); err != nil || d.ID != newer {
		t.Errorf("reused provider id finds %v, %v after the older delivery was pruned; want %s", d, err, newer)
	}
}

// Schema 2 left the provider ids of earlier attempts behind when it pruned
// their deliveries. Opening such a file removes them, and lists the others
// under their deliveries, so that pruning those removes them too.
func TestMigrateSchema2ProviderIDs(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "v2.db")
	db := openTest(t, path, c)
	res := ingestOne(t, db, 1)
	jobs, _ := db.Claim(ctx, 1, time.Minute, nil)
	if _, err := db.Record(ctx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent, ProviderID: "SMkept"}); err != nil {
		t.Fatal(err)
	}
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bDeliveryPIDs); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bDeliveryPIDs); err != nil {
			return err
		}
		if err := tx.Bucket(bProviderIDs).Put(providerKey("sms", "SMstale"), []byte("dlv_prunedlongago")); err != nil {
			return err
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 2)
		return tx.Bucket(bMeta).Put(keySchema, v[:])
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openTest(t, path, c)
	if n := countKeys(t, db, bProviderIDs); n != 1 {
		t.Errorf("%d provider-id entries after migration; want the 1 of a stored delivery", n)
	}
	if d, err := db.DeliveryByProviderID(ctx, "webhook", "SMkept"); err != nil || d.ID != res.Deliveries[0].ID {
		t.Fatalf("migrated provider id finds %v, %v", d, err)
	}
	c.Advance(8 * 24 * time.Hour)
	if n, err := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if n, m := countKeys(t, db, bProviderIDs), countKeys(t, db, bDeliveryPIDs); n != 0 || m != 0 {
		t.Errorf("%d provider-id entries and %d listed ids outlived their pruned delivery", n, m)
	}
}

// CheckInvariants names a provider-id entry that pruning would leave
// behind.
func TestCheckInvariantsFindsStrayProviderIDs(t *testing.T) {
	for name, tc := range map[string]struct {
		key, val []byte
		bucket   []byte
		want     string
	}{
		"entry of a missing delivery": {bucket: bProviderIDs, key: providerKey("sms", "SMx"), val: []byte("dlv_gone"), want: "missing delivery dlv_gone"},
		"entry not listed":            {bucket: bProviderIDs, key: providerKey("webhook", "SMx"), want: "not listed"},
		"id listed under a missing":   {bucket: bDeliveryPIDs, key: deliveryPIDKey("dlv_gone", "SMx"), want: "missing delivery"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClock()
			db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
			res := ingestOne(t, db, 1)
			val := tc.val
			if val == nil {
				val = []byte(res.Deliveries[0].ID)
			}
			if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(tc.bucket).Put(tc.key, val) }); err != nil {
				t.Fatal(err)
			}
			if err := db.CheckInvariants(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckInvariants = %v; want it to say %q", err, tc.want)
			}
			// Take the stray entry out, so that the closing check passes.
			db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(tc.bucket).Delete(tc.key) })
		})
	}
}

// TestPrunePassesOverADamagedEnvelope: one envelope record that does not
// decode is passed over (and named by CheckInvariants); retention of the
// finished envelopes around it goes on.
func TestPrunePassesOverADamagedEnvelope(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	var envs []string
	for range 3 {
		res := ingestOne(t, db, 1)
		envs = append(envs, res.EnvelopeID)
		jobs, err := db.Claim(ctx, 1, time.Minute, nil)
		if err != nil || len(jobs) != 1 {
			t.Fatal(err)
		}
		if _, err := db.Record(ctx, jobs[0].ID, jobs[0].LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bEnvelopes).Put([]byte(envs[1]), []byte("{not json")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckInvariants(); err == nil || !strings.Contains(err.Error(), envs[1]) {
		t.Fatalf("CheckInvariants = %v; want it to name %s", err, envs[1])
	}
	c.Advance(8 * 24 * time.Hour)
	total := 0
	for range 5 {
		n, err := db.Prune(ctx, c.Now().Add(-7*24*time.Hour), 100)
		if err != nil {
			t.Fatalf("prune: %v", err)
		}
		if total += n; n == 0 {
			break
		}
	}
	if total != 2 {
		t.Fatalf("pruned %d; want the 2 sound envelopes", total)
	}
	// Take the damaged one out, so that the closing check passes.
	db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bEnvelopes).Delete([]byte(envs[1])) })
}
