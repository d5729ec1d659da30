package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// policyPeer is beachd dev (its real SMTP and IMAP mail server, recorded
// SMS) with the A2A JS SDK 1.x agent as the travel agent and the given
// approval policies.
type policyPeer struct {
	d      *devDaemon
	js     *a2ajstest.Server
	client *agent.Client
}

func startPolicyPeer(t *testing.T, policies ...config.PolicyConfig) *policyPeer {
	t.Helper()
	js := a2ajstest.Start(t, a2ajstest.Options{})
	d := startDev(t, func(c *config.Config) {
		c.Agents["travel"] = config.AgentConfig{A2AURL: js.JSONRPC, Timeout: 10 * time.Second}
		c.Approvals.Policies = policies
	})
	client, err := agent.New(map[string]agent.Target{"travel": {URL: js.JSONRPC}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &policyPeer{d: d, js: js, client: client}
}

// ask holds a turn of the JS agent on approval id and posts its envelope
// to `to` (JSON), returning the HTTP status and body.
func (p *policyPeer) ask(t *testing.T, id, to string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	turn, err := p.client.StartTurn(ctx, "travel", "approve:"+id, "")
	if err != nil {
		t.Fatal(err)
	}
	env, err := p.client.WaitTurn(ctx, "travel", turn, 20*time.Millisecond)
	if err != nil || env.Meta.FinalizedBy != "suspended" {
		t.Fatalf("held turn: %+v, %v", env, err)
	}
	body, _ := json.Marshal(map[string]any{"envelope": env, "agent": "travel", "to": json.RawMessage(to)})
	var out map[string]any
	code := p.d.do("POST", "/v1/deliveries", bytes.NewReader(body), "application/json", &out)
	return code, out
}

// injected is what the JS agent received for approval id, in order.
func (p *policyPeer) injected(t *testing.T, id string) []map[string]any {
	t.Helper()
	return jsInjected(t, p.js, id)
}

// jsInjected is what the JS agent js received for approval id, in order.
func jsInjected(t *testing.T, js *a2ajstest.Server, id string) []map[string]any {
	t.Helper()
	r, err := js.Received(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, a := range r.Approvals {
		if a.Response["approvalId"] == id {
			out = append(out, a.Response)
		}
	}
	return out
}

// exactlyOne waits for the agent to receive approval id's decision, gives
// a wrong second injection the chance to happen, and checks there is one,
// with decision and decidedBy. It returns when the first one was seen.
func (p *policyPeer) exactlyOne(t *testing.T, id, decision, decidedBy string) time.Time {
	t.Helper()
	poll.Eventually(t, 20*time.Second, "the decision at the agent", func() bool { return len(p.injected(t, id)) > 0 })
	seen := time.Now()
	time.Sleep(300 * time.Millisecond) // a second injection would come now
	got := p.injected(t, id)
	if len(got) != 1 || got[0]["decision"] != decision || got[0]["decidedBy"] != decidedBy {
		t.Fatalf("the agent received %v for %s, want one %s by %q", got, id, decision, decidedBy)
	}
	return seen
}

// smsTo is the recorded SMS texts to number containing s.
func (p *policyPeer) smsTo(number, s string) []string {
	var out []string
	for _, m := range p.d.messages().Messages {
		if m.Channel == "sms" && m.To == number && strings.Contains(m.Body, s) {
			out = append(out, m.Body)
		}
	}
	return out
}

// TestPolicyAutoGrantEndToEnd: a request a policy decides at ingest is
// injected into the JS SDK agent at once, exactly once, with decidedBy
// "policy:<name>"; the mail and the SMS still carry the agent's text and
// say it was decided by the policy, with no token, code or link.
func TestPolicyAutoGrantEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server and the JS SDK agent")
	}
	p := startPolicyPeer(t, config.PolicyConfig{Name: "small-groups",
		Match: config.PolicyMatch{Agent: "travel", Tool: "book_flight", When: "int(args.seats) <= 6"}, Decide: policy.DecideGranted})
	code, out := p.ask(t, "pol_auto", `[{"channel":"email","address":"you@beachd.localhost"},{"channel":"sms","address":"+15555550131"}]`)
	start := time.Now()
	if code != 202 {
		t.Fatalf("ingest: %d %v", code, out)
	}
	seen := p.exactlyOne(t, "pol_auto", "granted", "policy:small-groups")
	t.Logf("auto-granted: at the agent %s after the request was accepted", seen.Sub(start).Round(time.Millisecond))
	if st := p.d.approvalState("pol_auto"); st != "granted" {
		t.Fatalf("state %q", st)
	}
	var msg *mail.Message
	poll.Eventually(t, 20*time.Second, "the mail", func() bool {
		if ms := p.d.inbox("BA2043"); len(ms) > 0 {
			msg = ms[0]
		}
		return msg != nil
	})
	subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	var body bytes.Buffer
	body.ReadFrom(msg.Body)
	if strings.Contains(subject, "[approval:") || strings.Contains(body.String(), "/a/") || !strings.Contains(body.String(), "Approved automatically by policy small-groups") ||
		!strings.Contains(body.String(), "I need your approval to book BA2043") {
		t.Fatalf("mail %q:\n%s\nwant the agent's text, the policy's decision and no way to answer", subject, body.String())
	}
	var sms []string
	poll.Eventually(t, 20*time.Second, "the SMS", func() bool {
		sms = p.smsTo("+15555550131", "BA2043")
		return len(sms) > 0
	})
	if strings.Contains(sms[0], "Reply YES") || !strings.Contains(sms[0], "Approved automatically by policy small-groups") {
		t.Fatalf("SMS %q: want the policy's decision and no code", sms[0])
	}
}

// TestPolicyQuorumEndToEnd: two of three people, asked by SMS and email,
// must grant. One grant by SMS is acknowledged with the tally and injects
// nothing; the second, by a mail reply through real SMTP and IMAP,
// resolves the policy and the JS SDK agent gets exactly one decision
// naming the policy and both deciders. Then a denial vetoes a second
// request after a grant.
func TestPolicyQuorumEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server and the JS SDK agent")
	}
	const bob, carol = "+15555550141", "+15555550142"
	p := startPolicyPeer(t, config.PolicyConfig{Name: "two-of-three", Match: config.PolicyMatch{Agent: "travel"}, Quorum: 2,
		Steps: []config.PolicyStep{{To: config.StepTo{Members: []config.StepMember{
			{Recipient: envelope.Recipient{Channel: "email", Address: "you@beachd.localhost"}},
			{Recipient: envelope.Recipient{Channel: "sms", Address: bob}},
			{Recipient: envelope.Recipient{Channel: "sms", Address: carol}},
		}}}}})
	const customer = "+15555550149"
	if code, out := p.ask(t, "pol_q1", `[{"channel":"sms","address":"`+customer+`"}]`); code != 202 {
		t.Fatalf("ingest: %d %v", code, out)
	}
	// The customer is told, not asked.
	poll.Eventually(t, 20*time.Second, "the customer's SMS", func() bool { return len(p.smsTo(customer, "BA2043")) > 0 })
	if got := p.smsTo(customer, "BA2043")[0]; strings.Contains(got, "Reply YES") || !strings.Contains(got, "awaits approval") {
		t.Fatalf("the customer was sent %q: want the request told, not asked", got)
	}
	if res := p.d.devReply("sms", bob, "YES "+smsCode(t, p.d, bob)); res.Outcome != "counted" {
		t.Fatalf("bob's grant: %+v", res)
	}
	poll.Eventually(t, 20*time.Second, "bob's acknowledgement", func() bool {
		return len(p.smsTo(bob, "Recorded: 1 of 2 approvals; waiting for the others.")) == 1
	})
	if got := p.injected(t, "pol_q1"); len(got) != 0 || p.d.approvalState("pol_q1") != "pending" {
		t.Fatalf("after one grant of two the agent got %v", got)
	}
	var msg *mail.Message
	poll.Eventually(t, 20*time.Second, "the approval mail", func() bool {
		if ms := p.d.inbox("BA2043"); len(ms) > 0 {
			msg = ms[0]
		}
		return msg != nil
	})
	subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	rt, err := mail.ParseAddress(msg.Header.Get("Reply-To"))
	if err != nil {
		t.Fatal(err)
	}
	id := msg.Header.Get("Message-Id")
	p.d.sendMail("you@beachd.localhost", rt.Address, fmt.Sprintf("From: You <you@beachd.localhost>\nTo: %s\nSubject: Re: %s\nMessage-ID: <pol-q1@beachd.localhost>\nIn-Reply-To: %s\nReferences: %s\nContent-Type: text/plain; charset=utf-8\n\nApprove\n", rt.Address, subject, id, id))
	p.exactlyOne(t, "pol_q1", "granted", "policy:two-of-three ("+bob+", you@beachd.localhost)")
	// Carol comes after the decision: no effect.
	if res := p.d.devReply("sms", carol, "NO "+smsCode(t, p.d, carol)); res.Outcome != "already-decided" {
		t.Fatalf("carol after the decision: %+v", res)
	}

	// One denial denies, whatever the grants before it.
	if code, out := p.ask(t, "pol_q2", `[{"channel":"sms","address":"`+customer+`"}]`); code != 202 {
		t.Fatalf("ingest: %d %v", code, out)
	}
	var bobCode string
	poll.Eventually(t, 20*time.Second, "bob's second request", func() bool {
		ms := p.smsTo(bob, "Reply YES")
		if len(ms) < 2 {
			return false
		}
		bobCode = codeRe.FindStringSubmatch(ms[len(ms)-1])[1]
		return true
	})
	if res := p.d.devReply("sms", bob, "YES "+bobCode); res.Outcome != "counted" {
		t.Fatalf("bob's grant: %+v", res)
	}
	var carolCode string
	poll.Eventually(t, 20*time.Second, "carol's second request", func() bool {
		ms := p.smsTo(carol, "Reply YES")
		if len(ms) < 2 {
			return false
		}
		carolCode = codeRe.FindStringSubmatch(ms[len(ms)-1])[1]
		return true
	})
	if res := p.d.devReply("sms", carol, "NO "+carolCode+" over budget"); res.Outcome != "decided" {
		t.Fatalf("carol's denial: %+v", res)
	}
	p.exactlyOne(t, "pol_q2", "denied", "policy:two-of-three ("+carol+")")
}

