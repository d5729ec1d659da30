package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// approvalsAPI is a store, an approvals service, an ingester and the API
// with the approval routes (key "key"), served until the test ends: what the
// approvals commands talk to.
func approvalsAPI(t *testing.T) (*bolt.DB, *approvals.Service, *api.Ingester, *httptest.Server) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "http://x"}, db, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true},
		Agents: map[string]bool{"travel": true}}, db, svc, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"key"}}, db, ing, nil, nil, nil, api.ApprovalRoutes(svc, nil))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return db, svc, ing, hs
}

func TestApprovalsCommands(t *testing.T) {
	ctx := context.Background()
	_, _, ing, hs := approvalsAPI(t)
	body := `{"envelope":{"role":"agent","parts":[{"data":{"approvalId":"appr-cli","toolName":"book","toolCallId":"c1","args":{},"handler":"h","turn":"t1","session":"s1","summary":"Book the flight"},"metadata":{"partType":"approval-request"}}],
	"meta":{"sessionId":"s1","turnId":"t1","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"suspended"}},"to":[{"channel":"email","address":"alice@example.org"}],"agent":"travel"}`
	if _, _, err := ing.Accept(ctx, []byte(body), "", "test"); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		getenv := func(string) string { return "" }
		code := run(ctx, append(args, "--url", hs.URL, "--api-key", "key"), getenv, &out, &errb)
		return code, out.String(), errb.String()
	}
	// beachd send with an idempotency key: the second call replays the
	// first answer instead of storing the envelope again.
	envFile := filepath.Join(t.TempDir(), "env.json")
	os.WriteFile(envFile, []byte(`{"role":"agent","parts":[{"text":"hi","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-11-21T20:00:00Z","finalizedBy":"complete"}}`), 0o600)
	_, first, errs := cli("send", envFile, "--to", "email:bob@example.org", "--idempotency-key", "k-1")
	_, again, _ := cli("send", envFile, "--to", "email:bob@example.org", "--idempotency-key", "k-1")
	if first == "" || first != again {
		t.Fatalf("send with a key twice: %q then %q (%s)", first, again, errs)
	}
	if _, other, _ := cli("send", envFile, "--to", "email:bob@example.org"); other == first {
		t.Fatal("send without a key replayed the keyed answer")
	}
	if code, out, errs := cli("approvals", "list", "--state", "pending"); code != 0 || !strings.Contains(out, "appr-cli") || !strings.Contains(out, "Book the flight") {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	if code, _, _ := cli("approvals", "decide", "appr-cli", "maybe"); code != 2 {
		t.Fatalf("bad decision exit %d", code)
	}
	if code, out, errs := cli("approvals", "decide", "appr-cli", "granted", "--reason", "fine"); code != 0 || !strings.Contains(out, `"state": "granted"`) || !strings.Contains(out, `"decidedBy": "operator:`) {
		t.Fatalf("decide: %d %q %q", code, out, errs)
	}
	if code, _, errs := cli("approvals", "decide", "appr-cli", "denied"); code != 1 || !strings.Contains(errs, "409") {
		t.Fatalf("second decide: %d %q", code, errs)
	}
	if code, out, _ := cli("approvals", "show", "appr-cli", "--json"); code != 0 || !strings.Contains(out, `"audit"`) || !strings.Contains(out, `"injection"`) {
		t.Fatalf("show: %d %q", code, out)
	}
	if code, out, _ := cli("approvals", "list", "--injection", "pending", "--json"); code != 0 || !strings.Contains(out, "appr-cli") {
		t.Fatalf("list --injection: %d %q", code, out)
	}
}
