package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// TestGolden renders every sample envelope on every channel and compares
// what a person would read with the golden files.
func TestGolden(t *testing.T) {
	envs := loadEnvelopes(t)
	r := newTestRenderer(t, Config{AttachDomainData: true, PublicURL: "https://beachd.example.org"})
	for _, name := range sortedNames(envs) {
		env := envs[name]
		t.Run(name, func(t *testing.T) {
			t.Run("email", func(t *testing.T) {
				e, err := r.Email(testInput(t, name, env, envelope.ChannelEmail))
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".email.txt", emailDump(e))
				golden(t, name+".email.html", e.HTML)
			})
			t.Run("sms", func(t *testing.T) {
				s, err := r.SMS(testInput(t, name, env, envelope.ChannelSMS))
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".sms.txt", smsDump(s))
			})
			t.Run("whatsapp", func(t *testing.T) {
				w, err := r.WhatsApp(testInput(t, name, env, envelope.ChannelWhatsApp))
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".whatsapp.txt", whatsAppDump(w))
			})
			t.Run("slack", func(t *testing.T) {
				s, err := r.Slack(testInput(t, name, env, envelope.ChannelSlack))
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".slack.json", slackDump(t, s))
			})
			t.Run("webhook", func(t *testing.T) {
				f, err := r.Webhook(testInput(t, name, env, envelope.ChannelWebhook))
				if err != nil {
					t.Fatal(err)
				}
				b, err := json.MarshalIndent(f, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".webhook.json", string(b)+"\n")
			})
		})
	}
}

// slackDump is the message as chat.postMessage gets it, checked against
// Slack's limits, and the renderer's warnings.
func slackDump(t *testing.T, s *Slack) string {
	t.Helper()
	checkSlackLimits(t, s)
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(s); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func emailDump(e *Email) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Subject: %s\n", e.Subject)
	keys := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, e.Headers[k])
	}
	for _, a := range e.Attachments {
		fmt.Fprintf(&b, "Attachment: %s (%s, %d bytes)\n", a.Filename, a.MimeType, len(a.Bytes))
	}
	for _, w := range e.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", w)
	}
	b.WriteString("\n")
	b.WriteString(e.Text)
	return b.String()
}

func smsDump(s *SMS) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Encoding: %s\nSegments: %d\nTruncated: %v\nCharacters: %d\n", s.Encoding, s.Segments, s.Truncated, len([]rune(s.Body)))
	for _, w := range s.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", w)
	}
	b.WriteString("\n" + s.Body + "\n")
	for i, p := range s.Parts {
		fmt.Fprintf(&b, "\n--- part %d ---\n%s\n", i+1, p)
	}
	return b.String()
}

func whatsAppDump(w *WhatsApp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Characters: %d\n", len([]rune(w.Body)))
	for _, bt := range w.Buttons {
		fmt.Fprintf(&b, "Button: %s [%s]\n", bt.Title, bt.Payload)
	}
	for _, u := range w.MediaURLs {
		fmt.Fprintf(&b, "Media: %s\n", u)
	}
	if w.ContentSID != "" {
		fmt.Fprintf(&b, "ContentSID: %s\n", w.ContentSID)
		keys := make([]string, 0, len(w.ContentVariables))
		for k := range w.ContentVariables {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "Variable %s: %s\n", k, w.ContentVariables[k])
		}
	}
	for _, x := range w.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", x)
	}
	b.WriteString("\n" + w.Body + "\n")
	return b.String()
}

// TestGoldenNotices renders every notice on every channel into one golden
// file.
func TestGoldenNotices(t *testing.T) {
	r := newTestRenderer(t, Config{})
	in := NoticeInput{Summary: "Book BA2043 (LGW→CFU, 15 Aug) for 6 people", Decision: envelope.DecisionGranted,
		DecidedBy: "alice@example.org", DecidedAt: testNow.Add(5 * time.Minute), Reason: "fine by me",
		Code: "4821", Token: testToken, LinkURL: "https://beachd.example.org/a/Lk4mQ9vT2xW7pR3s", Now: testNow}
	var b strings.Builder
	for _, kind := range []string{KindApprovalConfirmation, KindAlreadyDecided, KindNotUnderstood} {
		for _, ch := range []string{envelope.ChannelEmail, envelope.ChannelSMS, envelope.ChannelWhatsApp} {
			in.Channel = ch
			n, err := r.Notice(kind, in)
			if err != nil {
				t.Fatalf("%s on %s: %v", kind, ch, err)
			}
			fmt.Fprintf(&b, "===== %s / %s\n", kind, ch)
			if n.Subject != "" {
				fmt.Fprintf(&b, "Subject: %s\n\n", n.Subject)
			}
			b.WriteString(n.Text)
			if ch == envelope.ChannelEmail && !strings.Contains(n.HTML, "</html>") {
				t.Errorf("%s: email notice without HTML", kind)
			}
		}
	}
	golden(t, "notices.txt", b.String())
}
