package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
)

// FuzzDevAgent10 feeds the 1.0 dev agent's JSON-RPC endpoint arbitrary
// bodies: it always answers one JSON-RPC response, never panics, and what
// it answers to SendMessage is a task beachd's own decoder accepts.
func FuzzDevAgent10(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","taskId":"t","contextId":"c","role":"ROLE_USER","parts":[{"data":{"approvalId":"a","decision":"granted"},"metadata":{"partType":"approval-response"}}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"3","method":"GetTask","params":{"id":"t"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"4","method":"message/send","params":{}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := &devAgent{generation: agent.V10, now: time.Now}
		req := httptest.NewRequest(http.MethodPost, "/dev/agent/", bytes.NewReader(body))
		req.Header.Set("A2A-Version", "1.0")
		rec := httptest.NewRecorder()
		d.serve10(rec, req)
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			Result  json.RawMessage `json:"result"`
			Error   *struct{ Code int }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" || (resp.Result == nil) == (resp.Error == nil) {
			t.Fatalf("answer %s (%v)", rec.Body.Bytes(), err)
		}
		if resp.Result != nil && bytes.Contains(body, []byte("SendMessage")) {
			if _, _, err := agent.DecodeSendResult(resp.Result); err != nil {
				t.Fatalf("the dev agent answered a task beachd refuses: %v\n%s", err, resp.Result)
			}
		}
	})
}

// The 1.0 dev agent refuses requests without A2A-Version: 1.0, as 1.0
// agents do, so a client that forgets the header finds out in dev.
func TestDevAgent10NeedsVersionHeader(t *testing.T) {
	d := &devAgent{generation: agent.V10, now: time.Now}
	req := httptest.NewRequest(http.MethodPost, "/dev/agent/", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{}}`)))
	rec := httptest.NewRecorder()
	d.serve10(rec, req)
	_, err := agent.DecodeRPCResponse(rec.Body.Bytes(), "1", agent.V10)
	if !agent.IsPermanent(err) || !strings.Contains(err.Error(), "version not supported") {
		t.Fatalf("err = %v", err)
	}
}
