package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

func sampleDelivery() *store.Delivery {
	t0 := time.Unix(1_776_000_000, 123456789)
	return &store.Delivery{ID: "dlv_01", EnvelopeID: "env_01", Channel: "sms", To: "+447700900123", Agent: "travel",
		State: store.StateRetrying, Attempts: 3, CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		NextAttemptAt: t0.Add(time.Minute), SentAt: time.Time{}, LastError: "HTTP 503: busy",
		ProviderID: "SM123", MaybeSent: true, ProviderStatus: "queued",
		ApprovalIDs: []string{"apr_1", "apr_2"}, Extra: map[string]string{"b": "2", "a": "1", "retriedAt": "x"}}
}

func TestDeliveryCodecRoundTrip(t *testing.T) {
	for _, d := range []*store.Delivery{sampleDelivery(), {ID: "dlv_02", State: store.StateQueued, CreatedAt: time.Unix(0, 0)},
		{ID: "dlv_03", State: store.StateSent, SentAt: time.Unix(5, 0), DeadReason: "ünïcode ✓"}} {
		var got store.Delivery
		if err := decodeDelivery(encodeDelivery(d), &got); err != nil {
			t.Fatal(err)
		}
		// Times come back without a monotonic reading, in the local zone;
		// compare them with Equal and the rest field by field.
		for _, p := range [][2]time.Time{{got.CreatedAt, d.CreatedAt}, {got.UpdatedAt, d.UpdatedAt},
			{got.NextAttemptAt, d.NextAttemptAt}, {got.SentAt, d.SentAt}} {
			if !p[0].Equal(p[1]) && !(p[0].IsZero() && p[1].IsZero()) {
				t.Fatalf("time %v came back as %v", p[1], p[0])
			}
		}
		want := *d
		got.CreatedAt, got.UpdatedAt, got.NextAttemptAt, got.SentAt = want.CreatedAt, want.UpdatedAt, want.NextAttemptAt, want.SentAt
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
	// Extra is written in key order, so equal deliveries encode equally.
	if a, b := encodeDelivery(sampleDelivery()), encodeDelivery(sampleDelivery()); string(a) != string(b) {
		t.Fatal("encoding is not deterministic")
	}
}

func TestDeliveryCodecReadsSchema1JSON(t *testing.T) {
	d := sampleDelivery()
	js, _ := json.Marshal(d)
	var got store.Delivery
	if err := decodeDelivery(js, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != d.ID || got.State != d.State || !got.NextAttemptAt.Equal(d.NextAttemptAt) || got.Extra["retriedAt"] != "x" {
		t.Fatalf("schema-1 record read as %+v", got)
	}
}

func TestDeliveryCodecRefusesDamage(t *testing.T) {
	b := encodeDelivery(sampleDelivery())
	for _, bad := range [][]byte{nil, {0x7f}, b[:len(b)-1], append(append([]byte(nil), b...), 0), b[:5]} {
		var d store.Delivery
		if err := decodeDelivery(bad, &d); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("decode % x: err = %v, want ErrCorrupt", bad, err)
		}
	}
	// A length that runs past the record.
	huge := append([]byte{deliveryCodec, 0}, binary.AppendUvarint(nil, 1<<40)...)
	var d store.Delivery
	if err := decodeDelivery(huge, &d); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("huge length: err = %v", err)
	}
}

func FuzzDecodeDelivery(f *testing.F) {
	f.Add(encodeDelivery(sampleDelivery()))
	js, _ := json.Marshal(sampleDelivery())
	f.Add(js)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d store.Delivery
		if err := decodeDelivery(data, &d); err != nil {
			return
		}
		// What decodes (either schema) re-encodes to a record that
		// decodes to the same bytes again.
		enc := encodeDelivery(&d)
		var again store.Delivery
		if err := decodeDelivery(enc, &again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if enc2 := encodeDelivery(&again); !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding changed the record:\n% x\n% x", enc, enc2)
		}
	})
}

