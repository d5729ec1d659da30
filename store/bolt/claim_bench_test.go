package bolt

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
)

// BenchmarkClaimRefusedRun is a claim facing an endpoint at its
// concurrency limit: every due job is for the one refused recipient, so
// the claim walks maxRefusedRun of them, takes none and writes nothing.
func BenchmarkClaimRefusedRun(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ins := make([]store.Ingest, 2000)
	for i := range ins {
		ins[i] = store.Ingest{Envelope: []byte(`{}`), Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}
	}
	if _, err := db.IngestBulk(ctx, ins); err != nil {
		b.Fatal(err)
	}
	refuse := func(*store.Delivery) store.Admission { return store.RefuseRecipient }
	b.ReportAllocs()
	for b.Loop() {
		got, err := db.ClaimAdmitting(ctx, 64, time.Hour, refuse)
		if err != nil || len(got) != 0 {
			b.Fatalf("claim: %d jobs, %v", len(got), err)
		}
	}
}
