package approvals

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

const alice, bob, aliceNum, bobNum = "alice@example.org", "bob@example.org", "+447700900123", "+447700900999"

func checkReceived(t *testing.T, h *harness, env *envelope.Envelope, id, decision, by string) {
	t.Helper()
	h.waitReceived(1)
	h.settle()
	got := h.agent.Received()
	if len(got) != 1 {
		t.Fatalf("agent received %d approval-responses, want exactly 1: %+v", len(got), got)
	}
	r := got[0]
	if r.ContextID != env.Meta.SessionID || r.TaskID != env.Meta.TurnID || r.Metadata["partType"] != "approval-response" {
		t.Fatalf("injected into %s/%s with metadata %v; want %s/%s", r.ContextID, r.TaskID, r.Metadata, env.Meta.SessionID, env.Meta.TurnID)
	}
	if r.Response.ApprovalID != id || r.Response.Decision != decision || r.Response.DecidedBy != by || r.Response.DecidedAt.IsZero() {
		t.Fatalf("response %+v, want %s %s by %s", r.Response, id, decision, by)
	}
	inj, err := h.db.ListInjections(h.ctx, store.InjectionDone, 10)
	if err != nil || len(inj) != 1 {
		t.Fatalf("done injections %v, %v", inj, err)
	}
}

// (a) An email-shaped reply from the recipient decides; the agent gets
// exactly one approval-response; replays and later replies have no effect.
func TestEmailReplyDecides(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-email")
	ds := h.ingest(env, email("Alice@Example.org"))
	hd := h.handle(ds[0])
	if !regexp.MustCompile(`^[a-z2-7]{26}$`).MatchString(hd.Token) || !strings.HasPrefix(hd.LinkURL, "https://beachd.example.org/a/") {
		t.Fatalf("handle %+v", hd)
	}
	res := h.inbound(envelope.Inbound{Channel: "email", From: "ALICE@example.org", MessageID: "<r1@mail>", Token: hd.Token,
		TokenSource: "subject", Text: "Yes - go ahead\n\nAlice"})
	if res.Outcome != OutcomeDecided || res.Decision != "granted" || res.Reason != "go ahead" {
		t.Fatalf("result %+v", res)
	}
	checkReceived(t, h, env, "appr-email", "granted", alice)
	if got := h.enq.To(alice); len(got) != 1 || !strings.HasPrefix(got[0], "Approved: Book BA2043 for 6 people.") {
		t.Fatalf("confirmation %q", got)
	}
	// The same message again: no second effect.
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r1@mail>", Token: hd.Token, Text: "yes"}); res.Outcome != OutcomeDuplicate {
		t.Fatalf("replay: %+v", res)
	}
	// Another reply (changing her mind): already decided, told so.
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r2@mail>", Token: hd.Token, Text: "no"}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("second decision: %+v", res)
	}
	h.settle()
	if n := len(h.agent.Received()); n != 1 {
		t.Fatalf("agent received %d", n)
	}
	if got := h.enq.To(alice); len(got) != 2 || !strings.Contains(got[1], "already approved at") {
		t.Fatalf("confirmations %q", got)
	}
	if n := counterValue(h.metrics.inbound.WithLabelValues("email", OutcomeDecided)); n != 1 {
		t.Errorf("decided metric %v", n)
	}
	if n := counterValue(h.metrics.inbound.WithLabelValues("email", OutcomeDuplicate)); n != 1 {
		t.Errorf("duplicate metric %v", n)
	}
	if n := counterValue(h.metrics.injections.WithLabelValues("done")); n != 1 {
		t.Errorf("injections metric %v", n)
	}
	a := h.approval("appr-email")
	if a.State != store.ApprovalGranted || a.Channel != "email" || a.MessageID != "<r1@mail>" || a.DecidedBy != alice {
		t.Fatalf("approval %+v", a)
	}
	// (An "injection-failed" may precede "injected": a2a-go can refuse a
	// message while the suspended turn's execution is still closing.)
	if ev := slices.DeleteFunc(h.audit("appr-email"), func(e string) bool { return e == "injection-failed" }); !slices.Equal(ev, []string{"created", "decided", "injected", "already-decided"}) {
		t.Fatalf("audit %v", ev)
	}
}

