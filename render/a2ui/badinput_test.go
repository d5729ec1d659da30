package a2ui

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMalformedInput(t *testing.T) {
	for _, tc := range []struct {
		name, in, warn string
	}{
		{"not JSON", `{"createSurface": {`, "not valid JSON"},
		{"empty", ``, "empty"},
		{"no messages", `{"hello":"world"}`, "no A2UI messages"},
		{"a number", `42`, "no A2UI messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Render(json.RawMessage(tc.in), Options{})
			if res.Text != "(surface could not be read)" {
				t.Errorf("Text = %q, want the unreadable fallback", res.Text)
			}
			wantContains(t, "html", res.HTML, "(surface could not be read)")
			wantWarning(t, res, tc.warn)
		})
	}
}

func TestInputShapes(t *testing.T) {
	create := `{"version":"v0.9","createSurface":{"surfaceId":"a","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}}`
	comps := `{"version":"v0.9","updateComponents":{"surfaceId":"a","components":[{"id":"root","component":"Text","text":{"path":"/greeting"}}]}}`
	data := `{"version":"v0.9","updateDataModel":{"surfaceId":"a","value":{"greeting":"Hello there"}}}`
	for _, tc := range []struct{ name, in string }{
		{"list", "[" + create + "," + comps + "," + data + "]"},
		{"messages object", `{"name":"x","messages":[` + create + "," + comps + "," + data + "]}"},
		{"jsonl stream", create + "\n" + comps + "\n" + data + "\n"},
		{"combined object", `{"version":"v0.9","createSurface":{"surfaceId":"a","catalogId":"c/basic"},"updateComponents":{"surfaceId":"a","components":[{"id":"root","component":"Text","text":{"path":"/greeting"}}]},"updateDataModel":{"surfaceId":"a","path":"/","value":{"greeting":"Hello there"}}}`},
		{"part with data", `{"data":` + "[" + create + "," + comps + "," + data + "]" + `,"metadata":{"partType":"a2ui-surface"}}`},
		{"data before components, no createSurface", "[" + data + "," + comps + "]"},
		{"crdt updates", "[" + create + "," + comps + `,{"updateDataModel":{"surfaceId":"a","actorId":"x","updates":[{"path":"/greeting","value":"Hello there","hlc":"1"}]}}]`},
		{"older component shape", "[" + create + `,{"updateComponents":{"surfaceId":"a","components":[{"id":"root","component":{"Text":{"text":{"path":"/greeting"}}}}]}},` + data + "]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Render(json.RawMessage(tc.in), goldenOptions())
			if strings.TrimSpace(res.Text) != "Hello there" {
				t.Errorf("Text = %q, want %q (warnings %q)", res.Text, "Hello there", res.Warnings)
			}
			wantContains(t, "html", res.HTML, "Hello there")
			if len(res.Texts) != 1 || res.Texts[0] != "Hello there" {
				t.Errorf("Texts = %q", res.Texts)
			}
		})
	}
}

func TestSeveralSurfacesAndDelete(t *testing.T) {
	in := `[
	 {"createSurface":{"surfaceId":"one","catalogId":"basic"}},
	 {"updateComponents":{"surfaceId":"one","components":[{"id":"root","component":"Text","text":"First surface","variant":"h2"}]}},
	 {"createSurface":{"surfaceId":"two","catalogId":"basic"}},
	 {"updateComponents":{"surfaceId":"two","components":[{"id":"root","component":"Text","text":"Second surface"}]}},
	 {"createSurface":{"surfaceId":"gone","catalogId":"basic"}},
	 {"updateComponents":{"surfaceId":"gone","components":[{"id":"root","component":"Text","text":"Deleted surface"}]}},
	 {"deleteSurface":{"surfaceId":"gone"}}
	]`
	res := Render(json.RawMessage(in), goldenOptions())
	wantContains(t, "text", res.Text, "First surface", "Second surface")
	wantContains(t, "html", res.HTML, "First surface", "Second surface")
	wantLacks(t, "text", res.Text, "Deleted surface")
	wantLacks(t, "html", res.HTML, "Deleted surface")
	if res.Title != "First surface" {
		t.Errorf("Title = %q", res.Title)
	}
	if strings.Count(res.HTML, `max-width:640px`) != 2 {
		t.Errorf("want one table per live surface:\n%s", res.HTML)
	}
	wantWarning(t, res, `"gone" was deleted`)
}

