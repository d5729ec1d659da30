package a2ui

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// allocated is the bytes allocated while f runs (the tests of this
// package do not run in parallel, so it is f's).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// hostileSurface is a Text whose formatString names a 1 MiB string 200
// times: 200 MiB asked for by 1 MiB of input.
func hostileSurface(t testing.TB) json.RawMessage {
	return surfaceJSON(t, `[{"id":"root","component":"Text","text":{"call":"formatString","args":{"value":"`+strings.Repeat("${/a}", 200)+`"}}}]`,
		`{"a":"`+strings.Repeat("x", 1<<20)+`"}`)
}

// TestHostileExpansionRefused: the amplifying surface fails with a
// LimitError naming the component, the function and the bound, within a
// few times its input of memory, in Render and in Check alike.
func TestHostileExpansionRefused(t *testing.T) {
	data := hostileSurface(t)
	var res Result
	n := allocated(func() { res = Render(data, Options{}) })
	if n > 16<<20 {
		t.Errorf("Render allocated %d MiB for a %d KiB surface", n>>20, len(data)>>10)
	}
	var le *LimitError
	if !errors.As(res.Err, &le) || !errors.Is(res.Err, ErrOverBudget) {
		t.Fatalf("Err = %v, want a *LimitError", res.Err)
	}
	if le.Surface != "s" || le.Component != "root" || le.What != "formatString" || le.Bound != "bytes" || le.Limit != DefaultMaxEvalBytes {
		t.Errorf("LimitError %+v", *le)
	}
	const msg = `surface "s", component "root": formatString asks for more than 16 MiB of text in all`
	if !strings.HasPrefix(res.Err.Error(), msg) {
		t.Errorf("message %q, want it to start %q", res.Err, msg)
	}
	if res.Text != "" || res.HTML != "" {
		t.Errorf("a refused surface rendered %d bytes of text, %d of HTML", len(res.Text), len(res.HTML))
	}
	var err error
	n = allocated(func() { err = Check(data, Options{}).Err })
	if n > 16<<20 {
		t.Errorf("Check allocated %d MiB", n>>20)
	}
	if err == nil || err.Error() != res.Err.Error() {
		t.Errorf("Check = %v, want %v", err, res.Err)
	}
}

