package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"
)

// devDaemon is `beachd dev` run in-process on :0 ports.
type devDaemon struct {
	t      *testing.T
	a      *app
	base   string
	key    string
	imap   string // dev IMAP address
	smtp   string // dev SMTP address
	you    string // your mailbox password
	cancel context.CancelFunc
	done   chan error
}

var bannerIMAP = regexp.MustCompile(`SMTP (127\.0\.0\.1:\d+), IMAP (127\.0\.0\.1:\d+)`)
var bannerYou = regexp.MustCompile(`you@beachd\.localhost\s+password (\S+)`)

func startDev(t *testing.T, mods ...func(*config.Config)) *devDaemon {
	t.Helper()
	return startDevApp(t, nil, mods...)
}

// startDevApp is startDev with hook called on the built app before it runs.
func startDevApp(t *testing.T, hook func(*app), mods ...func(*config.Config)) *devDaemon {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	key := "dev-test-key-0123456789"
	cfg := devConfig(ln.Addr().String(), t.TempDir(), key, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	for _, m := range mods {
		m(cfg)
	}
	reg, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := buildApp(ctx, cfg, reg, log, io.Discard, true, ln)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	d := &devDaemon{t: t, a: a, base: "http://" + ln.Addr().String(), key: key, cancel: cancel, done: make(chan error, 1)}
	banner := strings.Join(a.banner, "\n")
	m := bannerIMAP.FindStringSubmatch(banner)
	y := bannerYou.FindStringSubmatch(banner)
	if m == nil || y == nil {
		cancel()
		t.Fatalf("dev banner lacks the mail server:\n%s", banner)
	}
	d.smtp, d.imap, d.you = m[1], m[2], y[1]
	if hook != nil {
		hook(a)
	}
	go func() { d.done <- a.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-d.done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("daemon did not stop")
		}
	})
	poll.Eventually(t, 10*time.Second, "the daemon to be ready", func() bool { return a.readyErr() == nil })
	return d
}

