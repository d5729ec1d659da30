package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render/a2ui"
	"github.com/cool-ai/beachd/templates"
)

// allocated is the bytes allocated while f runs (this package's tests do
// not run in parallel).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// surfacePart is an a2ui-surface part whose root Text is formatString
// value over a data model holding a.
func surfacePart(value, a string) map[string]any {
	return map[string]any{"metadata": map[string]any{"partType": "a2ui-surface"}, "data": map[string]any{
		"createSurface":    map[string]any{"surfaceId": "s", "catalogId": "basic"},
		"updateComponents": map[string]any{"surfaceId": "s", "components": []any{map[string]any{"id": "root", "component": "Text", "text": map[string]any{"call": "formatString", "args": map[string]any{"value": value}}}}},
		"updateDataModel":  map[string]any{"surfaceId": "s", "value": map[string]any{"a": a}},
	}}
}

// checkPart is an a2ui-surface part whose one TextField checks the length
// of formatString value over a data model holding a: evaluation that
// shows nothing.
func checkPart(value, a string) map[string]any {
	p := surfacePart(value, a)
	p["data"].(map[string]any)["updateComponents"] = map[string]any{"surfaceId": "s", "components": []any{map[string]any{
		"id": "root", "component": "TextField", "label": "Name", "value": "ok",
		"checks": []any{map[string]any{"message": "too long", "condition": map[string]any{"call": "length", "args": map[string]any{
			"max": 5, "value": map[string]any{"call": "formatString", "args": map[string]any{"value": value}}}}}}}}}
	return p
}

func textPart(s string) map[string]any {
	return map[string]any{"text": s, "metadata": map[string]any{"partType": "response"}}
}