func TestDataModelUpdates(t *testing.T) {
	in := `[
	 {"createSurface":{"surfaceId":"s","catalogId":"basic"}},
	 {"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Column","children":["a","b","c"]},
	   {"id":"a","component":"Text","text":{"path":"/user/name"}},
	   {"id":"b","component":"Text","text":{"path":"/user/title"}},
	   {"id":"c","component":"Text","text":{"path":"/tags/1"}}]}},
	 {"updateDataModel":{"surfaceId":"s","value":{"user":{"name":"Ada","title":"Countess"},"tags":["x","y"]}}},
	 {"updateDataModel":{"surfaceId":"s","path":"/user/name","value":"Ada Lovelace"}},
	 {"updateDataModel":{"surfaceId":"s","path":"/user/title"}},
	 {"updateDataModel":{"surfaceId":"s","path":"/tags/1","value":"engine"}}
	]`
	res := Render(json.RawMessage(in), goldenOptions())
	if got := strings.TrimSpace(res.Text); got != "Ada Lovelace\nengine" {
		t.Errorf("Text = %q", got)
	}
	wantWarning(t, res, "no data at /user/title")
}

func TestTemplateOverKeyedObject(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Text","text":{"path":"name"}}]`,
		`{"items":{"k1":{"pos":"b","name":"Second"},"k2":{"pos":"a","name":"First"},"k3":{"pos":"c","name":"Third"}}}`)
	if got := strings.TrimSpace(res.Text); got != "First\nSecond\nThird" {
		t.Errorf("Text = %q, want the items in pos order", got)
	}
}

func TestUnknownComponent(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["m","after"]},
		  {"id":"m","component":"MapView","title":"Where we meet","children":["pin"]},
		  {"id":"pin","component":"Text","text":"Café Central"},
		  {"id":"after","component":"Text","text":"See you there"}]`, "")
	wantContains(t, "text", res.Text, "Where we meet", "Café Central", "See you there")
	wantContains(t, "html", res.HTML, "Where we meet", "Café Central")
	wantWarning(t, res, `unknown component "MapView"`)
}

func TestDanglingChild(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["a","ghost","b"]},{"id":"a","component":"Text","text":"Before"},{"id":"b","component":"Text","text":"After"},{"id":"card","component":"Card","child":"nobody"}]`, "")
	if got := strings.TrimSpace(res.Text); got != "Before\nAfter" {
		t.Errorf("Text = %q", got)
	}
	wantWarning(t, res, `missing component "ghost"`)
}

func TestCycle(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["t","loop"]},{"id":"t","component":"Text","text":"Top text"},{"id":"loop","component":"Card","child":"root"}]`, "")
	if strings.Count(res.Text, "Top text") != 1 {
		t.Errorf("the cycle should render its text once:\n%s", res.Text)
	}
	wantWarning(t, res, "cycle")
	wellFormed(t, res.HTML)
}

func TestBadPointers(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["a","b","c"]},
		  {"id":"a","component":"Text","text":{"path":"/a/0/b"}},
		  {"id":"b","component":"Text","text":{"path":"/list/9"}},
		  {"id":"c","component":"Text","text":"Still here"}]`,
		`{"a":"scalar","list":[1]}`)
	if got := strings.TrimSpace(res.Text); got != "Still here" {
		t.Errorf("Text = %q", got)
	}
	wantWarning(t, res, "no data at /a/0/b")
	wantWarning(t, res, "no data at /list/9")
}

func TestFunctionErrorShowsRawValue(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Text","text":{"call":"formatDate","args":{"value":{"path":"/when"},"format":"d MMM"},"returnType":"string"}}]`,
		`{"when":"sometime soon"}`)
	if got := strings.TrimSpace(res.Text); got != "sometime soon" {
		t.Errorf("Text = %q", got)
	}
	wantWarning(t, res, "formatDate")
}

