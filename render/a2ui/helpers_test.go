package a2ui

import (
	"encoding/json"
	"strings"
	"testing"
)

// surfaceJSON builds the combined-object input (the envelope's shape) of a
// surface from a components list and a data model, both JSON text.
func surfaceJSON(t testing.TB, components, data string) json.RawMessage {
	t.Helper()
	var comps, model any
	if err := json.Unmarshal([]byte(components), &comps); err != nil {
		t.Fatalf("test components are not JSON: %v", err)
	}
	if data == "" {
		data = "{}"
	}
	if err := json.Unmarshal([]byte(data), &model); err != nil {
		t.Fatalf("test data is not JSON: %v", err)
	}
	b, err := json.Marshal(map[string]any{
		"version":          "v0.9",
		"createSurface":    map[string]any{"surfaceId": "s", "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"},
		"updateComponents": map[string]any{"surfaceId": "s", "components": comps},
		"updateDataModel":  map[string]any{"surfaceId": "s", "path": "/", "value": model},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func renderTest(t testing.TB, components, data string) Result {
	t.Helper()
	return Render(surfaceJSON(t, components, data), goldenOptions())
}

func wantContains(t *testing.T, what, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%s lacks %q; got:\n%s", what, s, got)
		}
	}
}

func wantLacks(t *testing.T, what, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(got, s) {
			t.Errorf("%s contains %q; got:\n%s", what, s, got)
		}
	}
}

func wantWarning(t *testing.T, res Result, sub string) {
	t.Helper()
	for _, w := range res.Warnings {
		if strings.Contains(w, sub) {
			return
		}
	}
	t.Errorf("no warning mentions %q; warnings: %q", sub, res.Warnings)
}

// wellFormed checks that every table, tr and td the HTML opens it closes,
// in order.
func wellFormed(t *testing.T, h string) {
	t.Helper()
	var stack []string
	for i := 0; i < len(h); i++ {
		if h[i] != '<' {
			continue
		}
		j := strings.IndexAny(h[i:], " >")
		if j < 0 {
			t.Errorf("unterminated tag at %d", i)
			return
		}
		tag := h[i+1 : i+j]
		switch tag {
		case "table", "tr", "td", "div", "a", "span", "h1", "h2", "h3", "h4", "h5", "strong", "em", "code", "s", "p":
			stack = append(stack, tag)
		case "/table", "/tr", "/td", "/div", "/a", "/span", "/h1", "/h2", "/h3", "/h4", "/h5", "/strong", "/em", "/code", "/s", "/p":
			if len(stack) == 0 || stack[len(stack)-1] != tag[1:] {
				t.Errorf("closing %s does not match the open %v at byte %d", tag, stack, i)
				return
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		t.Errorf("elements left open: %v", stack)
	}
}
