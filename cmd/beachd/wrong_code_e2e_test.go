package main

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestMistypedCodeIsAnsweredNotChatted: in the daemon, a number with an
// approval waiting texts the agent's number a mistyped code ("YES 111111")
// — by SMS, then by WhatsApp. It is not a chat turn: the approval stays
// pending, the answer says the code does not match and shows the right
// one (the number's own), the dev agent gets no message from that number.
// After too many wrong codes, the answer says so without any code.
func TestMistypedCodeIsAnsweredNotChatted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	d := startDev(t)
	for _, c := range []struct{ channel, number, id string }{
		{"sms", "+447700900301", "appr_typo_sms"},
		{"whatsapp", "+447700900302", "appr_typo_wa"},
	} {
		t.Run(c.channel, func(t *testing.T) {
			d.requestApproval(c.id, `[{"channel":"`+c.channel+`","address":"`+c.number+`"}]`)
			// The SMS shows its code; WhatsApp shows Approve/Deny buttons
			// (the code is there for typed answers): a five-digit code is
			// wrong whatever the code is.
			code, wrong := "", "11111"
			if c.channel == "sms" {
				code = d.waitCode(c.channel, c.number)
				if wrong = "111111"; code == wrong {
					wrong = "222222"
				}
			} else {
				d.waitButtons(c.number, c.id)
			}
			res := d.devReply(c.channel, c.number, "YES "+wrong)
			if res.Outcome != "wrong-code" || res.Conversation != "" || res.ApprovalID != c.id {
				t.Fatalf("a mistyped code: %+v; want wrong-code about %s and no conversation", res, c.id)
			}
			answer := d.waitMessage(c.channel, c.number, "does not match")
			switch {
			case strings.Contains(answer, wrong):
				t.Fatalf("the answer %q repeats the wrong code", answer)
			case c.channel == "sms" && !strings.Contains(answer, "YES "+code+" or NO "+code):
				t.Fatalf("the answer %q does not give the right code", answer)
			case c.channel == "whatsapp":
				if n := d.countButtons(c.number, "does not match", c.id); n != 2 {
					t.Fatalf("the answer %q carries %d buttons for %s, want Approve and Deny", answer, n, c.id)
				}
			}
			if st := d.approvalState(c.id); st != "pending" {
				t.Fatalf("approval %s after a mistyped code", st)
			}
			// More wrong codes lock the code for this number (5 by default):
			// the answer then names no code, once.
			for range 4 {
				d.devReply(c.channel, c.number, "yes "+wrong)
			}
			locked := d.waitMessage(c.channel, c.number, "Too many wrong codes")
			if regexp.MustCompile(`\b\d{4,10}\b`).MatchString(locked) || d.countButtons(c.number, "Too many wrong codes", c.id) != 0 {
				t.Fatalf("the lock's answer carries a code or buttons: %q", locked)
			}
			if c.channel == "sms" {
				if res := d.devReply(c.channel, c.number, "YES "+code); res.Outcome != "rate-limited" || res.Conversation != "" {
					t.Fatalf("the right code while locked: %+v", res)
				}
			}
			if st := d.approvalState(c.id); st != "pending" {
				t.Fatalf("approval %s while locked", st)
			}
			if n := d.countMessages(c.channel, c.number, "Too many wrong codes"); n != 1 {
				t.Fatalf("%d lock answers, want 1", n)
			}
			// None of these texts reached the agent as a chat message: it
			// would have answered "turn 1 of conversation …".
			if n := d.countMessages(c.channel, c.number, "of conversation"); n != 0 {
				t.Fatalf("the agent answered %d of these texts as chat", n)
			}
		})
	}
}

