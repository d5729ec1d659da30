package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/internal/testkit/mcpjs"
)

// TestTypeScriptClient: the official TypeScript SDK's client lists the
// tools and calls each; the SDK checks every structured result against
// the tool's output schema (a result that breaks it is an error here), and
// bad arguments come back as tool errors.
func TestTypeScriptClient(t *testing.T) {
	h := newHarness(t)
	c := mcpjs.Start(t, h.url, key)
	if c.Server["name"] != "beachd" {
		t.Fatalf("server %v", c.Server)
	}
	tools := c.ListTools()
	names := map[string]mcpjs.Tool{}
	for _, tl := range tools {
		names[tl.Name] = tl
		var in, out struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(tl.InputSchema, &in) != nil || in.Type != "object" || len(in.Properties) == 0 {
			t.Errorf("%s input schema %s", tl.Name, tl.InputSchema)
		}
		if json.Unmarshal(tl.OutputSchema, &out) != nil || out.Type != "object" || len(out.Properties) == 0 {
			t.Errorf("%s output schema %s", tl.Name, tl.OutputSchema)
		}
	}
	if len(names) != 7 {
		t.Fatalf("%d tools", len(names))
	}

	var sent struct {
		EnvelopeID string `json:"envelopeId"`
		Deliveries []struct{ ID string }
	}
	c.CallInto("send_message", map[string]any{"to": []map[string]string{{"channel": "webhook", "endpoint": "ops"}}, "text": "Hello"}, &sent)
	var got map[string]any
	c.CallInto("get_delivery", map[string]any{"id": sent.EnvelopeID}, &got)
	c.CallInto("get_delivery", map[string]any{"id": sent.Deliveries[0].ID}, &got)
	var asked struct{ ApprovalID string }
	c.CallInto("ask_for_approval", map[string]any{"agent": "travel", "to": []map[string]string{{"channel": "email", "address": "bob@example.org"}},
		"summary": "Pay invoice 42", "toolName": "pay"}, &asked)
	c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got["state"] != "pending" {
		t.Fatalf("get_approval %v", got)
	}
	if _, err := h.svc.Decide(t.Context(), asked.ApprovalID, "denied", "too much", "abcd1234"); err != nil {
		t.Fatal(err)
	}
	c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got["decision"] != "denied" || got["reason"] != "too much" {
		t.Fatalf("get_approval %v", got)
	}
	c.CallInto("list_conversations", map[string]any{}, &got)
	c.CallInto("read_conversation", map[string]any{"id": "cnv_1"}, &got)
	c.CallInto("reply_to_conversation", map[string]any{"id": "cnv_1", "text": "Yes"}, &got)

	r := c.Call("send_message", map[string]any{"to": []map[string]string{{"channel": "email", "address": "nope"}}, "agent": "ghost", "text": "x"})
	if !r.IsError || !strings.Contains(r.Text(), "- to[0].address:") || !strings.Contains(r.Text(), `- agent: unknown agent "ghost"`) {
		t.Fatalf("bad arguments: %v %q", r.IsError, r.Text())
	}
	// The session goes on.
	c.CallInto("get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
}
