package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// discardWriter is a ResponseWriter that keeps what is written.
type discardWriter struct {
	h    http.Header
	body bytes.Buffer
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return w.body.Write(b) }

// answers are values of the kinds the API answers with: the 202 of an
// ingest, an error with problems (whose text comes from the request),
// maps, times, raw JSON, nil slices and odd strings.
var answers = []any{
	&Accepted{ID: "env_01JF", Deliveries: []AcceptedDelivery{{ID: "dlv_1", Channel: "webhook", To: "sink", Status: "queued"}, {ID: "dlv_2", Channel: "email", To: "a@example.com", Status: "held"}}},
	errorBody{Error: "validation failed: <b> & \u2028", Problems: []envelope.Problem{{Path: "parts[0].kind", Reason: "unknown kind \"x\xff\""}}},
	map[string]any{"z": 1, "a": []any{1.5, 1e21, 0.000001, nil, true, "x"}, "m": map[string]string{"b": "<", "a": "&"}},
	struct {
		At    time.Time       `json:"at"`
		Raw   json.RawMessage `json:"raw"`
		None  []string        `json:"none"`
		Empty []string        `json:"empty"`
		Omit  string          `json:"omit,omitempty"`
	}{At: time.Date(2026, 12, 7, 14, 0, 0, 123456789, time.FixedZone("x", 3600)), Raw: json.RawMessage(` { "b" : [ 1 , 2 ] } `), Empty: []string{}},
	[]int(nil),
	"plain",
}

// TestWriteJSONAsEncodingJSONDoes: the answers' bytes are those of
// encoding/json's indenting encoder.
func TestWriteJSONAsEncodingJSONDoes(t *testing.T) {
	for i, v := range answers {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		w := &discardWriter{h: http.Header{}}
		WriteJSON(w, http.StatusOK, v)
		if !bytes.Equal(w.body.Bytes(), want.Bytes()) {
			t.Errorf("answer %d:\n got %s\nwant %s", i, w.body.Bytes(), want.Bytes())
		}
		if ct := w.h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("answer %d: Content-Type %q", i, ct)
		}
	}
}

// failingWriter's body cannot be written: the client has gone.
type failingWriter struct{ discardWriter }

func (w *failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestWriteJSONAfterAFailedWrite: an answer whose client has gone leaves
// nothing behind for the next one (a pooled encoder keeps a failed write's
// error and would refuse everything after it).
func TestWriteJSONAfterAFailedWrite(t *testing.T) {
	for range 8 {
		WriteJSON(&failingWriter{discardWriter{h: http.Header{}}}, http.StatusOK, answers[0])
	}
	for i := range 8 {
		w := &discardWriter{h: http.Header{}}
		WriteJSON(w, http.StatusOK, answers[0])
		if !bytes.Contains(w.body.Bytes(), []byte(`"env_01JF"`)) {
			t.Fatalf("answer %d after failed writes: %q", i, w.body.Bytes())
		}
	}
}

func BenchmarkWriteJSONAccepted(b *testing.B) {
	w := &discardWriter{h: http.Header{}}
	v := answers[0]
	b.ReportAllocs()
	for b.Loop() {
		w.body.Reset()
		WriteJSON(w, http.StatusAccepted, v)
	}
}
