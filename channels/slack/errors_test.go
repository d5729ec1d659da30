package slack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
)

// Slack's answers, as its Web API gives them, and what the dispatcher is
// told: a 429 storm waits as long as Slack asks; an unknown channel, a
// channel the bot left and a revoked token are dead-lettered at once with
// the reason; a server error is tried again.
func TestErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		permanent  bool
		retryAfter time.Duration
		code       string
	}{
		{"ratelimited", 429, map[string]string{"Retry-After": "30"}, `{"ok":false,"error":"ratelimited"}`, false, 30 * time.Second, "ratelimited"},
		{"ratelimited without Retry-After", 429, nil, `{"ok":false,"error":"ratelimited"}`, false, 0, "http_429"},
		{"channel_not_found", 200, nil, `{"ok":false,"error":"channel_not_found"}`, true, 0, "channel_not_found"},
		{"not_in_channel", 200, nil, `{"ok":false,"error":"not_in_channel"}`, true, 0, "not_in_channel"},
		{"invalid_auth", 200, nil, `{"ok":false,"error":"invalid_auth"}`, true, 0, "invalid_auth"},
		{"token_revoked", 200, nil, `{"ok":false,"error":"token_revoked"}`, true, 0, "token_revoked"},
		{"internal_error", 200, nil, `{"ok":false,"error":"internal_error"}`, false, 0, "internal_error"},
		{"server error", 503, nil, `<html>down</html>`, false, 0, "http_503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			s, err := NewSender(Config{}, newClient(t, srv.URL+"/", nil), openStore(t), newRenderer(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Deliver(context.Background(), job("dlv_1", "C0123ABCD", "hello"))
			if err == nil {
				t.Fatal("delivered")
			}
			e := channels.AsError(err)
			if e.Permanent != tc.permanent || (tc.retryAfter > 0 && e.RetryAfter != tc.retryAfter) {
				t.Errorf("classified %+v, want permanent %v, retry after %v", e, tc.permanent, tc.retryAfter)
			}
			if e.Receipt == nil || e.Receipt.Meta["error"] != tc.code {
				t.Errorf("receipt %+v, want error %q", e.Receipt, tc.code)
			}
		})
	}
}

// A timeout after the POST may have posted the message: MaybeSent, and a
// retry whose ts was recorded is not sent again.
func TestTimeoutMaybeSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(300 * time.Millisecond) }))
	defer srv.Close()
	c, err := NewClient(ClientConfig{Token: testToken, APIBaseURL: srv.URL, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSender(Config{}, c, openStore(t), newRenderer(t), nil)
	j := job("dlv_1", "C0123ABCD", "hello")
	_, err = s.Deliver(context.Background(), j)
	if e := channels.AsError(err); err == nil || e.Permanent || !e.MaybeSent {
		t.Fatalf("timeout classified %+v", e)
	}
	j.Delivery.MaybeSent, j.Delivery.ProviderID = true, "C0123ABCD/1700000000.000100"
	res, err := s.Deliver(context.Background(), j)
	if err != nil || res.Receipt.Meta["recovered"] != true {
		t.Fatalf("recorded message sent again: %+v %v", res, err)
	}
}
