package a2ui

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenOptions are the options every golden rendering uses.
func goldenOptions() Options {
	return Options{
		Now:      time.Date(2025, 12, 15, 9, 0, 0, 0, time.UTC),
		Locale:   "en",
		TimeZone: time.UTC,
	}
}

func exampleFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "examples", "*.json"))
	if err != nil || len(files) != 20 {
		t.Fatalf("want the 20 example surfaces in testdata/examples, found %d (%v)", len(files), err)
	}
	return files
}

// TestGoldenExamples renders the specification's twenty example surfaces
// and compares the text and HTML with testdata/golden (go test -update to
// rewrite them after reading the change).
func TestGoldenExamples(t *testing.T) {
	for _, f := range exampleFiles(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res := Render(json.RawMessage(data), goldenOptions())
			if len(res.Warnings) > 0 {
				t.Errorf("example rendered with warnings: %q", res.Warnings)
			}
			checkGolden(t, filepath.Join("testdata", "golden", name+".txt"), res.Text)
			checkGolden(t, filepath.Join("testdata", "golden", name+".html"), res.HTML)
			for _, bad := range []string{"${", "<script", "<form", "javascript:"} {
				if strings.Contains(res.Text, bad) || strings.Contains(res.HTML, bad) {
					t.Errorf("output contains %q", bad)
				}
			}
			for _, s := range res.Texts {
				if !strings.Contains(res.Text, s) && !strings.Contains(strings.Join(strings.Fields(res.Text), " "), s) {
					t.Errorf("visible HTML text %q missing from the text rendition", s)
				}
			}
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test ./render/a2ui -update): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendition (go test ./render/a2ui -update to accept):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