// TestPolicyQuorumUnreachableRefused: a policy whose quorum counts the
// request's own recipients refuses, with 400 naming the policy, a request
// with too few of them; nothing is stored.
func TestPolicyQuorumUnreachableRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with the JS SDK agent")
	}
	p := startPolicyPeer(t, config.PolicyConfig{Name: "two-of-envelope", Match: config.PolicyMatch{Agent: "travel"}, Quorum: 2})
	code, out := p.ask(t, "pol_q3", `[{"channel":"email","address":"you@beachd.localhost"}]`)
	if code != 400 || !strings.Contains(fmt.Sprint(out), "approval policy two-of-envelope needs 2 people") {
		t.Fatalf("ingest: %d %v; want 400 naming the policy", code, out)
	}
	if c := p.d.do("GET", "/v1/approvals/pol_q3", nil, "", nil); c != 404 {
		t.Fatalf("GET the refused approval: %d, want 404", c)
	}
}

// twilioPolicyPeer is the built daemon with its SMS going to Prism serving
// Twilio's OpenAPI description (through a recorder), the people's texts
// coming back through the signed webhook, and the A2A JS SDK agent
// holding the turns; policies is the approvals: section.
type twilioPolicyPeer struct {
	js     *a2ajstest.Server
	tw     *twilioRecorder
	cd     *convDaemon
	client *agent.Client
	hc     *http.Client
}

