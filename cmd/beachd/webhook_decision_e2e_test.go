package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// A system behind a webhook endpoint decides an approval: it reads the
// endpoint's token from the delivered approval-request part (metadata
// decisionToken), signs a decision with the endpoint's secret and posts it
// to /v1/inbound/webhook/{endpoint}; the decision reaches the agent as made
// by the endpoint. A token taken from the decision link is not the
// endpoint's token and decides nothing.
func TestWebhookDecisionEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	d := startDev(t)
	d.requestApproval("appr_e2e_hook", `[{"channel":"webhook","endpoint":"dev-sink"}]`)

	meta := sinkApprovalMeta(t, d, "appr_e2e_hook")
	token, _ := meta["decisionToken"].(string)
	if token == "" {
		t.Fatal("the approval-request part delivered to the endpoint carries no decisionToken")
	}
	link, _ := meta["decisionUrl"].(string)
	linkToken := link[bytes.LastIndexByte([]byte(link), '/')+1:]

	signer, err := webhook.ParseSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	post := func(id, tok string) map[string]any {
		t.Helper()
		body := []byte(fmt.Sprintf(`{"token":%q,"decision":"approved","reason":"within budget"}`, tok))
		req, _ := http.NewRequest("POST", d.base+"/v1/inbound/webhook/"+devSinkEndpoint, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		signer.SetHeaders(req.Header, id, time.Now(), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil {
			t.Fatalf("decision: %d %s", resp.StatusCode, b)
		}
		return out
	}
	if out := post("msg_link_token", linkToken); out["outcome"] == "decided" {
		t.Fatalf("the page's link token decided through the webhook: %v", out)
	}
	if out := post("msg_hook_1", token); out["outcome"] != "decided" || out["decision"] != "granted" {
		t.Fatalf("signed decision: %v", out)
	}
	poll.Eventually(t, 30*time.Second, "the injected decision", func() bool { return len(d.agentReceived().Received) == 1 })
	got := d.agentReceived().Received[0].ApprovalResponse
	if got.ApprovalID != "appr_e2e_hook" || got.Decision != "granted" || got.Reason != "within budget" || got.DecidedBy == "" {
		t.Fatalf("agent received %+v", got)
	}
	if out := post("msg_hook_2", token); out["outcome"] == "decided" {
		t.Fatalf("a second decision took effect: %v", out)
	}
}