func boundsEnvelope(t testing.TB, parts ...map[string]any) *envelope.Envelope {
	t.Helper()
	b, err := json.Marshal(map[string]any{"role": "agent", "parts": parts,
		"meta": map[string]any{"sessionId": "s", "turnId": "t", "producedAt": "2026-04-20T09:00:00Z", "finalizedBy": "complete"}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.Decode(b, envelope.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func boundsInput(env *envelope.Envelope, channel string) Input {
	in := Input{Envelope: env, DeliveryID: "dlv_1", Now: testNow, From: "a@example.org",
		FullMessageURL: "https://beachd.example.org/m/dlv_1", WhatsAppWindowOpen: true}
	in.Recipient = Recipient{Channel: channel, Address: "+15555550100"}
	if channel == envelope.ChannelEmail {
		in.Recipient.Address = "ann@example.org"
	}
	return in
}

// A surface that names a 1 MiB string 200 times fails the email with an
// error naming the part and the bound, without rendering it.
func TestEmailHostileSurface(t *testing.T) {
	r := newTestRenderer(t, Config{})
	env := boundsEnvelope(t, surfacePart(strings.Repeat("${/a}", 200), strings.Repeat("x", 1<<20)))
	var err error
	n := allocated(func() { _, err = r.Email(boundsInput(env, envelope.ChannelEmail)) })
	if !errors.Is(err, a2ui.ErrOverBudget) || !strings.Contains(err.Error(), `parts[0] (a2ui-surface): surface "s", component "root": formatString asks for more than 16 MiB`) {
		t.Errorf("Email: %v, want the surface refused", err)
	}
	if n > 32<<20 {
		t.Errorf("allocated %d MiB", n>>20)
	}
}

// The surfaces of one envelope share the evaluation budget: three that
// each fit alone are refused together.
func TestSurfacesShareBudget(t *testing.T) {
	r := newTestRenderer(t, Config{})
	one := checkPart(strings.Repeat("${/a}", 7), strings.Repeat("x", 1<<20))
	if _, err := r.Email(boundsInput(boundsEnvelope(t, one), envelope.ChannelEmail)); err != nil {
		t.Fatalf("one surface: %v", err)
	}
	_, err := r.Email(boundsInput(boundsEnvelope(t, one, one, one), envelope.ChannelEmail))
	var le *a2ui.LimitError
	if !errors.As(err, &le) || le.Limit != a2ui.DefaultMaxEvalBytes || !strings.Contains(err.Error(), "parts[2]") {
		t.Errorf("three surfaces: %v, want parts[2] over the message's 16 MiB", err)
	}
}

// Many surfaces share the room for surfaces: the email is sent, the
// surfaces past the room are left out with a warning.
func TestSurfacesShareRoom(t *testing.T) {
	r := newTestRenderer(t, Config{})
	var parts []map[string]any
	for i := range 30 {
		parts = append(parts, surfacePart(fmt.Sprintf("surface %d: ${/a}", i), strings.Repeat("word ", 20<<10)))
	}
	em, err := r.Email(boundsInput(boundsEnvelope(t, parts...), envelope.ChannelEmail))
	if err != nil {
		t.Fatalf("Email: %v", err)
	}
	if !strings.Contains(em.Text, "surface 0: word") || strings.Contains(em.Text, "surface 29:") {
		t.Errorf("text holds the first surface %v, the last %v", strings.Contains(em.Text, "surface 0: word"), strings.Contains(em.Text, "surface 29:"))
	}
	if !strings.Contains(strings.Join(em.Warnings, "\n"), "surface 29: not shown") {
		t.Errorf("warnings %q", em.Warnings)
	}
	if max(len(em.Text), len(em.HTML)) > templates.DefaultLimits.MaxBytes {
		t.Errorf("text %d, HTML %d bytes", len(em.Text), len(em.HTML))
	}
}

// longText is a text of about n bytes in paragraphs, starting and ending
// with a marker.
func longText(n int) string {
	var b strings.Builder
	b.WriteString("Start-1 of the report.\n\n")
	for b.Len() < n {
		fmt.Fprintf(&b, "Paragraph %d: the figures are in order and nothing needs your attention.\n\n", b.Len())
	}
	b.WriteString("The end-2.")
	return b.String()
}

// A 1.2 MB text reaches every channel: cut to SMS and WhatsApp with the
// link to the whole, cut in an email with a note saying where the rest
// is, and whole on the full-message page.
func TestLongText(t *testing.T) {
	env := boundsEnvelope(t, textPart(longText(1_200_000)))
	const link = "Full message: https://beachd.example.org/m/dlv_1"
	t.Run("sms truncate", func(t *testing.T) {
		s, err := newTestRenderer(t, Config{}).SMS(boundsInput(env, envelope.ChannelSMS))
		if err != nil {
			t.Fatal(err)
		}
		if smsUnits(s.Body, s.Encoding) > 1600 || !s.Truncated || !strings.HasPrefix(s.Body, "Start-1") || !strings.HasSuffix(s.Body, link) {
			t.Errorf("%d units, truncated %v:\n%s", smsUnits(s.Body, s.Encoding), s.Truncated, s.Body)
		}
	})
	t.Run("sms split", func(t *testing.T) {
		s, err := newTestRenderer(t, Config{SMSPolicy: SMSSplit}).SMS(boundsInput(env, envelope.ChannelSMS))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Parts) != maxSMSParts || !s.Truncated || !strings.HasSuffix(s.Parts[len(s.Parts)-1], link) {
			t.Fatalf("%d parts, truncated %v; last:\n%s", len(s.Parts), s.Truncated, s.Parts[len(s.Parts)-1])
		}
		for i, p := range s.Parts {
			if smsUnits(p, s.Encoding) > 1600 {
				t.Errorf("part %d: %d units", i, smsUnits(p, s.Encoding))
			}
		}
	})
	t.Run("whatsapp", func(t *testing.T) {
		w, err := newTestRenderer(t, Config{}).WhatsApp(boundsInput(env, envelope.ChannelWhatsApp))
		if err != nil {
			t.Fatal(err)
		}
		if n := utf8.RuneCountInString(w.Body); n > 4096 || !strings.HasSuffix(w.Body, link) {
			t.Errorf("%d characters:\n%s", n, w.Body[max(0, len(w.Body)-200):])
		}
	})
	t.Run("email", func(t *testing.T) {
		in := boundsInput(env, envelope.ChannelEmail)
		in.FullMessageURL = ""
		em, err := newTestRenderer(t, Config{}).Email(in)
		if err != nil {
			t.Fatal(err)
		}
		const note = "more characters are not shown: the message is longer than one email may be."
		if !strings.Contains(em.Text, "Start-1") || strings.Contains(em.Text, "The end-2") || !strings.Contains(em.Text, note) || !strings.Contains(em.HTML, note) {
			t.Errorf("text %d bytes, HTML %d: note in text %v, in HTML %v", len(em.Text), len(em.HTML), strings.Contains(em.Text, note), strings.Contains(em.HTML, note))
		}
		in.FullMessageURL = "https://beachd.example.org/m/dlv_1"
		if em, err = newTestRenderer(t, Config{}).Email(in); err != nil || !strings.Contains(em.Text, "… The rest of this message: https://beachd.example.org/m/dlv_1\n") ||
			!strings.Contains(em.HTML, `href="https://beachd.example.org/m/dlv_1"`) {
			t.Errorf("with a link: %v", err)
		}
	})
	t.Run("page", func(t *testing.T) {
		in := boundsInput(env, envelope.ChannelEmail)
		in.Page = true
		em, err := newTestRenderer(t, Config{}).Email(in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(em.HTML, "Start-1") || !strings.Contains(em.HTML, "The end-2") {
			t.Errorf("the page lacks the start or the end of the text (%d bytes)", len(em.HTML))
		}
	})
}

// Markup that grows many times its source (a one-character code span is
// some 140 bytes of HTML) stays within the bound, in bounded memory.
func TestEmailMarkupGrowth(t *testing.T) {
	env := boundsEnvelope(t, textPart(strings.Repeat("`a` ", 1_500_000)))
	for _, page := range []bool{false, true} {
		in := boundsInput(env, envelope.ChannelEmail)
		in.Page = page
		var em *Email
		var err error
		n := allocated(func() { em, err = newTestRenderer(t, Config{}).Email(in) })
		if err != nil {
			t.Fatalf("page %v: %v", page, err)
		}
		bound := templates.DefaultLimits.MaxBytes
		if page {
			bound = 2 * pageContentBytes
		}
		if len(em.HTML) > bound || len(em.Text) > bound {
			t.Errorf("page %v: text %d, HTML %d bytes", page, len(em.Text), len(em.HTML))
		}
		if n > 1<<30 {
			t.Errorf("page %v: allocated %d MiB for 6 MB of text", page, n>>20)
		}
		t.Logf("page %v: allocated %d MiB, HTML %d KiB", page, n>>20, len(em.HTML)>>10)
	}
}

// CheckSurfaces refuses what the email rendition refuses, naming the part,
// and passes what it renders.
func TestCheckSurfaces(t *testing.T) {
	r := newTestRenderer(t, Config{})
	one := checkPart(strings.Repeat("${/a}", 7), strings.Repeat("x", 1<<20))
	for _, tc := range []struct {
		name  string
		parts []map[string]any
		part  int
	}{
		{"ordinary", []map[string]any{textPart("hello"), surfacePart("Hello ${/a}", "Ann")}, -1},
		{"hostile", []map[string]any{textPart("hello"), surfacePart(strings.Repeat("${/a}", 200), strings.Repeat("x", 1<<20))}, 1},
		{"shared budget", []map[string]any{one, textPart("hello"), one, one}, 3},
	} {
		env := boundsEnvelope(t, tc.parts...)
		part, err := CheckSurfaces(env)
		_, emailErr := r.Email(boundsInput(env, envelope.ChannelEmail))
		if part != tc.part || (err == nil) != (tc.part < 0) || (emailErr == nil) != (err == nil) {
			t.Errorf("%s: part %d, %v; email: %v", tc.name, part, err, emailErr)
		}
		if err != nil && (!errors.Is(err, a2ui.ErrOverBudget) || !strings.Contains(emailErr.Error(), err.Error())) {
			t.Errorf("%s: check %q, email %q", tc.name, err, emailErr)
		}
	}
}
