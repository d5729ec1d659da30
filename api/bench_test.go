package api

import (
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// BenchmarkAccept measures acknowledged ingests (decode, validate, one
// fsync'd transaction shared by concurrent callers) without HTTP.
func BenchmarkAccept(b *testing.B) {
	db := storetest.Open(b, bolt.Options{})
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"webhook": true},
		Endpoints: map[string]bool{"ops": true}}, db, nil, nil, nil)
	body := []byte(request(`[{"channel":"webhook","endpoint":"ops"}]`))
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := ing.Accept(b.Context(), body, "", "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ingests/s")
}