func startTwilioPolicyPeer(t *testing.T, policies string) *twilioPolicyPeer {
	t.Helper()
	prism := twiliotest.StartPrism(t, "the policy test's Twilio peer", twiliotest.SpecMessages)
	js := a2ajstest.Start(t, a2ajstest.Options{})
	mp := startMailPeer(t)
	smtpPort, _ := smtptest.Start(t, &smtptest.Server{}, smtptest.Plain)
	tw := startTwilioRecorder(t, prism)
	cd := startConvDaemon(t, js.JSONRPC, mp, smtpPort, tw.URL, policies)
	cd.start()
	t.Cleanup(cd.stop)
	client, err := agent.New(map[string]agent.Target{"travel": {URL: js.JSONRPC}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &twilioPolicyPeer{js: js, tw: tw, cd: cd, client: client, hc: &http.Client{Timeout: 10 * time.Second}}
}

// ask holds a turn of the agent on approval id and posts its envelope to
// the SMS number customer.
func (p *twilioPolicyPeer) ask(t *testing.T, id, customer string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	turn, err := p.client.StartTurn(ctx, "travel", "approve:"+id, "")
	if err != nil {
		t.Fatal(err)
	}
	env, err := p.client.WaitTurn(ctx, "travel", turn, 20*time.Millisecond)
	if err != nil || env.Meta.FinalizedBy != "suspended" {
		t.Fatalf("held turn: %+v, %v", env, err)
	}
	body, _ := json.Marshal(map[string]any{"envelope": env, "agent": "travel", "to": []map[string]string{{"channel": "sms", "address": customer}}})
	if code, out, err := p.cd.post(string(body)); err != nil || code != 202 {
		t.Fatalf("approval request: %d %s %v", code, out, err)
	}
}

// codeOf waits for an SMS with a code to number at the Twilio peer.
func (p *twilioPolicyPeer) codeOf(t *testing.T, number string) string {
	t.Helper()
	var code string
	poll.Eventually(t, 30*time.Second, "the approval SMS to "+number+" at the Twilio peer", func() bool {
		for _, m := range p.tw.Sent("Reply YES") {
			if mm := anyCodeRe.FindStringSubmatch(m.Body); mm != nil && m.To == number {
				code = mm[1]
				return true
			}
		}
		return false
	})
	return code
}

// text sends body from number through the signed webhook.
func (p *twilioPolicyPeer) text(t *testing.T, sid, number, body string) {
	t.Helper()
	if status, out := p.cd.sms(p.hc, sid, number, body); status/100 != 2 {
		t.Fatalf("webhook: %d %s", status, out)
	}
}

// acked waits for the tally's acknowledgement to number.
func (p *twilioPolicyPeer) acked(t *testing.T, number string) {
	t.Helper()
	poll.Eventually(t, 30*time.Second, "the acknowledgement to "+number+" at the Twilio peer", func() bool {
		for _, m := range p.tw.Sent("Recorded: 1 of 2 approvals; waiting for the others.") {
			if m.To == number {
				return true
			}
		}
		return false
	})
}

// exactlyOne waits for approval id's decision at the agent and checks it
// came once, granted by decidedBy.
func (p *twilioPolicyPeer) exactlyOne(t *testing.T, id, decidedBy string) {
	t.Helper()
	injected := func() []map[string]any { return jsInjected(t, p.js, id) }
	poll.Eventually(t, 30*time.Second, "the decision at the agent", func() bool { return len(injected()) > 0 })
	time.Sleep(300 * time.Millisecond) // a second injection would come now
	if got := injected(); len(got) != 1 || got[0]["decision"] != "granted" || got[0]["decidedBy"] != decidedBy {
		t.Fatalf("the agent received %v, want one grant by %s", got, decidedBy)
	}
	if refused := p.tw.Refused(); len(refused) != 0 {
		t.Fatalf("the Twilio peer refused %+v", refused)
	}
}

// TestPolicyQuorumThroughTwilio: two of three must grant, by SMS through
// Twilio's OpenAPI description under Prism: the first grant is
// acknowledged with the tally (an SMS the Twilio peer accepts), the second
// resolves the policy, and the agent receives exactly one decision naming
// both; the customer, in no step, is never asked.
func TestPolicyQuorumThroughTwilio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon with its peers")
	}
	const ann, ben, cat, customer = "+447700900601", "+447700900602", "+447700900603", "+447700900609"
	p := startTwilioPolicyPeer(t, `approvals:
  policies:
    - name: two-of-three
      match: { agent: travel, tool: book_flight }
      quorum: 2
      steps:
        - to: [ {channel: sms, address: "`+ann+`"}, {channel: sms, address: "`+ben+`"}, {channel: sms, address: "`+cat+`"} ]
`)
	p.ask(t, "pol_tw", customer)
	annCode, benCode := p.codeOf(t, ann), p.codeOf(t, ben)
	p.text(t, "SMpolicy00000000000000000000000001", ann, "YES "+annCode)
	p.acked(t, ann)
	p.text(t, "SMpolicy00000000000000000000000002", ben, "yes "+benCode)
	p.exactlyOne(t, "pol_tw", "policy:two-of-three ("+ann+", "+ben+")")
	for _, m := range p.tw.Sent("BA2043") {
		if m.To == customer && strings.Contains(m.Body, "Reply YES") {
			t.Fatalf("the customer, in no step, was asked: %q", m.Body)
		}
	}
}

