package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
)

// FuzzDevAgent10 feeds the 1.0 dev agent's JSON-RPC endpoint arbitrary
// bodies: it always answers one JSON-RPC response, never panics, and what
// it answers to SendMessage is a task beachd's own decoder accepts.
func FuzzDevAgent10(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","taskId":"t","contextId":"c","role":"ROLE_USER","parts":[{"data":{"approvalId":"a","decision":"granted"},"metadata":{"partType":"approval-response"}}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"5","method":"SendMessage","params":{"message":{"messageId":"m","contextId":"cnv_1","role":"ROLE_USER","parts":[{"text":"hi"},{"raw":"aGk=","filename":"a.txt","mediaType":"text/plain"},{"url":"ftp://x/y","filename":"y"}]}}}`))
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

// startDevAgent serves a dev agent of generation gen, and /files/photo.jpg
// (5000 bytes), on a loopback test server.
func startDevAgent(t *testing.T, gen string) (*devAgent, *httptest.Server) {
	t.Helper()
	d := &devAgent{generation: gen, now: time.Now, fetch: &http.Client{Timeout: 5 * time.Second}}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	mux := http.NewServeMux()
	for _, r := range d.routes(base, slog.New(slog.DiscardHandler)) {
		mux.Handle(r.Method+" "+r.Pattern, r.Handler)
	}
	mux.HandleFunc("GET /files/photo.jpg", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 5000)) })
	srv.Config.Handler = mux
	srv.Start()
	d.fetchBase = srv.URL
	t.Cleanup(srv.Close)
	return d, srv
}

