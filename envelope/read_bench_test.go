package envelope

import (
	"fmt"
	"strings"
	"testing"
)

func BenchmarkReadLimitedSize(b *testing.B) {
	for _, n := range []int{892, 1 << 20} {
		body := strings.Repeat("x", n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := ReadLimitedSize(strings.NewReader(body), 8<<20, int64(n)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecipientTarget(b *testing.B) {
	r := Recipient{Channel: ChannelWebhook, Endpoint: "sink"}
	b.ReportAllocs()
	for b.Loop() {
		if r.Target() != "sink" || !KnownChannel(r.Channel) {
			b.Fatal("wrong target")
		}
	}
}
