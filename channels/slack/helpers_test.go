package slack

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

const testToken = "xoxb-1234567890-abcdefghijkl"

func openStore(t testing.TB) *bolt.DB {
	t.Helper()
	return storetest.Open(t, bolt.Options{NoSync: true, MaxBatchDelay: time.Microsecond})
}

func textEnvelope(text string) *envelope.Envelope {
	return &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": "response"}}},
		Meta: envelope.Meta{SessionID: "ses_1", TurnID: "turn_1", ProducedAt: time.Now(), FinalizedBy: "complete"}}
}

func job(id, to, text string) *channels.Job {
	return &channels.Job{
		Delivery: &store.Delivery{ID: id, EnvelopeID: "env_1", Channel: envelope.ChannelSlack, To: to, CreatedAt: time.Now().Add(-time.Minute)},
		Envelope: textEnvelope(text), Attempt: 1,
	}
}

func approvalJob(id, to string) *channels.Job {
	j := job(id, to, "Your flight is ready to book.")
	j.Envelope.Meta.FinalizedBy = "suspended"
	req := []byte(`{"approvalId":"apr_1","toolName":"book_flight","toolCallId":"call_1","args":{"flight":"BA2043","seats":6},"handler":"travel","turn":"turn_1","session":"ses_1","summary":"Book BA2043 for 6 people"}`)
	j.Envelope.Parts = append(j.Envelope.Parts, envelope.Part{Data: req, Metadata: map[string]any{"partType": "approval-request"}})
	j.Approvals = []render.ApprovalHandle{{
		ApprovalID: "apr_1",
		Request:    envelope.ApprovalRequest{ApprovalID: "apr_1", ToolName: "book_flight", ToolCallID: "call_1", Handler: "travel", Turn: "turn_1", Session: "ses_1", Summary: "Book BA2043 for 6 people"},
		Buttons:    []render.Button{{Title: "Approve", Payload: "apr_1:n0nce"}, {Title: "Deny", Payload: "apr_1:n0nce2"}},
		ExpiresAt:  time.Now().Add(time.Hour),
	}}
	j.Delivery.ApprovalIDs = []string{"apr_1"}
	return j
}

func newRenderer(t testing.TB) RenderFunc {
	t.Helper()
	r, err := render.New(render.Config{PublicURL: "https://beachd.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	return Renderer(r, envelope.NewRegistry(), func(id string) string { return "https://beachd.example.org/m/" + id })
}

func newClient(t testing.TB, base string, rt http.RoundTripper) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Token: testToken, APIBaseURL: base, Timeout: 10 * time.Second, Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countingTransport counts the requests to each path, and keeps their
// Authorization headers.
type countingTransport struct {
	mu    sync.Mutex
	paths map[string]int
	auth  []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.paths == nil {
		c.paths = map[string]int{}
	}
	c.paths[r.Method+" "+r.URL.Path]++
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[key]
}

func testNow() time.Time { return time.Date(2026, 4, 20, 9, 50, 0, 0, time.UTC) }
