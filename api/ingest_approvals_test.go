package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

func approvalServer(t *testing.T, approvers map[string]map[string]bool) (*httptest.Server, *bolt.DB) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "http://x"}, db, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true, "sms": true, "webhook": true, "slack": true},
		Endpoints: map[string]bool{"ops": true, "agent-self": true}, Agents: map[string]bool{"travel": true, "open": true}, Approvers: approvers}, db, svc, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"k1"}}, db, ing, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs, db
}

func approvalBody(id, agent, to string) string {
	return fmt.Sprintf(`{"envelope":{"role":"agent","parts":[{"text":"May I?","metadata":{"partType":"response"}},
	{"data":{"approvalId":%q,"toolName":"book","toolCallId":"c1","args":{"x":1},"handler":"h","turn":"t1","session":"s1"},"metadata":{"partType":"approval-request"}}],
	"meta":{"sessionId":"s1","turnId":"t1","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"suspended"}},
	"to":%s,"agent":%q}`, id, to, agent)
}

func post(t *testing.T, hs *httptest.Server, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", hs.URL+"/v1/deliveries", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m
}

func problemPaths(m map[string]any) []string {
	var out []string
	ps, _ := m["problems"].([]any)
	for _, p := range ps {
		pm, _ := p.(map[string]any)
		out = append(out, fmt.Sprint(pm["path"]))
	}
	return out
}

// An approvalId already used is refused with 409 naming its path, and
// nothing of the second request is stored.
func TestIngestRefusesAUsedApprovalID(t *testing.T) {
	hs, db := approvalServer(t, nil)
	to := `[{"channel":"email","address":"alice@example.org"}]`
	if st, m := post(t, hs, approvalBody("a1", "travel", to)); st != 202 {
		t.Fatalf("first: %d %v", st, m)
	}
	st, m := post(t, hs, approvalBody("a1", "travel", `[{"channel":"email","address":"bob@example.org"}]`))
	if st != 409 || fmt.Sprint(problemPaths(m)) != "[envelope.parts[1].data.approvalId]" {
		t.Fatalf("used approvalId: %d %v", st, m)
	}
	if ds, _ := db.ListDeliveries(t.Context(), "", "", 10); len(ds) != 1 {
		t.Fatalf("%d deliveries stored; want the first request's 1", len(ds))
	}
}

// agents.NAME.approvers: every recipient of an approval-request envelope
// for that agent must be an approver; other agents are not restricted.
func TestIngestApprovers(t *testing.T) {
	allowed := map[string]bool{}
	for _, r := range []envelope.Recipient{{Channel: "email", Address: "alice@example.org"}, {Channel: "sms", Address: "+447700900123"}, {Channel: "webhook", Endpoint: "ops"}} {
		allowed[api.ApproverKey(r)] = true
	}
	hs, _ := approvalServer(t, map[string]map[string]bool{"travel": allowed})
	ok := `[{"channel":"email","address":"Alice@Example.org"},{"channel":"sms","address":"+447700900123"},{"channel":"webhook","endpoint":"ops"}]`
	if st, m := post(t, hs, approvalBody("a1", "travel", ok)); st != 202 {
		t.Fatalf("approvers only: %d %v", st, m)
	}
	bad := `[{"channel":"email","address":"alice@example.org"},{"channel":"webhook","endpoint":"agent-self"},{"channel":"sms","address":"+15550001111"}]`
	st, m := post(t, hs, approvalBody("a2", "travel", bad))
	if st != 400 || fmt.Sprint(problemPaths(m)) != "[to[1] to[2]]" || !strings.Contains(fmt.Sprint(m), "agents.travel.approvers") {
		t.Fatalf("non-approvers: %d %v", st, m)
	}
	if st, m := post(t, hs, approvalBody("a3", "open", bad)); st != 202 {
		t.Fatalf("agent without approvers: %d %v", st, m)
	}
	// An envelope without an approval-request goes anywhere.
	plain := `{"envelope":{"role":"agent","parts":[{"text":"hi","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"complete"}},"to":[{"channel":"sms","address":"+15550001111"}],"agent":"travel"}`
	if st, m := post(t, hs, plain); st != 202 {
		t.Fatalf("plain envelope: %d %v", st, m)
	}
}

// An approval posted to a Slack channel is decided by the agent's
// approvers only: an agent without approvers cannot post one (nobody
// could decide it); one whose approvers list the channel can.
func TestIngestSlackChannelNeedsApprovers(t *testing.T) {
	allowed := map[string]bool{"slack:C0OPS": true, "slack:U0ALICE": true}
	hs, _ := approvalServer(t, map[string]map[string]bool{"travel": allowed})
	if st, m := post(t, hs, approvalBody("s1", "travel", `[{"channel":"slack","address":"C0OPS"}]`)); st != 202 {
		t.Fatalf("a channel among the approvers: %d %v", st, m)
	}
	st, m := post(t, hs, approvalBody("s2", "open", `[{"channel":"slack","address":"U0ALICE"},{"channel":"slack","address":"C0OPS"}]`))
	if st != 400 || fmt.Sprint(problemPaths(m)) != "[to[1]]" || !strings.Contains(fmt.Sprint(m), "nobody could decide it") {
		t.Fatalf("a channel, no approvers: %d %v", st, m)
	}
}
