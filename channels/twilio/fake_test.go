package twilio

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

const (
	testAccount = "AC0123456789abcdef0123456789abcdef"
	testToken   = "12345authtoken67890"
	ourSMS      = "+15550001111"
	ourWA       = "whatsapp:+15550002222"
	alice       = "+447700900123"
)

// newFakeTwilio starts the shared fake Twilio, accepting the test
// account's credentials, until the test ends.
func newFakeTwilio(t testing.TB) *twiliotest.Server {
	return twiliotest.Start(t, testAccount, testToken)
}

func openStore(t testing.TB) *bolt.DB {
	t.Helper()
	// Fuzzing and benchmarks measure our code, not fsync.
	_, fast := t.(*testing.F)
	if _, ok := t.(*testing.B); ok {
		fast = true
	}
	opt := bolt.Options{NoSync: fast}
	if fast {
		// A lone write need not wait 2ms for company (bbolt Batch).
		opt.MaxBatchDelay = time.Microsecond
	}
	return storetest.Open(t, opt)
}

func newTestClient(t testing.TB, baseURL string, timeout time.Duration) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: testToken, APIBaseURL: baseURL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fastLimiter never makes a test wait.
func fastLimiter() *Limiter { return NewLimiter(LimiterConfig{PerSecond: 1e9, Burst: 1 << 30}) }

func testConfig() Config {
	return Config{SMSFrom: ourSMS, WhatsAppFrom: ourWA, StatusCallback: "https://beachd.example.org/v1/inbound/twilio"}
}

func textEnvelope(text string) *envelope.Envelope {
	return &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": "response"}}}}
}

func job(id, channel, to, text string) *channels.Job {
	return &channels.Job{
		Delivery: &store.Delivery{ID: id, EnvelopeID: "env_1", Channel: channel, To: to, CreatedAt: time.Now().Add(-time.Minute)},
		Envelope: textEnvelope(text), Attempt: 1,
	}
}

func approvalJob(id, channel, to string) *channels.Job {
	j := job(id, channel, to, "Your flight is ready to book.")
	req := []byte(`{"approvalId":"apr_1","toolName":"book_flight","toolCallId":"call_1","args":{"flight":"BA2043","seats":6},"handler":"travel","turn":"turn_1","session":"ses_1","summary":"Book BA2043 for 6 people"}`)
	j.Envelope.Parts = append(j.Envelope.Parts, envelope.Part{Data: req, Metadata: map[string]any{"partType": "approval-request"}})
	j.Approvals = []render.ApprovalHandle{{
		ApprovalID: "apr_1", Code: "4821", LinkURL: "https://beachd.example.org/a/lnk",
		Request: envelope.ApprovalRequest{ApprovalID: "apr_1", ToolName: "book_flight", ToolCallID: "call_1", Handler: "travel", Turn: "turn_1", Session: "ses_1", Summary: "Book BA2043 for 6 people"},
		Buttons: []render.Button{{Title: "Approve", Payload: "apr_1:n0nce"}, {Title: "Deny", Payload: "apr_1:n0nce2"}},
	}}
	j.Delivery.ApprovalIDs = []string{"apr_1"}
	return j
}

// recordingDecider is a hand-written decider that keeps what it got.
type recordingDecider struct {
	mu  sync.Mutex
	got []envelope.Inbound
	err error
}

func (d *recordingDecider) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return envelope.InboundResult{}, d.err
	}
	d.got = append(d.got, in)
	return envelope.InboundResult{Outcome: "no-token"}, nil
}

func (d *recordingDecider) all() []envelope.Inbound {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]envelope.Inbound(nil), d.got...)
}

// newPrefixServer serves f under prefix, for base URLs with a path.
func newPrefixServer(t *testing.T, prefix string, f *twiliotest.Server) string {
	srv := httptest.NewServer(http.StripPrefix(prefix, f))
	t.Cleanup(srv.Close)
	return srv.URL
}
