package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	testbrowser "github.com/cool-ai/beachd/internal/testkit/browser"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

// The operator console in a real browser, against a live `beachd dev`: every
// screen renders, at desktop and phone size (screenshots are written to
// $BEACHD_SCREENSHOTS, else a temporary directory), axe-core finds no
// serious or critical accessibility violation on any of them, and the
// actions work through the UI: sign in, retry, bulk retry with its count
// first, decide, run now, enable an endpoint, send a test event, reply as a
// phone. A read-only key sees no button and its POSTs are refused; a POST
// without the CSRF token is refused.

const readKey = "read-only-key-0123456789"

// browser is one headless Chromium with its own profile (cookies).
type browser struct {
	t    *testing.T
	ctx  context.Context
	axe  string
	dir  string
	base string
}

func newBrowser(t *testing.T, axe, dir, base string) *browser {
	t.Helper()
	ctx := testbrowser.Start(t)
	return &browser{t: t, ctx: ctx, axe: axe, dir: dir, base: base}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
}

// press clicks and waits for the page it loads.
func (b *browser) press(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("press %s: %v", sel, err)
	}
}

func (b *browser) text() string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	// Read in the page, not through a node id: right after a navigation the
	// id of the previous document's body can be all chromedp knows ("No
	// node with given id found").
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *browser) count(css string) int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, css)))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

type axeResult struct {
	Violations []struct {
		ID, Impact, Help string
		Nodes            []struct{ Target []any }
	}
}

