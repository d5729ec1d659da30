package email

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/emersion/go-smtp"
)

// BenchmarkSend compares the Sender (render fallback, go-mail, pool of one
// connection) with a raw go-smtp client sending the same bytes on one
// reused connection, against the same local go-smtp sink, in the same run.
func BenchmarkSend(b *testing.B) {
	be := &smtptest.Server{}
	port, _ := smtptest.Start(b, be, TLSNone)
	s := newTestSender(b, port, func(c *SenderConfig) { c.PoolSize = 1 }, false)
	env := textEnvelope("Your itinerary for Monday: LH 902 FRA-LHR 10:05, hotel near the office, taxi booked.\n\nReply if you need changes.")
	ctx := context.Background()

	// The raw client sends exactly what the Sender produced.
	j := job("dlvbench", "alice@example.com", env)
	em, err := s.render(ctx, j)
	if err != nil {
		b.Fatal(err)
	}
	msg, err := s.buildMessage("alice@example.com", em)
	if err != nil {
		b.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := msg.WriteTo(&raw); err != nil {
		b.Fatal(err)
	}

	c, err := smtp.Dial(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("bench.test"); err != nil {
		b.Fatal(err)
	}
	// Batches alternate between the two clients so that load from other
	// processes on the machine hits both alike.
	const batch = 10
	var senderDur, rawDur time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		start := time.Now()
		for i := 0; i < n; i++ {
			if _, err := s.Deliver(ctx, job(fmt.Sprintf("dlv%d", done+i), "alice@example.com", env)); err != nil {
				b.Fatal(err)
			}
		}
		senderDur += time.Since(start)
		start = time.Now()
		for i := 0; i < n; i++ {
			if err := c.SendMail("agent@beachd.test", []string{"alice@example.com"}, bytes.NewReader(raw.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
		rawDur += time.Since(start)
	}
	b.StopTimer()
	senderRate := float64(b.N) / senderDur.Seconds()
	rawRate := float64(b.N) / rawDur.Seconds()
	b.ReportMetric(senderRate, "sender-msgs/s")
	b.ReportMetric(rawRate, "raw-msgs/s")
	b.ReportMetric(senderRate/rawRate, "ratio")
	if be.Stats().Total != 2*b.N {
		b.Fatalf("sink counted %d, want %d", be.Stats().Total, 2*b.N)
	}
}

// BenchmarkParseMessage parses the whole reply corpus; msgs/s is inbound
// messages parsed per second.
func BenchmarkParseMessage(b *testing.B) {
	files, _ := filepath.Glob("testdata/replies/*.eml")
	var msgs [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, raw)
	}
	opts := corpusOptions(time.Time{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ParseMessage(msgs[i%len(msgs)], opts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
