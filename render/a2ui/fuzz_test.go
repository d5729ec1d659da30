package a2ui

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzRender feeds arbitrary bytes (seeded with the twenty examples and
// some broken surfaces) to the renderer: it must not panic, must respect the
// output bound, and must never emit a script, a form or a javascript: URL.
func FuzzRender(f *testing.F) {
	for _, file := range exampleFiles(f) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		``, `{`, `[]`, `null`, `{"messages":[{"deleteSurface":{"surfaceId":""}}]}`,
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Card","child":"root"}]}}`,
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":{"call":"formatString","args":{"value":"${formatDate(value: ${/a}, format: 'EEEE ''x''')} ${pluralize(value: ${/n}, one: 'a', other: 'b')} \\${x}"}}}]},"updateDataModel":{"surfaceId":"s","value":{"a":"2026-01-01","n":1}}}`,
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"List","children":{"componentId":"root","path":"/x"}}]},"updateDataModel":{"surfaceId":"s","value":{"x":[[1],[2]]}}}`,
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Button","child":"t","action":{"functionCall":{"call":"openUrl","args":{"url":"javascript:alert(1)"}}}},{"id":"t","component":"Text","text":"<script>x</script>"}]}}`,
	} {
		f.Add([]byte(s))
	}
	opt := Options{MaxOutputBytes: 8 << 10, Now: time.Date(2026, 8, 15, 8, 45, 0, 0, time.UTC)}
	f.Fuzz(func(t *testing.T, data []byte) {
		res := render(json.RawMessage(data), opt) // not Render: its recover would hide panics
		if len(res.Text) > opt.MaxOutputBytes || len(res.HTML) > opt.MaxOutputBytes {
			t.Fatalf("output over the bound: text %d, html %d", len(res.Text), len(res.HTML))
		}
		h := strings.ToLower(res.HTML)
		for _, bad := range []string{"<script", "<form", "javascript:", "<iframe", "<input", " onerror", " onload"} {
			if strings.Contains(h, bad) {
				t.Fatalf("HTML contains %q:\n%s", bad, res.HTML)
			}
		}
		if res.HTML != "" && res.Text == "" {
			t.Fatalf("HTML without text")
		}
		wellFormed(t, res.HTML)
	})
}

// BenchmarkRender renders the twenty example surfaces (text and HTML) per
// iteration; MB/s is over their JSON input.
func BenchmarkRender(b *testing.B) {
	var inputs [][]byte
	total := 0
	for _, file := range exampleFiles(b) {
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, data)
		total += len(data)
	}
	opt := goldenOptions()
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range inputs {
			Render(in, opt)
		}
	}
	elapsed := b.Elapsed()
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*len(inputs)), "ns/surface")
	// Baseline in the same run: only decoding the same JSON, so the ratio
	// says what the rendering itself costs on a busy machine.
	start := time.Now()
	for range b.N {
		for _, in := range inputs {
			var v any
			if err := json.Unmarshal(in, &v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(elapsed)/float64(time.Since(start)), "x-json-decode")
}
