package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// FuzzToolArguments: whatever a client sends as a tool's arguments, the
// tool answers a result or an error of the caller's (never a panic, never
// an internal error), and every error names at least one problem or says
// what is wrong.
func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{
		`{"to":[{"channel":"email","address":"a@example.org"}],"text":"hi"}`,
		`{"to":[{"channel":"webhook","endpoint":"ops"}],"text":"hi","subject":"s","idempotencyKey":"k"}`,
		`{"to":"x","text":3,"colour":1}`,
		`{"agent":"travel","to":[{"channel":"sms","address":"+447700900123"}],"summary":"s","toolName":"t","expiresIn":"2h","args":{"a":1}}`,
		`{"id":"env_x"}`, `{"approvalId":"apr_x"}`, `{"limit":1e400}`, `[]`, `null`, `{"to":[{"conversation":"cnv_1"}],"text":"x"}`,
		`{"envelope":{"role":"agent","parts":[{"text":"x","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}},"to":[{"channel":"email","address":"a@example.org"}]}`,
	} {
		for i := range 7 {
			f.Add(uint8(i), []byte(s))
		}
	}
	db := storetest.Open(f, bolt.Options{})
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32))}, db, nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	agents := map[string]bool{"travel": true}
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Limits: envelope.Limits{MaxBytes: 4096},
		Channels: map[string]bool{"email": true, "webhook": true, "sms": true}, Endpoints: map[string]bool{"ops": true}, Agents: agents}, db, svc, nil, nil)
	s := &service{cfg: Config{Ingester: ing, Deliveries: db, Approvals: svc, Conversations: noConversations{}, Agents: agents, NewID: db.NewID,
		Now: nowFunc}}
	s.cfg.Log, s.log = discard, discard
	tools := s.tools()
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tl := tools[int(which)%len(tools)]
		_, err := tl.call(context.Background(), json.RawMessage(raw))
		if err == nil {
			return
		}
		status, msg, _ := api.DescribeError(err)
		if status == http.StatusInternalServerError || msg == "" {
			t.Fatalf("%s %q: %d %v", tl.def.Name, raw, status, err)
		}
	})
}
