package main

import (
	"bytes"
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// trail is approval id's event trail as the API serves it; it must
// verify.
func (p *policyPeer) trail(t *testing.T, id string) []store.ApprovalEvent {
	t.Helper()
	var v struct {
		Events   []store.ApprovalEvent
		Verified bool
	}
	if code := p.d.do("GET", "/v1/approvals/"+id+"/events", nil, "", &v); code != 200 || !v.Verified {
		t.Fatalf("events of %s: %d, verified %v", id, code, v.Verified)
	}
	return v.Events
}

func kindsOf(evs []store.ApprovalEvent) string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, " ")
}

// mails are the dev mailbox's messages whose subject contains s.
func (p *policyPeer) mails(s string) []*mail.Message {
	var out []*mail.Message
	for _, m := range p.d.inbox("") {
		subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
		if strings.Contains(subject, s) {
			out = append(out, m)
		}
	}
	return out
}

// replyTo answers mail m from the dev mailbox with text, through SMTP.
func (p *policyPeer) replyTo(t *testing.T, m *mail.Message, msgID, text string) {
	t.Helper()
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	rt, err := mail.ParseAddress(m.Header.Get("Reply-To"))
	if err != nil {
		t.Fatal(err)
	}
	id := m.Header.Get("Message-Id")
	p.d.sendMail("you@beachd.localhost", rt.Address, fmt.Sprintf("From: You <you@beachd.localhost>\nTo: %s\nSubject: Re: %s\nMessage-ID: <%s@beachd.localhost>\nIn-Reply-To: %s\nReferences: %s\nContent-Type: text/plain; charset=utf-8\n\n%s\n", rt.Address, subject, msgID, id, id, text))
}

// TestPolicyLadderEndToEnd: a ladder of two steps under the built-in
// daemon's clock, with the A2A JS SDK agent holding the turn. The first
// step (a mailbox, through real SMTP and IMAP) gets one reminder after a
// second; two seconds later the second step (two SMS numbers) is asked
// with codes of their own. One of them grants by SMS, the first step's
// person grants by a mail reply, and the agent receives exactly one
// decision naming both; the trail verifies and tells it in order.
func TestPolicyLadderEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server and the JS SDK agent")
	}
	const bob, carol, customer = "+15555550151", "+15555550152", "+15555550159"
	p := startPolicyPeer(t, config.PolicyConfig{Name: "ladder", Match: config.PolicyMatch{Agent: "travel"}, Quorum: 2,
		Steps: []config.PolicyStep{
			{To: config.StepTo{Members: []config.StepMember{{Recipient: envelope.Recipient{Channel: "email", Address: "you@beachd.localhost"}}}},
				RemindAfter: time.Second, EscalateAfter: 3 * time.Second},
			{To: config.StepTo{Members: []config.StepMember{{Recipient: envelope.Recipient{Channel: "sms", Address: bob}},
				{Recipient: envelope.Recipient{Channel: "sms", Address: carol}}}}},
		}})
	if code, out := p.ask(t, "pol_l1", `[{"channel":"sms","address":"`+customer+`"}]`); code != 202 {
		t.Fatalf("ingest: %d %v", code, out)
	}
	poll.Eventually(t, 20*time.Second, "the reminder mail", func() bool { return len(p.mails("Reminder:")) > 0 })
	if got := p.smsTo(bob, "Reply YES"); len(got) != 0 {
		t.Fatalf("bob was asked before the escalation: %q", got)
	}
	bobCode := smsCode(t, p.d, bob) // the escalation
	smsCode(t, p.d, carol)
	if res := p.d.devReply("sms", bob, "YES "+bobCode); res.Outcome != "counted" {
		t.Fatalf("bob's grant: %+v", res)
	}
	reminder := p.mails("Reminder:")[0]
	var body bytes.Buffer
	body.ReadFrom(reminder.Body)
	if !strings.Contains(body.String(), "I need your approval to book BA2043") {
		t.Fatalf("the reminder does not carry the request:\n%s", body.String())
	}
	p.replyTo(t, reminder, "pol-l1", "Approve")
	p.exactlyOne(t, "pol_l1", "granted", "policy:ladder ("+bob+", you@beachd.localhost)")
	if n := len(p.mails("Reminder:")); n != 1 {
		t.Fatalf("%d reminders, want 1", n)
	}
	want := "asked reminded asked asked escalated voted voted decided injected"
	if got := kindsOf(p.trail(t, "pol_l1")); got != want {
		t.Fatalf("trail %s\nwant %s", got, want)
	}
}

// TestPolicyQuietHoursEndToEnd: an escalation that comes within the
// policy's quiet hours asks its SMS recipient only when they end: the
// message is stored, due then, and not sent; the request is decided
// meanwhile by the first step and injected once.
func TestPolicyQuietHoursEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server and the JS SDK agent")
	}
	const dave, customer = "+15555550161", "+15555550169"
	now := time.Now().UTC()
	hm := func(t time.Time) string { return fmt.Sprintf("%02d:%02d", t.Hour(), t.Minute()) }
	from, to := hm(now.Add(-time.Hour)), hm(now.Add(2*time.Hour))
	p := startPolicyPeer(t, config.PolicyConfig{Name: "quiet", Match: config.PolicyMatch{Agent: "travel"},
		Steps: []config.PolicyStep{
			{To: config.StepTo{Members: []config.StepMember{{Recipient: envelope.Recipient{Channel: "email", Address: "you@beachd.localhost"}}}},
				EscalateAfter: time.Second},
			{To: config.StepTo{Members: []config.StepMember{{Recipient: envelope.Recipient{Channel: "sms", Address: dave}}}}},
		},
		QuietHours: &config.QuietHoursConfig{Zone: "UTC", From: from, To: to}})
	if code, out := p.ask(t, "pol_qh", `[{"channel":"sms","address":"`+customer+`"}]`); code != 202 {
		t.Fatalf("ingest: %d %v", code, out)
	}
	var asked store.ApprovalEvent
	poll.Eventually(t, 20*time.Second, "the escalation in the trail", func() bool {
		for _, e := range p.trail(t, "pol_qh") {
			if e.Kind == store.EventAsked && e.Channel == "sms" {
				asked = e
				return true
			}
		}
		return false
	})
	due, err := time.Parse(time.RFC3339, asked.Evidence["due"])
	if err != nil || due.Format("15:04") != to || !due.After(time.Now()) {
		t.Fatalf("dave's message is due %q, want the end of the quiet hours (%s UTC)", asked.Evidence["due"], to)
	}
	var d struct{ State string }
	if code := p.d.do("GET", "/v1/deliveries/"+asked.Evidence["delivery"], nil, "", &d); code != 200 || d.State != "queued" {
		t.Fatalf("dave's delivery: %d %+v, want queued", code, d)
	}
	var m *mail.Message
	poll.Eventually(t, 20*time.Second, "the approval mail", func() bool {
		if ms := p.mails("BA2043"); len(ms) > 0 {
			m = ms[0]
		}
		return m != nil
	})
	p.replyTo(t, m, "pol-qh", "Approve")
	p.exactlyOne(t, "pol_qh", "granted", "policy:quiet (you@beachd.localhost)")
	if got := p.smsTo(dave, ""); len(got) != 0 {
		t.Fatalf("dave was texted within the quiet hours: %q", got)
	}
}