// A schema-1 file (JSON records, in-flight jobs stored as sending with
// time-keyed leases) is migrated at open: its in-flight jobs are due again,
// maybe-sent, and every invariant of schema 2 holds.
func TestMigrateSchema1(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "v1.db")
	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := c.Now()
	sending := store.Delivery{ID: "dlv_a", EnvelopeID: "env_a", Channel: "webhook", To: "sink", State: store.StateSending,
		Attempts: 1, CreatedAt: t0, UpdatedAt: t0, LeaseUntil: t0.Add(time.Minute)}
	queued := store.Delivery{ID: "dlv_b", EnvelopeID: "env_a", Channel: "webhook", To: "sink", State: store.StateQueued,
		CreatedAt: t0, UpdatedAt: t0, NextAttemptAt: t0}
	sent := store.Delivery{ID: "dlv_c", EnvelopeID: "env_a", Channel: "webhook", To: "sink", State: store.StateSent,
		CreatedAt: t0, UpdatedAt: t0, SentAt: t0}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], 1)
		tx.Bucket(bMeta).Put(keySchema, v[:])
		for _, d := range []store.Delivery{sending, queued, sent} {
			js, _ := json.Marshal(d)
			tx.Bucket(bDeliveries).Put([]byte(d.ID), js)
			tx.Bucket(bByState).Put(stateKey(d.State, d.ID), nil)
		}
		tx.Bucket(bLeases).Put(timeKey(sending.LeaseUntil, sending.ID), nil)
		return tx.Bucket(bDue).Put(timeKey(queued.NextAttemptAt, queued.ID), nil)
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	db := openTest(t, path, c)
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	a, err := db.Delivery(ctx, "dlv_a")
	if err != nil || a.State != store.StateRetrying || !a.MaybeSent || !a.NextAttemptAt.Equal(c.Now()) {
		t.Fatalf("migrated in-flight job: %+v %v", a, err)
	}
	got, err := db.Claim(ctx, 10, time.Minute, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("claimed %d after migration, want 2 (%v)", len(got), err)
	}
	for _, d := range got {
		if _, err := db.Record(ctx, d.ID, d.LeaseUntil, store.Outcome{State: store.StateSent}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := db.CountByState(ctx); n[store.StateSent] != 3 || len(n) != 1 {
		t.Fatalf("counts after migration and delivery: %v", n)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A job in flight is shown as sending with its lease by every read, and
// keeps its stored state underneath.
func TestInFlightReadsAsSending(t *testing.T) {
	c := newClock()
	db := openTest(t, filepath.Join(t.TempDir(), "b.db"), c)
	ingestOne(t, db, 3)
	got, err := db.Claim(ctx, 1, time.Minute, nil)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	d, err := db.Delivery(ctx, got[0].ID)
	if err != nil || d.State != store.StateSending || !d.LeaseUntil.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("in flight: %+v %v", d, err)
	}
	if n, _ := db.CountByState(ctx); n[store.StateSending] != 1 || n[store.StateQueued] != 2 {
		t.Fatalf("counts: %v", n)
	}
	if l, _ := db.ListDeliveries(ctx, store.StateSending, "", 10); len(l) != 1 || l[0].ID != got[0].ID {
		t.Fatalf("sending list: %+v", l)
	}
	if l, _ := db.ListDeliveries(ctx, store.StateQueued, "", 10); len(l) != 2 {
		t.Fatalf("queued list has %d, want 2", len(l))
	}
	if l, _ := db.ListDeliveries(ctx, "", "", 10); len(l) != 3 {
		t.Fatalf("full list has %d", len(l))
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := db.Release(ctx, got[0].ID, got[0].LeaseUntil, c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d, _ := db.Delivery(ctx, got[0].ID); d.State != store.StateQueued || !d.NextAttemptAt.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("released: %+v", d)
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
