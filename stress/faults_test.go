package stress

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/rs/zerolog"

	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// Each scenario builds a rig (store, dispatcher, the three deliverers,
// toxiproxy in front of each peer), ingests envelopes to all four
// channels, injects its fault, and checks that every delivery ends sent
// (at its peer) or dead-lettered with the right reason, and that
// goroutines and open descriptors come back to where they were.

const perScenario = 6 // envelopes; ×4 deliveries

func scenario(t *testing.T, name string, opt rigOptions, body func(r *rig) func(*store.Delivery) outcome) {
	t.Run(name, func(t *testing.T) {
		var v verdict
		start := time.Now()
		before, after := noLeak(t, func() {
			r := newRig(t, opt)
			expect := body(r)
			r.settle(60 * time.Second)
			v = r.check(expect)
			r.close()
		})
		writeFaultResult(t, faultResult{Scenario: name, Verdict: v, Before: before, After: after, Took: time.Since(start).Round(time.Millisecond).String()})
	})
}

func TestMain(m *testing.M) {
	// toxiproxy's toxics log through zerolog's global logger at trace level.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	os.Exit(m.Run())
}

func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite: a few seconds per scenario")
	}
	all := []string{"web", "smtp", "twilio"}

	scenario(t, "baseline", rigOptions{}, func(r *rig) func(*store.Delivery) outcome {
		r.ingest("base", perScenario)
		return allSent
	})

	scenario(t, "latency", rigOptions{}, func(r *rig) func(*store.Delivery) outcome {
		for _, p := range all {
			toxic(t, r.proxies[p], "lat-down", "latency", "downstream", map[string]any{"latency": 40, "jitter": 20})
			toxic(t, r.proxies[p], "lat-up", "latency", "upstream", map[string]any{"latency": 10})
		}
		r.ingest("lat", perScenario)
		return allSent
	})

	scenario(t, "bandwidth", rigOptions{}, func(r *rig) func(*store.Delivery) outcome {
		for _, p := range all {
			// 8 KB/s each way: an email of ~10 KB takes more than a second
			// to write, so the attempt timeout (1 s) is hit and retried.
			toxic(t, r.proxies[p], "bw-up", "bandwidth", "upstream", map[string]any{"rate": 2})
			toxic(t, r.proxies[p], "bw-down", "bandwidth", "downstream", map[string]any{"rate": 2})
		}
		r.ingest("bw", perScenario)
		// Let some attempts crawl, then lift the limit so the rest go.
		poll.Eventually(t, 20*time.Second, "attempts under the bandwidth limit", func() bool { return r.attemptsSoFar() >= 4 })
		for _, p := range all {
			untoxic(t, r.proxies[p], "bw-up")
		}
		return allSent
	})

	scenario(t, "reset_peer", rigOptions{}, func(r *rig) func(*store.Delivery) outcome {
		for _, p := range all {
			toxic(t, r.proxies[p], "reset", "reset_peer", "upstream", map[string]any{"timeout": 0})
		}
		r.ingest("rst", perScenario)
		poll.Eventually(t, 20*time.Second, "failed attempts on reset connections", func() bool { return r.attemptsSoFar() >= 8 })
		for _, p := range all {
			untoxic(t, r.proxies[p], "reset")
		}
		return allSent
	})

	// The connection is cut after some bytes of the request: inside SMTP
	// DATA (the envelope commands are ~100 bytes, the message ~10 KB),
	// inside the webhook body, inside Twilio's form.
	scenario(t, "cut_mid_transfer", rigOptions{}, func(r *rig) func(*store.Delivery) outcome {
		toxic(t, r.proxies["smtp"], "cut", "limit_data", "upstream", map[string]any{"bytes": 600})
		toxic(t, r.proxies["web"], "cut", "limit_data", "upstream", map[string]any{"bytes": 400})
		toxic(t, r.proxies["twilio"], "cut", "limit_data", "upstream", map[string]any{"bytes": 300})
		r.ingest("cut", perScenario)
		poll.Eventually(t, 20*time.Second, "a DATA cut mid-message", func() bool { return r.smtp.Stats().Partial >= 2 })
		poll.Eventually(t, 20*time.Second, "failed attempts", func() bool { return r.attemptsSoFar() >= 8 })
		for _, p := range all {
			untoxic(t, r.proxies[p], "cut")
		}
		return allSent
	})

	scenario(t, "timeout", rigOptions{}, func(r *rig) func(*store.Delivery) outcome {
		for _, p := range all {
			// Data stops flowing and the connection stays open.
			toxic(t, r.proxies[p], "stall", "timeout", "downstream", map[string]any{"timeout": 0})
		}
		r.ingest("to", perScenario)
		poll.Eventually(t, 20*time.Second, "attempts that timed out", func() bool { return r.attemptsSoFar() >= 8 })
		for _, p := range all {
			untoxic(t, r.proxies[p], "stall")
		}
		return allSent
	})

	downOpt := rigOptions{}
	if os.Getenv("BEACHD_STRESS_LONG") != "" {
		downOpt.Policy = fastPolicy(10 * time.Minute) // outlives the 2-minute outage
	}
	scenario(t, "peer_down_then_back", downOpt, func(r *rig) func(*store.Delivery) outcome {
		for _, p := range all {
			r.proxies[p].Stop()
		}
		r.ingest("down", perScenario)
		down := time.Now()
		poll.Eventually(t, 20*time.Second, "refused attempts", func() bool { return r.attemptsSoFar() >= 12 })
		// Down for a while (seconds here: the retry schedule is scaled down
		// to 100–800 ms; BEACHD_STRESS_LONG=1 keeps it down for 2 minutes).
		if os.Getenv("BEACHD_STRESS_LONG") != "" {
			for time.Since(down) < 2*time.Minute {
				time.Sleep(100 * time.Millisecond)
			}
		}
		for _, p := range all {
			if err := r.proxies[p].Start(); err != nil {
				t.Fatalf("restart proxy %s: %v", p, err)
			}
		}
		return allSent
	})

	scenario(t, "peer_down_for_good", rigOptions{Policy: fastPolicy(1500 * time.Millisecond)}, func(r *rig) func(*store.Delivery) outcome {
		for _, p := range all {
			r.proxies[p].Stop()
		}
		r.ingest("gone", perScenario)
		return func(*store.Delivery) outcome { return outcome{state: store.StateDead, reason: "gave up after"} }
	})

	// Peers answering errors: temporary ones (5xx, 429 with Retry-After,
	// SMTP 4xx) are retried until the peer accepts; permanent ones (HTTP
	// 400, Twilio 21211, SMTP 550) are dead-lettered at once.
	var mu sync.Mutex
	seen := map[string]int{}
	retryAfterWeb := map[string]time.Time{}
	var raViolations []string
	webStatus := func(n int, req *http.Request) (int, http.Header) {
		id := req.Header.Get("webhook-id")
		mu.Lock()
		defer mu.Unlock()
		seen[id]++
		if strings.Contains(req.URL.RawQuery, "refuse") {
			return 0, nil
		}
		switch seen[id] {
		case 1:
			return http.StatusServiceUnavailable, nil
		case 2:
			retryAfterWeb[id] = time.Now()
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
		case 3:
			if since := time.Since(retryAfterWeb[id]); since < 900*time.Millisecond {
				raViolations = append(raViolations, id+" retried after "+since.String())
			}
		}
		return 0, nil
	}
	scenario(t, "peer_errors", rigOptions{WebStatus: webStatus}, func(r *rig) func(*store.Delivery) outcome {
		var tmu sync.Mutex
		twSeen := map[string]int{}
		r.tw.Fail = func(n int, to, body string) *twiliotest.Reply {
			if strings.Contains(to, "+15005550001") {
				rep := twiliotest.Error(400, 21211, "The 'To' number +15005550001 is not a valid phone number.")
				return &rep
			}
			tmu.Lock()
			defer tmu.Unlock()
			twSeen[to+body]++
			switch twSeen[to+body] {
			case 1:
				rep := twiliotest.Error(503, 20500, "Service unavailable")
				return &rep
			case 2:
				rep := twiliotest.Error(429, 20429, "Too Many Requests")
				rep.Header["Retry-After"] = "1"
				return &rep
			}
			return nil
		}
		var smu sync.Mutex
		smSeen := map[string]int{}
		r.smtp.RcptRefuse = func(rcpt string) *smtp.SMTPError {
			if strings.HasPrefix(rcpt, "bounce@") {
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
			}
			return nil
		}
		r.smtp.Refuse = func(rcpts []string, id string) *smtp.SMTPError {
			smu.Lock()
			defer smu.Unlock()
			smSeen[id]++
			if smSeen[id] <= 2 {
				return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
			}
			return nil
		}
		r.ingest("err", perScenario)
		// Permanent refusals.
		r.ingest("perm", 2, store.NewDelivery{Channel: "email", To: "bounce@example.net"},
			store.NewDelivery{Channel: "sms", To: "+15005550001"})
		return func(d *store.Delivery) outcome {
			if d.To == "bounce@example.net" || d.To == "+15005550001" {
				return outcome{state: store.StateDead, reason: "permanent failure"}
			}
			return outcome{state: store.StateSent}
		}
	})
	mu.Lock()
	for _, v := range raViolations {
		t.Errorf("Retry-After not honoured: %s", v)
	}
	mu.Unlock()

	scenario(t, "webhook_4xx", rigOptions{WebStatus: func(n int, req *http.Request) (int, http.Header) {
		return http.StatusBadRequest, nil
	}}, func(r *rig) func(*store.Delivery) outcome {
		r.ingest("w4xx", perScenario, store.NewDelivery{Channel: "webhook", To: "sink"})
		return func(*store.Delivery) outcome { return outcome{state: store.StateDead, reason: "permanent failure"} }
	})
}
