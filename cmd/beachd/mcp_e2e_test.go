package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/testkit/mcpjs"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPEndToEnd: the daemon (`beachd dev`, its SMS going to Prism
// serving Twilio's OpenAPI description) and the official MCP TypeScript
// client at /mcp. The client lists the tools and their schemas; sends a
// message that reaches the dev mailbox (real SMTP and IMAP) and the
// webhook sink, and reads with get_delivery that both were sent; asks for
// an approval by SMS, the person answers with the code through the signed
// Twilio webhook, and get_approval reads the decision — which is not
// injected into the agent (no turn waits for it). Bad arguments come back
// as tool errors naming each.
func TestMCPEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its peers")
	}
	mcpjs.Skip(t)
	prism := twiliotest.StartPrism(t, "the MCP test's Twilio peer", twiliotest.SpecMessages)
	tw := startTwilioRecorder(t, prism)
	d := startDev(t, func(c *config.Config) {
		c.Twilio = &config.TwilioConfig{AccountSID: fakeTwilioAccount, AuthToken: fakeTwilioToken, APIBaseURL: tw.URL,
			SMSFrom: devAgentNumber, RatePerSecond: 1000, Burst: 1000, Timeout: 5 * time.Second}
	})
	c := mcpjs.Start(t, d.base+"/mcp", d.key)

	tools := map[string]mcpjs.Tool{}
	for _, tl := range c.ListTools() {
		tools[tl.Name] = tl
	}
	for name, required := range map[string]string{
		"send_message": `["to"]`, "get_delivery": `["id"]`, "ask_for_approval": `["agent","to","summary","toolName"]`,
		"get_approval": `["approvalId"]`, "list_conversations": ``, "read_conversation": `["id"]`, "reply_to_conversation": `["id","text"]`,
	} {
		tl, ok := tools[name]
		if !ok {
			t.Fatalf("tool %s not listed (%d tools)", name, len(tools))
		}
		var in struct {
			Type     string          `json:"type"`
			Required json.RawMessage `json:"required"`
		}
		json.Unmarshal(tl.InputSchema, &in)
		if in.Type != "object" || string(in.Required) != required || len(tl.OutputSchema) == 0 || tl.Description == "" {
			t.Errorf("%s: input schema %s, output schema %s", name, tl.InputSchema, tl.OutputSchema)
		}
	}

	// 1. A message to a mailbox and to the webhook sink.
	var sent struct {
		EnvelopeID string `json:"envelopeId"`
		Deliveries []struct{ ID, Channel, Status string }
	}
	c.CallInto("send_message", map[string]any{"agent": devAgentName, "subject": "MCP dinner booking", "text": "Your table for two is booked for 8pm.",
		"to": []map[string]string{{"channel": "email", "address": "you@beachd.localhost"}, {"channel": "webhook", "endpoint": devSinkEndpoint}}}, &sent)
	if len(sent.Deliveries) != 2 || sent.Deliveries[0].Status != "queued" {
		t.Fatalf("send_message: %+v", sent)
	}
	poll.Eventually(t, 20*time.Second, "the mail in the mailbox", func() bool { return len(d.inbox("MCP dinner booking")) == 1 })
	poll.Eventually(t, 20*time.Second, "the envelope at the webhook sink", func() bool {
		var sink json.RawMessage
		d.do("GET", "/dev/sink", nil, "", &sink)
		return strings.Contains(string(sink), "Your table for two is booked for 8pm.")
	})
	poll.Eventually(t, 20*time.Second, "get_delivery to say both were sent", func() bool {
		var got struct {
			Deliveries []struct{ State string }
		}
		c.CallInto("get_delivery", map[string]any{"id": sent.EnvelopeID}, &got)
		return len(got.Deliveries) == 2 && got.Deliveries[0].State == "sent" && got.Deliveries[1].State == "sent"
	})

	// 2. An approval asked by SMS, answered through Twilio's webhook.
	const person = "+447700900601"
	var asked struct {
		ApprovalID string `json:"approvalId"`
		State      string `json:"state"`
	}
	c.CallInto("ask_for_approval", map[string]any{"agent": devAgentName, "to": []map[string]string{{"channel": "sms", "address": person}},
		"summary": "Book flight BA2043 for 6 people", "toolName": "book_flight", "args": map[string]any{"flight": "BA2043", "seats": 6}, "expiresIn": "1h"}, &asked)
	if asked.State != "pending" || asked.ApprovalID == "" {
		t.Fatalf("ask_for_approval: %+v", asked)
	}
	var code string
	poll.Eventually(t, 30*time.Second, "the approval SMS at the Twilio peer", func() bool {
		for _, m := range tw.Sent("BA2043") {
			if mm := anyCodeRe.FindStringSubmatch(m.Body); mm != nil && m.To == person {
				code = mm[1]
				return true
			}
		}
		return false
	})
	var got struct{ State, Decision, DecidedBy string }
	c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got.State != "pending" || got.Decision != "" {
		t.Fatalf("before the answer: %+v", got)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if status, out := postTwilio(hc, d.base, d.a.cfg.PublicURL, fakeTwilioToken, smsForm("SMmcp00000000000000000000000000001", person, devAgentNumber, "YES "+code)); status/100 != 2 {
		t.Fatalf("Twilio webhook: %d %s", status, out)
	}
	poll.Eventually(t, 20*time.Second, "get_approval to read the decision", func() bool {
		c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
		return got.State != "pending"
	})
	if got.State != "granted" || got.Decision != "granted" || got.DecidedBy != person {
		t.Fatalf("decision: %+v", got)
	}
	for _, r := range d.agentReceived().Received {
		if r.ApprovalResponse.ApprovalID == asked.ApprovalID {
			t.Fatalf("the MCP approval's decision was injected into the agent: %+v", r)
		}
	}
	// The trail says the decision was kept for the MCP caller: a returned
	// event, never an injected one claiming an agent took it; the metrics
	// count it as returned.
	var trail struct {
		Events []struct {
			Kind, Actor, Channel string
			Evidence             map[string]string
		}
		Verified bool
	}
	poll.Eventually(t, 20*time.Second, "the trail's last event after the decision", func() bool {
		d.do("GET", "/v1/approvals/"+asked.ApprovalID+"/events", nil, "", &trail)
		n := len(trail.Events)
		return n > 0 && trail.Events[n-1].Kind != "decided" && trail.Events[n-1].Kind != "voted"
	})
	last := trail.Events[len(trail.Events)-1]
	if !trail.Verified || last.Kind != "returned" || last.Actor != "mcp" || last.Evidence["to"] != "the MCP caller (get_approval)" {
		t.Errorf("the MCP approval's trail ends %+v (verified %v), want a returned event by mcp", last, trail.Verified)
	}
	for _, e := range trail.Events {
		if e.Kind == "injected" {
			t.Errorf("the MCP approval's trail claims an injection: %+v", e)
		}
	}
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte(`beachd_approval_injections_total{result="returned"} 1`)) ||
		bytes.Contains(metrics, []byte(`beachd_approval_injections_total{result="done"}`)) {
		t.Errorf("the metrics do not count the MCP approval as returned:\n%s", grepLines(metrics, "beachd_approval_injections_total"))
	}
	c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got.State != "granted" || got.Decision != "granted" {
		t.Fatalf("get_approval after the trail: %+v", got)
	}
	if refused := tw.Refused(); len(refused) != 0 {
		t.Fatalf("the Twilio peer refused %+v", refused)
	}

	// 3. Bad arguments: tool errors naming each; the session goes on.
	r := c.Call("ask_for_approval", map[string]any{"agent": "ghost", "to": []map[string]string{{"channel": "sms", "address": "12"}}, "summary": "x"})
	for _, want := range []string{"- toolName: required", `- agent: unknown agent "ghost"`} {
		if !r.IsError || !strings.Contains(r.Text(), want) {
			t.Errorf("bad ask_for_approval: %v %q lacks %q", r.IsError, r.Text(), want)
		}
	}
	r = c.Call("send_message", map[string]any{"to": []map[string]string{{"channel": "sms", "address": "12"}, {"channel": "webhook", "endpoint": "nope"}}, "text": "x"})
	for _, want := range []string{"- to[0].address:", `- to[1].endpoint: unknown webhook endpoint "nope"`} {
		if !r.IsError || !strings.Contains(r.Text(), want) {
			t.Errorf("bad send_message: %v %q lacks %q", r.IsError, r.Text(), want)
		}
	}
	c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
}

