package bolt

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// ingestTo stores one envelope for one recipient on channel and returns the
// delivery id.
func ingestTo(t *testing.T, db *DB, channel, to string) string {
	t.Helper()
	res, err := db.Ingest(ctx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), Deliveries: []store.NewDelivery{{Channel: channel, To: to}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Deliveries[0].ID
}

func ids(ds []*store.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// TestClaimPassesOverARefusedChannel: a channel that admits nothing now
// (RefuseChannel) is asked once per claim, and its backlog, however long,
// does not keep another channel's job behind it from being claimed.
func TestClaimPassesOverARefusedChannel(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	var ins []store.Ingest
	for i := range 7000 {
		ins = append(ins, store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "sms", To: fmt.Sprintf("+4477009%05d", i)}}})
	}
	if _, err := db.IngestBulk(ctx, ins); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Millisecond)
	hook := ingestTo(t, db, "webhook", "ops")
	asked := map[string]int{}
	got, err := db.ClaimAdmitting(ctx, 10, time.Minute, func(d *store.Delivery) store.Admission {
		asked[d.Channel]++
		if d.Channel == "sms" {
			return store.RefuseChannel
		}
		return store.Admit
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []string{hook}) || asked["sms"] != 1 {
		t.Fatalf("claimed %v, sms asked %d times; want the webhook, sms asked once", ids(got), asked["sms"])
	}
	// Refused per recipient instead, the backlog is walked up to the run
	// limit, and still does not stop the other channel.
	c.Advance(time.Millisecond)
	hook2 := ingestTo(t, db, "webhook", "ops")
	got, err = db.ClaimAdmitting(ctx, 10, time.Minute, func(d *store.Delivery) store.Admission {
		if d.Channel == "sms" {
			return store.RefuseRecipient
		}
		return store.Admit
	})
	if err != nil || !slices.Equal(ids(got), []string{hook2}) {
		t.Fatalf("claimed %v, %v; want the second webhook", ids(got), err)
	}
}

// TestClaimTakesChannelsInDueOrder: jobs of several channels are claimed
// earliest first, across channels.
func TestClaimTakesChannelsInDueOrder(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	var want []string
	for i, ch := range []string{"email", "sms", "email", "webhook", "sms"} {
		want = append(want, ingestTo(t, db, ch, fmt.Sprintf("r%d", i)))
		c.Advance(time.Millisecond)
	}
	got, err := db.Claim(ctx, 3, time.Minute, nil)
	if err != nil || !slices.Equal(ids(got), want[:3]) {
		t.Fatalf("first claim %v, %v; want %v", ids(got), err, want[:3])
	}
	got, err = db.Claim(ctx, 3, time.Minute, nil)
	if err != nil || !slices.Equal(ids(got), want[3:]) {
		t.Fatalf("second claim %v, %v; want %v", ids(got), err, want[3:])
	}
	if t0, ok := db.NextDue(); ok {
		t.Fatalf("NextDue %v with nothing due", t0)
	}
}

// TestMigrateSchema3DueIndex: schema 3's due index (time first) is re-keyed
// by channel at open, including an entry without the channel in its value
// (as schema 1 wrote them); the jobs are then claimed in due order.
func TestMigrateSchema3DueIndex(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "v3.db")
	db := openTest(t, path, c)
	var want []string
	for i, ch := range []string{"sms", "email", "sms", "webhook"} {
		want = append(want, ingestTo(t, db, ch, fmt.Sprintf("r%d", i)))
		c.Advance(time.Millisecond)
	}
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		type entry struct{ k, v []byte }
		var old []entry
		if err := tx.Bucket(bDue).ForEach(func(k, v []byte) error {
			_, at, id, ok := splitDueKey(k)
			if !ok {
				return fmt.Errorf("due key %q", k)
			}
			val := append([]byte(nil), v...)
			if string(id) == want[1] {
				val = nil // schema 1: no channel and recipient
			}
			old = append(old, entry{timeKey(at, string(id)), val})
			return nil
		}); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bDue); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bDue)
		if err != nil {
			return err
		}
		for _, e := range old {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 3)
		return tx.Bucket(bMeta).Put(keySchema, v[:])
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openTest(t, path, c)
	if err := db.CheckInvariants(); err != nil {
		t.Fatalf("after migration: %v", err)
	}
	got, err := db.Claim(ctx, 10, time.Minute, nil)
	if err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("claimed %v, %v; want %v", ids(got), err, want)
	}
}

// The dispatcher's periodic sweep of leases that ran out writes nothing
// when none has: no commit (an fsync holding the writer's lock) for an
// empty sweep. One that has run out is re-queued, maybe sent.
func TestRequeueExpiredWritesOnlyWhenALeaseRanOut(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "b.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id := ingestTo(t, db, "webhook", "a")
	claimed, err := db.Claim(ctx, 1, time.Hour, nil)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	pagesWritten := func() int64 { st := db.bolt.Stats(); return st.TxStats.GetWrite() }
	writes := pagesWritten()
	if n, err := db.RequeueExpired(ctx, time.Now()); n != 0 || err != nil {
		t.Fatalf("sweep: %d re-queued, %v", n, err)
	}
	if w := pagesWritten(); w != writes {
		t.Fatalf("a sweep with no lease run out wrote %d pages", w-writes)
	}
	if n, err := db.RequeueExpired(ctx, time.Now().Add(2*time.Hour)); n != 1 || err != nil {
		t.Fatalf("sweep after the lease: %d re-queued, %v", n, err)
	}
	d, err := db.Delivery(ctx, id)
	if err != nil || d.State != store.StateQueued || !d.MaybeSent {
		t.Fatalf("after the sweep: %+v %v", d, err)
	}
}
