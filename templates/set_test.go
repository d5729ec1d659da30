package templates

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, rel, body string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every channel has every kind the renderer asks for.
func TestDefaultsComplete(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"result", "clarification", "error", "approval-request", "approval-confirmation", "already-decided", "not-understood"}
	for _, k := range kinds {
		for _, n := range []string{"email/" + k + ".subject", "email/" + k + ".txt", "email/" + k + ".html", "sms/" + k + ".txt", "whatsapp/" + k + ".txt", "slack/" + k + ".txt"} {
			if !s.Has(n) {
				t.Errorf("default template %s missing", n)
			}
		}
	}
	if s.Has("email/_parts.html") {
		t.Error("partials must not be listed as templates")
	}
}

func TestOverrideReplacesFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "sms/result.txt.tmpl", "Custom: {{.Text}}")
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Execute("sms/result.txt", map[string]string{"Text": "hi"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if out != "Custom: hi" {
		t.Errorf("override not used: %q", out)
	}
	if s.File("sms/result.txt") != p {
		t.Errorf("File = %q, want %q", s.File("sms/result.txt"), p)
	}
	if !strings.HasPrefix(s.File("sms/error.txt"), "(embedded)") {
		t.Errorf("untouched template should stay embedded: %q", s.File("sms/error.txt"))
	}
}

func TestOverrideErrors(t *testing.T) {
	for _, tc := range []struct {
		name, rel, body string
		wantLine        int
		wantText        string
	}{
		{"parse error", "email/result.txt.tmpl", "line one\n{{if .Text}}\nno end\n", 4, "unexpected EOF"},
		{"unknown function", "sms/error.txt.tmpl", "ok\nok\n{{frobnicate .Text}}", 3, "frobnicate"},
		{"escaping error", "email/result.html.tmpl", "<p>\n{{if .Text}}<a href=\"{{else}}<b>{{end}}</p>", 2, "html/template"},
		{"typo in file name", "email/reslut.txt.tmpl", "x", 0, "no default template"},
		{"not a template", "email/notes.md", "x", 0, "not a template name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, tc.rel, tc.body)
			_, err := Load(dir)
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want *templates.Error", err)
			}
			if te.File != p {
				t.Errorf("file %q, want %q", te.File, p)
			}
			if te.Line != tc.wantLine {
				t.Errorf("line %d, want %d (%v)", te.Line, tc.wantLine, err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not mention %q", err, tc.wantText)
			}
		})
	}
}

func TestNewPartialAllowed(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sms/_mine.txt.tmpl", `{{define "sig"}} -- Travel desk{{end}}`)
	writeFile(t, dir, "sms/result.txt.tmpl", `{{.Text}}{{template "sig"}}`)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Execute("sms/result.txt", map[string]string{"Text": "hi"}, Limits{})
	if err != nil || out != "hi -- Travel desk" {
		t.Errorf("got %q, %v", out, err)
	}
}

func TestExecuteLimits(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sms/result.txt.tmpl", `{{range 1000000}}xxxxxxxxxx{{end}}`)
	writeFile(t, dir, "sms/error.txt.tmpl", `{{range 2000000000}}{{end}}`)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Execute("sms/result.txt", nil, Limits{MaxBytes: 4096}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big output: got %v, want ErrTooLarge", err)
	}
	start := time.Now()
	if _, err := s.Execute("sms/error.txt", nil, Limits{Timeout: 50 * time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Errorf("endless loop: got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout took %s", d)
	}
	if _, err := s.Execute("sms/nope.txt", nil, Limits{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown template: got %v", err)
	}
}

// HTML templates escape data by context, whatever it holds.
func TestHTMLEscapesData(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "email/result.html.tmpl", `<p title="{{.Text}}">{{.Text}}</p><a href="{{.URL}}">x</a>`)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Execute("email/result.html", map[string]string{"Text": `"><script>alert(1)</script>`, "URL": "javascript:alert(1)"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "<script") || strings.Contains(out, "javascript:") {
		t.Errorf("data not escaped: %s", out)
	}
}
