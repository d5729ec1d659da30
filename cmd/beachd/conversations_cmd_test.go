package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// fixedConversations is a Conversations with one page of fixed records; it
// remembers the last inbound query.
type fixedConversations struct {
	inbound []api.InboundItem
	convs   []api.ConversationItem
	detail  map[string]*api.ConversationDetail
	got     api.InboundQuery
}

func (f *fixedConversations) ListInbound(ctx context.Context, q api.InboundQuery) ([]api.InboundItem, string, error) {
	f.got = q
	var out []api.InboundItem
	for _, it := range f.inbound {
		if q.Disposition == "" || it.Disposition == q.Disposition {
			out = append(out, it)
		}
	}
	if len(out) > q.Limit {
		return out[:q.Limit], out[q.Limit-1].ID, nil
	}
	return out, "", nil
}

func (f *fixedConversations) ListConversations(ctx context.Context, q api.ConversationQuery) ([]api.ConversationItem, string, error) {
	return f.convs, "", nil
}

func (f *fixedConversations) Conversation(ctx context.Context, id string) (*api.ConversationDetail, error) {
	if d, ok := f.detail[id]; ok {
		return d, nil
	}
	return nil, store.ErrNotFound
}

func (f *fixedConversations) Resolve(ctx context.Context, id string) (store.NewDelivery, error) {
	return store.NewDelivery{}, store.ErrNotFound
}

func (f *fixedConversations) Transports(agent string) []api.Transport { return nil }

func (f *fixedConversations) OpenAttachment(ctx context.Context, id string, n int, expires, sig string) (string, string, []byte, error) {
	return "", "", nil, api.ErrBadSignature
}

func conversationsAPI(t *testing.T) (*fixedConversations, *httptest.Server) {
	t.Helper()
	at := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	f := &fixedConversations{
		inbound: []api.InboundItem{
			{ID: "inb_2", Channel: "email", From: "mallory@evil.example", To: "travel@example.org", Subject: "Cheap pills", ReceivedAt: at.Add(2 * time.Minute),
				Disposition: envelope.DispositionRejected, Reason: "sender not allowed", Agent: "travel"},
			{ID: "inb_1", Channel: "whatsapp", From: "+447700900123", To: "+15550002222", Text: "Any flights\nto Lisbon?", ReceivedAt: at.Add(time.Minute),
				Attachments: []api.AttachmentItem{{Filename: "photo.jpg", MediaType: "image/jpeg", Size: 1200}},
				Disposition: envelope.DispositionTurn, Agent: "travel", ConversationID: "cnv_w1", TurnID: "trn_1"},
		},
		convs: []api.ConversationItem{{ID: "cnv_w1", Agent: "travel", Channel: "whatsapp", OurAddress: "+15550002222",
			Participants: []string{"+447700900123"}, CreatedAt: at, UpdatedAt: at.Add(3 * time.Minute), LastInboundAt: at.Add(time.Minute), Turns: 1}},
	}
	f.detail = map[string]*api.ConversationDetail{"cnv_w1": {Conversation: f.convs[0], Messages: []api.Message{
		{At: at.Add(time.Minute), Direction: "in", InboundID: "inb_1", Text: "Any flights\nto Lisbon?", State: "turn"},
		{At: at.Add(3 * time.Minute), Direction: "out", DeliveryID: "dlv_9", Text: "Two flights tomorrow.", State: "held"},
	}, Window: &api.Window{Open: false, ClosesAt: at.Add(-time.Hour)}}}
	db := storetest.Open(t, bolt.Options{})
	agents := map[string]bool{"travel": true}
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"email": true}, Agents: agents, Conversations: f}, db, nil, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"key"}}, db, ing, nil, nil, nil, api.ConversationRoutes(f, agents, nil))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return f, hs
}

func TestInboundListCommand(t *testing.T) {
	f, hs := conversationsAPI(t)
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--url", hs.URL, "--api-key", "key"), func(string) string { return "" }, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := cli("inbound", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "INBOUND") || !strings.HasPrefix(lines[1], "inb_2") || !strings.HasPrefix(lines[2], "inb_1") {
		t.Fatalf("table:\n%s", out)
	}
	for _, want := range []string{"rejected (sender not allowed)", "Cheap pills", "cnv_w1", "[1 attachment(s)] Any flights to Lisbon?"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The flags become the query; a page that is cut says how to go on.
	code, out, errs = cli("inbound", "list", "--disposition", "turn", "--channel", "whatsapp", "--agent", "travel", "--limit", "1")
	if code != 0 || f.got != (api.InboundQuery{Disposition: "turn", Channel: "whatsapp", Agent: "travel", Limit: 1}) || strings.Contains(out, "inb_2") {
		t.Fatalf("exit %d, query %+v:\n%s%s", code, f.got, out, errs)
	}
	code, out, _ = cli("inbound", "list", "--limit", "1")
	if code != 0 || !strings.Contains(out, "More: pass --after inb_2") {
		t.Fatalf("next page:\n%s", out)
	}
	code, out, _ = cli("inbound", "list", "--json")
	var js struct{ Inbound []api.InboundItem }
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || len(js.Inbound) != 2 || js.Inbound[1].ConversationID != "cnv_w1" {
		t.Fatalf("json: %d %s", code, out)
	}
	// A disposition the command does not know is refused before any call;
	// the server names a bad agent.
	if code, _, _ = cli("inbound", "list", "--disposition", "approved"); code != 2 {
		t.Fatalf("bad disposition: exit %d", code)
	}
	code, _, errs = cli("inbound", "list", "--agent", "nobody")
	if code != 1 || !strings.Contains(errs, "agent: unknown agent \"nobody\"") || !strings.Contains(errs, "HTTP 400") {
		t.Fatalf("unknown agent: exit %d %s", code, errs)
	}
}

func TestConversationsCommands(t *testing.T) {
	_, hs := conversationsAPI(t)
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--url", hs.URL, "--api-key", "key"), func(string) string { return "" }, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := cli("conversations", "list", "--channel", "whatsapp")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "CONVERSATION") || !strings.Contains(lines[1], "cnv_w1") ||
		!strings.Contains(lines[1], "+447700900123") || !strings.Contains(lines[1], "+15550002222") {
		t.Fatalf("list: exit %d %s\n%s", code, errs, out)
	}
	code, out, errs = cli("conversations", "show", "cnv_w1")
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errs)
	}
	closed := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC).Local().Format(time.DateTime)
	for _, want := range []string{"Conversation  cnv_w1", "Channel       whatsapp, from +15550002222", "With          +447700900123",
		fmt.Sprintf("Window        closed (closed %s)", closed), "inb_1", "Any flights to Lisbon?", "dlv_9", "held", "Two flights tomorrow."} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	// The thread reads in order: the question, then the answer.
	if strings.Index(out, "inb_1") > strings.Index(out, "dlv_9") {
		t.Errorf("messages out of order:\n%s", out)
	}
	code, out, _ = cli("conversations", "show", "cnv_w1", "--json")
	var d api.ConversationDetail
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Messages) != 2 || d.Window == nil || d.Window.Open {
		t.Fatalf("show --json: %d %s", code, out)
	}
	code, _, errs = cli("conversations", "show", "cnv_nope")
	if code != 1 || !strings.Contains(errs, "not found (HTTP 404)") {
		t.Fatalf("unknown: exit %d %s", code, errs)
	}
}
