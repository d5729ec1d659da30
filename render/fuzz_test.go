package render

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// FuzzEmail renders arbitrary envelopes (whatever Decode accepts, valid or
// not) on every channel. Nothing may panic, and the email invariants hold:
// a one-line subject of 1-78 characters, HTML free of active content, and
// SMS/WhatsApp bodies within their limits.
func FuzzEmail(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(envelopesDir, "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"role":"agent","parts":[{"text":"<script>x</script>\n\n**[a](javascript:1)**","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`))
	f.Add([]byte(`{"role":"agent","parts":[{"data":{"approvalId":"a","toolName":"<b>","args":{"x":[1,{"y":null}]},"summary":"\u0000\r\n"},"metadata":{"partType":"approval-request"}},{"data":[1,2],"metadata":{"partType":"a2ui-surface"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"suspended"}}`))
	r := newTestRenderer(f, Config{AttachDomainData: true})
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := envelope.Decode(b, envelope.Limits{MaxBytes: 64 << 10})
		if err != nil {
			return
		}
		var handles []ApprovalHandle
		for _, p := range env.PartsOf(envelope.PartApprovalRequest) {
			var ar envelope.ApprovalRequest
			if json.Unmarshal(p.Data, &ar) == nil {
				handles = append(handles, ApprovalHandle{ApprovalID: ar.ApprovalID, Token: testToken, Code: "1234",
					LinkURL: "https://b.example/a/x", Buttons: []Button{{Title: "Approve", Payload: "p"}}})
			}
		}
		in := Input{Envelope: env, Approvals: handles, DeliveryID: "d1", From: "a@example.org", ReplyTo: "r@example.org", Now: testNow}
		if e, err := r.Email(in); err == nil {
			if e.Subject == "" || strings.ContainsAny(e.Subject, "\r\n") || utf8.RuneCountInString(e.Subject) > 78 {
				t.Fatalf("subject %q", e.Subject)
			}
			if bad := unsafeHTML(e.HTML); bad != "" {
				t.Fatalf("HTML carries %s", bad)
			}
			if len(e.Text) > 1<<20 || len(e.HTML) > 1<<20 {
				t.Fatalf("email of %d bytes of text, %d of HTML", len(e.Text), len(e.HTML))
			}
			for k, v := range e.Headers {
				if strings.ContainsAny(v, "\r\n") {
					t.Fatalf("header %s carries a line break: %q", k, v)
				}
			}
		}
		if s, err := r.SMS(in); err == nil {
			if smsUnits(s.Body, s.Encoding) > 1600 {
				t.Fatalf("SMS of %d units", smsUnits(s.Body, s.Encoding))
			}
		}
		in.WhatsAppWindowOpen = true
		if w, err := r.WhatsApp(in); err == nil {
			limit := 4096
			if len(w.Buttons) > 0 {
				limit = 1024
			}
			if n := utf8.RuneCountInString(w.Body); n > limit || len(w.Buttons) > 3 {
				t.Fatalf("WhatsApp body %d characters, %d buttons", n, len(w.Buttons))
			}
		}
		if _, err := r.Webhook(in); err != nil && err != ErrEmpty {
			t.Fatalf("webhook: %v", err)
		}
	})
}

// FuzzTemplatesHostileData runs the default templates of every channel over
// views full of hostile strings: the HTML must stay free of active content
// and every template must succeed.
func FuzzTemplatesHostileData(f *testing.F) {
	for _, s := range []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, "javascript:alert(1)",
		"{{.Subject}}", "\x00\u2028\r\n", `</td></tr></table><form action="https://evil.example">`} {
		f.Add(s, "https://ok.example/"+s)
	}
	r := newTestRenderer(f, Config{})
	kinds := []string{KindResult, KindClarification, KindError, KindApprovalRequest}
	f.Fuzz(func(t *testing.T, s, u string) {
		v := View{Channel: "email", Subject: s, DefaultSubject: s, Text: s,
			Surfaces:  []SurfaceView{{Title: s, Text: s}},
			Approvals: []ApprovalView{{Summary: s, Tool: s, Args: []Arg{{Name: s, Value: s}}, Why: s, Handler: s, Expires: s, ExpiresIn: s, Token: s, SubjectTag: s, Code: s, LinkURL: u, ByReply: true, Answerable: true}},
			Artifacts: []ArtifactView{{Name: s, URL: u, Note: s, Size: s}},
			Citations: []CitationView{{N: 1, Title: s, URL: u, Text: s}},
			Attached:  []string{s},
			Notice:    &NoticeView{Summary: s, Decision: s, DecidedBy: s, DecidedAt: s, Reason: s, Code: s, SubjectTag: s, LinkURL: u}}
		for _, k := range append(kinds, KindApprovalConfirmation, KindAlreadyDecided, KindNotUnderstood) {
			v.Kind = k
			out, err := r.tpl.Execute("email/"+k+".html", &v, r.cfg.TemplateLimits)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if bad := unsafeHTML(out); bad != "" {
				t.Fatalf("%s: HTML carries %s", k, bad)
			}
			for _, name := range []string{"email/" + k + ".txt", "email/" + k + ".subject", "sms/" + k + ".txt", "whatsapp/" + k + ".txt"} {
				if _, err := r.tpl.Execute(name, &v, r.cfg.TemplateLimits); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
	})
}
