package channels

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// receipts are what the channels record: a webhook's answer (its status,
// body and headers, all from the endpoint), Twilio's and Slack's JSON as
// decoded into maps, an SMTP server's reply, and values an encoder must
// refuse.
var receipts = []Receipt{
	{Data: map[string]any{"status": 200, "body": "ok"}, Meta: map[string]any{"source": "http", "status": 200, "headers": map[string]string{"Content-Type": "text/plain", "Date": "Mon, 07 Dec 2026 14:00:00 GMT", "X-Trace": "<a&b>"}}},
	{Data: map[string]any{"status": 503, "body": "bad \xff utf8 <b> & \u2028 \u2029 \x00", "bodyTruncated": true, "bodyError": "unexpected EOF"}, Meta: map[string]any{"source": "http", "status": 503, "headers": map[string]string{"\xff": "\xfe", "": ""}}},
	{Data: map[string]any{"sid": "SM123", "price": nil, "num_segments": "1", "error_code": nil, "subresource_uris": map[string]any{"media": "/2010-04-01/Accounts/AC/Messages/SM123/Media.json"}, "rate": 1e21, "small": 0.000001, "neg": math.Copysign(0, -1), "big": 12345678901234567890.0, "tiny": 1e-7, "list": []any{1.5, "x", true, nil, map[string]any{}}}, Meta: map[string]any{"source": "twilio", "status": 201}},
	{Data: "250 2.0.0 Ok: queued as 4F1B2C", Meta: map[string]any{"source": "smtp"}},
	{Data: json.RawMessage(`{"ok":true,"channel":"C1","ts":"1503435956.000247"}`), Meta: map[string]any{"source": "slack"}},
	{},
	// A struct: segmentio's encoder would write its zero time; it goes to
	// encoding/json.
	{Data: struct {
		At   time.Time `json:"at,omitzero"`
		Name string    `json:"name,omitempty"`
	}{}, Meta: map[string]any{"source": "http", "at": struct {
		At time.Time `json:"at,omitzero"`
	}{}}},
	{Data: map[string]any{"ints": []any{int64(1) << 60, 3}, "s": []string{"a", "<"}}, Meta: map[string]any{"source": "smtp"}},
	// Raw JSON and numbers, which encoding/json checks (and compacts).
	{Data: map[string]any{"raw": json.RawMessage(` { "a" : 1 } `), "n": json.Number("12.50")}, Meta: map[string]any{"source": "slack"}},
	{Data: map[string]any{"raw": json.RawMessage(`{bad`)}, Meta: map[string]any{"source": "http"}},
	{Data: map[string]any{"n": json.Number("abc")}, Meta: map[string]any{"source": "http"}},
	{Data: math.NaN(), Meta: map[string]any{"source": "http"}},
	{Data: map[string]any{"f": func() {}}, Meta: map[string]any{"source": "http"}},
}

// encodingJSON is how a receipt was encoded before marshal used segmentio's
// encoder: encoding/json, with the same fallback for what it refuses.
func encodingJSON(r Receipt) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	return b
}

// TestReceiptEncodedAsEncodingJSONDoes: the stored receipt's bytes are
// encoding/json's for every value it encodes, and a value it refuses is
// recorded as a readable note.
func TestReceiptEncodedAsEncodingJSONDoes(t *testing.T) {
	for i, r := range receipts {
		got := r.marshal()
		if want := encodingJSON(r); want != nil {
			if !bytes.Equal(got, want) {
				t.Errorf("receipt %d:\n got %s\nwant %s", i, got, want)
			}
			continue
		}
		var back struct {
			Data string         `json:"data"`
			Meta map[string]any `json:"meta"`
		}
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("receipt %d: %s is not JSON: %v", i, got, err)
		}
		if !bytes.HasPrefix([]byte(back.Data), []byte("unencodable receipt: ")) || back.Meta["source"] != "http" {
			t.Errorf("receipt %d: refused value recorded as %s", i, got)
		}
	}
}

// FuzzReceiptEncodedAsEncodingJSONDoes: what an endpoint answers (its
// body and a header) is recorded as encoding/json would record it.
func FuzzReceiptEncodedAsEncodingJSONDoes(f *testing.F) {
	f.Add("ok", "X-Trace", "abc", 200)
	f.Add("bad \xff <b> & \u2028", "\xff", "\x00\x7f", 503)
	f.Fuzz(func(t *testing.T, body, hk, hv string, status int) {
		r := Receipt{Data: map[string]any{"status": status, "body": body}, Meta: map[string]any{"source": "http", "status": status, "headers": map[string]string{hk: hv, "Content-Type": body}}}
		if got, want := r.marshal(), encodingJSON(r); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkReceiptMarshal(b *testing.B) {
	r := receipts[0]
	b.ReportAllocs()
	for b.Loop() {
		_ = r.marshal()
	}
}
