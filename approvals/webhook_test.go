package approvals

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
)

// The webhook injector: a Standard-Webhooks-signed POST that the receiver
// verifies with the same secret; 4xx is permanent, 5xx temporary.
func TestWebhookSender(t *testing.T) {
	signer, err := webhook.ParseSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []map[string]any
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := signer.Verify(r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		got = append(got, m)
		st := status
		mu.Unlock()
		w.WriteHeader(st)
	}))
	defer srv.Close()
	ws := &WebhookSender{URL: srv.URL, Signer: signer, Client: srv.Client()}
	at := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	resp := envelope.ApprovalResponse{ApprovalID: "a1", Decision: "granted", DecidedBy: "alice@example.org", DecidedAt: at}
	if err := ws.Inject(context.Background(), "travel", "s1", "t1", resp); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["type"] != "beach.approval-response" {
		t.Fatalf("got %v", got)
	}
	data := got[0]["data"].(map[string]any)
	part := data["part"].(map[string]any)
	if data["session"] != "s1" || data["turn"] != "t1" || part["metadata"].(map[string]any)["partType"] != "approval-response" ||
		part["data"].(map[string]any)["approvalId"] != "a1" || part["data"].(map[string]any)["decidedBy"] != "alice@example.org" {
		t.Fatalf("body %v", got[0])
	}
	for st, perm := range map[int]bool{400: true, 404: true, 410: true, 429: false, 408: false, 500: false, 503: false} {
		mu.Lock()
		status = st
		mu.Unlock()
		err := ws.Inject(context.Background(), "travel", "s1", "t1", resp)
		if err == nil || PermanentHTTP(err) != perm {
			t.Errorf("HTTP %d: err %v, permanent %v", st, err, PermanentHTTP(err))
		}
	}
	// A wrong secret is refused by the receiver (and is permanent: 401).
	other, _ := webhook.ParseSigner("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo3ODkwMTI=")
	bad := &WebhookSender{URL: srv.URL, Signer: other}
	if err := bad.Inject(context.Background(), "travel", "s1", "t1", resp); err == nil || !PermanentHTTP(err) {
		t.Fatalf("wrong secret: %v", err)
	}
}
