package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

func sampleEnvelopeRecord() *store.EnvelopeRecord {
	return &store.EnvelopeRecord{ID: "env_01", Agent: "travel", Source: "schedule:daily",
		CreatedAt: time.Unix(1_776_000_000, 123456789), DeliveryIDs: []string{"dlv_1", "dlv_2"}}
}

func TestEnvelopeCodecRoundTrip(t *testing.T) {
	for _, rec := range []*store.EnvelopeRecord{sampleEnvelopeRecord(), {ID: "env_02", CreatedAt: time.Unix(0, 0)}} {
		var got store.EnvelopeRecord
		if err := decodeEnvelope([]byte(rec.ID), encodeEnvelope(rec), &got); err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(rec.CreatedAt) {
			t.Fatalf("created %v came back as %v", rec.CreatedAt, got.CreatedAt)
		}
		got.CreatedAt = rec.CreatedAt
		if !reflect.DeepEqual(&got, rec) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, *rec)
		}
	}
	// JSON records written before the binary form are read.
	js, _ := json.Marshal(sampleEnvelopeRecord())
	var got store.EnvelopeRecord
	if err := decodeEnvelope([]byte("env_01"), js, &got); err != nil || got.Agent != "travel" || len(got.DeliveryIDs) != 2 {
		t.Fatalf("JSON record read as %+v, %v", got, err)
	}
	b := encodeEnvelope(sampleEnvelopeRecord())
	for _, bad := range [][]byte{nil, {0x7f}, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if err := decodeEnvelope([]byte("env_01"), bad, &got); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("decode % x: err = %v, want ErrCorrupt", bad, err)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(encodeEnvelope(sampleEnvelopeRecord()))
	js, _ := json.Marshal(sampleEnvelopeRecord())
	f.Add(js)
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec store.EnvelopeRecord
		if err := decodeEnvelope([]byte("env_01"), data, &rec); err != nil {
			return
		}
		enc := encodeEnvelope(&rec)
		var again store.EnvelopeRecord
		if err := decodeEnvelope([]byte("env_01"), enc, &again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if enc2 := encodeEnvelope(&again); !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding changed the record:\n% x\n% x", enc, enc2)
		}
	})
}

// Bodies are stored compressed when that saves space, read back exactly,
// and bodies stored as they are (short ones, and those of earlier files)
// are read as they are.
func TestEnvelopeBodies(t *testing.T) {
	long := []byte(spaceEnvelope)
	if c := encodeBody(long); !bytes.HasPrefix(c, zstdMagic) || len(c) >= len(long)*3/4 {
		t.Fatalf("typical envelope stored in %d bytes of %d, compressed %v", len(c), len(long), bytes.HasPrefix(c, zstdMagic))
	}
	short := []byte(`{"role":"agent","parts":[{"text":"hi"}]}`)
	if c := encodeBody(short); !bytes.Equal(c, short) {
		t.Fatal("a short body was not stored as it is")
	}
	for _, b := range [][]byte{long, short} {
		if got, err := decodeBody(encodeBody(b)); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("body came back as %q, %v", got, err)
		}
	}
	if _, err := decodeBody(append(append([]byte(nil), zstdMagic...), 1, 2, 3)); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("damaged compressed body: %v", err)
	}

	// Through the store, next to an envelope stored the earlier way (body
	// as it arrived, record as JSON).
	db, err := Open(filepath.Join(t.TempDir(), "b.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	res, err := db.Ingest(ctx, store.Ingest{Envelope: long, Deliveries: []store.NewDelivery{{Channel: "webhook", To: "sink"}}})
	if err != nil {
		t.Fatal(err)
	}
	old := sampleEnvelopeRecord()
	old.ID = "env_00000000000000000000000001"
	old.DeliveryIDs = nil
	js, _ := json.Marshal(old)
	if err := db.bolt.Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bEnvelopes).Put([]byte(old.ID), js); err != nil {
			return err
		}
		return tx.Bucket(bEnvelopeBodies).Put([]byte(old.ID), long)
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{res.EnvelopeID, old.ID} {
		rec, err := db.Envelope(ctx, id)
		if err != nil || !bytes.Equal(rec.Envelope, long) || rec.ID != id {
			t.Fatalf("envelope %s read as %+v, %v", id, rec, err)
		}
	}
	if err := db.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