// TestDevBannerMCPConfig: the MCP client configuration `beachd dev`
// prints is one line of JSON whose URL and header reach the MCP server:
// a client configured with them lists the tools.
func TestDevBannerMCPConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	d := startDev(t)
	var banner bytes.Buffer
	printDevBanner(&banner, d.a, strings.TrimPrefix(d.base, "http://"))
	var line string
	for _, l := range strings.Split(banner.String(), "\n") {
		if strings.Contains(l, `"mcpServers"`) {
			line = strings.TrimSpace(l)
		}
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(line), &cfg); err != nil {
		t.Fatalf("no MCP configuration in the banner (%v):\n%s", err, banner.String())
	}
	s := cfg.MCPServers["beachd"]
	if s.Type != "http" || s.URL != d.base+"/mcp" {
		t.Fatalf("configuration %+v", s)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "banner-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport(s.Headers)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(res.Tools) != 7 {
		t.Fatalf("tools/list: %v, %d tools", err, len(res.Tools))
	}

	// mcp.enabled: false turns it off, and the banner says nothing of it.
	off := startDev(t, func(c *config.Config) { c.MCP.Enabled = new(bool) })
	banner.Reset()
	printDevBanner(&banner, off.a, strings.TrimPrefix(off.base, "http://"))
	if strings.Contains(banner.String(), "mcpServers") {
		t.Errorf("the banner offers MCP with mcp.enabled false")
	}
	if code := off.do("POST", "/mcp", strings.NewReader(`{}`), "application/json", nil); code != http.StatusNotFound {
		t.Errorf("POST /mcp with mcp.enabled false: %d", code)
	}
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// grepLines returns the lines of b that contain s.
func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