func devClient(t *testing.T, url string) *agent.Client {
	t.Helper()
	c, err := agent.New(map[string]agent.Target{devAgentName: {URL: url, Timeout: 5 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answerText sends msg and returns the text of the dev agent's immediate
// answer, which must be a Message in msg's context.
func answerText(t *testing.T, c *agent.Client, msg *agent.Message) string {
	t.Helper()
	turn, err := c.SendMessage(t.Context(), devAgentName, msg)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Message == nil || turn.Task != nil {
		t.Fatalf("turn %+v: want an immediate message", turn)
	}
	if turn.Message.ContextID != msg.ContextID || turn.ContextID != msg.ContextID {
		t.Fatalf("answer in context %q, want %q", turn.Message.ContextID, msg.ContextID)
	}
	env, err := c.WaitTurn(t.Context(), devAgentName, turn, 10*time.Millisecond)
	if err != nil || env.Meta.SessionID != msg.ContextID || len(env.Parts) != 1 || env.Parts[0].Text == nil {
		t.Fatalf("answer envelope %+v, %v", env, err)
	}
	return *env.Parts[0].Text
}

func mustContain(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("answer %q does not contain %q", got, w)
		}
	}
}

// TestDevAgentConverses: in both generations (chosen from its card), the
// dev agent answers a message in a conversation at once, in the same
// context, quoting the text, naming each attachment with its type and size
// (bytes inline, or read from its URL), and counting the turns of each
// conversation — a repeated message id is the same turn again. A cron
// prompt still completes a task, and an injected approval decision is
// still recorded.
func TestDevAgentConverses(t *testing.T) {
	for _, gen := range []string{agent.V10, agent.V03} {
		t.Run(gen, func(t *testing.T) {
			d, srv := startDevAgent(t, gen)
			c := devClient(t, srv.URL+"/dev/agent/")
			first := &agent.Message{MessageID: "inb_1", ContextID: "cnv_lisbon",
				Metadata: map[string]any{"beach": map[string]any{"channel": "email", "from": "ana@example.org"}},
				Parts: agent.Parts{agent.TextPart("Flights to Lisbon for six, please.", nil),
					{Raw: make([]byte, 1234), Filename: "travellers.csv", MediaType: "text/csv"},
					{URL: srv.URL + "/files/photo.jpg", Filename: "photo.jpg", MediaType: "image/jpeg"}}}
			got := answerText(t, c, first)
			mustContain(t, got, "turn 1 of conversation cnv_lisbon. (email from ana@example.org)\n", `You wrote: "Flights to Lisbon for six, please."`,
				"2 attachments:", "- travellers.csv (text/csv, 1234 bytes)", "- photo.jpg (image/jpeg, 5000 bytes)")
			if st, _ := c.Status(devAgentName); st.Generation != gen {
				t.Fatalf("talking %s, want %s", st.Generation, gen)
			}

			second := &agent.Message{MessageID: "inb_2", ContextID: "cnv_lisbon", Parts: agent.Parts{agent.TextPart("Make it seven.", nil)}}
			mustContain(t, answerText(t, c, second), "turn 2 of conversation cnv_lisbon", `You wrote: "Make it seven."`, "No attachments.")
			mustContain(t, answerText(t, c, second), "turn 2 of conversation cnv_lisbon") // a repeat
			rome := &agent.Message{MessageID: "inb_3", ContextID: "cnv_rome",
				Parts: agent.Parts{{URL: srv.URL + "/files/missing.pdf", Filename: "missing.pdf", MediaType: "application/pdf"}}}
			mustContain(t, answerText(t, c, rome), "turn 1 of conversation cnv_rome", "You wrote no text.",
				"1 attachment:", "- missing.pdf (application/pdf, size unknown)")
			// A URL that is not beachd's own is not read.
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 10)) }))
			defer other.Close()
			elsewhere := &agent.Message{MessageID: "inb_5", ContextID: "cnv_rome",
				Parts: agent.Parts{{URL: other.URL + "/files/photo.jpg", Filename: "photo.jpg", MediaType: "image/jpeg"}}}
			mustContain(t, answerText(t, c, elsewhere), "turn 2 of conversation cnv_rome", "- photo.jpg (image/jpeg, size unknown)")
			third := &agent.Message{MessageID: "inb_4", ContextID: "cnv_lisbon", Parts: agent.Parts{agent.TextPart("Thanks", nil)}}
			mustContain(t, answerText(t, c, third), "turn 3 of conversation cnv_lisbon")

			// A cron prompt: a task, as before.
			turn, err := c.StartTurn(t.Context(), devAgentName, "Today's tasks", "")
			if err != nil {
				t.Fatal(err)
			}
			env, err := c.WaitTurn(t.Context(), devAgentName, turn, 10*time.Millisecond)
			if err != nil || turn.TaskID == "" || len(env.Parts) != 1 || *env.Parts[0].Text != "The dev agent received: Today's tasks" {
				t.Fatalf("cron turn %+v → %+v, %v", turn, env, err)
			}
			// An approval decision into a turn the agent never started.
			at := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
			if err := c.Inject(t.Context(), devAgentName, "ses-1", "turn-1",
				envelope.ApprovalResponse{ApprovalID: "appr_1", Decision: "granted", DecidedAt: at}); err != nil {
				t.Fatal(err)
			}
			if _, ok := d.receivedFor("appr_1"); !ok {
				t.Fatal("the dev agent did not record the decision")
			}
		})
	}
}

func TestDevAgentTurnCountIsBounded(t *testing.T) {
	d := &devAgent{}
	for i := range devMaxConversations + 5 {
		d.turnOf(fmt.Sprintf("cnv_%d", i), "m")
	}
	if n := len(d.conversations); n > devMaxConversations+1 {
		t.Fatalf("remembers %d conversations", n)
	}
	for i := range 250 {
		d.turnOf("cnv_x", fmt.Sprint(i))
	}
	if n := d.turnOf("cnv_x", "new"); n != 251 {
		t.Fatalf("turn %d, want 251", n)
	}
	if n := len(d.conversations["cnv_x"].byMessage); n > 100 {
		t.Fatalf("remembers %d message ids of one conversation", n)
	}
}
