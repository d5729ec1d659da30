package approvals

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// BenchmarkInboundToInjection measures the time from HandleInbound (an
// email-shaped reply, sender-bound, parsed, decided and committed with
// fsync) to the moment the real a2a-go agent server has received the
// approval-response, one approval after another. It reports p50/p99 over
// b.N approvals (run with -benchtime=200x or more), and the same figures
// for a raw baseline measured in the same run: agent.Client.Inject called
// directly, with no store and no decision.
//
//	go test ./approvals -run XXX -bench InboundToInjection -benchtime 300x
func BenchmarkInboundToInjection(b *testing.B) {
	h := newHarness(b, harnessOpt{})
	n := b.N
	type item struct {
		env   *envelope.Envelope
		token string
		id    string
	}
	items := make([]item, n)
	for i := range n {
		id := fmt.Sprintf("bench-%d", i)
		env := h.suspend(id)
		items[i] = item{env: env, token: h.handle(h.ingest(env, email(alice))[0]).Token, id: id}
	}
	lat := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i, it := range items {
		start := time.Now()
		res, err := h.svc.HandleInbound(h.ctx, envelope.Inbound{Channel: "email", From: alice, MessageID: fmt.Sprintf("<b%d@x>", i), Token: it.token, Text: "yes"})
		if err != nil || res.Outcome != OutcomeDecided {
			b.Fatalf("%+v %v", res, err)
		}
		got := h.waitReceived(i + 1)
		if r := got[i]; r.Response.ApprovalID != it.id {
			b.Fatalf("received %s, want %s", r.Response.ApprovalID, it.id)
		}
		lat = append(lat, got[i].At.Sub(start))
	}
	b.StopTimer()
	// Baseline: the same agent, a direct Inject into fresh suspended turns.
	base := make([]time.Duration, 0, n)
	for i := range n {
		env := h.suspend(fmt.Sprintf("base-%d", i))
		start := time.Now()
		// Retried like the injector does: right after a turn suspends,
		// a2a-go may still be closing its execution and answers "internal
		// error" (task execution is already in progress).
		for try := 0; ; try++ {
			err := h.client.Inject(h.ctx, "travel", env.Meta.SessionID, env.Meta.TurnID,
				envelope.ApprovalResponse{ApprovalID: fmt.Sprint("base-", i), Decision: "granted", DecidedAt: start})
			if err == nil {
				break
			}
			if try == 50 {
				b.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		got := h.waitReceived(n + i + 1)
		base = append(base, got[n+i].At.Sub(start))
	}
	p := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(lat, 0.50), "p50-ms")
	b.ReportMetric(p(lat, 0.99), "p99-ms")
	b.ReportMetric(p(base, 0.50), "raw-p50-ms")
	b.ReportMetric(p(base, 0.99), "raw-p99-ms")
	b.ReportMetric(p(lat, 0.50)/p(base, 0.50), "p50-ratio")
	b.ReportMetric(float64(n), "approvals")
}