// (b) An SMS with the code from the recipient's number decides; the code
// is worthless from another number; wrong codes lock the number.
func TestSMSCodeFromNumber(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.MaxWrongCodes = 3 }})
	env := h.suspend("appr-sms")
	ds := h.ingest(env, sms(aliceNum))
	hd := h.handle(ds[0])
	if !regexp.MustCompile(`^[0-9]{6}$`).MatchString(hd.Code) {
		t.Fatalf("code %q", hd.Code)
	}
	// Right code, wrong number: nothing (and it counts as a wrong code for bob).
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: bobNum, MessageID: "SM1", Text: "YES " + hd.Code}); res.Outcome != OutcomeUnknownToken {
		t.Fatalf("wrong number: %+v", res)
	}
	// No code at all.
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "SM2", Text: "yes"}); res.Outcome != OutcomeNoToken {
		t.Fatalf("no code: %+v", res)
	}
	// Opt-out words never decide.
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "SM3", Text: "STOP " + hd.Code}); res.Outcome != OutcomeOptOut {
		t.Fatalf("stop: %+v", res)
	}
	res := h.inbound(envelope.Inbound{Channel: "sms", From: "whatsapp:" + aliceNum, MessageID: "SM4", Text: "no " + hd.Code + " too dear"})
	if res.Outcome != OutcomeDecided || res.Decision != "denied" || res.Reason != "too dear" {
		t.Fatalf("result %+v", res)
	}
	checkReceived(t, h, env, "appr-sms", "denied", aliceNum)
	if got := h.enq.To(aliceNum); len(got) != 1 || !strings.HasPrefix(got[0], "Denied: ") {
		t.Fatalf("confirmation %q", got)
	}
}

func TestSMSWrongCodesLockTheNumber(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.MaxWrongCodes = 3 }})
	env := h.suspend("appr-lock")
	hd := h.handle(h.ingest(env, sms(aliceNum))[0])
	wrong := "000000"
	if wrong == hd.Code {
		wrong = "000001"
	}
	var outcomes []string
	for i := range 3 {
		outcomes = append(outcomes, h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: fmt.Sprint("W", i), Text: "yes " + wrong}).Outcome)
	}
	if !slices.Equal(outcomes, []string{OutcomeWrongCode, OutcomeWrongCode, OutcomeRateLimited}) {
		t.Fatalf("outcomes %v", outcomes)
	}
	// Locked: even the right code is refused now.
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "R", Text: "yes " + hd.Code}); res.Outcome != OutcomeRateLimited {
		t.Fatalf("right code while locked: %+v", res)
	}
	if h.approval("appr-lock").State != store.ApprovalPending {
		t.Fatal("decided while locked")
	}
	// After the lock, the right code works.
	h.clock.Advance(25 * time.Hour)
	h.approval("appr-lock")
	res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "R2", Text: "yes " + hd.Code})
	// The approval's default expiry (24h) has passed by now: expired, not decided.
	if res.Outcome != OutcomeExpired {
		t.Fatalf("after lock: %+v", res)
	}
}

