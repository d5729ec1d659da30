package twilio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/storetest"
)

const (
	testAccount = "AC0123456789abcdef0123456789abcdef"
	testToken   = "12345authtoken67890"
	ourSMS      = "+15550001111"
	ourWA       = "whatsapp:+15550002222"
	alice       = "+447700900123"
)

// fakeReply is one canned answer of the fake Twilio.
type fakeReply struct {
	status int
	header map[string]string
	body   string
	// hang: do not answer until the client gives up.
	hang bool
}

// fakeTwilio answers the Messages API the way Twilio does (JSON message
// resources, Twilio's error JSON), keeps what was created, and can be told
// to fail the next POSTs.
type fakeTwilio struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	created []map[string]any
	forms   []url.Values
	posts   int
	queue   []fakeReply
	authBad int
	skip    int
	// getQueue answers the next GETs.
	getQueue []fakeReply
}

func (f *fakeTwilio) failGet(r ...fakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.getQueue = append(f.getQueue, r...)
}

func newFakeTwilio(t *testing.T) *fakeTwilio {
	f := &fakeTwilio{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTwilio) fail(r ...fakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, r...)
}

// failAfter lets n POSTs through, then answers r once.
func (f *fakeTwilio) failAfter(n int, r fakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skip = n
	f.queue = append(f.queue, r)
}

func (f *fakeTwilio) postCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts
}

func (f *fakeTwilio) lastForm() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.forms) == 0 {
		return nil
	}
	return f.forms[len(f.forms)-1]
}

func twilioError(status, code int, msg string) fakeReply {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code), "status": status})
	return fakeReply{status: status, body: string(b), header: map[string]string{"Content-Type": "application/json"}}
}

func (f *fakeTwilio) serve(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != testAccount || pass != testToken {
		f.mu.Lock()
		f.authBad++
		f.mu.Unlock()
		writeReply(w, twilioError(401, 20003, "Authenticate"))
		return
	}
	prefix := "/2010-04-01/Accounts/" + testAccount + "/Messages"
	if r.Method == http.MethodGet {
		f.mu.Lock()
		var rep *fakeReply
		if len(f.getQueue) > 0 {
			rep = &f.getQueue[0]
			f.getQueue = f.getQueue[1:]
		}
		f.mu.Unlock()
		if rep != nil {
			writeReply(w, *rep)
			return
		}
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == prefix+".json":
		r.ParseForm()
		f.mu.Lock()
		f.posts++
		f.forms = append(f.forms, r.PostForm)
		var rep *fakeReply
		if f.skip > 0 {
			f.skip--
		} else if len(f.queue) > 0 {
			rep = &f.queue[0]
			f.queue = f.queue[1:]
		}
		f.mu.Unlock()
		if rep != nil {
			if rep.hang {
				<-r.Context().Done()
				// The message was created all the same.
				f.create(r.PostForm)
				return
			}
			writeReply(w, *rep)
			return
		}
		m := f.create(r.PostForm)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(m)
	case r.Method == http.MethodGet && r.URL.Path == prefix+".json":
		to, from := r.URL.Query().Get("To"), r.URL.Query().Get("From")
		f.mu.Lock()
		var out []map[string]any
		for i := len(f.created) - 1; i >= 0; i-- {
			m := f.created[i]
			if m["to"] == to && (from == "" || m["from"] == from) {
				out = append(out, m)
			}
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"messages": out, "page": 0, "page_size": 50})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix+"/"):
		sid := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix+"/"), ".json")
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, m := range f.created {
			if m["sid"] == sid {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(m)
				return
			}
		}
		writeReply(w, twilioError(404, 20404, "The requested resource "+r.URL.Path+" was not found"))
	default:
		writeReply(w, twilioError(404, 20404, "not found"))
	}
}

func (f *fakeTwilio) create(form url.Values) map[string]any {
	var b [16]byte
	rand.Read(b[:])
	m := map[string]any{
		"sid": "SM" + hex.EncodeToString(b[:]), "account_sid": testAccount, "status": "queued",
		"to": form.Get("To"), "from": form.Get("From"), "body": form.Get("Body"),
		"direction": "outbound-api", "date_created": time.Now().UTC().Format(time.RFC1123Z),
		"num_segments": "1", "api_version": "2010-04-01", "error_code": nil,
	}
	if form.Get("MessagingServiceSid") != "" {
		m["messaging_service_sid"] = form.Get("MessagingServiceSid")
	}
	f.mu.Lock()
	f.created = append(f.created, m)
	f.mu.Unlock()
	return m
}

func writeReply(w http.ResponseWriter, r fakeReply) {
	for k, v := range r.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(r.status)
	fmt.Fprint(w, r.body)
}

func openStore(t testing.TB) *store.DB {
	t.Helper()
	// Fuzzing and benchmarks measure our code, not fsync.
	_, fast := t.(*testing.F)
	if _, ok := t.(*testing.B); ok {
		fast = true
	}
	opt := store.Options{NoSync: fast}
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
func newPrefixServer(t *testing.T, prefix string, f *fakeTwilio) string {
	srv := httptest.NewServer(http.StripPrefix(prefix, http.HandlerFunc(f.serve)))
	t.Cleanup(srv.Close)
	return srv.URL
}
