package console

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/store"
)

// TestDeliveriesTellApart: each delivery in the list shows its kind and
// its subject or first text, escaped.
func TestDeliveriesTellApart(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	env := json.RawMessage(`{"role":"agent","parts":[{"text":"**I'm ready** to book <b>BA2043</b>.\n\nMore.","metadata":{"partType":"response"}},` +
		`{"data":{"approvalId":"appr_x","toolName":"book_flight","toolCallId":"c","args":{},"handler":"h","turn":"t","session":"s","summary":"Book <i>BA2043</i> for 6"},"metadata":{"partType":"approval-request"}}],` +
		`"meta":{"sessionId":"s","turnId":"t2","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"suspended"}}`)
	q := json.RawMessage(`{"role":"agent","parts":[{"text":"- Which **day** suits you?","metadata":{"partType":"clarify"}}],"meta":{"sessionId":"s","turnId":"t3","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"clarifying"}}`)
	for _, e := range []json.RawMessage{env, q} {
		if _, err := f.db.Ingest(context.Background(), store.Ingest{Envelope: e, Agent: "travel", Source: "api",
			Deliveries: []store.NewDelivery{{Channel: "sms", To: "+15555550100"}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, body, _ := f.get(fullKey, "/ui/deliveries")
	for _, want := range []string{
		`<span class="badge warn">approval request</span> <span class="small">Approve: Book &lt;i&gt;BA2043&lt;/i&gt; for 6</span>`,
		`<span class="badge plain">question</span> <span class="small">Which day suits you?</span>`,
		`<span class="badge plain">message</span> <span class="small">Two flights</span>`,
		`<th scope="col">message</th>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the deliveries lack %q", want)
		}
	}
	if strings.Contains(body, "<i>BA2043") {
		t.Error("a summary's markup is not escaped")
	}
	for raw, want := range map[string]gist{
		`{"role":"agent","parts":[{"text":"Sorry, the **booking** failed","metadata":{"partType":"error"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"error"}}`:             {"error", "Sorry, the booking failed"},
		`{"role":"agent","parts":[{"text":"` + strings.Repeat("long ", 40) + `","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"complete"}}`: {"message", strings.Repeat("long ", 18)[:89] + "…"},
		`{"role":"agent","parts":[{"data":{"x":1},"metadata":{"partType":"domain-data"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-24T01:00:00Z","finalizedBy":"complete"}}`:                            {"message", "(no text)"},
		`not json`: {"message", "(unreadable envelope)"},
	} {
		if got := gistOf(json.RawMessage(raw)); got != want {
			t.Errorf("gistOf(%.60s) = %+v, want %+v", raw, got, want)
		}
	}
}

// TestApprovalShowsWhyAndMessage: the approval screen shows why the agent
// asks and its message, as the approval page does, escaped; the decided
// tab and the decided approval say which channel decided.
func TestApprovalShowsWhyAndMessage(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	_, body, _ := f.get(fullKey, "/ui/approvals/appr_1")
	for _, want := range []string{
		`<h2>Why the agent asks</h2><blockquote class="quote">Charges the card &lt;script&gt;alert(1)&lt;/script&gt; on file; refundable for 24 hours.</blockquote>`,
		`<h2>The agent's message</h2><blockquote class="quote">I&#39;m ready to book BA2043 &lt;img src=x onerror=alert(2)&gt; for all 6 of you.</blockquote>`,
		`<dt>Tool</dt><dd>Book a flight <code>book_flight</code></dd>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the approval lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
		t.Error("the agent's text is not escaped")
	}
	_, body, _ = f.get(fullKey, "/ui/approvals?tab=decided")
	if !strings.Contains(body, `<th scope="col">via</th>`) || !strings.Contains(body, `data-label="via">email reply</td>`) {
		t.Errorf("the decided tab does not say which channel decided:\n%s", body)
	}
	_, body, _ = f.get(fullKey, "/ui/approvals/appr_dead")
	if !strings.Contains(body, "via email reply") {
		t.Errorf("the decided approval does not say which channel decided")
	}
	for ch, want := range map[string]string{"link": "approval page", "operator": "operator (console or API)", "sms": "SMS", "whatsapp": "WhatsApp", "webhook": "signed webhook", "": "", "carrier-pigeon": "carrier-pigeon"} {
		if got := decidedVia(ch); got != want {
			t.Errorf("decidedVia(%q) = %q, want %q", ch, got, want)
		}
	}
}

// TestWebhookEndpointsPlainWords: the webhook screen shows each endpoint's
// URL without user information, fragment or credential-looking query
// values, and says in plain words whether beachd is sending to it.
func TestWebhookEndpointsPlainWords(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	_, body, _ := f.get(fullKey, "/ui/webhooks")
	for _, want := range []string{
		`<th scope="col">URL</th>`,
		"http:/<wbr>/<wbr>127.<wbr>0.<wbr>0.<wbr>1:8025/<wbr>dev/<wbr>sink",
		"crm.<wbr>partner.<wbr>example/<wbr>hooks/<wbr>beachd-notifications?<wbr>access_token=…&amp;<wbr>sig=…&amp;<wbr>tenant=acme",
		"sending normally", "paused after repeated failures",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the webhook screen lacks %q:\n%s", want, body)
		}
	}
	for _, secret := range []string{"hunter2", "bot:", "abcDEF1234567890xyz", "frag", ">closed<", ">open<", "breaker"} {
		if strings.Contains(body, secret) {
			t.Errorf("the webhook screen shows %q", secret)
		}
	}
	_, body, _ = f.get(fullKey, "/ui/")
	if !strings.Contains(body, "sending normally") || strings.Contains(body, ">closed<") {
		t.Errorf("the overview still speaks of the breaker")
	}
	for raw, want := range map[string]string{
		"https://u:p@example.org/h?id=12&key=short#x":                "https://example.org/h?id=12&key=…",
		"https://example.org/h?ref=d41d8cd98f00b204e9800998ecf8427e": "https://example.org/h?ref=…",
		"https://example.org/h?mode=verbose-and-friendly-mode":       "https://example.org/h?mode=verbose-and-friendly-mode",
		"not a url":   "",
		"":            "",
		"/relative/x": "",
	} {
		if got := displayURL(raw); got != want {
			t.Errorf("displayURL(%q) = %q, want %q", raw, got, want)
		}
	}
	now := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	e := webhook.EndpointStatus{Breaker: webhook.Open, ProbeAt: now.Add(90 * time.Second)}
	if w, r := breakerWords(e.Breaker), breakerRetry(e, now); w != "paused after repeated failures" || r != "retrying at 02:01:30 UTC (in 1 min)" {
		t.Errorf("open: %q, %q", w, r)
	}
	if w := breakerWords(webhook.HalfOpen); w != "trying again after repeated failures" {
		t.Errorf("half-open: %q", w)
	}
}

// TestSchedulesTextMatchesThePage: the schedules screen describes the
// buttons it shows: Run now and Pause (Resume once paused) for a full
// key; none for a read-only key, and says so.
func TestSchedulesTextMatchesThePage(t *testing.T) {
	f := newFixture(t, "http://beachd.test")
	_, body, _ := f.get(fullKey, "/ui/schedules")
	if !strings.Contains(body, "<strong>Run now</strong> starts a run") || !strings.Contains(body, "<strong>Pause</strong> stops") ||
		strings.Count(body, ">Run now</button>") != 2 || strings.Count(body, ">Pause</button>") != 2 {
		t.Errorf("full key: the text and the buttons do not match:\n%s", body)
	}
	_, body, _ = f.get(readKey, "/ui/schedules")
	if strings.Contains(body, "<strong>Run now</strong>") || strings.Contains(body, "</button></form>") && strings.Contains(body, ">Run now<") ||
		!strings.Contains(body, "This key is read-only") {
		t.Errorf("read-only key: the text describes buttons that are not there:\n%s", body)
	}
}
