package bolt

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// spaceEnvelope is the benchmarks' typical envelope (beachd-bench's).
const spaceEnvelope = `{"role":"agent","parts":[{"text":"Two direct flights found, 15 August 2026 LGW to CFU. Cheapest is easyJet EJ4521 at 94 GBP per person (06:15-12:00). More convenient is British Airways BA2043 at 187 GBP per person (08:45-14:20).","metadata":{"partType":"response"}},{"data":{"route":{"origin":"London Gatwick","destination":"Corfu"},"flights":[{"flightNumber":"BA 2043","airline":"British Airways","departure":"2026-08-15T08:45:00","arrival":"2026-08-15T14:20:00","pricePerPerson":187,"currency":"GBP","stops":0},{"flightNumber":"EJ 4521","airline":"easyJet","departure":"2026-08-15T06:15:00","arrival":"2026-08-15T12:00:00","pricePerPerson":94,"currency":"GBP","stops":0}]},"metadata":{"partType":"domain-data"}}],"meta":{"sessionId":"sess_bench","turnId":"turn_bench","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`

// BenchmarkQueuedBytes stores 100,000 queued deliveries, as the ingest
// path writes them (one envelope and one delivery per transaction's
// request, in groups), and reports the file's bytes per delivery and each
// bucket's share.
func BenchmarkQueuedBytes(b *testing.B) {
	const n = 100000
	for range b.N {
		db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		db.SetNoSync(true)
		ctx := context.Background()
		for i := 0; i < n; i += 1000 {
			ins := make([]store.Ingest, 1000)
			for j := range ins {
				ins[j] = store.Ingest{Envelope: json.RawMessage(spaceEnvelope), Source: "bench", Deliveries: []store.NewDelivery{{Channel: "webhook", To: "sink"}}}
			}
			if _, err := db.IngestBulk(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		sz, _ := db.FileSize()
		b.ReportMetric(float64(sz)/n, "file-B/delivery")
		db.bolt.View(func(tx *bbolt.Tx) error {
			for _, name := range [][]byte{bEnvelopeBodies, bEnvelopes, bDeliveries, bDue, bByState} {
				st := tx.Bucket(name).Stats()
				b.ReportMetric(float64(st.BranchAlloc+st.LeafAlloc)/n, string(name)+"-B/delivery")
			}
			return nil
		})
		db.Close()
	}
}
