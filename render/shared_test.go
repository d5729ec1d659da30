package render

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

// The dispatcher hands one decoded envelope to every delivery of it
// (channels.EnvelopeCache), on as many goroutines. Rendering every channel
// of every sample envelope at once must neither race (under -race) nor
// change the envelope.
func TestRenderingLeavesSharedEnvelope(t *testing.T) {
	r := newTestRenderer(t, Config{})
	for _, name := range sortedNames(loadEnvelopes(t)) {
		env := loadEnvelopes(t)[name]
		before, _ := json.Marshal(env)
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			for _, ch := range []string{envelope.ChannelEmail, envelope.ChannelSMS, envelope.ChannelWhatsApp, envelope.ChannelWebhook} {
				in := testInput(t, name, env, ch)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					switch ch {
					case envelope.ChannelEmail:
						_, err = r.Email(in)
					case envelope.ChannelSMS:
						_, err = r.SMS(in)
					case envelope.ChannelWhatsApp:
						_, err = r.WhatsApp(in)
					case envelope.ChannelWebhook:
						_, err = r.Webhook(in)
					}
					if err != nil && err != ErrEmpty {
						t.Errorf("%s %s: %v", name, ch, err)
					}
				}()
			}
		}
		wg.Wait()
		if after, _ := json.Marshal(env); string(after) != string(before) {
			t.Errorf("%s: rendering changed the shared envelope:\n%s\n%s", name, before, after)
		}
	}
}

// The full-message page is the email rendition without what only makes
// sense in a mailbox: the reply footer, attachments, and "no way to answer"
// for an approval whose handle went out in the SMS.
func TestPageRendition(t *testing.T) {
	r := newTestRenderer(t, Config{AttachDomainData: true})
	envs := loadEnvelopes(t)
	// flight-results' domain data is shown through its surface, so it
	// attaches nothing either way; it is here for the surface.
	for _, name := range []string{"approval-request", "artifacts", "flight-results"} {
		in := testInput(t, name, envs[name], envelope.ChannelEmail)
		in.Approvals, in.Artifacts = nil, nil // the page has no handles or fetched files
		mail, err := r.Email(in)
		if err != nil {
			t.Fatal(err)
		}
		in.Page = true
		page, err := r.Email(in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(mail.HTML, "Replies are read only") || strings.Contains(page.HTML, "Replies are read only") {
			t.Errorf("%s: the reply footer belongs in the mail only", name)
		}
		if name == "artifacts" && len(mail.Attachments) == 0 {
			t.Fatalf("%s: the mail attaches nothing; the sample no longer tests attachments", name)
		}
		if name == "approval-request" && !strings.Contains(mail.HTML, "No way to answer") {
			t.Fatalf("%s: the mail without handles no longer says so; the sample no longer tests it", name)
		}
		if len(page.Attachments) != 0 || strings.Contains(page.HTML, "(attached)") || strings.Contains(page.HTML, "Attached data") {
			t.Errorf("%s: the page attaches %d files or says so", name, len(page.Attachments))
		}
		if strings.Contains(page.HTML, "No way to answer") {
			t.Errorf("%s: the page says no way to answer was issued", name)
		}
		if name == "approval-request" && !strings.Contains(page.HTML, "Answer it from the message you received.") {
			t.Errorf("%s: the page does not point to the message for the answer", name)
		}
	}
}
