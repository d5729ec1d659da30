package webhook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/cool-ai/beachd/envelope"
)

// sameAsEncodingJSON fails unless the webhook body of env is, byte for
// byte, what encoding/json writes for it (the encoder payload uses is
// another, faster one).
func sameAsEncodingJSON(t testing.TB, env *envelope.Envelope) {
	t.Helper()
	v := body{Type: EventType, Timestamp: "2026-08-15T09:30:00Z", Data: bodyData{DeliveryID: "dlv_x", Envelope: env}}
	want, werr := json.Marshal(v)
	got, gerr := segjson.Marshal(v)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("the body differs from encoding/json's (errors %v, %v):\n got %s\nwant %s", gerr, werr, got, want)
	}
}

// Every envelope the repository holds, and the odd cases: part data with
// whitespace, characters encoding/json escapes (<, >, &, U+2028), invalid
// UTF-8, numbers at the edges of their formats, metadata keys to sort.
func TestBodyEncodedAsEncodingJSONDoes(t *testing.T) {
	var files []string
	for _, dir := range []string{"testdata", "../../testdata/envelopes", "../../render/testdata/golden", "../../render/a2ui/testdata/examples"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var env envelope.Envelope
		if json.Unmarshal(b, &env) != nil || len(env.Parts) == 0 {
			continue // not an envelope
		}
		n++
		sameAsEncodingJSON(t, &env)
	}
	if n < 10 {
		t.Fatalf("only %d envelopes found in %d files", n, len(files))
	}
	for _, raw := range odd {
		var env, stored envelope.Envelope
		if err := json.Unmarshal([]byte(raw), &env); err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, &env)
		if err := envelope.UnmarshalStored([]byte(raw), &stored); err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, &stored)
	}
}

var odd = []string{
	`{"role":"agent","parts":[{"kind":"data","data": { "a" : [1, 2 ,3], "b":"<x>&\u2028" } ,"metadata":{"z":1,"a":2,"m":{"y":1e21,"x":0.000001,"w":-0,"v":12345678901234567890,"u":1e-7,"t":123456789012345678}}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-02T03:04:05.123456789+02:00","finalizedBy":"f"}}`,
	"{\"role\":\"agent\",\"parts\":[{\"text\":\"bad \xff utf8 <b> & \u2029 \\u0000 \\ud800\",\"metadata\":{}}],\"meta\":{\"sessionId\":\"s\",\"turnId\":\"t\",\"producedAt\":\"2026-01-02T03:04:05Z\",\"finalizedBy\":\"f\"},\"metadata\":{\"k\":null,\"b\":true,\"\xff\":\"x\",\"\":[{},[],\"\"]}}",
}

func FuzzBodyEncodedAsEncodingJSONDoes(f *testing.F) {
	for _, raw := range odd {
		f.Add([]byte(raw))
	}
	if b, err := os.ReadFile("testdata/mixed.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// As encoding/json decodes it, and as beachd decodes what it
		// stored (the laxest of its decoders: invalid UTF-8 is kept).
		var env, stored envelope.Envelope
		if json.Unmarshal(raw, &env) == nil {
			sameAsEncodingJSON(t, &env)
		}
		if envelope.UnmarshalStored(raw, &stored) == nil {
			sameAsEncodingJSON(t, &stored)
		}
	})
}

// BenchmarkPayload is the body of one attempt (filter, encode), with
// encoding/json as the baseline in the same run.
func BenchmarkPayload(b *testing.B) {
	clk := newClock()
	d := newDeliverer(b, clk, "http://127.0.0.1:1")
	j := job(b, "ops", "dlv_bench")
	at := time.Date(2026, 8, 15, 9, 30, 0, 0, time.UTC)
	b.Run("payload", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Payload(j, "ops", at); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			env, err := d.filter(j, &d.endpoints["ops"].Endpoint)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(body{Type: EventType, Timestamp: at.Format(time.RFC3339), Data: bodyData{DeliveryID: j.Delivery.ID, Envelope: env}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
