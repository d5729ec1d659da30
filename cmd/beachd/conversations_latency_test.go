//go:build conversations_wip

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
)

// TestConversationLatency measures, over -latency N inbound mails and N
// inbound SMS (N ≥ 200 for the figures the README quotes), the time from
// a mail APPENDed to the agent's Dovecot mailbox (the intake waits in
// IDLE) to its turn reaching the a2a-go agent, from a signed Twilio
// webhook POST to its turn reaching the agent, and from the agent's
// answer (its task first seen completed) to the answer handed to the SMTP
// server or created at Twilio. Each message is sent once the previous one
// is answered. It asserts only that every message made its turn and its
// answer. Run it with
//
//	go test ./cmd/beachd -run TestConversationLatency -latency 200 -v
func TestConversationLatency(t *testing.T) {
	if *latencyN <= 0 {
		t.Skip("pass -latency N to measure")
	}
	n := *latencyN
	ag := agenttest.Start()
	t.Cleanup(ag.Close)
	rec := startAgentRecorder(t, ag.URL)
	mp := startMailPeer(t)
	sink := &smtptest.Server{Keep: true}
	smtpPort, _ := smtptest.Start(t, sink, smtptest.Plain)
	tw := twiliotest.Start(t, fakeTwilioAccount, fakeTwilioToken)
	cd := startConvDaemon(t, rec.URL, mp, smtpPort, tw.URL, "")
	cd.start()
	defer cd.stop()
	imapc := mp.login()
	defer imapc.Close()
	hc := &http.Client{Timeout: 10 * time.Second}

	// waitTurn returns the turn carrying marker and when its answer left
	// the agent.
	waitTurn := func(marker string) (agentTurn, time.Time) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if ts := rec.Turns(marker); len(ts) > 0 {
				if at, ok := rec.Answered(ts[0].MessageID); ok {
					if n := distinctMessages(ts); n != 1 {
						t.Fatalf("%s made %d turns", marker, n)
					}
					return ts[0], at
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no answered turn for %s within 30s\n%s", marker, cd.stderr)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitSent := func(what string, sent func() (time.Time, bool)) time.Time {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if at, ok := sent(); ok {
				return at
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not sent within 30s\n%s", what, cd.stderr)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	mailAt, mailSeen := map[string]time.Time{}, 0
	var mailIn, mailOut, smsIn, smsOut []time.Duration
	for i := 0; i < n; i++ {
		marker := fmt.Sprintf("lm%05d", i)
		from := fmt.Sprintf("p%03d@people.test", i)
		mp.deliver(imapc, plainMail(from, convAgentEmail, "Latency "+marker, "<"+marker+"@people.test>", "", "Latency mail "+marker))
		appended := time.Now()
		turn, answered := waitTurn(marker)
		mailIn = append(mailIn, turn.At.Sub(appended))
		sent := waitSent("the mail answer to "+marker, func() (time.Time, bool) {
			msgs := sink.Messages()
			for _, m := range msgs[mailSeen:] {
				if pm, err := mail.ReadMessage(bytes.NewReader(m.Raw)); err == nil {
					for _, mk := range latencyMarker.FindAllString(mailText(pm), -1) {
						if _, dup := mailAt[mk]; !dup {
							mailAt[mk] = m.At
						}
					}
				}
			}
			mailSeen = len(msgs)
			at, ok := mailAt[marker]
			return at, ok
		})
		mailOut = append(mailOut, sent.Sub(answered))
	}
	for i := 0; i < n; i++ {
		marker := fmt.Sprintf("ls%05d", i)
		from := fmt.Sprintf("+4477009%05d", i)
		start := time.Now()
		if code, body := cd.sms(hc, fmt.Sprintf("SMlat%030d", i), from, "Latency text "+marker); code/100 != 2 {
			t.Fatalf("webhook %d: %d %s", i, code, body)
		}
		turn, answered := waitTurn(marker)
		smsIn = append(smsIn, turn.At.Sub(start))
		sent := waitSent("the SMS answer to "+marker, func() (time.Time, bool) {
			for _, m := range tw.Created() {
				if m.To == from && strings.Contains(m.Body, marker) {
					return m.Created, true
				}
			}
			return time.Time{}, false
		})
		smsOut = append(smsOut, sent.Sub(answered))
	}
	out := map[string]any{
		"mails":                   len(mailIn),
		"sms":                     len(smsIn),
		"imapAppendToTurn":        map[string]float64{"p50ms": ms(percentile(mailIn, 50)), "p99ms": ms(percentile(mailIn, 99))},
		"twilioWebhookToTurn":     map[string]float64{"p50ms": ms(percentile(smsIn, 50)), "p99ms": ms(percentile(smsIn, 99))},
		"agentAnswerToSMTP":       map[string]float64{"p50ms": ms(percentile(mailOut, 50)), "p99ms": ms(percentile(mailOut, 99))},
		"agentAnswerToTwilioSend": map[string]float64{"p50ms": ms(percentile(smsOut, 50)), "p99ms": ms(percentile(smsOut, 99))},
	}
	b, _ := json.Marshal(out)
	t.Logf("%s", b)
	if len(mailIn) != n || len(smsIn) != n || len(mailOut) != n || len(smsOut) != n {
		t.Fatalf("measured %d/%d mail and %d/%d SMS turns/answers of %d", len(mailIn), len(mailOut), len(smsIn), len(smsOut), n)
	}
}

var latencyMarker = regexp.MustCompile(`lm\d{5}`)
