package a2ui

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzRender feeds arbitrary bytes (seeded with the twenty examples and
// some broken surfaces) to the renderer: it must not panic, must respect the
// output bound, must allocate no more than decoding its input and the
// evaluation budget account for, must agree with Check on whether the
// surface is over the budget, and must never emit a script, a form or a
// javascript: URL.
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
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":{"call":"formatString","args":{"value":"${/a}${/a}${/a}${/a}${/a}${/a}${/a}${/a}"}}}]},"updateDataModel":{"surfaceId":"s","value":{"a":"` + strings.Repeat("x", 4096) + `"}}}`,
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":{"call":"formatString","args":{"value":"${formatString(value: ${/a})}"}}}]},"updateDataModel":{"surfaceId":"s","value":{"a":"${formatString(value: ${/a})}${formatString(value: ${/a})}"}}}`,
		`{"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"List","children":{"componentId":"t","path":"/i"}},{"id":"t","component":"Text","text":{"call":"formatDate","args":{"value":"2026-01-01","format":"EEEE EEEE EEEE EEEE"}}}]},"updateDataModel":{"surfaceId":"s","value":{"i":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}}}`,
	} {
		f.Add([]byte(s))
	}
	opt := Options{MaxOutputBytes: 8 << 10, Now: time.Date(2026, 8, 15, 8, 45, 0, 0, time.UTC),
		MaxEvalBytes: 64 << 10, MaxEvalSteps: 20_000}
	f.Fuzz(func(t *testing.T, data []byte) {
		var res Result
		n := allocated(func() {
			res = render(json.RawMessage(data), opt) // not Render: its recover would hide panics
		})
		if bound := uint64(64*len(data) + 16<<20); n > bound {
			t.Fatalf("allocated %d bytes for %d bytes of input, over %d", n, len(data), bound)
		}
		if len(res.Text) > opt.MaxOutputBytes || len(res.HTML) > opt.MaxOutputBytes {
			t.Fatalf("output over the bound: text %d, html %d", len(res.Text), len(res.HTML))
		}
		if c := Check(json.RawMessage(data), opt); (c.Err == nil) != (res.Err == nil) ||
			c.Err == nil && (c.SpentBytes != res.SpentBytes || c.SpentSteps != res.SpentSteps) {
			t.Fatalf("Check says %v after %d bytes %d steps, render %v after %d bytes %d steps",
				c.Err, c.SpentBytes, c.SpentSteps, res.Err, res.SpentBytes, res.SpentSteps)
		}
		if res.Err != nil {
			if !errors.Is(res.Err, ErrOverBudget) || res.Text != "" || res.HTML != "" {
				t.Fatalf("refused (%v) with %d bytes of text, %d of HTML", res.Err, len(res.Text), len(res.HTML))
			}
			return
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