// TestMistypedCodeThroughTheTwilioWebhook: the built daemon, its SMS going
// to Prism serving Twilio's OpenAPI description, a person's texts coming
// through the signed webhook. A number with an approval waiting texts the
// agent's number "YES" and a wrong code: no turn reaches the agent, the
// approval stays pending, and the SMS beachd sends back (accepted by the
// Twilio peer) says the code does not match and gives the right one.
func TestMistypedCodeThroughTheTwilioWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon with its peers")
	}
	prism := twiliotest.StartPrism(t, "the mistyped-code test's Twilio peer", twiliotest.SpecMessages)
	ag := agenttest.Start()
	t.Cleanup(ag.Close)
	rec := startAgentRecorder(t, ag.URL)
	mp := startMailPeer(t)
	smtpPort, _ := smtptest.Start(t, &smtptest.Server{}, smtptest.Plain)
	tw := startTwilioRecorder(t, prism)
	cd := startConvDaemon(t, rec.URL, mp, smtpPort, tw.URL, "")
	cd.start()
	defer cd.stop()
	const person = "+447700900501"

	raw, err := os.ReadFile("../../testdata/dev-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	req["to"] = json.RawMessage(`[{"channel":"sms","address":"` + person + `"}]`)
	req["agent"] = json.RawMessage(`"travel"`)
	body, _ := json.Marshal(req)
	if code, out, err := cd.post(string(body)); err != nil || code != 202 {
		t.Fatalf("approval request: %d %s %v", code, out, err)
	}
	var code string
	poll.Eventually(t, 30*time.Second, "the approval SMS at the Twilio peer", func() bool {
		for _, m := range tw.Sent("Reply YES") {
			if mm := anyCodeRe.FindStringSubmatch(m.Body); mm != nil && m.To == person {
				code = mm[1]
				return true
			}
		}
		return false
	})
	wrong := "111111"
	if code == wrong {
		wrong = "222222"
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if status, out := cd.sms(hc, "SMtypo0000000000000000000000000001", person, "YES "+wrong); status/100 != 2 {
		t.Fatalf("webhook: %d %s", status, out)
	}
	var answer string
	poll.Eventually(t, 30*time.Second, "the answer to the mistyped code at the Twilio peer", func() bool {
		for _, m := range tw.Sent("does not match") {
			if m.To == person {
				answer = m.Body
				return true
			}
		}
		return false
	})
	if !strings.Contains(answer, "Reply YES "+code+" or NO "+code) || strings.Contains(answer, wrong) {
		t.Fatalf("the answer %q does not give the right code (or repeats the wrong one)", answer)
	}
	var inbound struct {
		Inbound []struct{ Disposition, Reason, TurnID, ConversationID string }
	}
	if status, err := getJSON(cd.base, "/v1/inbound?channel=sms", &inbound); status != 200 || err != nil || len(inbound.Inbound) != 1 {
		t.Fatalf("inbound: %d %v %+v", status, err, inbound)
	}
	if in := inbound.Inbound[0]; in.Disposition != "approval" || in.Reason != "wrong-code" || in.TurnID != "" || in.ConversationID != "" {
		t.Fatalf("the mistyped code was recorded %+v; want an approval answer (wrong-code), no turn", in)
	}
	var a struct{ State string }
	if status, err := getJSON(cd.base, "/v1/approvals/appr_dev_1", &a); status != 200 || err != nil || a.State != "pending" {
		t.Fatalf("approval: %d %v %q", status, err, a.State)
	}
	if n := len(rec.All()); n != 0 {
		t.Fatalf("%d messages reached the agent as turns", n)
	}
	if refused := tw.Refused(); len(refused) != 0 {
		t.Fatalf("the Twilio peer refused %+v", refused)
	}
}

var anyCodeRe = regexp.MustCompile(`YES (\d{4,8})`)

// waitCode waits for the approval request to number on channel and returns
// its code.
func (d *devDaemon) waitCode(channel, number string) string {
	d.t.Helper()
	var code string
	poll.Eventually(d.t, 20*time.Second, "the approval request to "+number, func() bool {
		for _, m := range d.messages().Messages {
			if mm := anyCodeRe.FindStringSubmatch(m.Body); mm != nil && m.Channel == channel && m.To == number {
				code = mm[1]
				return true
			}
		}
		return false
	})
	return code
}

// waitMessage waits for a message to number on channel containing marker.
func (d *devDaemon) waitMessage(channel, number, marker string) string {
	d.t.Helper()
	var body string
	poll.Eventually(d.t, 20*time.Second, "a message to "+number+" saying "+marker, func() bool {
		for _, m := range d.messages().Messages {
			if m.Channel == channel && m.To == number && strings.Contains(m.Body, marker) {
				body = m.Body
				return true
			}
		}
		return false
	})
	return body
}

// countMessages counts the messages to number on channel containing marker.
func (d *devDaemon) countMessages(channel, number, marker string) int {
	n := 0
	for _, m := range d.messages().Messages {
		if m.Channel == channel && m.To == number && strings.Contains(m.Body, marker) {
			n++
		}
	}
	return n
}

// devButtons are the WhatsApp messages of /dev/messages with their buttons.
type devButtons struct {
	Messages []struct {
		To, Body, Channel string
		Buttons           []struct{ Title, Payload string }
	}
}

// waitButtons waits for a WhatsApp message to number with buttons for
// approval id.
func (d *devDaemon) waitButtons(number, id string) {
	d.t.Helper()
	poll.Eventually(d.t, 20*time.Second, "the WhatsApp approval request to "+number, func() bool {
		return d.countButtons(number, "", id) > 0
	})
}

// countButtons counts the buttons for approval id on WhatsApp messages to
// number containing marker.
func (d *devDaemon) countButtons(number, marker, id string) int {
	var m devButtons
	d.do("GET", "/dev/messages", nil, "", &m)
	n := 0
	for _, msg := range m.Messages {
		if msg.Channel != "whatsapp" || msg.To != number || !strings.Contains(msg.Body, marker) {
			continue
		}
		for _, b := range msg.Buttons {
			if strings.HasPrefix(b.Payload, id+":") {
				n++
			}
		}
	}
	return n
}
