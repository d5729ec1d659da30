package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/api/mcp"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const key = "test-key-0123456789"

// fakeConversations is one conversation on email; the conversations
// router, with its mailboxes, is tested on its own.
type fakeConversations struct{}

var conv = api.ConversationItem{ID: "cnv_1", Agent: "travel", Channel: "email", OurAddress: "travel@example.org",
	Participants: []string{"alice@example.org"}, Subject: "Trip", CreatedAt: time.Unix(1e9, 0).UTC(), UpdatedAt: time.Unix(1e9, 0).UTC(),
	LastInboundAt: time.Unix(1e9, 0).UTC(), Turns: 1}

func (fakeConversations) ListInbound(context.Context, api.InboundQuery) ([]api.InboundItem, string, error) {
	return nil, "", nil
}
func (fakeConversations) ListConversations(_ context.Context, q api.ConversationQuery) ([]api.ConversationItem, string, error) {
	if q.Agent != "" && q.Agent != conv.Agent {
		return nil, "", nil
	}
	return []api.ConversationItem{conv}, "", nil
}
func (fakeConversations) Conversation(_ context.Context, id string) (*api.ConversationDetail, error) {
	if id != conv.ID {
		return nil, store.ErrNotFound
	}
	return &api.ConversationDetail{Conversation: conv, Messages: []api.Message{{At: conv.CreatedAt, Direction: "in", InboundID: "inb_1", Text: "Can we go on Friday?", State: "turn"}}}, nil
}
func (fakeConversations) Resolve(_ context.Context, id string) (store.NewDelivery, error) {
	if id != conv.ID {
		return store.NewDelivery{}, store.ErrNotFound
	}
	return store.NewDelivery{Channel: "email", To: "alice@example.org", Extra: map[string]string{envelope.ExtraConversation: id}}, nil
}
func (fakeConversations) Transports(string) []api.Transport { return nil }
func (fakeConversations) OpenAttachment(context.Context, string, int, string, string) (string, string, []byte, error) {
	return "", "", nil, store.ErrNotFound
}

type harness struct {
	url string
	db  *bolt.DB
	svc *approvals.Service
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "https://beachd.example.org"}, db, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]bool{"travel": true, "other": true}
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Limits: envelope.Limits{MaxBytes: 4096},
		Channels: map[string]bool{"email": true, "webhook": true, "sms": true}, Endpoints: map[string]bool{"ops": true},
		Agents: agents, Conversations: fakeConversations{}}, db, svc, nil, nil)
	h, err := mcp.New(mcp.Config{Ingester: ing, Deliveries: db, Approvals: svc, Conversations: fakeConversations{}, Agents: agents,
		MaxBodyBytes: 16 << 10, NewID: db.NewID})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{APIKeys: []string{key}, ReadKeys: []string{"read-key-0123456789"}}, db, ing, nil, nil, nil, mcp.Routes(h))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &harness{url: ts.URL + mcp.Path, db: db, svc: svc}
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func (h *harness) connect(t *testing.T, key string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured result into out (when not
// nil); it returns the result.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	if out != nil {
		if res.IsError {
			t.Fatalf("%s: tool error %s", name, text(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v in %s", name, err, b)
		}
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsListedWithSchemas(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, key)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"send_message":          {"to"},
		"get_delivery":          {"id"},
		"ask_for_approval":      {"agent", "to", "summary", "toolName"},
		"get_approval":          {"approvalId"},
		"list_conversations":    nil,
		"read_conversation":     {"id"},
		"reply_to_conversation": {"id", "text"},
	}
	if len(res.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(res.Tools), len(want))
	}
	for _, tl := range res.Tools {
		req, ok := want[tl.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tl.Name)
			continue
		}
		in, _ := json.Marshal(tl.InputSchema)
		var schema struct {
			Type     string   `json:"type"`
			Required []string `json:"required"`
		}
		json.Unmarshal(in, &schema)
		if schema.Type != "object" || strings.Join(schema.Required, ",") != strings.Join(req, ",") {
			t.Errorf("%s input schema %s", tl.Name, in)
		}
		out, _ := json.Marshal(tl.OutputSchema)
		if tl.OutputSchema == nil || !strings.Contains(string(out), `"type":"object"`) {
			t.Errorf("%s output schema %s", tl.Name, out)
		}
		if len(tl.Description) < 100 {
			t.Errorf("%s: description too short for a model: %q", tl.Name, tl.Description)
		}
	}
}