func (d *devDaemon) do(method, path string, body io.Reader, contentType string, out any) int {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.base+path, body)
	req.Header.Set("Authorization", "Bearer "+d.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// runNow fires the schedule name by hand (POST /v1/schedules/name/run).
func (d *devDaemon) runNow(name string) {
	d.t.Helper()
	if code := d.do("POST", "/v1/schedules/"+name+"/run", nil, "", nil); code != 202 {
		d.t.Fatalf("run now: %d", code)
	}
}

// waitSink waits (what, up to 30s) for an envelope carrying text at the
// dev webhook sink.
func (d *devDaemon) waitSink(what, text string) {
	d.t.Helper()
	poll.Eventually(d.t, 30*time.Second, what, func() bool {
		var sink struct {
			Received []struct{ Envelope json.RawMessage }
		}
		d.do("GET", "/dev/sink", nil, "", &sink)
		for _, r := range sink.Received {
			if bytes.Contains(r.Envelope, []byte(text)) {
				return true
			}
		}
		return false
	})
}

// succeededRun waits (what, up to limit) for the only schedule's last run
// to have succeeded and returns how it was answered (push or poll).
func (d *devDaemon) succeededRun(limit time.Duration, what string) (answeredBy string) {
	d.t.Helper()
	var list struct {
		Schedules []struct {
			Last struct{ State, AnsweredBy string }
		}
	}
	poll.Eventually(d.t, limit, what, func() bool {
		d.do("GET", "/v1/schedules", nil, "", &list)
		return len(list.Schedules) == 1 && list.Schedules[0].Last.State == "succeeded"
	})
	return list.Schedules[0].Last.AnsweredBy
}

// approve posts dev-approval.json with a fresh approval id and recipients.
func (d *devDaemon) requestApproval(id string, to string) {
	d.t.Helper()
	raw, err := os.ReadFile("../../testdata/dev-approval.json")
	if err != nil {
		d.t.Fatal(err)
	}
	// Each approval suspends its own turn.
	body := strings.Replace(string(raw), "appr_dev_1", id, 1)
	body = strings.ReplaceAll(body, "turn_xyz789", "turn_"+id)
	var req map[string]json.RawMessage
	json.Unmarshal([]byte(body), &req)
	req["to"] = json.RawMessage(to)
	b, _ := json.Marshal(req)
	var out map[string]any
	if code := d.do("POST", "/v1/deliveries", bytes.NewReader(b), "application/json", &out); code != 202 {
		d.t.Fatalf("approval request: %d %v", code, out)
	}
}

type received struct {
	Received []struct {
		TaskID           string
		ApprovalResponse struct {
			ApprovalID, Decision, Reason, DecidedBy string
			DecidedAt                               time.Time
		}
	}
}

func (d *devDaemon) agentReceived() received {
	var r received
	d.do("GET", "/dev/agent/received", nil, "", &r)
	return r
}

func (d *devDaemon) approvalState(id string) string {
	var a struct{ State string }
	d.do("GET", "/v1/approvals/"+id, nil, "", &a)
	return a.State
}

// inbox returns the messages in your dev mailbox whose subject contains s.
func (d *devDaemon) inbox(s string) []*mail.Message {
	d.t.Helper()
	c, err := imapclient.DialInsecure(d.imap, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("you@beachd.localhost", d.you).Wait(); err != nil {
		d.t.Fatal(err)
	}
	sel, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil || sel.NumMessages == 0 {
		return nil
	}
	var set imap.SeqSet
	set.AddRange(1, sel.NumMessages)
	sec := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(set, &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil {
		d.t.Fatal(err)
	}
	var out []*mail.Message
	for _, m := range msgs {
		pm, err := mail.ReadMessage(bytes.NewReader(m.FindBodySection(sec)))
		if err == nil && strings.Contains(pm.Header.Get("Subject"), s) {
			out = append(out, pm)
		}
	}
	return out
}

func (d *devDaemon) sendMail(from, to, raw string) {
	d.t.Helper()
	c, err := smtp.Dial(d.smtp)
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close()
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	if err := c.SendMail(from, []string{to}, strings.NewReader(raw)); err != nil {
		d.t.Fatal(err)
	}
}

// TestApprovalEndToEnd: an agent suspends on an approval-request; beachd
// mails it (real SMTP into the dev mailbox), texts it (recorded SMS) and
// posts it (webhook); the person answers by mail through real SMTP, the
// reply comes back through the real IMAP intake, and the dev a2a-go agent
// receives exactly one approval-response with the right fields. The other
// channels then have no effect. A forwarded mail answered from another
// address has no effect; a link page GET changes nothing, its POST decides;
// an SMS code from the right number decides.
func TestApprovalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	d := startDev(t)
	all := `[{"channel":"email","address":"you@beachd.localhost"},{"channel":"sms","address":"+15555550100"},{"channel":"webhook","endpoint":"dev-sink"}]`

	// 1. Email reply decides.
	d.requestApproval("appr_e2e_mail", all)
	var msg *mail.Message
	poll.Eventually(t, 20*time.Second, "the approval mail", func() bool {
		ms := d.inbox("BA2043")
		if len(ms) > 0 {
			msg = ms[0]
		}
		return msg != nil
	})
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	replyTo, msgID := msg.Header.Get("Reply-To"), msg.Header.Get("Message-Id")
	if !regexp.MustCompile(`\[approval:[a-z2-7]{26}\]`).MatchString(subject) {
		t.Fatalf("subject has no approval token: %q", subject)
	}
	if msg.Header.Get("Auto-Submitted") != "auto-generated" {
		t.Errorf("Auto-Submitted = %q", msg.Header.Get("Auto-Submitted"))
	}
	rt, err := mail.ParseAddress(replyTo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rt.Address, "agent+") {
		t.Fatalf("Reply-To %q is not a plus-address", replyTo)
	}
	d.sendMail("you@beachd.localhost", rt.Address, fmt.Sprintf("From: You <you@beachd.localhost>\nTo: %s\nSubject: Re: %s\nMessage-ID: <reply-1@beachd.localhost>\nIn-Reply-To: %s\nReferences: %s\nContent-Type: text/plain; charset=utf-8\n\nApproved, within budget\n\nOn Sat, 21 Nov 2026 at 09:30, beachd dev agent <agent@beachd.localhost> wrote:\n> I'm ready to book British Airways BA2043\n", rt.Address, subject, msgID, msgID))
	poll.Eventually(t, 30*time.Second, "the injected decision", func() bool { return len(d.agentReceived().Received) == 1 })
	got := d.agentReceived().Received[0]
	ar := got.ApprovalResponse
	if ar.ApprovalID != "appr_e2e_mail" || ar.Decision != "granted" || ar.Reason != "within budget" || ar.DecidedBy != "you@beachd.localhost" || ar.DecidedAt.IsZero() || got.TaskID != "turn_appr_e2e_mail" {
		t.Fatalf("agent received %+v", got)
	}
	if st := d.approvalState("appr_e2e_mail"); st != "granted" {
		t.Fatalf("state %q", st)
	}

	// The SMS recipient answers too late: no second effect.
	code := smsCode(t, d, "+15555550100")
	d.devReply("sms", "+15555550100", "NO "+code)
	time.Sleep(300 * time.Millisecond) // give a wrong second injection the chance to happen
	if n := len(d.agentReceived().Received); n != 1 {
		t.Fatalf("the agent received %d decisions for one approval", n)
	}

	// 2. A forwarded mail answered by someone else has no effect.
	d.requestApproval("appr_e2e_fwd", `[{"channel":"email","address":"you@beachd.localhost"}]`)
	var fwd *mail.Message
	poll.Eventually(t, 20*time.Second, "the second approval mail", func() bool {
		for _, m := range d.inbox("approv") {
			subj, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
			if m.Header.Get("Message-Id") != msgID && strings.Contains(subj, "[approval:") {
				fwd = m
			}
		}
		return fwd != nil
	})
	frt, _ := mail.ParseAddress(fwd.Header.Get("Reply-To"))
	fsubj, _ := new(mime.WordDecoder).DecodeHeader(fwd.Header.Get("Subject"))
	d.sendMail("mallory@elsewhere.example", frt.Address, fmt.Sprintf("From: Mallory <mallory@elsewhere.example>\nTo: %s\nSubject: Re: %s\nMessage-ID: <fwd-1@elsewhere.example>\nIn-Reply-To: %s\nContent-Type: text/plain\n\nyes\n", frt.Address, fsubj, fwd.Header.Get("Message-Id")))
	// The intake processes it (it leaves the inbox) but nothing is decided.
	poll.Eventually(t, 20*time.Second, "the forged reply to be processed", func() bool {
		var a json.RawMessage
		d.do("GET", "/v1/approvals/appr_e2e_fwd", nil, "", &a)
		return strings.Contains(string(a), `"wrong-sender"`)
	})
	if st := d.approvalState("appr_e2e_fwd"); st != "pending" {
		t.Fatalf("a reply from another address changed the approval to %q", st)
	}

	// 3. The link page: GET and HEAD change nothing; POST decides.
	d.requestApproval("appr_e2e_link", `[{"channel":"webhook","endpoint":"dev-sink"}]`)
	link := sinkLink(t, d, "appr_e2e_link")
	var page []byte
	for _, m := range []string{"HEAD", "GET", "GET"} {
		req, _ := http.NewRequest(m, link, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %v %v", m, link, resp, err)
		}
		page, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if !bytes.Contains(page, []byte("BA2043")) {
		t.Errorf("the confirmation page does not say what is approved:\n%s", page)
	}
	if bytes.Contains(page, []byte("ZgotmplZ")) {
		t.Errorf("html/template refused part of the page (ZgotmplZ):\n%s", page)
	}
	if st := d.approvalState("appr_e2e_link"); st != "pending" {
		t.Fatalf("opening the link page changed the approval to %q", st)
	}
	postLinkForm(t, link, page, "denied")
	poll.Eventually(t, 20*time.Second, "the link decision injected", func() bool {
		for _, r := range d.agentReceived().Received {
			if r.ApprovalResponse.ApprovalID == "appr_e2e_link" {
				return r.ApprovalResponse.Decision == "denied"
			}
		}
		return false
	})

	// 4. An SMS code from the right number decides; the same code from
	// another number decides nothing: it is no approval answer of theirs,
	// so (beachd dev lets anybody write to the dev agent) it is a message
	// in a conversation with the agent.
	d.requestApproval("appr_e2e_sms", `[{"channel":"sms","address":"+15555550102"}]`)
	code = smsCode(t, d, "+15555550102")
	if res := d.devReply("sms", "+15555550199", "YES "+code); res.ApprovalID != "" || res.Outcome != "turn" || res.Conversation == "" {
		t.Errorf("/dev/reply from another number: %+v; want no approval, a conversation turn", res)
	}
	time.Sleep(300 * time.Millisecond)
	if st := d.approvalState("appr_e2e_sms"); st != "pending" {
		t.Fatalf("a code from another number decided: %q", st)
	}
	if res := d.devReply("sms", "+15555550102", "YES "+code); res.ApprovalID != "appr_e2e_sms" || res.Decision != "granted" || res.Outcome != "decided" {
		t.Errorf("/dev/reply: %+v; want the approval it decided", res)
	}
	poll.Eventually(t, 20*time.Second, "the SMS decision injected", func() bool {
		for _, r := range d.agentReceived().Received {
			if r.ApprovalResponse.ApprovalID == "appr_e2e_sms" {
				return r.ApprovalResponse.Decision == "granted" && r.ApprovalResponse.DecidedBy == "+15555550102"
			}
		}
		return false
	})
	per := map[string]int{}
	for _, r := range d.agentReceived().Received {
		per[r.ApprovalResponse.ApprovalID]++
	}
	for id, n := range per {
		if n != 1 {
			t.Errorf("%s injected %d times", id, n)
		}
	}
}

// devReply answers as a phone would, and returns what /dev/reply says
// became of the answer.
func (d *devDaemon) devReply(channel, from, body string) twilio.DevReplyResult {
	d.t.Helper()
	form := url.Values{"channel": {channel}, "from": {from}, "body": {body}}
	resp, err := http.PostForm(d.base+"/dev/reply", form)
	if err != nil {
		d.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		d.t.Fatalf("dev reply: %d %s", resp.StatusCode, b)
	}
	var res twilio.DevReplyResult
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		d.t.Fatalf("dev reply answered %s %q: %v", resp.Header.Get("Content-Type"), b, err)
	}
	return res
}

type devMessages struct {
	Messages []struct{ To, Body, Channel string }
}

func (d *devDaemon) messages() devMessages {
	var m devMessages
	d.do("GET", "/dev/messages", nil, "", &m)
	return m
}

var codeRe = regexp.MustCompile(`YES (\d{4,8})`)

// smsCode waits for the approval SMS to the number `to` and returns its code.
func smsCode(t *testing.T, d *devDaemon, to string) string {
	t.Helper()
	var code string
	poll.Eventually(t, 20*time.Second, "the approval SMS", func() bool {
		ms := d.messages().Messages
		for i := len(ms) - 1; i >= 0; i-- {
			if m := codeRe.FindStringSubmatch(ms[i].Body); m != nil && ms[i].Channel == "sms" && ms[i].To == to {
				code = m[1]
				return true
			}
		}
		return false
	})
	return code
}

// sinkLink waits for the webhook carrying approval id and returns its
// decision link (metadata.decisionUrl of the approval-request part).
func sinkLink(t *testing.T, d *devDaemon, id string) string {
	t.Helper()
	link, _ := sinkApprovalMeta(t, d, id)["decisionUrl"].(string)
	if link == "" {
		t.Fatalf("the approval-request part of %s carries no decisionUrl", id)
	}
	return link
}

// sinkApprovalMeta waits for the webhook carrying approval id and returns
// the metadata of its approval-request part.
func sinkApprovalMeta(t *testing.T, d *devDaemon, id string) map[string]any {
	t.Helper()
	var meta map[string]any
	poll.Eventually(t, 20*time.Second, "the approval webhook", func() bool {
		var sink struct {
			Received []struct {
				Envelope struct {
					Parts []struct {
						Data     map[string]any
						Metadata map[string]any
					}
				}
			}
		}
		d.do("GET", "/dev/sink", nil, "", &sink)
		for _, r := range sink.Received {
			for _, p := range r.Envelope.Parts {
				if p.Metadata["partType"] == "approval-request" && p.Data["approvalId"] == id {
					meta = p.Metadata
					return true
				}
			}
		}
		return false
	})
	return meta
}

var formRe = regexp.MustCompile(`(?s)<form[^>]*method="post"[^>]*>(.*?)</form>`)
var hiddenRe = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"`)
var buttonRe = regexp.MustCompile(`<button[^>]*name="([^"]+)"[^>]*value="([^"]*)"`)

// postLinkForm does what a browser does when the button whose value is
// decision is pressed: it posts the form's hidden fields and that button.
func postLinkForm(t *testing.T, link string, page []byte, decision string) {
	t.Helper()
	for _, f := range formRe.FindAllSubmatch(page, -1) {
		vals := url.Values{}
		for _, in := range hiddenRe.FindAllSubmatch(f[1], -1) {
			vals.Add(string(in[1]), string(in[2]))
		}
		pressed := vals.Get("decision") == decision // one form per decision
		for _, b := range buttonRe.FindAllSubmatch(f[1], -1) {
			if string(b[2]) == decision {
				vals.Set(string(b[1]), decision)
				pressed = true
			}
		}
		if !pressed {
			continue
		}
		vals.Set("reason", "over budget")
		resp, err := http.PostForm(link, vals)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d\n%s", link, resp.StatusCode, body)
		}
		return
	}
	t.Fatalf("no form with a %q button on the page:\n%s", decision, page)
}

// TestReadinessSaysStopping: once shutdown begins /readyz answers 503
// "stopping" (a load balancer drains the daemon), not "starting: …" as the
// workers end one by one.
func TestReadinessSaysStopping(t *testing.T) {
	d := startDev(t)
	d.cancel()
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatal(err)
		}
		d.done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop")
	}
	if err := d.a.readyErr(); err == nil || err.Error() != "stopping" {
		t.Fatalf("readyErr after shutdown = %v, want stopping", err)
	}
}