// (c) The link page: GET and HEAD change nothing; the POST from the page decides.
func TestLinkPage(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-link")
	hd := h.handle(h.ingest(env, email(alice))[0])
	mux := http.NewServeMux()
	mux.Handle("/a/{token}", h.svc.LinkHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	link := srv.URL + strings.TrimPrefix(hd.LinkURL, "https://beachd.example.org")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for range 3 {
		for _, m := range []string{"GET", "HEAD"} {
			req, _ := http.NewRequest(m, link, nil)
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") ||
				res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Referrer-Policy") != "no-referrer" ||
				// THREATS #7: the page cannot be framed (clickjacking).
				res.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Fatalf("%s: %d %v", m, res.StatusCode, res.Header)
			}
		}
	}
	if a := h.approval("appr-link"); a.State != store.ApprovalPending {
		t.Fatalf("GET changed the state to %s", a.State)
	}
	if ev := h.audit("appr-link"); !slices.Equal(ev, []string{"created"}) {
		t.Fatalf("GET wrote audit %v", ev)
	}
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	for _, want := range []string{"Book BA2043 for 6 people", "book_flight", "go ahead with this action: <strong>Book flight</strong>", `<form method="post"`, `value="granted"`, `value="denied"`, "Expires"} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script") {
		t.Fatal("page has a script")
	}
	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(body)[1]

	// A POST without the page's nonce (a cross-site form, a scanner) is refused.
	res, err = noRedirect.PostForm(link, url.Values{"decision": {"granted"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || h.approval("appr-link").State != store.ApprovalPending {
		t.Fatalf("POST without nonce: %d", res.StatusCode)
	}
	// A POST naming both decisions decides nothing.
	res, err = noRedirect.PostForm(link, url.Values{"decision": {"granted", "denied"}, "nonce": {nonce}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || h.approval("appr-link").State != store.ApprovalPending {
		t.Fatalf("POST with both decisions: %d", res.StatusCode)
	}
	// A POST from another origin is refused.
	req, _ := http.NewRequest("POST", link, strings.NewReader(url.Values{"decision": {"granted"}, "nonce": {nonce}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if res, err = noRedirect.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %d", res.StatusCode)
	}
	res, err = noRedirect.PostForm(link, url.Values{"decision": {"granted"}, "nonce": {nonce}, "reason": {"fine by me"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST: %d", res.StatusCode)
	}
	checkReceived(t, h, env, "appr-link", "granted", alice)
	if r := h.agent.Received()[0].Response; r.Reason != "fine by me" {
		t.Fatalf("reason %q", r.Reason)
	}
	a := h.approval("appr-link")
	if a.Channel != ChannelLink {
		t.Fatalf("channel %q", a.Channel)
	}
	res, _ = http.Get(link)
	if body := readAll(t, res); !strings.Contains(body, "Approved by you at") || strings.Contains(body, "<form") || strings.Contains(body, alice) {
		t.Fatalf("page after decision:\n%s", body)
	}
	// Replaying the POST: no second effect.
	res, _ = noRedirect.PostForm(link, url.Values{"decision": {"denied"}, "nonce": {nonce}})
	res.Body.Close()
	h.settle()
	if len(h.agent.Received()) != 1 || h.approval("appr-link").State != store.ApprovalGranted {
		t.Fatal("replayed POST had an effect")
	}
	// A guessed token: the same "not valid" page as any other.
	res, _ = http.Get(srv.URL + "/a/" + strings.Repeat("a", 26))
	if res.StatusCode != 404 {
		t.Fatalf("guessed link: %d", res.StatusCode)
	}
	res.Body.Close()
	// The email token is not a link token.
	res, _ = http.Get(srv.URL + "/a/" + hd.Token)
	if res.StatusCode != 404 {
		t.Fatalf("email token as link: %d", res.StatusCode)
	}
	res.Body.Close()
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// (d) Expiry: denied by policy and injected; later answers are told so.
func TestExpiryDeniesAndInjects(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-exp")
	// Give the request an expiry of its own, 10 minutes ahead.
	exp := h.clock.Now().Add(10 * time.Minute).UTC().Truncate(time.Second)
	setExpiry(t, env, exp)
	hd := h.handle(h.ingest(env, email(alice), sms(aliceNum))[0])
	sw := NewSweeper(h.svc)
	if n, err := sw.Sweep(h.ctx); err != nil || n != 0 {
		t.Fatalf("early sweep: %d, %v", n, err)
	}
	h.clock.Advance(11 * time.Minute)
	if n, err := sw.Sweep(h.ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	checkReceived(t, h, env, "appr-exp", "denied", DecidedByExpiry)
	a := h.approval("appr-exp")
	if a.State != store.ApprovalExpired || !a.ExpiresAt.Equal(exp) {
		t.Fatalf("approval %+v", a)
	}
	res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<late@x>", Token: hd.Token, Text: "yes"})
	if res.Outcome != OutcomeExpired {
		t.Fatalf("late reply: %+v", res)
	}
	if got := h.enq.To(alice); len(got) != 1 || !strings.HasPrefix(got[0], "This request expired") {
		t.Fatalf("late reply told %q", got)
	}
}

// An approval whose expiry passed is expired on contact even before the
// sweeper runs: the answer has no effect.
func TestExpiredBeforeSweep(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-exp2")
	hd := h.handle(h.ingest(env, email(alice))[0])
	h.clock.Advance(25 * time.Hour) // default expiry 24h
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<m>", Token: hd.Token, Text: "yes"}); res.Outcome != OutcomeExpired {
		t.Fatalf("%+v", res)
	}
	checkReceived(t, h, env, "appr-exp2", "denied", DecidedByExpiry)
}

func setExpiry(t *testing.T, env *envelope.Envelope, exp time.Time) {
	t.Helper()
	for i, p := range env.Parts {
		if p.PartType() != envelope.PartApprovalRequest {
			continue
		}
		m, err := p.DataObject()
		if err != nil {
			t.Fatal(err)
		}
		m["expiresAt"] = exp.Format(time.RFC3339)
		env.Parts[i].Data = mustJSON(m)
	}
}

// A forwarded approval answered by someone else has no effect, and the
// sender is told nothing.
func TestForwardedMailHasNoEffect(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-fwd")
	hd := h.handle(h.ingest(env, email(alice))[0])
	res := h.inbound(envelope.Inbound{Channel: "email", From: bob, MessageID: "<fwd@x>", Token: hd.Token, Text: "Approved"})
	if res.Outcome != OutcomeWrongSender {
		t.Fatalf("%+v", res)
	}
	if h.approval("appr-fwd").State != store.ApprovalPending || h.enq.Count() != 0 {
		t.Fatal("forwarded reply had an effect or got an answer")
	}
	if ev := h.audit("appr-fwd"); !slices.Equal(ev, []string{"created", OutcomeWrongSender}) {
		t.Fatalf("audit %v", ev)
	}
	// Alice can still decide.
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<a@x>", Token: hd.Token, Text: "deny"}); res.Outcome != OutcomeDecided {
		t.Fatalf("%+v", res)
	}
	checkReceived(t, h, env, "appr-fwd", "denied", alice)
}

// Two channels answer: the first wins, the second is told "already decided".
func TestTwoChannelsFirstWins(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-two")
	ds := h.ingest(env, email(alice), sms(aliceNum), wa(bobNum))
	he, hs, hw := h.handle(ds[0]), h.handle(ds[1]), h.handle(ds[2])
	if len(hw.Buttons) != 2 || hw.Code == "" {
		t.Fatalf("whatsapp handle %+v", hw)
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "SM1", Text: "Y " + hs.Code}); res.Outcome != OutcomeDecided {
		t.Fatalf("sms: %+v", res)
	}
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<e>", Token: he.Token, Text: "no"}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("email: %+v", res)
	}
	if res := h.inbound(envelope.Inbound{Channel: "whatsapp", From: bobNum, MessageID: "WA1", ButtonPayload: hw.Buttons[1].Payload}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("whatsapp: %+v", res)
	}
	checkReceived(t, h, env, "appr-two", "granted", aliceNum)
	// The email recipient's link page says it was decided, not by whom.
	mux := http.NewServeMux()
	mux.Handle("/a/{token}", h.svc.LinkHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	res, err := http.Get(srv.URL + strings.TrimPrefix(he.LinkURL, "https://beachd.example.org"))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); !strings.Contains(body, "Approved by another person who was asked") || strings.Contains(body, aliceNum) {
		t.Fatalf("page:\n%s", body)
	}
	// Late answerers learn it was decided, not by whom: one recipient's
	// number is not for the others.
	if got := h.enq.To(alice); len(got) != 1 || !strings.Contains(got[0], "already approved") || strings.Contains(got[0], aliceNum) {
		t.Fatalf("email told %q", got)
	}
	if got := h.enq.To(bobNum); len(got) != 1 || !strings.Contains(got[0], "already approved") || strings.Contains(got[0], aliceNum) {
		t.Fatalf("whatsapp told %q", got)
	}
}

// Many channels at once: exactly one decision, exactly one injection.
func TestConcurrentAnswersOneWins(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-race")
	var to []envelope.Recipient
	for i := range 8 {
		to = append(to, email(fmt.Sprintf("p%d@example.org", i)))
	}
	ds := h.ingest(env, to...)
	var decided atomic.Int32
	var wg sync.WaitGroup
	for i, d := range ds {
		hd := h.handle(d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.svc.HandleInbound(h.ctx, envelope.Inbound{Channel: "email", From: d.To, MessageID: fmt.Sprint("<", i, ">"), Token: hd.Token, Text: []string{"yes", "no"}[i%2]})
			if err != nil {
				t.Error(err)
			}
			if res.Outcome == OutcomeDecided {
				decided.Add(1)
			}
		}()
	}
	wg.Wait()
	if decided.Load() != 1 {
		t.Fatalf("%d decisions", decided.Load())
	}
	h.waitReceived(1)
	h.settle()
	if n := len(h.agent.Received()); n != 1 {
		t.Fatalf("agent received %d", n)
	}
}

func TestWhatsAppButtons(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-wa")
	hw := h.handle(h.ingest(env, wa(aliceNum))[0])
	if hw.Buttons[0].Title != "Approve" || hw.Buttons[1].Title != "Deny" || !strings.HasPrefix(hw.Buttons[0].Payload, "appr-wa:") ||
		hw.Buttons[0].Payload == hw.Buttons[1].Payload {
		t.Fatalf("buttons %+v", hw.Buttons)
	}
	// The payload from another number: nothing.
	if res := h.inbound(envelope.Inbound{Channel: "whatsapp", From: bobNum, MessageID: "W0", ButtonPayload: hw.Buttons[0].Payload}); res.Outcome != OutcomeWrongSender {
		t.Fatalf("%+v", res)
	}
	// A forged payload: nothing.
	if res := h.inbound(envelope.Inbound{Channel: "whatsapp", From: aliceNum, MessageID: "W1", ButtonPayload: "appr-wa:" + strings.Repeat("a", 26)}); res.Outcome != OutcomeUnknownToken {
		t.Fatalf("%+v", res)
	}
	if res := h.inbound(envelope.Inbound{Channel: "whatsapp", From: aliceNum, MessageID: "W2", ButtonPayload: hw.Buttons[1].Payload, Text: "Deny"}); res.Outcome != OutcomeDecided || res.Decision != "denied" {
		t.Fatalf("%+v", res)
	}
	checkReceived(t, h, env, "appr-wa", "denied", aliceNum)
}

func TestQuarantineIgnoredAndNotUnderstood(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-q")
	hd := h.handle(h.ingest(env, email(alice))[0])
	cases := []struct {
		in   envelope.Inbound
		want string
	}{
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<1>", Token: hd.Token, Text: "yes", AuthFailed: true, AuthDetail: "dmarc=fail"}, OutcomeQuarantined},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<2>", Token: hd.Token, Text: "yes", AutoGenerated: true}, OutcomeIgnored},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<3>", Token: hd.Token, Text: "yes", Bounce: true}, OutcomeIgnored},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<4>", Token: hd.Token, Text: "yes", IgnoredBecause: "out of office"}, OutcomeIgnored},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<5>", Token: hd.Token, Text: "yes", TokenConflict: true}, OutcomeIgnored},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<6>", Text: "yes"}, OutcomeNoToken},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<7>", Token: strings.Repeat("b", 26), Text: "yes"}, OutcomeUnknownToken},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<8>", Token: "not-a-token", Text: "yes"}, OutcomeUnknownToken},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<9>", Token: hd.Token, Text: "maybe later"}, OutcomeNotUnderstood},
		{envelope.Inbound{Channel: "email", From: alice, MessageID: "<10>", Token: hd.Token, Text: "yes or no?"}, OutcomeNotUnderstood},
		{envelope.Inbound{Channel: "sms", From: alice, MessageID: "<11>", Token: hd.Token, Text: "yes"}, OutcomeNoToken},
	}
	for _, c := range cases {
		if res := h.inbound(c.in); res.Outcome != c.want {
			t.Errorf("%+v: outcome %s, want %s", c.in, res.Outcome, c.want)
		}
	}
	if h.approval("appr-q").State != store.ApprovalPending {
		t.Fatal("decided")
	}
	// One "did not understand" per address per day.
	if got := h.enq.To(alice); len(got) != 1 || !strings.Contains(got[0], "did not understand") {
		t.Fatalf("replies %q", got)
	}
	if ev := h.audit("appr-q"); !slices.Contains(ev, OutcomeQuarantined) {
		t.Fatalf("quarantine not audited: %v", ev)
	}
}