func TestSendMessageAndGetDelivery(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, key)
	var sent struct {
		EnvelopeID string `json:"envelopeId"`
		Deliveries []struct{ ID, Channel, To, Status string }
		Replayed   bool
	}
	args := map[string]any{"to": []map[string]string{{"channel": "email", "address": "Alice@Example.org"}, {"channel": "webhook", "endpoint": "ops"}},
		"text": "Your table is booked for 8pm.", "subject": "Dinner", "agent": "travel", "idempotencyKey": "k1"}
	call(t, cs, "send_message", args, &sent)
	if len(sent.Deliveries) != 2 || sent.Deliveries[0].To != "Alice@example.org" || sent.Deliveries[0].Status != "queued" || sent.Replayed {
		t.Fatalf("sent %+v", sent)
	}
	rec, err := h.db.Envelope(t.Context(), sent.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope.Envelope
	json.Unmarshal(rec.Envelope, &env)
	if rec.Agent != "travel" || rec.Source != mcp.Source || env.Parts[0].TextValue() != "# Dinner\n\nYour table is booked for 8pm." {
		t.Fatalf("stored %s %s %s", rec.Agent, rec.Source, rec.Envelope)
	}

	// The same key and arguments: the first result, nothing stored again.
	var again struct {
		EnvelopeID string `json:"envelopeId"`
		Replayed   bool
	}
	call(t, cs, "send_message", args, &again)
	if again.EnvelopeID != sent.EnvelopeID || !again.Replayed {
		t.Fatalf("retry %+v, first %s", again, sent.EnvelopeID)
	}
	// The same key with other arguments: refused.
	args["text"] = "Something else"
	if res := call(t, cs, "send_message", args, nil); !res.IsError || !strings.Contains(text(res), "- idempotencyKey: already used with other arguments") {
		t.Fatalf("reused key: %v %s", res.IsError, text(res))
	}
	counts, _ := h.db.CountByState(t.Context())
	if counts[store.StateQueued] != 2 {
		t.Fatalf("stored %v", counts)
	}

	var got struct {
		EnvelopeID string `json:"envelopeId"`
		Deliveries []struct{ ID, State string }
	}
	call(t, cs, "get_delivery", map[string]any{"id": sent.EnvelopeID}, &got)
	if got.EnvelopeID != sent.EnvelopeID || len(got.Deliveries) != 2 || got.Deliveries[0].State != "queued" {
		t.Fatalf("get_delivery %+v", got)
	}
	call(t, cs, "get_delivery", map[string]any{"id": sent.Deliveries[1].ID}, &got)
	if len(got.Deliveries) != 1 || got.Deliveries[0].ID != sent.Deliveries[1].ID {
		t.Fatalf("get_delivery of one %+v", got)
	}
}

func TestWholeEnvelope(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, key)
	env := json.RawMessage(`{"role":"agent","parts":[{"text":"Hello","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`)
	var sent struct {
		EnvelopeID string `json:"envelopeId"`
	}
	call(t, cs, "send_message", map[string]any{"to": []map[string]string{{"channel": "sms", "address": "+447700900123"}}, "envelope": env}, &sent)
	rec, err := h.db.Envelope(t.Context(), sent.EnvelopeID)
	if err != nil || !strings.Contains(string(rec.Envelope), `"turnId":"t"`) {
		t.Fatalf("stored %s %v", rec.Envelope, err)
	}
}

