package bolt

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// BenchmarkIngestUnderWriter measures how long one ingest of the typical
// envelope holds the group writer's transaction (what runs inside s.write's
// function, the commit apart), with its encoding done before the
// transaction (as Ingest does) or inside it. One op is one envelope; a
// transaction carries 50, as a loaded commit does.
func BenchmarkIngestUnderWriter(b *testing.B) {
	for _, mode := range []string{"encode-before", "encode-inside"} {
		b.Run(mode, func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			const group = 50
			var under time.Duration
			for done := 0; done < b.N; done += group {
				n := min(group, b.N-done)
				ins := make([]store.Ingest, n)
				ps := make([]*preparedIngest, n)
				now := db.now()
				for i := range ins {
					ins[i] = store.Ingest{Envelope: json.RawMessage(spaceEnvelope), Source: "bench", Deliveries: []store.NewDelivery{{Channel: "webhook", To: "sink"}}}
					if mode == "encode-before" {
						ps[i] = prepareIngest(&ins[i], db.NewID("env_"), []string{db.NewID("dlv_")}, now)
					}
				}
				err := db.bolt.Update(func(tx *bbolt.Tx) error {
					start := time.Now()
					for i := range ins {
						p := ps[i]
						if p == nil {
							p = prepareIngest(&ins[i], db.NewID("env_"), []string{db.NewID("dlv_")}, now)
						}
						if _, err := db.writeIngestTx(tx, &ins[i], p, now); err != nil {
							return err
						}
					}
					under += time.Since(start)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(under.Nanoseconds())/float64(b.N)/1e3, "µs-under-writer/op")
		})
	}
}
