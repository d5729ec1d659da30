package render

import (
	"encoding/json"
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
