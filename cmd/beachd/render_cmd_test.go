package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
)

var renderNow = time.Date(2026, 4, 20, 10, 0, 0, 0, time.UTC)

func renderFile(t *testing.T, o renderOpts) string {
	t.Helper()
	o.Now = renderNow
	if o.From == "" {
		o.From = "Travel agent <agent@example.org>"
	}
	var b bytes.Buffer
	if err := runRender(&b, o); err != nil {
		t.Fatalf("render %+v: %v", o, err)
	}
	return b.String()
}

const sampleDir = "../../testdata/envelopes"

func TestRenderCmdJSONShapes(t *testing.T) {
	for _, tc := range []struct {
		channel string
		keys    []string
	}{
		{"email", []string{"subject", "text", "html", "attachments", "headers"}},
		{"sms", []string{"body", "encoding", "segments", "truncated"}},
		{"whatsapp", []string{"body", "buttons", "mediaUrls"}},
		{"webhook", []string{"type", "timestamp", "data"}},
	} {
		out := renderFile(t, renderOpts{Channel: tc.channel, Format: "json", File: filepath.Join(sampleDir, "approval-request.json")})
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", tc.channel, err, out)
		}
		for _, k := range tc.keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: JSON lacks %q: %s", tc.channel, k, out)
			}
		}
	}
}

// TestRenderCmdMIME parses the printed message with go-message: it must be
// a well-formed multipart message with our headers, both alternatives and
// the inline-bytes attachment.
func TestRenderCmdMIME(t *testing.T) {
	out := renderFile(t, renderOpts{Channel: "email", Format: "mime", To: "alice@example.org",
		ReplyTo: "replies@reply.example.org", File: filepath.Join(sampleDir, "artifacts.json")})
	r, err := mail.CreateReader(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not a MIME message: %v\n%s", err, out)
	}
	h := r.Header
	if got, _ := h.Subject(); got != "Your booking is confirmed" {
		t.Errorf("subject %q", got)
	}
	if h.Get("Auto-Submitted") != "auto-generated" || h.Get("X-Auto-Response-Suppress") != "All" {
		t.Errorf("auto-reply suppression headers missing:\n%s", out[:min(len(out), 800)])
	}
	if id := h.Get("Message-Id"); id != "<preview@example.org>" {
		t.Errorf("Message-ID %q", id)
	}
	var kinds []string
	for {
		p, err := r.NextPart()
		if err != nil {
			break
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := ph.ContentType()
			kinds = append(kinds, ct)
		case *mail.AttachmentHeader:
			name, _ := ph.Filename()
			kinds = append(kinds, "attachment:"+name)
		}
	}
	want := "text/plain text/html attachment:BA2043.ics"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("parts %q, want %q", got, want)
	}
}

func TestRenderCmdBareSurface(t *testing.T) {
	dir := t.TempDir()
	surface := `{"version":"v0.9","createSurface":{"surfaceId":"s","catalogId":"https://a2ui.org/specification/v0_9/basic_catalog.json"},
"updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Text","text":"Hello from a bare surface","variant":"h1"}]}}`
	file := filepath.Join(dir, "surface.json")
	if err := os.WriteFile(file, []byte(surface), 0o644); err != nil {
		t.Fatal(err)
	}
	out := renderFile(t, renderOpts{Channel: "email", Format: "text", File: file})
	if !strings.Contains(out, "Subject: Hello from a bare surface") || !strings.Contains(out, "Hello from a bare surface\n") {
		t.Errorf("bare surface not rendered:\n%s", out)
	}
}

func TestRenderCmdUsageErrors(t *testing.T) {
	var b bytes.Buffer
	err := runRender(&b, renderOpts{Channel: "sms", Format: "html", File: filepath.Join(sampleDir, "simple.json")})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("html for sms: got %v, want a usage error (exit 2)", err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "email"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "email", "result.txt.tmpl"), []byte("ok\n{{.Text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runRender(&b, renderOpts{Channel: "email", TemplatesDir: dir, File: filepath.Join(sampleDir, "simple.json")})
	if err == nil || !strings.Contains(err.Error(), "result.txt.tmpl:2") {
		t.Errorf("broken override: got %v, want file and line", err)
	}
}

func TestRenderCmdSMSApproval(t *testing.T) {
	out := renderFile(t, renderOpts{Channel: "sms", File: filepath.Join(sampleDir, "approval-request.json")})
	if !strings.Contains(out, "Reply YES 000000 or NO 000000") {
		t.Errorf("SMS approval instruction missing:\n%s", out)
	}
}

// `beachd render --channel slack` previews the Block Kit message: as text,
// with the approval's buttons, and as the JSON chat.postMessage gets.
func TestRenderCmdSlack(t *testing.T) {
	out := renderFile(t, renderOpts{Channel: "slack", File: filepath.Join(sampleDir, "approval-request.json"), NowProduced: true})
	if !strings.Contains(out, "*Approval needed:* Book BA2043") || !strings.Contains(out, "[ Approve ] [ Deny ]") {
		t.Errorf("slack preview:\n%s", out)
	}
	js := renderFile(t, renderOpts{Channel: "slack", Format: "json", File: filepath.Join(sampleDir, "approval-request.json"), NowProduced: true})
	var m struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type    string `json:"type"`
			BlockID string `json:"block_id"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("%v:\n%s", err, js)
	}
	last := m.Blocks[len(m.Blocks)-1]
	if m.Text == "" || last.Type != "actions" || last.BlockID != "approval:appr_7Q2K9" {
		t.Errorf("slack json: %+v", m)
	}
}