// Bad arguments are tool errors naming every one, as the API's 400; the
// session goes on, and nothing is stored.
func TestBadArgumentsAreToolErrors(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, key)
	big := strings.Repeat("x", 5000)
	tests := []struct {
		tool string
		args any
		want []string
	}{
		{"send_message", map[string]any{}, []string{"- to: required", "- text: required"}},
		{"send_message", map[string]any{"to": "alice", "text": 3, "colour": "red"}, []string{"- colour: unknown argument", "- to: must be an array", "- text: must be a string"}},
		{"send_message", manyArgs(30), []string{"- a00: unknown argument", "- a09: unknown argument", "- 20 more unknown arguments"}},
		{"send_message", map[string]any{"to": []map[string]string{{"channel": "email", "address": "not an address"}, {"channel": "fax", "address": "1"}, {"channel": "webhook", "endpoint": "nope"}}, "text": "hi", "agent": "ghost"},
			[]string{"- to[0].address:", "- to[1].channel:", "- to[2].endpoint: unknown webhook endpoint", `- agent: unknown agent "ghost"`}},
		{"send_message", map[string]any{"to": []map[string]string{{"channel": "email", "address": "a@example.org"}}, "text": "hi", "envelope": map[string]any{}}, []string{"- envelope: give text (and subject) or envelope, not both"}},
		{"send_message", map[string]any{"to": []map[string]string{{"channel": "email", "address": "a@example.org"}}, "text": big}, []string{"4096 bytes"}},
		{"send_message", map[string]any{"to": []map[string]string{{"channel": "email", "address": "a@example.org"}}, "text": "hi", "subject": "two\nlines"}, []string{"- subject: must be one line"}},
		{"get_delivery", map[string]any{"id": "env_nope"}, []string{`- id: no message has the id "env_nope"`}},
		{"get_delivery", map[string]any{"id": "../x"}, []string{"- id: not an envelope id"}},
		{"ask_for_approval", map[string]any{"to": []map[string]string{}, "expiresIn": "soon", "args": []int{1}},
			[]string{"- agent: required", "- summary: required", "- toolName: required", "- args: must be a JSON object", "- expiresIn: not a duration"}},
		{"ask_for_approval", map[string]any{"agent": "ghost", "to": []map[string]string{{"channel": "sms", "address": "+447700900123"}}, "summary": "s", "toolName": "t", "expiresIn": "1000h"},
			[]string{`- agent: unknown agent "ghost"`, "- expiresIn: must be from 1m to 720h"}},
		{"ask_for_approval", map[string]any{"agent": "travel", "to": []map[string]string{}, "summary": "s", "toolName": strings.Repeat("t", 300)},
			[]string{"- toolName: longer than 256 bytes"}},
		{"ask_for_approval", map[string]any{"agent": "travel", "to": []map[string]string{}, "summary": "s", "toolName": "t"},
			[]string{"- to: at least one recipient is required"}},
		{"get_approval", map[string]any{"approvalId": "apr_nope"}, []string{`- approvalId: no approval has the id "apr_nope"`}},
		{"list_conversations", map[string]any{"limit": 0, "channel": "fax", "agent": "ghost"}, []string{"- limit: must be an integer from 1 to 1000"}},
		{"list_conversations", map[string]any{"channel": "fax", "agent": "ghost"}, []string{`- channel: unknown channel "fax"`, `- agent: unknown agent "ghost"`}},
		{"read_conversation", map[string]any{"id": "cnv_nope"}, []string{`- id: no conversation has the id "cnv_nope"`}},
		{"reply_to_conversation", map[string]any{"id": "x"}, []string{"- text: required", "- id: not a conversation id"}},
	}
	for _, tc := range tests {
		res := call(t, cs, tc.tool, tc.args, nil)
		got := text(res)
		if !res.IsError {
			t.Errorf("%s %v: not an error: %s", tc.tool, tc.args, got)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %v: %q lacks %q", tc.tool, tc.args, got, w)
			}
		}
	}
	counts, _ := h.db.CountByState(t.Context())
	if len(counts) != 0 {
		t.Fatalf("stored %v", counts)
	}
	// The session is alive.
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestAskForApprovalThenGetApproval(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, key)
	var asked struct {
		ApprovalID string    `json:"approvalId"`
		State      string    `json:"state"`
		ExpiresAt  time.Time `json:"expiresAt"`
		Deliveries []struct{ ID string }
	}
	args := map[string]any{"agent": "travel", "to": []map[string]string{{"channel": "sms", "address": "+447700900123"}},
		"summary": "Book BA2043 for 6", "toolName": "book_flight", "args": map[string]any{"flight": "BA2043"}, "expiresIn": "2h", "idempotencyKey": "b1"}
	call(t, cs, "ask_for_approval", args, &asked)
	if asked.State != "pending" || !strings.HasPrefix(asked.ApprovalID, "apr_") || len(asked.Deliveries) != 1 ||
		time.Until(asked.ExpiresAt) < 119*time.Minute || time.Until(asked.ExpiresAt) > 2*time.Hour {
		t.Fatalf("asked %+v", asked)
	}
	a, err := h.db.Approval(t.Context(), asked.ApprovalID)
	if err != nil || a.Session != mcp.Session || a.Agent != "travel" {
		t.Fatalf("stored approval %+v %v", a, err)
	}
	var got struct{ ApprovalID, State, Decision, DecidedBy, Reason string }
	call(t, cs, "get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got.State != "pending" || got.Decision != "" {
		t.Fatalf("pending: %+v", got)
	}
	if _, err := h.svc.Decide(t.Context(), asked.ApprovalID, "granted", "fine", "abcd1234"); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got.State != "granted" || got.Decision != "granted" || got.Reason != "fine" || got.DecidedBy == "" {
		t.Fatalf("decided: %+v", got)
	}
	// A retry with the key: the same approval, as it stands; nobody asked again.
	var again struct {
		ApprovalID, State string
		Replayed          bool
	}
	call(t, cs, "ask_for_approval", args, &again)
	if again.ApprovalID != asked.ApprovalID || again.State != "granted" || !again.Replayed {
		t.Fatalf("retry %+v", again)
	}
	// The key with another request: refused, nobody asked.
	args["summary"] = "Book BA2043 for 60"
	if res := call(t, cs, "ask_for_approval", args, nil); !res.IsError || !strings.Contains(text(res), "- idempotencyKey: already used") {
		t.Fatalf("reused key: %v %s", res.IsError, text(res))
	}
	if n, _ := h.db.CountByState(t.Context()); n[store.StateQueued] != 1 {
		t.Fatalf("deliveries %v", n)
	}
}

