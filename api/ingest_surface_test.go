package api

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// surfaceEnvelope is an envelope with a response and one a2ui-surface
// whose root Text is formatString value over a data model holding a.
func surfaceEnvelope(t testing.TB, value, a string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{"role": "agent",
		"parts": []any{
			map[string]any{"text": "Your report", "metadata": map[string]any{"partType": "response"}},
			map[string]any{"metadata": map[string]any{"partType": "a2ui-surface"}, "data": map[string]any{
				"createSurface":    map[string]any{"surfaceId": "s", "catalogId": "basic"},
				"updateComponents": map[string]any{"surfaceId": "s", "components": []any{map[string]any{"id": "root", "component": "Text", "text": map[string]any{"call": "formatString", "args": map[string]any{"value": value}}}}},
				"updateDataModel":  map[string]any{"surfaceId": "s", "value": map[string]any{"a": a}},
			}},
		},
		"meta": map[string]any{"sessionId": "s", "turnId": "t", "producedAt": "2026-04-20T09:00:00Z", "finalizedBy": "complete"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A surface that asks for more than a rendition may evaluate is refused
// at ingest, from a request and from inside beachd alike, naming the part;
// nothing is stored. An ordinary surface is accepted.
func TestIngestRefusesOverBudgetSurface(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true}}, db, nil, nil, nil)
	to := `[{"channel":"email","address":"ann@example.org"}]`
	hostile := surfaceEnvelope(t, strings.Repeat("${/a}", 200), strings.Repeat("x", 1<<20))
	check := func(what string, err error) {
		t.Helper()
		var ve *envelope.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "envelope.parts[1].data" ||
			!strings.Contains(ve.Problems[0].Reason, `surface "s", component "root": formatString asks for more than 16 MiB`) {
			t.Errorf("%s: %v, want the surface at envelope.parts[1].data refused", what, err)
		}
	}
	_, _, err := ing.Accept(t.Context(), []byte(`{"envelope":`+string(hostile)+`,"to":`+to+`}`), "", "test")
	check("request", err)
	env, err := envelope.Decode(hostile, envelope.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ing.EnqueueKeyed(t.Context(), env, []envelope.Recipient{{Channel: "email", Address: "ann@example.org"}}, "", "conversation", "k1")
	check("enqueue", err)
	if ds, err := db.ListDeliveries(t.Context(), store.StateQueued, "", 10); err != nil || len(ds) != 0 {
		t.Fatalf("stored %d deliveries (%v)", len(ds), err)
	}
	ok := surfaceEnvelope(t, "Hello ${/a}", "Ann")
	if _, _, err := ing.Accept(t.Context(), []byte(`{"envelope":`+string(ok)+`,"to":`+to+`}`), "", "test"); err != nil {
		t.Fatalf("ordinary surface: %v", err)
	}
}

// BenchmarkAcceptSurface is BenchmarkAccept with the typical envelope
// carrying an A2UI surface (flight results), whose surface ingest checks.
func BenchmarkAcceptSurface(b *testing.B) {
	db := storetest.Open(b, bolt.Options{})
	ing := NewIngester(IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true}}, db, nil, nil, nil)
	raw, err := os.ReadFile("../testdata/envelopes/flight-results.json")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"envelope":` + string(raw) + `,"to":[{"channel":"email","address":"ann@example.org"}]}`)
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
