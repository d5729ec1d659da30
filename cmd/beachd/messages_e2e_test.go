package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

var fullLinkRe = regexp.MustCompile(`https?://\S+/m/[A-Za-z0-9_.-]+`)

// TestFullMessagePage sends `beachd dev` an envelope too long for an SMS:
// the recorded SMS is cut short and ends with a link, and that link opens
// the whole message as a page. A tampered link and a link to a delivery
// that does not exist show nothing of it.
func TestFullMessagePage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	d := startDev(t)
	var b strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "Line %d of the itinerary: flight, hotel and transfer details. ", i)
	}
	b.WriteString("THE-VERY-END")
	text := b.String()
	body := fmt.Sprintf(`{"to":[{"channel":"sms","address":"+15555550142"}],"envelope":{"role":"agent","parts":[{"text":%q,"metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t-long","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}}`, text)
	if code := d.do("POST", "/v1/deliveries", strings.NewReader(body), "application/json", nil); code != 202 {
		t.Fatalf("ingest: %d", code)
	}
	var link, sms string
	poll.Eventually(t, 20*time.Second, "the cut-short SMS", func() bool {
		for _, m := range d.messages().Messages {
			if m.To == "+15555550142" {
				sms, link = m.Body, fullLinkRe.FindString(m.Body)
				return true
			}
		}
		return false
	})
	if strings.Contains(sms, "THE-VERY-END") || link == "" {
		t.Fatalf("the SMS is not cut short with a link:\n%s", sms)
	}
	get := func(u string) (int, http.Header, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	t.Logf("the SMS (%d chars): %s", len(sms), sms)
	// The link names the public URL; the test reaches the same daemon.
	path := link[strings.Index(link, "/m/"):]
	code, h, page := get(d.base + path)
	if code != 200 || !strings.Contains(page, "THE-VERY-END") || !strings.Contains(page, "Line 1 of the itinerary") {
		t.Fatalf("full-message page: %d\n%.400s", code, page)
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("Cache-Control") != "no-store" {
		t.Errorf("page headers: %v", h)
	}
	tampered := path[:len(path)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(path, "A")]
	if code, _, page := get(d.base + tampered); code != 404 || strings.Contains(page, "itinerary") {
		t.Errorf("tampered link: %d\n%.200s", code, page)
	}
	if code, _, _ := get(d.base + "/m/" + strings.Repeat("x", 200)); code != 404 {
		t.Errorf("oversize ref: %d", code)
	}
}
