package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/emersion/go-imap/v2/imapclient"
)

var latencyN = flag.Int("latency", 0, "measure decision latency over this many approvals per channel (TestApprovalLatency)")

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p/100)]
}

var bannerAgent = regexp.MustCompile(`agent@beachd\.localhost\s+password (\S+)`)

// TestApprovalLatency measures, over -latency N approvals each, the time
// from a reply APPENDed to the agent's IMAP mailbox (the intake waits in
// IDLE) to the decision reaching the a2a-go agent, and from a signed Twilio
// webhook POST to the decision reaching the agent. Run it with
//
//	go test ./cmd/beachd -run TestApprovalLatency -latency 200 -v
func TestApprovalLatency(t *testing.T) {
	if *latencyN <= 0 {
		t.Skip("pass -latency N to measure")
	}
	n := *latencyN
	tw := twiliotest.Start(t, fakeTwilioAccount, fakeTwilioToken)
	const token = fakeTwilioToken
	d := startDev(t, func(c *config.Config) {
		c.Twilio = &config.TwilioConfig{AccountSID: fakeTwilioAccount, AuthToken: token, APIBaseURL: tw.URL,
			SMSFrom: "+15550001111", RatePerSecond: 1000, Burst: 1000}
	})
	agentPass := bannerAgent.FindStringSubmatch(strings.Join(d.a.banner, "\n"))
	if agentPass == nil {
		t.Fatal("no agent mailbox in the banner")
	}

	// Email: N approvals, then for each a reply appended to the agent's
	// mailbox as an MTA would deliver it.
	for i := 0; i < n; i++ {
		d.requestApproval(fmt.Sprintf("lat_mail_%d", i), `[{"channel":"email","address":"you@beachd.localhost"}]`)
	}
	tokens := map[string]string{} // approval id → token
	tokRe := regexp.MustCompile(`agent\+([a-z2-7]{26})@`)
	poll.Eventually(t, 120*time.Second, "every approval mail", func() bool {
		for _, m := range d.inbox("") {
			rt := m.Header.Get("Reply-To")
			if tk := tokRe.FindStringSubmatch(rt); tk != nil {
				tokens[rt] = tk[1]
			}
		}
		return len(tokens) >= n
	})
	c, err := imapclient.DialInsecure(d.imap, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("agent@beachd.localhost", agentPass[1]).Wait(); err != nil {
		t.Fatal(err)
	}
	var mailLat []time.Duration
	i := 0
	for rt, tk := range tokens {
		addr, _ := mail.ParseAddress(rt)
		raw := fmt.Sprintf("From: You <you@beachd.localhost>\r\nTo: %s\r\nSubject: Re: approval\r\nMessage-ID: <lat-%d@beachd.localhost>\r\nContent-Type: text/plain\r\n\r\nApprove\r\n", addr.Address, i)
		i++
		start := time.Now()
		cmd := c.Append("INBOX", int64(len(raw)), nil)
		cmd.Write([]byte(raw))
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		var id string
		poll.Eventually(t, 30*time.Second, "the mailed decision at the agent", func() bool {
			for j := 0; j < n; j++ {
				cand := fmt.Sprintf("lat_mail_%d", j)
				if at, ok := d.a.devAgent.receivedFor(cand); ok && at.After(start) {
					if id == "" {
						id = cand
						mailLat = append(mailLat, at.Sub(start))
					}
					return true
				}
			}
			return false
		})
		_ = tk
	}

	// Twilio: N approvals by SMS, each answered by a signed webhook.
	for i := 0; i < n; i++ {
		d.requestApproval(fmt.Sprintf("lat_sms_%d", i), fmt.Sprintf(`[{"channel":"sms","address":"+1555600%04d"}]`, i))
	}
	codeRe := regexp.MustCompile(`YES (\d+)`)
	codes := map[int]string{}
	poll.Eventually(t, 120*time.Second, "every approval SMS", func() bool {
		for _, m := range tw.Created() {
			var i int
			if _, err := fmt.Sscanf(m.To, "+1555600%04d", &i); err != nil {
				continue
			}
			if c := codeRe.FindStringSubmatch(m.Body); c != nil {
				codes[i] = c[1]
			}
		}
		return len(codes) == n
	})
	hook := d.a.cfg.PublicURL + twilioInboundPath
	var smsLat []time.Duration
	for i := 0; i < n; i++ {
		form := url.Values{"AccountSid": {fakeTwilioAccount}, "MessageSid": {fmt.Sprintf("SMin%030d", i)},
			"From": {fmt.Sprintf("+1555600%04d", i)}, "To": {"+15550001111"}, "Body": {"YES " + codes[i]}, "NumMedia": {"0"}}
		req, _ := http.NewRequest("POST", hook, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", twilio.Signature(token, hook, form))
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte("<Response>")) {
			t.Fatalf("webhook: %d %s", resp.StatusCode, b)
		}
		id := fmt.Sprintf("lat_sms_%d", i)
		poll.Eventually(t, 30*time.Second, "the SMS decision at the agent", func() bool {
			at, ok := d.a.devAgent.receivedFor(id)
			if ok {
				smsLat = append(smsLat, at.Sub(start))
			}
			return ok
		})
	}
	out := map[string]any{
		"approvals":                n,
		"imapAppendToInjection":    map[string]float64{"p50ms": ms(percentile(mailLat, 50)), "p99ms": ms(percentile(mailLat, 99))},
		"twilioWebhookToInjection": map[string]float64{"p50ms": ms(percentile(smsLat, 50)), "p99ms": ms(percentile(smsLat, 99))},
	}
	b, _ := json.Marshal(out)
	t.Logf("%s", b)
	if len(mailLat) != n || len(smsLat) != n {
		t.Fatalf("measured %d mail and %d SMS decisions of %d", len(mailLat), len(smsLat), n)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
