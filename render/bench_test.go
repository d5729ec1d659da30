package render

import (
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

// BenchmarkRenderAllChannels renders the typical envelope (flight results:
// response, domain-data, llm-context and an A2UI surface) for all four
// channels per iteration. Reported: ns/op for the four, and ns per channel.
func BenchmarkRenderAllChannels(b *testing.B) {
	envs := loadEnvelopes(b)
	env := envs["flight-results"]
	r := newTestRenderer(b, Config{})
	ins := map[string]Input{}
	for _, ch := range envelope.ChannelNames() {
		ins[ch] = testInput(b, "flight-results", env, ch)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Email(ins[envelope.ChannelEmail]); err != nil {
			b.Fatal(err)
		}
		if _, err := r.SMS(ins[envelope.ChannelSMS]); err != nil {
			b.Fatal(err)
		}
		if _, err := r.WhatsApp(ins[envelope.ChannelWhatsApp]); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Webhook(ins[envelope.ChannelWebhook]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4, "ns/channel")
}

// BenchmarkRenderEmail is the email rendition alone (the costly one: the
// surface and two templates).
func BenchmarkRenderEmail(b *testing.B) {
	envs := loadEnvelopes(b)
	r := newTestRenderer(b, Config{})
	in := testInput(b, "flight-results", envs["flight-results"], envelope.ChannelEmail)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Email(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckSurfaces is what ingest pays to check the typical
// envelope's surface against the evaluation budget (CheckSurfaces), to
// compare with BenchmarkRenderEmail.
func BenchmarkCheckSurfaces(b *testing.B) {
	env := loadEnvelopes(b)["flight-results"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckSurfaces(env); err != nil {
			b.Fatal(err)
		}
	}
}