// flaky fails n times, then passes to the real sender.
type flaky struct {
	real Sender
	n    atomic.Int32
	err  error
}

func (f *flaky) Inject(ctx contextT, a, s, tu string, r envelope.ApprovalResponse) error {
	if f.n.Add(-1) >= 0 {
		return f.err
	}
	return f.real.Inject(ctx, a, s, tu, r)
}

func TestInjectionRetriesUntilAgentAnswers(t *testing.T) {
	var f *flaky
	h := newHarness(t, harnessOpt{sender: func(real Sender) Sender {
		f = &flaky{real: real, err: errors.New("connection refused")}
		f.n.Store(3)
		return f
	}})
	env := h.suspend("appr-retry")
	hd := h.handle(h.ingest(env, email(alice))[0])
	h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "ok"})
	checkReceived(t, h, env, "appr-retry", "granted", alice)
	inj, _ := h.db.ListInjections(h.ctx, store.InjectionDone, 10)
	if inj[0].Attempts != 4 {
		t.Fatalf("attempts %d", inj[0].Attempts)
	}
	if ev := h.audit("appr-retry"); strings.Count(strings.Join(ev, ","), "injection-failed") != 3 {
		t.Fatalf("audit %v", ev)
	}
}

func TestInjectionDeadLettersVisiblyAndRetries(t *testing.T) {
	var f *flaky
	// The lifetime runs on the test's clock, which moves only when the
	// test says so (beside real time): the injection is retried at least
	// twice, then the clock passes the lifetime, however slow the machine.
	h := newHarness(t, harnessOpt{lifetime: time.Hour, sender: func(real Sender) Sender {
		f = &flaky{real: real, err: errors.New("agent down")}
		f.n.Store(1 << 30)
		return f
	}})
	env := h.suspend("appr-dead")
	hd := h.handle(h.ingest(env, email(alice))[0])
	h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "ok"})
	poll.Eventually(t, 10*time.Second, "two failed injection attempts", func() bool {
		p, _ := h.db.ListInjections(h.ctx, store.InjectionPending, 10)
		return len(p) == 1 && p[0].Attempts >= 2
	})
	h.clock.Advance(2 * time.Hour)
	var dead []*store.Injection
	poll.Eventually(t, 10*time.Second, "the injection to be dead-lettered", func() bool {
		dead, _ = h.db.ListInjections(h.ctx, store.InjectionDead, 10)
		return len(dead) == 1
	})
	if !strings.Contains(dead[0].LastError, "agent down") || dead[0].Attempts < 2 {
		t.Fatalf("dead %+v", dead[0])
	}
	v, err := h.svc.Get(h.ctx, "appr-dead")
	if err != nil || v.Injection == nil || v.Injection.State != store.InjectionDead {
		t.Fatalf("operator view %+v %v", v, err)
	}
	// The agent is back; an operator retries.
	f.n.Store(0)
	if _, err := h.svc.RetryInjection(h.ctx, "appr-dead"); err != nil {
		t.Fatal(err)
	}
	checkReceived(t, h, env, "appr-dead", "granted", alice)
}