func TestMissingRoot(t *testing.T) {
	res := renderTest(t,
		`[{"id":"main","component":"Column","children":["a"]},{"id":"a","component":"Text","text":"Main part"},{"id":"extra","component":"Text","text":"Loose part"}]`, "")
	if got := strings.TrimSpace(res.Text); got != "Main part\nLoose part" {
		t.Errorf("Text = %q", got)
	}
	wantWarning(t, res, `no component with id "root"`)
}

func TestDeepNesting(t *testing.T) {
	var comps []string
	for i := range 100 {
		comps = append(comps, fmt.Sprintf(`{"id":"c%d","component":"Column","children":["c%d","t%d"]}`, i, i+1, i))
		comps = append(comps, fmt.Sprintf(`{"id":"t%d","component":"Text","text":"level %d"}`, i, i))
	}
	comps[0] = strings.Replace(comps[0], `"id":"c0"`, `"id":"root"`, 1)
	res := renderTest(t, "["+strings.Join(comps, ",")+"]", "")
	wantContains(t, "text", res.Text, "level 0", "level 60")
	wantLacks(t, "text", res.Text, "level 70")
	wantWarning(t, res, "nested deeper than 64")
	wellFormed(t, res.HTML)
}

func TestComponentCountBound(t *testing.T) {
	var comps []string
	ids := make([]string, 0, 2100)
	for i := range 2100 {
		ids = append(ids, fmt.Sprintf(`"t%d"`, i))
		comps = append(comps, fmt.Sprintf(`{"id":"t%d","component":"Text","text":"n%d"}`, i, i))
	}
	comps = append([]string{`{"id":"root","component":"Column","children":[` + strings.Join(ids, ",") + `]}`}, comps...)
	res := renderTest(t, "["+strings.Join(comps, ",")+"]", "")
	wantContains(t, "text", res.Text, "n0\n", "n1998\n")
	wantLacks(t, "text", res.Text, "n2000")
	wantWarning(t, res, "more than 2000 components")
}

func TestOutputBound(t *testing.T) {
	items := make([]string, 0, 1000)
	for i := range 1000 {
		items = append(items, fmt.Sprintf(`{"name":"Item number %d with a fairly long <description> & text"}`, i))
	}
	for _, limit := range []int{2000, 10000, 100000} {
		res := Render(surfaceJSON(t,
			`[{"id":"root","component":"Card","child":"l"},{"id":"l","component":"List","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Text","text":{"path":"name"}}]`,
			`{"items":[`+strings.Join(items, ",")+`]}`), Options{MaxOutputBytes: limit})
		if len(res.Text) > limit || len(res.HTML) > limit {
			t.Errorf("limit %d: text %d bytes, html %d bytes", limit, len(res.Text), len(res.HTML))
		}
		if limit < 50000 {
			wantContains(t, "text", res.Text, "Item number 0 ", "[… output truncated]")
			wantWarning(t, res, "text output truncated")
		} else {
			wantContains(t, "text", res.Text, "Item number 0 ", "Item number 999 ")
		}
		wantContains(t, "html", res.HTML, "Item number 0 ", "[… output truncated]")
		wantWarning(t, res, "HTML output truncated")
		wellFormed(t, res.HTML)
		for _, s := range res.Texts {
			if !strings.Contains(res.HTML, strings.ReplaceAll(strings.ReplaceAll(s, "&", "&amp;"), "<", "&lt;")[:10]) {
				t.Errorf("Texts has %q which the truncated HTML does not show", s)
			}
		}
	}
}

func TestEscapingAndURLs(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["t","i","j","b","v","m"]},
		  {"id":"t","component":"Text","text":{"path":"/evil"}},
		  {"id":"i","component":"Image","url":"javascript:alert(1)","description":"x"},
		  {"id":"j","component":"Image","url":"https://example.com/a.png\" onerror=\"alert(1)","description":"\"><script>alert(1)</script>"},
		  {"id":"b","component":"Button","child":"bl","action":{"functionCall":{"call":"openUrl","args":{"url":"data:text/html,<script>alert(1)</script>"}}}},
		  {"id":"bl","component":"Text","text":"Click"},
		  {"id":"v","component":"Video","url":"file:///etc/passwd"},
		  {"id":"m","component":"Text","text":"[link](javascript:alert(1)) and [ok](https://example.com)"}]`,
		`{"evil":"<script>alert('x')</script><img src=x onerror=alert(1)>"}`)
	h := strings.ToLower(res.HTML)
	for _, bad := range []string{"<script", "javascript:", "data:text", "file:", `" onerror`, "<img src=x"} {
		if strings.Contains(h, bad) {
			t.Errorf("HTML contains %q:\n%s", bad, res.HTML)
		}
	}
	wantContains(t, "html", res.HTML, "&lt;script&gt;", `<a href="https://example.com"`)
	wantWarning(t, res, "only http(s) and mailto")
	wantContains(t, "text", res.Text, "<script>alert('x')</script>", "[image: x]", "[ Click ]")
}

