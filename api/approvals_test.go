package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

func TestApprovalRoutes(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, bolt.Options{})
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "http://x"}, db, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := envelope.NewRegistry()
	ing := api.NewIngester(api.IngestConfig{Registry: reg, Channels: map[string]bool{"email": true}, Agents: map[string]bool{"travel": true}}, db, svc, nil, nil)
	routes := append(api.ApprovalRoutes(svc, nil), api.LinkRoutes(svc.LinkHandler())...)
	srv, err := api.New(api.Config{APIKeys: []string{"k1"}}, db, ing, nil, nil, nil, routes)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	body := `{"envelope":{"role":"agent","parts":[{"text":"May I?","metadata":{"partType":"response"}},
	{"data":{"approvalId":"a1","toolName":"book","toolCallId":"c1","args":{"x":1},"handler":"h","turn":"t1","session":"s1"},"metadata":{"partType":"approval-request"}}],
	"meta":{"sessionId":"s1","turnId":"t1","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"suspended"}},
	"to":[{"channel":"email","address":"alice@example.org"}],"agent":"travel"}`
	acc, _, err := ing.Accept(ctx, []byte(body), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	d, err := db.Delivery(ctx, acc.Deliveries[0].ID)
	if err != nil || len(d.ApprovalIDs) != 1 {
		t.Fatalf("delivery %+v %v", d, err)
	}

	do := func(method, path, key, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	if st, _ := do("GET", "/v1/approvals", "", ""); st != 401 {
		t.Fatalf("no key: %d", st)
	}
	if st, m := do("GET", "/v1/approvals?state=pending", "k1", ""); st != 200 || len(m["approvals"].([]any)) != 1 {
		t.Fatalf("list: %d %v", st, m)
	}
	if st, _ := do("GET", "/v1/approvals?state=nope", "k1", ""); st != 400 {
		t.Fatalf("bad state: %d", st)
	}
	if st, _ := do("GET", "/v1/approvals/zzz", "k1", ""); st != 404 {
		t.Fatalf("unknown: %d", st)
	}
	// The link page is public; HEAD and GET do not change anything.
	hd, _ := svc.Handles(ctx, d, nil)
	link := strings.TrimPrefix(hd[0].LinkURL, "http://x")
	for _, m := range []string{"HEAD", "GET"} {
		req, _ := http.NewRequest(m, hs.URL+link, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s link: %v %v", m, res, err)
		}
		res.Body.Close()
	}
	if st, _ := do("POST", "/v1/approvals/a1/decision", "k1", `{"decision":"perhaps"}`); st != 400 {
		t.Fatalf("bad decision: %d", st)
	}
	st, m := do("POST", "/v1/approvals/a1/decision", "k1", `{"decision":"granted","reason":"ok by ops"}`)
	if st != 200 || m["state"] != "granted" || m["decidedBy"] != "operator:"+keyID("k1") || m["reason"] != "ok by ops" {
		t.Fatalf("decide: %d %v", st, m)
	}
	if st, _ := do("POST", "/v1/approvals/a1/decision", "k1", `{"decision":"denied"}`); st != 409 {
		t.Fatalf("second decision: %d", st)
	}
	if st, m := do("GET", "/v1/approvals?injection=pending", "k1", ""); st != 200 || len(m["approvals"].([]any)) != 1 {
		t.Fatalf("by injection: %d %v", st, m)
	}
	if st, _ := do("GET", "/v1/approvals?injection=bogus", "k1", ""); st != 400 {
		t.Fatalf("bad injection state: %d", st)
	}
	st, m = do("GET", "/v1/approvals/a1", "k1", "")
	if st != 200 || m["injection"] == nil || len(m["audit"].([]any)) < 2 {
		t.Fatalf("get: %d %v", st, m)
	}
	if strings.Contains(mustMarshal(m), "nonce") {
		t.Fatal("view leaks a nonce")
	}
	// The event trail: asked, then the operator's decision, verified.
	if st, _ := do("GET", "/v1/approvals/a1/events", "", ""); st != 401 {
		t.Fatalf("events without a key: %d", st)
	}
	if st, _ := do("GET", "/v1/approvals/zzz/events", "k1", ""); st != 404 {
		t.Fatalf("events of an unknown approval: %d", st)
	}
	st, m = do("GET", "/v1/approvals/a1/events", "k1", "")
	evs, _ := m["events"].([]any)
	if st != 200 || m["verified"] != true || m["approvalId"] != "a1" || len(evs) != 2 || m["problem"] != nil {
		t.Fatalf("events: %d %v", st, m)
	}
	first, second := evs[0].(map[string]any), evs[1].(map[string]any)
	if first["kind"] != "asked" || first["actor"] != "alice@example.org" || first["prevHash"] != "" ||
		second["kind"] != "decided" || second["actor"] != "operator:"+keyID("k1") || second["prevHash"] != first["hash"] {
		t.Fatalf("events %v", evs)
	}
	head := m["head"].(map[string]any)
	if head["seq"] != 2.0 || head["hash"] != second["hash"] {
		t.Fatalf("head %v", head)
	}
	// Anyone can check a hash from the answer alone: drop "hash", take the
	// RFC 8785 form (here: Go's sorted keys; the values need no escaping),
	// SHA-256 it.
	delete(first, "hash")
	raw, _ := json.Marshal(first)
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != second["prevHash"] {
		t.Fatalf("hash of %s is not the next event's prevHash", raw)
	}
}

func keyID(k string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+k)
	return api.KeyID(req)
}

func mustMarshal(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestPreparerRefusalIsA400: a request the approvals configuration cannot
// honour (two approvals in one mail with approvals.email_links off) is a
// 400 naming the recipient, and nothing is stored.
func TestPreparerRefusalIsA400(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "http://x", NoEmailLinks: true}, db, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true}, Agents: map[string]bool{"travel": true}}, db, svc, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"k1"}}, db, ing, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ask := func(id string) string {
		return `{"data":{"approvalId":"` + id + `","toolName":"book","toolCallId":"c` + id + `","args":{},"handler":"h","turn":"t1","session":"s1"},"metadata":{"partType":"approval-request"}}`
	}
	body := `{"envelope":{"role":"agent","parts":[{"text":"May I?","metadata":{"partType":"response"}},` + ask("a1") + `,` + ask("a2") + `],
	"meta":{"sessionId":"s1","turnId":"t1","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"suspended"}},
	"to":[{"channel":"email","address":"alice@example.org"}],"agent":"travel"}`
	req, _ := http.NewRequest("POST", hs.URL+"/v1/deliveries", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), `"to[0]"`) || !strings.Contains(string(b), "one envelope per approval") {
		t.Fatalf("HTTP %d: %s", res.StatusCode, b)
	}
	if as, err := db.ListApprovals(context.Background(), "", "", 10); err != nil || len(as) != 0 {
		t.Fatalf("approvals stored: %d, %v", len(as), err)
	}
	if n, err := db.CountByState(context.Background()); err != nil || len(n) != 0 && n[store.StateQueued] != 0 {
		t.Fatalf("deliveries stored: %v, %v", n, err)
	}
}