// TestExpansionPaths walks every way a surface can ask for more than it
// holds. Each either renders within the output bound or is refused, and
// allocates at most what decoding its JSON into maps may (some 40 times
// a small object's text) plus a fixed allowance (what the budget lets
// evaluation and layout churn through).
func TestExpansionPaths(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	kib100 := strings.Repeat("y", 100<<10)
	fmtStr := func(v string) string {
		return `{"call":"formatString","args":{"value":"` + v + `"}}`
	}
	items := func(n int, item string) string {
		return `[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]`
	}
	cases := []struct {
		name, comps, data string
		raw               string // the whole input, instead of comps and data
		refused           string // the LimitError's What, "" when it renders
		warn              string
	}{
		{name: "formatString within the budget is cut",
			comps: `[{"id":"root","component":"Text","text":` + fmtStr(strings.Repeat("${/a}", 10)) + `}]`,
			data:  `{"a":"` + mib + `"}`, warn: "formatString output cut at 262144 bytes"},
		{name: "formatString nested through the data",
			// Each level names the next twice: 2^32 expansions.
			comps: `[{"id":"root","component":"Text","text":` + fmtStr(`${formatString(value: ${/a})}`) + `}]`,
			data:  `{"a":"${formatString(value: ${/a})}${formatString(value: ${/a})}"}`, refused: "formatString"},
		{name: "a check over a long value in every list item",
			comps: `[{"id":"root","component":"List","children":{"componentId":"f","path":"/items"}},
				{"id":"f","component":"TextField","label":"x","value":"ok","checks":[{"condition":{"call":"length","args":{"value":{"path":"/b"},"max":5}},"message":"too long"}]}]`,
			data: `{"b":"` + kib100 + `","items":` + items(1000, "0") + `}`, refused: "length"},
		{name: "formatDate with a long pattern is cut",
			comps: `[{"id":"root","component":"Text","text":{"call":"formatDate","args":{"value":"2026-08-15","format":{"path":"/p"}}}}]`,
			data:  `{"p":"` + strings.Repeat("EEEE ", 100<<10) + `"}`, warn: "formatDate output cut"},
		{name: "a regex too large once compiled fails its check",
			comps: `[{"id":"root","component":"TextField","label":"x","value":"aaa","checks":[{"condition":{"call":"regex","args":{"value":"aaa","pattern":"(?:` + strings.Repeat("a", 990) + `){1000}"}},"message":"no"}]}]`,
			warn:  "too large once compiled"},
		{name: "a ChoicePicker value over a long list in every item",
			comps: `[{"id":"root","component":"List","children":{"componentId":"c","path":"/items"}},
				{"id":"c","component":"ChoicePicker","label":"x","value":{"path":"/big"},"options":[{"label":"a","value":"a"}]}]`,
			data: `{"big":` + items(200000, "1") + `,"items":` + items(1000, "0") + `}`, refused: "a ChoicePicker value"},
		{name: "many tabs titled by a long string",
			comps: `[{"id":"root","component":"Tabs","tabs":` + items(5000, `{"title":{"path":"/a"},"child":"t"}`) + `},{"id":"t","component":"Text","text":"x"}]`,
			data:  `{"a":"` + mib + `"}`},
		{name: "many options labelled by a long string",
			comps: `[{"id":"root","component":"ChoicePicker","label":"x","options":` + items(1000, `{"label":{"path":"/a"},"value":"v"}`) + `}]`,
			data:  `{"a":"` + mib + `"}`},
		{name: "Markdown code spans grow in HTML",
			comps: `[{"id":"root","component":"Text","text":{"path":"/a"}}]`,
			data:  `{"a":"` + strings.Repeat("\x60a\x60 ", 60000) + `"}`},
		{name: "a list of objects shown as JSON",
			comps: `[{"id":"root","component":"List","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Text","text":{"path":"/obj"}}]`,
			data:  `{"obj":` + items(50000, `{"k":"v"}`) + `,"items":` + items(1000, "0") + `}`},
		{name: "long object keys under nested lists",
			comps: `[{"id":"root","component":"List","children":{"componentId":"l","path":"/o"}},
				{"id":"l","component":"List","children":{"componentId":"t","path":"n"}},{"id":"t","component":"Text","text":{"path":"v"}}]`,
			data: `{"o":{"` + mib + `":{"n":` + items(1000, `{"v":"z"}`) + `}}}`, refused: "a list template"},
		{name: "a long surface id in every warning",
			raw: `{"createSurface":{"surfaceId":"` + kib100 + `"},"updateComponents":{"surfaceId":"` + kib100 + `","components":` +
				items(1000, `{"id":"root","component":"List","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Nope","text":{"path":"/nowhere"}}`) +
				`},"updateDataModel":{"surfaceId":"` + kib100 + `","value":{"items":` + items(1000, "0") + `}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := json.RawMessage(tc.raw)
			if tc.raw == "" {
				data = surfaceJSON(t, tc.comps, tc.data)
			}
			var res Result
			n := allocated(func() { res = render(data, Options{}) })
			if bound := uint64(64*len(data) + 64<<20); n > bound {
				t.Errorf("allocated %d MiB for %d KiB of input, want at most %d MiB", n>>20, len(data)>>10, bound>>20)
			}
			if len(res.Text) > defaultMaxOutput || len(res.HTML) > defaultMaxOutput {
				t.Errorf("output over the bound: text %d, html %d", len(res.Text), len(res.HTML))
			}
			for _, w := range res.Warnings {
				if len(w) > 400 {
					t.Errorf("a warning of %d bytes", len(w))
				}
			}
			var le *LimitError
			switch {
			case tc.refused == "" && res.Err != nil:
				t.Errorf("refused: %v", res.Err)
			case tc.refused != "" && !errors.As(res.Err, &le):
				t.Errorf("rendered (%d bytes of text), want refused in %s", len(res.Text), tc.refused)
			case tc.refused != "" && le.What != tc.refused:
				t.Errorf("refused in %q, want %q: %v", le.What, tc.refused, res.Err)
			}
			if tc.warn != "" {
				wantWarning(t, res, tc.warn)
			}
			if err := Check(data, Options{}).Err; (err == nil) != (res.Err == nil) {
				t.Errorf("Check = %v, Render = %v", err, res.Err)
			}
		})
	}
}

// TestBudgetOptions: a smaller budget refuses what the default allows,
// counting steps as well as bytes, and Spent reports the charge.
func TestBudgetOptions(t *testing.T) {
	data := surfaceJSON(t, `[{"id":"root","component":"List","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Text","text":{"path":"n"}}]`,
		`{"items":[{"n":"a"},{"n":"b"},{"n":"c"}]}`)
	res := Render(data, Options{})
	if res.Err != nil || res.SpentSteps == 0 || res.SpentBytes == 0 {
		t.Fatalf("default budget: %v, spent %d bytes %d steps", res.Err, res.SpentBytes, res.SpentSteps)
	}
	res = Render(data, Options{MaxEvalSteps: res.SpentSteps - 1})
	var le *LimitError
	if !errors.As(res.Err, &le) || le.Bound != "steps" {
		t.Errorf("one step short: %v", res.Err)
	}
	res = Render(data, Options{MaxEvalBytes: 4})
	if !errors.As(res.Err, &le) || le.Bound != "bytes" || !strings.Contains(res.Err.Error(), "4 bytes") {
		t.Errorf("4 bytes: %v", res.Err)
	}
}