func TestConversationTools(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, key)
	var list struct {
		Conversations []struct{ ID, Agent string }
	}
	call(t, cs, "list_conversations", map[string]any{"agent": "travel", "limit": 10}, &list)
	if len(list.Conversations) != 1 || list.Conversations[0].ID != "cnv_1" {
		t.Fatalf("list %+v", list)
	}
	var detail struct {
		Messages []struct{ Direction, Text string }
	}
	call(t, cs, "read_conversation", map[string]any{"id": "cnv_1"}, &detail)
	if len(detail.Messages) != 1 || detail.Messages[0].Text != "Can we go on Friday?" {
		t.Fatalf("read %+v", detail)
	}
	var sent struct {
		EnvelopeID string `json:"envelopeId"`
		Deliveries []struct{ ID, Channel, To string }
	}
	call(t, cs, "reply_to_conversation", map[string]any{"id": "cnv_1", "text": "Friday works."}, &sent)
	if len(sent.Deliveries) != 1 || sent.Deliveries[0].To != "alice@example.org" {
		t.Fatalf("reply %+v", sent)
	}
	d, err := h.db.Delivery(t.Context(), sent.Deliveries[0].ID)
	if err != nil || d.Extra[envelope.ExtraConversation] != "cnv_1" || d.Agent != "travel" {
		t.Fatalf("stored %+v %v", d, err)
	}
}

// The route takes the API's keys: none or a wrong one is 401, a read-only
// one 403 (every MCP call is a POST).
func TestKeys(t *testing.T) {
	h := newHarness(t)
	for k, want := range map[string]int{"": 401, "wrong-key-0123456789": 401, "read-key-0123456789": 403} {
		req, _ := http.NewRequest("POST", h.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if k != "" {
			req.Header.Set("Authorization", "Bearer "+k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", k, resp.StatusCode, want)
		}
	}
}

// A body over the API's bound is refused before it is read whole.
func TestBodyBound(t *testing.T) {
	h := newHarness(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_message","arguments":{"text":"` + strings.Repeat("x", 20<<10) + `"}}}`
	req, _ := http.NewRequest("POST", h.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// manyArgs is n unknown arguments a00, a01, …
func manyArgs(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("a%02d", i)] = i
	}
	return m
}

// A client that asks and goes away loses nothing: the approval goes on,
// and another client, later, reads its decision.
func TestApprovalOutlivesTheClient(t *testing.T) {
	h := newHarness(t)
	first := h.connect(t, key)
	var asked struct{ ApprovalID string }
	call(t, first, "ask_for_approval", map[string]any{"agent": "travel", "to": []map[string]string{{"channel": "email", "address": "bob@example.org"}},
		"summary": "Pay invoice 42", "toolName": "pay"}, &asked)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Decide(t.Context(), asked.ApprovalID, "granted", "", "abcd1234"); err != nil {
		t.Fatal(err)
	}
	var got struct{ State, Decision string }
	call(t, h.connect(t, key), "get_approval", map[string]any{"approvalId": asked.ApprovalID}, &got)
	if got.State != "granted" || got.Decision != "granted" {
		t.Fatalf("%+v", got)
	}
}