func TestTitleAndTexts(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["c","h","h1"]},{"id":"c","component":"Text","text":"caption first","variant":"caption"},{"id":"h","component":"Text","text":"Your **flights**","variant":"h2"},{"id":"h1","component":"Text","text":"Later h1","variant":"h1"}]`, "")
	if res.Title != "Your flights" {
		t.Errorf("Title = %q", res.Title)
	}
	want := []string{"caption first", "Your flights", "Later h1"}
	if strings.Join(res.Texts, "|") != strings.Join(want, "|") {
		t.Errorf("Texts = %q, want %q", res.Texts, want)
	}
}

func TestTextWrapping(t *testing.T) {
	long := strings.Repeat("lorem ipsum dolor ", 20)
	res := Render(surfaceJSON(t, `[{"id":"root","component":"Text","text":"`+long+`"}]`, ""), Options{TextWidth: 40})
	for _, l := range strings.Split(strings.TrimSpace(res.Text), "\n") {
		if width(l) > 40 {
			t.Errorf("line wider than 40 columns: %q", l)
		}
	}
}

func TestNeverEmptyWhenRenderable(t *testing.T) {
	// Everything broken but one Text.
	res := Render(json.RawMessage(`[{"updateComponents":{"surfaceId":"x","components":[
	  {"id":"root","component":"Row","children":{"componentId":"nope","path":"/missing"}},
	  {"id":"lonely","component":"Text","text":"I am still shown"},
	  {"id":"bad","component":"Button"},
	  {"component":"Text","text":"no id"}]}}]`), Options{})
	wantContains(t, "text", res.Text, "I am still shown")
	wantContains(t, "html", res.HTML, "I am still shown")
}

// TestPathologicalStringsStayFast renders inputs built to trigger quadratic
// or deep work in the Markdown and interpolation readers. The bound is on
// bytes allocated, at most 64 per input byte (each case takes 6–30 here);
// the clock only catches a hang, as a shared machine can make anything
// slow.
func TestPathologicalStringsStayFast(t *testing.T) {
	big := 200 << 10
	for name, text := range map[string]string{
		"bold markers":    strings.Repeat("**", big/2),
		"link openers":    strings.Repeat("[", big),
		"underscores":     strings.Repeat("a_", big/2),
		"backticks":       "`" + strings.Repeat("x", big),
		"nested calls":    `${` + strings.Repeat("formatNumber(value: ", 5000) + "1" + strings.Repeat(")", 5000) + `}`,
		"many exprs":      strings.Repeat("${/x}", big/5),
		"unclosed exprs":  strings.Repeat("${", big/2),
		"long date field": "${formatDate(value: '2026-01-01', format: '" + strings.Repeat("y", big) + "')}",
	} {
		t.Run(name, func(t *testing.T) {
			comps, _ := json.Marshal([]any{map[string]any{"id": "root", "component": "Text", "text": map[string]any{"call": "formatString", "args": map[string]any{"value": text}}}})
			in := surfaceJSON(t, string(comps), `{"x":"y"}`)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			res := Render(in, Options{})
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(64*len(text)) {
				t.Errorf("allocated %d KiB for %d KiB of input", alloc>>10, len(text)>>10)
			}
			if d > time.Minute {
				t.Errorf("took %v", d)
			}
			if res.Text == "" {
				t.Error("empty text")
			}
		})
	}
}