func TestPermanentInjectionErrorDeadLettersAtOnce(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-perm")
	// The turn is over before the decision arrives: the task is terminal.
	env.Meta.TurnID = "no-such-task"
	setTurn(t, env, "no-such-task")
	hd := h.handle(h.ingest(env, email(alice))[0])
	h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "ok"})
	var dead []*store.Injection
	poll.Eventually(t, 10*time.Second, "the injection to be dead-lettered", func() bool {
		dead, _ = h.db.ListInjections(h.ctx, store.InjectionDead, 10)
		return len(dead) == 1
	})
	if dead[0].Attempts != 1 || !strings.HasPrefix(dead[0].LastError, "permanent") {
		t.Fatalf("%+v", dead[0])
	}
}

func setTurn(t *testing.T, env *envelope.Envelope, turn string) {
	for i, p := range env.Parts {
		if p.PartType() == envelope.PartApprovalRequest {
			m, _ := p.DataObject()
			m["turn"] = turn
			env.Parts[i].Data = mustJSON(m)
		}
	}
}

func TestOperatorDecision(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-op")
	h.ingest(env, email(alice))
	if _, err := h.svc.Decide(h.ctx, "appr-op", "maybe", "", "k1"); !errors.Is(err, ErrBadDecision) {
		t.Fatal(err)
	}
	v, err := h.svc.Decide(h.ctx, "appr-op", "denied", "not now", "k1")
	if err != nil || v.State != store.ApprovalDenied || v.DecidedBy != "operator:k1" {
		t.Fatalf("%+v %v", v, err)
	}
	for _, r := range v.Recipients {
		if r.Nonce != "" {
			t.Fatal("operator view shows a nonce")
		}
	}
	checkReceived(t, h, env, "appr-op", "denied", "operator:k1")
	if _, err := h.svc.Decide(h.ctx, "appr-op", "granted", "", "k1"); !errors.Is(err, store.ErrAlreadyDecided) {
		t.Fatal(err)
	}
	l, err := h.svc.List(h.ctx, "denied", "", 10)
	if err != nil || len(l) != 1 {
		t.Fatalf("%v %v", l, err)
	}
	if _, err := h.svc.List(h.ctx, "bogus", "", 10); !errors.Is(err, ErrBadState) {
		t.Fatal(err)
	}
}

func TestVoidInjectsNothing(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-void")
	hd := h.handle(h.ingest(env, email(alice))[0])
	if _, err := h.svc.Decide(h.ctx, "appr-void", "void", "turn withdrawn", "k1"); err != nil {
		t.Fatal(err)
	}
	if res := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<v>", Token: hd.Token, Text: "yes"}); res.Outcome != OutcomeAlreadyDecided {
		t.Fatalf("%+v", res)
	}
	h.settle()
	if n := len(h.agent.Received()); n != 0 {
		t.Fatalf("void injected %d", n)
	}
}

func TestDuplicateApprovalIDRejected(t *testing.T) {
	h := newHarness(t, harnessOpt{noInjector: true})
	env := h.suspend("appr-dup")
	h.ingest(env, email(alice))
	as, per, err := h.svc.Prepare(h.ctx, env, []envelope.Recipient{email(bob)}, "travel")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.db.Ingest(h.ctx, store.Ingest{Envelope: mustJSON(env), Agent: "travel", Approvals: as,
		Deliveries: []store.NewDelivery{{Channel: "email", To: bob, ApprovalIDs: per[0]}}})
	if !errors.Is(err, store.ErrDuplicateApproval) {
		t.Fatalf("err %v", err)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
