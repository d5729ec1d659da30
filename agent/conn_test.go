package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestUnreadableCardIsReadAgainSoon: a card that could not be read (the
// agent was still starting, say) is read again after cardRetry, not after
// the hour a good card is trusted, so the error does not linger and the
// card's choice takes over.
func TestUnreadableCardIsReadAgainSoon(t *testing.T) {
	var cardUp atomic.Bool
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == CardPath && !cardUp.Load():
			http.Error(w, "starting", http.StatusServiceUnavailable)
		case r.URL.Path == CardPath:
			io.WriteString(w, `{"supportedInterfaces":[{"url":"`+srv.URL+`/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}]}`)
		case r.URL.Path == "/rest/message:send":
			io.WriteString(w, `{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"rest"}]}}`)
		case r.Header.Get("A2A-Version") == "1.0":
			body, _ := io.ReadAll(r.Body)
			id := strings.SplitN(strings.SplitN(string(body), `"id":"`, 2)[1], `"`, 2)[0]
			io.WriteString(w, `{"jsonrpc":"2.0","id":"`+id+`","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"rpc"}]}}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := New(map[string]Target{"a": {URL: srv.URL + "/rpc"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	c.targets["a"].now = func() time.Time { return now }
	say := func() string {
		turn, err := c.StartTurn(context.Background(), "a", "hi", "")
		if err != nil {
			t.Fatal(err)
		}
		return *turn.Message.Parts[0].Text
	}
	if got := say(); got != "rpc" {
		t.Fatalf("with no card: %q, want the 1.0 JSON-RPC probe", got)
	}
	if st, _ := c.Status("a"); st.ChosenBy != "probe" || !strings.Contains(st.CardError, "HTTP 503") {
		t.Fatalf("status %+v", st)
	}
	cardUp.Store(true)
	now = now.Add(cardRetry / 2)
	if got := say(); got != "rpc" {
		t.Fatalf("before cardRetry: %q", got)
	}
	now = now.Add(cardRetry)
	if got := say(); got != "rest" {
		t.Fatalf("after cardRetry: %q, want the card's HTTP+JSON interface", got)
	}
	if st, _ := c.Status("a"); st.ChosenBy != "card" || st.CardError != "" || st.Binding != BindingHTTPJSON {
		t.Fatalf("status %+v", st)
	}
}

// TestCardStaysWithinOrigin: a card that points at another origin is not
// followed — the configured headers would go there — and says so.
func TestCardStaysWithinOrigin(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization") != "")
		http.NotFound(w, r)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == CardPath {
			io.WriteString(w, `{"supportedInterfaces":[{"url":"`+other.URL+`/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		id := strings.SplitN(strings.SplitN(string(body), `"id":"`, 2)[1], `"`, 2)[0]
		io.WriteString(w, `{"jsonrpc":"2.0","id":"`+id+`","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"here"}]}}}`)
	}))
	defer srv.Close()
	c, err := New(map[string]Target{"a": {URL: srv.URL + "/rpc", Headers: map[string]string{"Authorization": "Bearer secret"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.StartTurn(context.Background(), "a", "hi", "")
	if err != nil || *turn.Message.Parts[0].Text != "here" || leaked.Load() {
		t.Fatalf("turn %+v, err %v, leaked %v", turn, err, leaked.Load())
	}
	if st, _ := c.Status("a"); st.ChosenBy != "probe" || !strings.Contains(st.CardError, "another origin") {
		t.Fatalf("status %+v", st)
	}
}

// TestPinned10WithoutCard: a fixed 1.0 whose card cannot be read talks
// JSON-RPC to the configured URL and shows the card error; when the agent
// refuses the method, it is not moved to 0.3 (the operator pinned 1.0).
func TestPinned10WithoutCard(t *testing.T) {
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == CardPath {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		sends.Add(1)
		if !strings.Contains(string(body), `"method":"SendMessage"`) || r.Header.Get("A2A-Version") != "1.0" {
			t.Errorf("request %s with A2A-Version %q", body, r.Header.Get("A2A-Version"))
		}
		id := strings.SplitN(strings.SplitN(string(body), `"id":"`, 2)[1], `"`, 2)[0]
		io.WriteString(w, `{"jsonrpc":"2.0","id":"`+id+`","error":{"code":-32601,"message":"method not found"}}`)
	}))
	defer srv.Close()
	c, err := New(map[string]Target{"a": {URL: srv.URL + "/rpc", Version: V10}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartTurn(context.Background(), "a", "hi", ""); err == nil || !IsPermanent(err) {
		t.Fatalf("err = %v, want the agent's permanent refusal", err)
	}
	st, _ := c.Status("a")
	if st.Generation != V10 || st.Binding != BindingJSONRPC || st.ChosenBy != "config" || !strings.Contains(st.CardError, "HTTP 404") {
		t.Fatalf("status %+v", st)
	}
	if n := sends.Load(); n != 1 {
		t.Fatalf("%d requests, want 1 (the card, read again, names nothing else; no move to 0.3)", n)
	}
}