func TestTinyOutputBound(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "examples", "13_coffee-order.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 50, 120, 400} {
		res := Render(data, Options{MaxOutputBytes: limit})
		if len(res.Text) > limit || len(res.HTML) > limit {
			t.Errorf("limit %d: text %d bytes, html %d bytes", limit, len(res.Text), len(res.HTML))
		}
		if limit >= 120 && !strings.Contains(res.HTML, "output truncated") {
			t.Errorf("limit %d: HTML lacks the truncation note: %q", limit, res.HTML)
		}
	}
}

func TestSurfaceRecreatedAfterDelete(t *testing.T) {
	in := `[{"createSurface":{"surfaceId":"s","catalogId":"basic"}},
	 {"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":"Old"}]}},
	 {"deleteSurface":{"surfaceId":"s"}},
	 {"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":"Ignored"}]}},
	 {"createSurface":{"surfaceId":"s","catalogId":"basic"}},
	 {"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":"New"}]}}]`
	res := Render(json.RawMessage(in), goldenOptions())
	if got := strings.TrimSpace(res.Text); got != "New" {
		t.Errorf("Text = %q, want only the recreated surface", got)
	}
	wantWarning(t, res, "update for deleted surface")
}

func TestOlderShapes(t *testing.T) {
	in := `[{"createSurface":{"surfaceId":"s","catalogId":"basic","root":"main"}},
	 {"updateComponents":{"surfaceId":"s","components":{
	   "main":{"component":"Column","children":{"explicitList":["a","b"]}},
	   "a":{"component":{"Text":{"text":{"literalString":"Shown first"}}}},
	   "b":{"component":"Text","text":"Shown second"},
	   "loose":{"component":"Text","text":"Not referenced"}}}}]`
	res := Render(json.RawMessage(in), goldenOptions())
	if got := strings.TrimSpace(res.Text); got != "Shown first\nShown second" {
		t.Errorf("Text = %q (warnings %q)", got, res.Warnings)
	}
}

// TestWholeModelInterpolationStaysBounded interpolates the whole (large)
// data model in every item of a long list. The work is bounded by the bytes
// allocated, not by a clock (a shared machine makes any time bound flaky):
// a thousand copies of the 1 MiB model would be a gigabyte.
func TestWholeModelInterpolationStaysBounded(t *testing.T) {
	items := strings.Repeat(`{"n":1},`, 999) + `{"n":1}`
	data := `{"blob":"` + strings.Repeat("x", 1<<20) + `","items":[` + items + `]}`
	in := surfaceJSON(t,
		`[{"id":"root","component":"List","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Text","text":{"call":"formatString","args":{"value":"${/}"}}}]`,
		data)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := Render(in, Options{})
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	} else {
		t.Logf("allocated %d MiB", alloc>>20)
	}
	if len(res.Text) > defaultMaxOutput || len(res.HTML) > defaultMaxOutput {
		t.Errorf("output over the bound: %d / %d", len(res.Text), len(res.HTML))
	}
	wantWarning(t, res, "larger than the output limit")
}

// TestWideCharactersAlign checks that label/value rows line up by display
// width when labels are CJK (two columns per character).
func TestWideCharactersAlign(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":["r1","r2"]},
		  {"id":"r1","component":"Row","children":["l1","v1"]},{"id":"l1","component":"Text","text":"東京"},{"id":"v1","component":"Text","text":"¥1,200"},
		  {"id":"r2","component":"Row","children":["l2","v2"]},{"id":"l2","component":"Text","text":"Paris"},{"id":"v2","component":"Text","text":"€9"}]`, "")
	want := "東京   ¥1,200\nParis  €9"
	if got := strings.TrimSpace(res.Text); got != want {
		t.Errorf("Text =\n%s\nwant\n%s", got, want)
	}
}

// An empty list is a list: a template over it renders nothing and warns of
// nothing; a string where a list belongs is named for what it is.
func TestEmptyTemplateListIsNoProblem(t *testing.T) {
	comps := `[{"id":"root","component":"Column","children":{"componentId":"t","path":"/items"}},{"id":"t","component":"Text","text":{"path":"name"}}]`
	res := renderTest(t, comps, `{"items":[]}`)
	for _, w := range res.Warnings {
		if strings.Contains(w, "not a list") {
			t.Errorf("empty list: warning %q", w)
		}
	}
	res = renderTest(t, comps, `{"items":"none"}`)
	wantWarning(t, res, "is a string, not a list")
}