// check runs axe-core on the current page and fails on serious or
// critical violations, then writes desktop and phone screenshots named
// name-desktop.png and name-phone.png.
func (b *browser) check(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	for _, vp := range []struct {
		suffix string
		w, h   int64
		mobile bool
	}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
		vopts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if vp.mobile {
			vopts = append(vopts, chromedp.EmulateMobile)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.w, vp.h, vopts...)); err != nil {
			b.t.Fatal(err)
		}
		res, err := chromedp.Run(ctx, chromedp.Evaluate[axeResult](b.axe+`;axe.run(document, {resultTypes: ["violations"]})`, chromedp.EvalAwaitPromise))
		if err != nil {
			b.t.Fatalf("%s: axe: %v", name, err)
		}
		for _, v := range res.Violations {
			if v.Impact == "serious" || v.Impact == "critical" {
				b.t.Errorf("%s (%s): axe %s violation %s: %s at %v", name, vp.suffix, v.Impact, v.ID, v.Help, v.Nodes)
			}
		}
		// Nothing is wider than the screen: a wide table scrolls in its box.
		if w, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.documentElement.scrollWidth - %d`, vp.w))); err != nil || w > 0 {
			b.t.Errorf("%s (%s): the page is %d px wider than the screen (%v)", name, vp.suffix, w, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.dir, name+"-"+vp.suffix+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) signIn(key string) {
	b.t.Helper()
	b.open("/ui/")
	if !strings.HasSuffix(strings.SplitN(b.location(), "?", 2)[0], "/ui/login") {
		b.t.Fatalf("a browser without a session went to %s, not the sign-in page", b.location())
	}
	b.do(chromedp.SetValue(chromedp.CSS("#key"), key))
	b.press(`form[action="/ui/login"] button`)
	if !strings.HasSuffix(b.location(), "/ui/") {
		b.t.Fatalf("after signing in: %s\n%s", b.location(), b.text())
	}
}

func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and a browser")
	}
	axe := testbrowser.Axe(t)
	dir := testbrowser.ScreenshotDir(t)
	t.Logf("screenshots in %s", dir)

	// An endpoint that is gone: its deliveries die and it is disabled.
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
	}))
	defer gone.Close()
	d := startDev(t, func(c *config.Config) {
		c.APIKeys = append(c.APIKeys, config.APIKey{Key: readKey, Role: config.RoleRead})
		ep := c.Webhooks.Endpoints[devSinkEndpoint]
		ep.URL = gone.URL
		c.Webhooks.Endpoints["partner-crm"] = ep
		off := false
		c.Schedules = append(c.Schedules,
			config.ScheduleConfig{Name: "morning-brief", Cron: "0 7 * * *", TimeZone: "Europe/London", Agent: devAgentName,
				Message: "Summarise overnight bookings", To: []envelope.Recipient{{Channel: "webhook", Endpoint: devSinkEndpoint}}},
			config.ScheduleConfig{Name: "weekly-report", Cron: "0 9 * * MON", TimeZone: "UTC", Agent: devAgentName, Enabled: &off,
				Message: "Weekly report", To: []envelope.Recipient{{Channel: "webhook", Endpoint: devSinkEndpoint}}})
	})
	// Traffic: the sample envelope to every channel, an approval, and two
	// envelopes to the gone endpoint.
	sample, err := os.ReadFile("../../testdata/dev-request.json")
	if err != nil {
		t.Fatal(err)
	}
	if code := d.do("POST", "/v1/deliveries", bytes.NewReader(sample), "application/json", nil); code != 202 {
		t.Fatalf("sample: %d", code)
	}
	d.requestApproval("appr_console", `[{"channel":"email","address":"you@beachd.localhost"},{"channel":"sms","address":"+15555550100"},{"channel":"whatsapp","address":"+15555550101"}]`)
	d.requestApproval("appr_page", `[{"channel":"webhook","endpoint":"dev-sink"}]`)
	d.requestApproval("appr_sms", `[{"channel":"sms","address":"+15555550199"}]`)
	d.requestApproval("appr_slack_ui", `[{"channel":"slack","address":"U012AB3CD"}]`)
	var dead []string
	for i := range 2 {
		body := fmt.Sprintf(`{"envelope":{"role":"agent","parts":[{"text":"Lead %d changed","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t%d","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"complete"}},"to":[{"channel":"webhook","endpoint":"partner-crm"}],"agent":"dev"}`, i, i)
		var acc struct{ Deliveries []struct{ ID string } }
		if code := d.do("POST", "/v1/deliveries", strings.NewReader(body), "application/json", &acc); code != 202 {
			t.Fatalf("partner-crm envelope: %d", code)
		}
		dead = append(dead, acc.Deliveries[0].ID)
	}
	state := func(id string) *store.Delivery {
		del, err := d.a.db.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return del
	}
	poll.Eventually(t, 20*time.Second, "the partner-crm deliveries to die", func() bool {
		return state(dead[0]).State == store.StateDead && state(dead[1]).State == store.StateDead
	})
	link := sinkLink(t, d, "appr_page")

	b := newBrowser(t, axe, dir, d.base)

	// Sign-in page, then a wrong key, then the right one.
	b.open("/ui/login")
	b.check("login")
	b.do(chromedp.SetValue(chromedp.CSS("#key"), "not-a-key-at-all-000"))
	b.press(`form[action="/ui/login"] button`)
	if !strings.Contains(b.text(), "not one of beachd's API keys") {
		t.Fatalf("a wrong key: %s", b.text())
	}
	b.signIn(d.key)

	// Overview.
	poll.Eventually(t, 20*time.Second, "the sample to be sent", func() bool {
		st, _ := d.a.db.DeliveryStats(context.Background(), time.Now())
		return st.Sent1h >= 4
	})
	b.open("/ui/")
	// The live figures arrive by server-sent events and say so.
	poll.Eventually(t, 20*time.Second, "the live figures", func() bool { return strings.Contains(b.text(), "Live · updated") })
	page := b.text()
	for _, want := range []string{"dead letters", "email", "sms", "whatsapp", "webhook", "partner-crm", "disabled", "last hour"} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q:\n%s", want, page)
		}
	}
	b.check("overview")

	// Deliveries with filters.
	b.open("/ui/deliveries")
	b.check("deliveries")
	b.open("/ui/deliveries?state=dead&channel=webhook")
	if n := b.count("tbody tr"); n != 2 || !strings.Contains(b.text(), "partner-crm") {
		t.Errorf("dead webhook deliveries: %d rows\n%s", n, b.text())
	}
	b.open("/ui/deliveries?to=you%40beachd&channel=email")
	if !strings.Contains(b.text(), "you@beachd.localhost") || strings.Contains(b.text(), "partner-crm") {
		t.Errorf("recipient filter:\n%s", b.text())
	}
	b.check("deliveries-filtered")

	// One email delivery: attempts, the rendition in a sandboxed frame, raw MIME.
	var email string
	ds, _, _ := d.a.db.QueryDeliveries(context.Background(), store.DeliveryFilter{Channel: "email", State: store.StateSent}, 10)
	for _, x := range ds {
		if len(x.ApprovalIDs) == 0 {
			email = x.ID
		}
	}
	if email == "" {
		t.Fatal("no sent email delivery")
	}
	b.open("/ui/deliveries/" + email)
	if n := b.count(`iframe[sandbox=""][src$="/frame"]`); n != 1 {
		t.Errorf("the email rendition is not in a sandboxed frame (%d)", n)
	}
	if !strings.Contains(b.text(), "attempt 1") || !strings.Contains(b.text(), "Raw MIME") {
		t.Errorf("delivery page:\n%s", b.text())
	}
	b.check("delivery-email")
	for _, ch := range []string{"sms", "whatsapp"} {
		ds, _, _ := d.a.db.QueryDeliveries(context.Background(), store.DeliveryFilter{Channel: ch}, 1)
		if len(ds) == 0 {
			t.Fatalf("no %s delivery", ch)
		}
		b.open("/ui/deliveries/" + ds[0].ID)
		b.check("delivery-" + ch)
	}

	// Retry one dead delivery through the UI.
	b.open("/ui/deliveries/" + dead[0])
	b.check("delivery-dead")
	b.press(`form[action$="/retry"] button`)
	if !strings.Contains(b.text(), "queued again") {
		t.Errorf("after retry:\n%s", b.text())
	}
	if state(dead[0]).Extra["retriedAt"] == "" {
		t.Errorf("the delivery was not retried")
	}
	poll.Eventually(t, 20*time.Second, "the retried delivery to die again", func() bool { return state(dead[0]).State == store.StateDead })

	// Bulk retry: the count first, then the confirmation.
	before := map[string]string{dead[0]: state(dead[0]).Extra["retriedAt"], dead[1]: state(dead[1]).Extra["retriedAt"]}
	b.open("/ui/retry")
	b.do(chromedp.SetValue(chromedp.CSS("#r-since"), time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")))
	b.press(`form[action="/ui/retry"][method="get"] button`)
	if !strings.Contains(b.text(), "2 dead deliveries died since") {
		t.Fatalf("the dry run did not count 2:\n%s", b.text())
	}
	for _, id := range dead {
		if state(id).Extra["retriedAt"] != before[id] {
			t.Fatalf("the count changed %s", id)
		}
	}
	b.check("bulk-retry")
	b.press(`form[action="/ui/retry"][method="post"] button`)
	for _, id := range dead {
		if state(id).Extra["retriedAt"] == before[id] {
			t.Errorf("bulk retry left %s alone", id)
		}
	}

	// Approvals: pending with time left, decide with a reason.
	b.open("/ui/approvals")
	if !strings.Contains(b.text(), "Book BA2043") || !strings.Contains(b.text(), "hours") {
		t.Errorf("pending approvals:\n%s", b.text())
	}
	b.check("approvals")
	b.open("/ui/approvals/appr_console")
	if !strings.Contains(b.text(), "GBP 1,122.00") {
		t.Errorf("the approval does not format its amount:\n%s", b.text())
	}
	b.check("approval-pending")
	b.do(chromedp.SetValue(chromedp.CSS("#reason"), "Fine, within budget"))
	b.press(`button[value="granted"]`)
	poll.Eventually(t, 20*time.Second, "the decision at the agent", func() bool {
		for _, r := range d.agentReceived().Received {
			if r.ApprovalResponse.ApprovalID == "appr_console" {
				return r.ApprovalResponse.Decision == "granted" && r.ApprovalResponse.Reason == "Fine, within budget" &&
					strings.HasPrefix(r.ApprovalResponse.DecidedBy, "operator:")
			}
		}
		return false
	})
	b.open("/ui/approvals/appr_console")
	poll.Eventually(t, 10*time.Second, "the injection to show done", func() bool {
		b.open("/ui/approvals/appr_console")
		return strings.Contains(b.text(), "done")
	})
	b.check("approval-decided")
	b.open("/ui/approvals?tab=decided")
	b.check("approvals-decided")

	// Schedules: run now.
	b.open("/ui/schedules")
	b.check("schedules")
	b.press(`form[action="/ui/schedules/morning-brief/run"] button`)
	if !strings.Contains(b.text(), "run has started") {
		t.Errorf("run now:\n%s", b.text())
	}
	poll.Eventually(t, 20*time.Second, "the manual run", func() bool {
		ss, _ := d.a.console.scheduler.List(context.Background())
		for _, s := range ss {
			if s.Name == "morning-brief" && s.Last != nil && s.Last.Trigger != "" && s.Last.Finished() {
				return true
			}
		}
		return false
	})
	b.open("/ui/schedules")
	b.check("schedules-after-run")

	// Schedules: pause, then resume.
	b.press(`form[action="/ui/schedules/morning-brief/pause"] button`)
	if txt := b.text(); !strings.Contains(txt, "schedule is paused") || !strings.Contains(txt, "none while paused") {
		t.Errorf("pause:\n%s", txt)
	}
	if ss, err := d.a.console.scheduler.List(context.Background()); err != nil || !pausedIn(ss, "morning-brief") {
		t.Errorf("morning-brief is not paused after Pause: %v", err)
	}
	b.check("schedules-paused")
	b.press(`form[action="/ui/schedules/morning-brief/resume"] button`)
	if txt := b.text(); !strings.Contains(txt, "schedule is resumed") || strings.Contains(txt, "none while paused") {
		t.Errorf("resume:\n%s", txt)
	}
	if ss, err := d.a.console.scheduler.List(context.Background()); err != nil || pausedIn(ss, "morning-brief") {
		t.Errorf("morning-brief is still paused after Resume: %v", err)
	}

	// Webhook endpoints: enable the disabled one, send a test event.
	b.open("/ui/webhooks")
	if !strings.Contains(b.text(), "disabled") {
		t.Errorf("partner-crm is not shown disabled:\n%s", b.text())
	}
	b.check("webhooks")
	b.press(`form[action="/ui/webhooks/partner-crm/enable"] button`)
	if st, _ := d.a.deliverers[envelope.ChannelWebhook].(*webhook.Deliverer).Status("partner-crm"); st.Disabled {
		t.Errorf("partner-crm is still disabled after Enable")
	}
	if b.count(`form[action="/ui/webhooks/partner-crm/enable"]`) != 0 {
		t.Errorf("partner-crm still offers Enable:\n%s", b.text())
	}
	b.press(`form[action="/ui/webhooks/dev-sink/test"] button`)
	poll.Eventually(t, 20*time.Second, "the test event at the sink", func() bool {
		var got struct {
			Received []struct{ Envelope json.RawMessage }
		}
		d.do("GET", "/dev/sink", nil, "", &got)
		for _, r := range got.Received {
			if strings.Contains(string(r.Envelope), "Test event from the beachd console") {
				return true
			}
		}
		return false
	})

	// Dev inbox: the mail beachd sent (the sample, and the approval with
	// its page), then reply to the SMS with the code, as the phone would.
	b.open("/ui/dev")
	page = b.text()
	if !strings.Contains(page, "+15555550100") || !strings.Contains(page, "granted") {
		t.Errorf("dev inbox:\n%s", page)
	}
	for _, want := range []string{"sent by beachd", "you@beachd.localhost", "Approve: Book BA2043", "London Gatwick to Corfu", "Open the approval page", "APPROVE or DENY"} {
		if !strings.Contains(page, want) {
			t.Errorf("the dev inbox's mail lacks %q:\n%s", want, page)
		}
	}
	if n := b.count(`.answer a[href^="` + d.base + `/a/"]`); n < 1 {
		t.Errorf("the approval mail in the dev inbox links no approval page")
	}
	b.check("dev")
	var smsCode string
	poll.Eventually(t, 20*time.Second, "the SMS asking appr_sms", func() bool {
		for _, m := range d.a.console.texts.Messages() {
			if m.To == "+15555550199" {
				if c := regexp.MustCompile(`YES (\d+)`).FindStringSubmatch(m.Body); c != nil {
					smsCode = c[1]
				}
			}
		}
		return smsCode != ""
	})
	b.open("/ui/dev")
	b.do(chromedp.SetValue(chromedp.CSS("#d-from"), "+15555550199"), chromedp.SetValue(chromedp.CSS("#d-body"), "YES "+smsCode))
	b.press(`form[action="/ui/dev/reply"] button`)
	if !strings.Contains(b.text(), "as if it came from the phone") {
		t.Errorf("dev reply:\n%s", b.text())
	}
	poll.Eventually(t, 20*time.Second, "the SMS reply to decide", func() bool { return d.approvalState("appr_sms") == "granted" })

	// Slack, recorded: write to the dev agent as a Slack user, and press
	// Deny on the approval's message as the user it went to.
	b.open("/ui/dev")
	b.do(chromedp.SetValue(chromedp.CSS("#s-user"), "U0ANN0001"), chromedp.SetValue(chromedp.CSS("#s-text"), "Flights to Lisbon?"))
	b.press(`form[action="/ui/dev/slack/message"] button`)
	if !strings.Contains(b.text(), "as if Slack had sent the event") {
		t.Errorf("dev Slack message:\n%s", b.text())
	}
	poll.Eventually(t, 20*time.Second, "the dev agent's Slack answer", func() bool {
		for _, m := range d.a.slackDev.Log.Messages() {
			if m.Channel == "D0ANN0001" && m.ThreadTS != "" && strings.Contains(m.Text, "turn 1 of conversation") {
				return true
			}
		}
		return false
	})
	poll.Eventually(t, 20*time.Second, "the Slack approval message", func() bool {
		for _, m := range d.a.slackDev.Log.Messages() {
			if m.To == "U012AB3CD" && len(m.Buttons) == 2 {
				return true
			}
		}
		return false
	})
	b.open("/ui/dev")
	if !strings.Contains(b.text(), "Flights to Lisbon?") && !strings.Contains(b.text(), "turn 1 of conversation") {
		t.Errorf("the dev inbox lacks the Slack answer:\n%s", b.text())
	}
	b.check("dev-slack")
	b.press(`form[action="/ui/dev/slack/click"] button[value="deny"]`)
	if !strings.Contains(b.text(), "pressed as if in Slack") {
		t.Errorf("dev Slack click:\n%s", b.text())
	}
	poll.Eventually(t, 20*time.Second, "the Slack click to decide", func() bool { return d.approvalState("appr_slack_ui") == "denied" })
	b.open("/ui/slack")
	if page := b.text(); !strings.Contains(page, "records Slack messages instead of posting them") || !strings.Contains(page, "rewrite after a decision") {
		t.Errorf("the Slack screen:\n%s", page)
	}
	b.check("slack")

	// The approval page a person opens from the link.
	b.open(strings.TrimPrefix(link, d.base))
	b.check("approval-page")
	b.do(chromedp.SetValue(chromedp.CSS("#reason"), "Too expensive"))
	b.press(`button[value="denied"]`)
	b.check("approval-page-decided")
	poll.Eventually(t, 20*time.Second, "the page's decision", func() bool { return d.approvalState("appr_page") == "denied" })
	b.open("/a/not-a-valid-token")
	if !strings.Contains(b.text(), "not valid") {
		t.Errorf("a guessed link:\n%s", b.text())
	}
	b.check("approval-page-invalid")

	// Sign out; a read-only key sees no button and changes nothing.
	b.open("/ui/")
	b.press(`form[action="/ui/logout"] button`)
	b.signIn(readKey)
	for _, p := range []string{"/ui/deliveries/" + dead[1], "/ui/approvals/appr_console", "/ui/webhooks", "/ui/schedules", "/ui/dev", "/ui/slack", "/ui/retry?since=2020-01-01T00:00"} {
		b.open(p)
		if n := b.count(`main form[method="post"], main button[type="submit"]:not(.link)`); n != 0 && !strings.HasPrefix(p, "/ui/retry") {
			t.Errorf("read-only %s shows %d forms or buttons", p, n)
		}
		if n := b.count(`main form[method="post"]`); n != 0 {
			t.Errorf("read-only %s shows %d POST forms", p, n)
		}
	}
	b.open("/ui/webhooks")
	b.check("webhooks-read-only")
	// A POST from the read-only session, with its valid CSRF token, is refused.
	b.open("/ui/deliveries/" + dead[1])
	code := b.fetchPost("/ui/deliveries/" + dead[1] + "/retry")
	if code != http.StatusForbidden {
		t.Errorf("read-only POST with the token: %d, want 403", code)
	}

	// Tools: bearer keys, CSRF and the read-only API.
	post := func(key, path string, form url.Values) int {
		req, _ := http.NewRequest("POST", d.base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if c := post(d.key, "/ui/webhooks/dev-sink/test", nil); c != http.StatusForbidden {
		t.Errorf("POST without the CSRF token: %d, want 403", c)
	}
	tok := csrfOf(t, d, d.key)
	if c := post(d.key, "/ui/webhooks/dev-sink/test", url.Values{"csrf": {tok}}); c != http.StatusSeeOther {
		t.Errorf("POST with the CSRF token: %d, want 303", c)
	}
	if c := post(readKey, "/ui/webhooks/dev-sink/test", url.Values{"csrf": {csrfOf(t, d, readKey)}}); c != http.StatusForbidden {
		t.Errorf("read-only bearer POST: %d, want 403", c)
	}
	if c := post(readKey, "/v1/deliveries/"+dead[1]+"/retry", nil); c != http.StatusForbidden {
		t.Errorf("read-only API POST: %d, want 403", c)
	}
	req, _ := http.NewRequest("GET", d.base+"/v1/deliveries/stats", nil)
	req.Header.Set("Authorization", "Bearer "+readKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("read-only API GET: %d", res.StatusCode)
	}
}

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf reads the CSRF token a bearer key's pages carry.
func csrfOf(t *testing.T, d *devDaemon, key string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", d.base+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	m := csrfField.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no CSRF token on /ui/ (%d)", res.StatusCode)
	}
	return string(m[1])
}

// fetchPost posts from the page, with the page's own CSRF token, and
// returns the status.
func (b *browser) fetchPost(path string) int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	js := fmt.Sprintf(`(async () => {
		const tok = document.querySelector('input[name="csrf"]').value;
		const r = await fetch(%q, {method: "POST", body: new URLSearchParams({csrf: tok}), redirect: "manual", credentials: "same-origin"});
		return r.status;
	})()`, path)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// pausedIn reports whether the schedule called name is paused in ss.
func pausedIn(ss []schedule.Status, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return s.Paused
		}
	}
	return false
}
