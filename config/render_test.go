package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderConfigValidate(t *testing.T) {
	v := &validator{}
	c := RenderConfig{TimeZone: "Mars/Olympus", SMS: RenderSMSConfig{MaxChars: 2000, Policy: "shout"},
		Email: RenderEmailConfig{MaxAttachmentBytes: -1}, TemplatesDir: "/nonexistent/templates"}
	c.validate(v)
	got := strings.Join(v.problems, "\n")
	for _, key := range []string{"render.time_zone", "render.sms.max_chars", "render.sms.policy", "render.email.max_attachment_bytes", "render.templates_dir"} {
		if !strings.Contains(got, key+":") {
			t.Errorf("no problem reported for %s:\n%s", key, got)
		}
	}
	v = &validator{}
	(&RenderConfig{SMS: RenderSMSConfig{MaxChars: 480, Policy: "split"}, TimeZone: "Europe/London"}).validate(v)
	if len(v.problems) > 0 {
		t.Errorf("valid section rejected: %v", v.problems)
	}
}

// config check names the broken template file and line.
func TestRenderConfigCheck(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sms"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "sms", "result.txt.tmpl")
	if err := os.WriteFile(bad, []byte("{{.Text}}\n{{template \"missing\" .}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := (&RenderConfig{TemplatesDir: dir}).check()
	if err == nil || !strings.Contains(err.Error(), bad+":2:") {
		t.Errorf("got %v, want %s:2", err, bad)
	}
	rc, err := (&RenderConfig{}).RendererConfig("https://beachd.example.org")
	if err != nil || rc.Templates == nil || rc.TimeZone == nil {
		t.Errorf("RendererConfig: %+v, %v", rc, err)
	}
}
