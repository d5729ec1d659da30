package envelope

import (
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strings"
	"testing"
)

// TestArtifactMediaTypeIsATokenPair: a media type reaches a MIME header,
// so anything but RFC 2045 type/subtype tokens (with parameters) is a 400
// problem at parts[i].data.mimeType; a CR or LF above all.
func TestArtifactMediaTypeIsATokenPair(t *testing.T) {
	good := []string{"application/pdf", "text/plain; charset=utf-8", "TEXT/Calendar", "application/vnd.ms-excel",
		"image/svg+xml", "application/ld+json; profile=\"https://x.example\""}
	bad := []string{"pdf", "text/html\r\nContent-Disposition: inline\r\nX-Injected: yes", "text/html\nX: y",
		"text/html\r", "text/\thtml", "text /html", "/pdf", "application/", "a/b/c", "text/html; charset", "text/h\"tml",
		"application/pdf\x00", "text/plain; charset=\"a\r\nb\"", "téxt/plain", "\u2028text/plain", ""}
	for _, mt := range good {
		if err := NewRegistry().Validate(artifactEnvelope(t, mt)); err != nil {
			t.Errorf("%q: %v", mt, err)
		}
	}
	for _, mt := range bad {
		err := NewRegistry().Validate(artifactEnvelope(t, mt))
		if err == nil {
			t.Errorf("%q accepted", mt)
			continue
		}
		if got := problemPaths(t, err); !slices.Contains(got, "parts[1].data.mimeType") {
			t.Errorf("%q: problems at %v, want parts[1].data.mimeType", mt, got)
		}
	}
	long := "application/" + fmt.Sprintf("%0300d", 0)
	if err := NewRegistry().Validate(artifactEnvelope(t, long)); err == nil {
		t.Error("a 312-character media type accepted")
	}
}

// TestArtifactURIWithUserInfoIsRefused: a password in an artifact URL
// would be sent on as Basic auth, or shown to the recipient in a link.
func TestArtifactURIWithUserInfoIsRefused(t *testing.T) {
	env := artifactEnvelope(t, "application/pdf")
	env.Parts[1].Data = json.RawMessage(`{"artifactId":"a1","mimeType":"application/pdf","uri":"https://user:pw@files.example.org/a.pdf"}`)
	err := NewRegistry().Validate(env)
	if err == nil {
		t.Fatal("accepted")
	}
	if got := problemPaths(t, err); !slices.Contains(got, "parts[1].data.uri") {
		t.Fatalf("problems at %v", got)
	}
}

func artifactEnvelope(t *testing.T, mimeType string) *Envelope {
	t.Helper()
	data, err := json.Marshal(map[string]any{"artifactId": "a1", "mimeType": mimeType, "uri": "https://files.example.org/a.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	raw := fmt.Sprintf(`{"role":"agent","parts":[{"text":"Here.","metadata":{"partType":"response"}},
	  {"data":%s,"metadata":{"partType":"artifact"}}],
	  "meta":{"sessionId":"s","turnId":"t","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`, data)
	env, err := Decode([]byte(raw), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// FuzzCheckMediaType: what passes is printable, parses, and is a
// type/subtype pair.
func FuzzCheckMediaType(f *testing.F) {
	for _, s := range []string{"application/pdf", "text/plain; charset=utf-8", "text/html\r\nX: y", "pdf", "a/b/c", "image/svg+xml"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkMediaType(s) != "" {
			return
		}
		if strings.ContainsAny(s, "\r\n\x00") {
			t.Fatalf("%q passed with a control character", s)
		}
		mt, _, err := mime.ParseMediaType(s)
		if err != nil || !ValidMediaType(mt) {
			t.Fatalf("%q passed: %q, %v", s, mt, err)
		}
	})
}