// TestPolicyLadderThroughTwilio: a ladder by SMS through Twilio's OpenAPI
// description under Prism. The first step's person gets one reminder
// after a second, and grants; three seconds after the request the second
// step's person is asked with a code of their own, and grants; the agent
// receives exactly one decision naming both.
func TestPolicyLadderThroughTwilio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon with its peers")
	}
	const ann, ben, customer = "+447700900611", "+447700900612", "+447700900619"
	p := startTwilioPolicyPeer(t, `approvals:
  policies:
    - name: ladder
      match: { agent: travel, tool: book_flight }
      quorum: 2
      steps:
        - to: [ {channel: sms, address: "`+ann+`"} ]
          remind_after: 1s
          escalate_after: 3s
        - to: [ {channel: sms, address: "`+ben+`"} ]
`)
	p.ask(t, "pol_twl", customer)
	annCode := p.codeOf(t, ann)
	poll.Eventually(t, 30*time.Second, "the reminder at the Twilio peer", func() bool { return len(p.tw.Sent("Reminder:")) > 0 })
	if r := p.tw.Sent("Reminder:")[0]; r.To != ann || !strings.Contains(r.Body, "YES "+annCode) {
		t.Fatalf("reminder %+v: want ann's, with her code", r)
	}
	p.text(t, "SMpolicyladder00000000000000000001", ann, "YES "+annCode)
	p.acked(t, ann)
	benCode := p.codeOf(t, ben) // the escalation
	p.text(t, "SMpolicyladder00000000000000000002", ben, "YES "+benCode)
	p.exactlyOne(t, "pol_twl", "policy:ladder ("+ann+", "+ben+")")
	if n := len(p.tw.Sent("Reminder:")); n != 1 {
		t.Fatalf("%d reminders, want one", n)
	}
}
