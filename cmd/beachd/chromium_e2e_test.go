package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cool-ai/beachd/config"
	testbrowser "github.com/cool-ai/beachd/internal/testkit/browser"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestLinkPageInChromium: a real browser opens the approval link (which,
// like a mail scanner's GET, changes nothing), reads who asks (the
// organisation, never the agent's internal name), what approving does,
// why, that two people were asked and the first answer decides, and that
// the answer is final; a person presses Approve on the page without
// JavaScript, and the agent receives exactly one granted decision.
func TestLinkPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and a browser")
	}
	axe, dir := testbrowser.Axe(t), testbrowser.ScreenshotDir(t)
	d := startDev(t, func(c *config.Config) { c.Organisation.Name = "Acme Travel" })
	d.requestApproval("appr_chromium", `[{"channel":"webhook","endpoint":"dev-sink"},{"channel":"sms","address":"+15555550100"}]`)
	link := sinkLink(t, d, "appr_chromium")
	b := newBrowser(t, axe, dir, d.base)
	b.open(strings.TrimPrefix(link, d.base))
	page := strings.Join(strings.Fields(b.text()), " ")
	for _, want := range []string{"Book BA2043", "Acme Travel asks for your approval before its assistant goes ahead.",
		"Approving lets it go ahead with this action: Book flight, as set out below. Denying stops it.",
		"refundable only within 24 hours", "I'm ready to book British Airways BA2043",
		"You are not the only one asked: 2 people were asked, and the first answer decides for everyone.",
		"Your answer is final: once sent, it cannot be changed"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	for _, internal := range []string{"travel-booker", "dev (", "Requested by dev"} {
		if strings.Contains(page, internal) {
			t.Errorf("the page names the internal %q:\n%s", internal, page)
		}
	}
	b.check("approval-page-organisation")
	if st := d.approvalState("appr_chromium"); st != "pending" {
		t.Fatalf("opening the page in a browser changed the approval to %q", st)
	}
	bctx := b.ctx
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	// Press the button: the form posts and the browser loads the answer.
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(`//button[contains(., "Approve")]`)); err != nil {
		t.Fatal(err)
	}
	after, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 20*time.Second, "the decision at the agent", func() bool {
		_, ok := d.a.devAgent.receivedFor("appr_chromium")
		return ok
	})
	n := 0
	for _, r := range d.agentReceived().Received {
		if r.ApprovalResponse.ApprovalID == "appr_chromium" {
			n++
			if r.ApprovalResponse.Decision != "granted" {
				t.Errorf("decision %q", r.ApprovalResponse.Decision)
			}
		}
	}
	if n != 1 {
		t.Fatalf("the agent received %d decisions", n)
	}
	t.Logf("page after the button: %.200s", strings.Join(strings.Fields(after), " "))
}
