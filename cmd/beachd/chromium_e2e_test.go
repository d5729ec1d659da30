package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	testbrowser "github.com/cool-ai/beachd/internal/testkit/browser"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestLinkPageInChromium: a real browser opens the approval link (which,
// like a mail scanner's GET, changes nothing), a person presses Approve
// on the page without JavaScript, and the agent receives exactly one
// granted decision.
func TestLinkPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and a browser")
	}
	bctx := testbrowser.Start(t)
	d := startDev(t)
	d.requestApproval("appr_chromium", `[{"channel":"webhook","endpoint":"dev-sink"}]`)
	link := sinkLink(t, d, "appr_chromium")

	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()

	if _, err := chromedp.RunResponse(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "BA2043") {
		t.Fatalf("the page does not say what is approved:\n%s", page)
	}
	if st := d.approvalState("appr_chromium"); st != "pending" {
		t.Fatalf("opening the page in a browser changed the approval to %q", st)
	}
	// Press the button: the form posts and the browser loads the answer.
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(`//button[contains(., "Approve")]`)); err != nil {
		t.Fatal(err)
	}
	after, err := chromedp.Run(ctx, chromedp.Text("body"))
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
