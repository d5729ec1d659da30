package approvals

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// redirectTrap is where a redirecting agent points: it records whatever
// reaches it and answers as a willing agent would (a JSON-RPC result for
// a JSON-RPC request, 204 for anything else), so that a client which
// followed the redirect would count the decision as delivered.
type redirectTrap struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func newRedirectTrap(t *testing.T) *redirectTrap {
	tr := &redirectTrap{}
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tr.mu.Lock()
		tr.got = append(tr.got, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization")+
			" X-Agent-Key="+r.Header.Get("X-Agent-Key")+" body="+string(body))
		tr.mu.Unlock()
		if id, ok := strings.CutPrefix(string(body), `{"id":"`); ok {
			id, _, _ = strings.Cut(id, `"`)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":"`+id+`","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(tr.srv.Close)
	return tr
}

func (tr *redirectTrap) requests() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.got...)
}

// TestInjectionRedirectIsNotDelivered: an agent whose A2A endpoint, or
// approval webhook, answers a redirect (302 or 307, to another port) gets
// nothing at the redirect's target — no credentials, no decision — and
// the injection is not counted as delivered: it is dead-lettered at once
// (a misconfigured URL answers the same until the configuration changes),
// with an error that names the redirect, and the decider is told.
func TestInjectionRedirectIsNotDelivered(t *testing.T) {
	creds := map[string]string{"Authorization": "Bearer s3cret", "X-Agent-Key": "k3y"}
	signer, err := webhook.ParseSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"a2a", "webhook"} {
		for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			t.Run(kind+"/"+http.StatusText(status), func(t *testing.T) {
				tr := newRedirectTrap(t)
				redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Location", tr.srv.URL+r.URL.Path)
					w.WriteHeader(status)
				}))
				defer redirecting.Close()
				var snd Sender
				if kind == "a2a" {
					c, err := agent.New(map[string]agent.Target{"travel": {URL: redirecting.URL + "/rpc", Version: "1.0", Headers: creds}}, nil)
					if err != nil {
						t.Fatal(err)
					}
					snd = c
				} else {
					snd = &WebhookSender{URL: redirecting.URL + "/hook", Signer: signer, Headers: creds}
				}
				h := newHarness(t, harnessOpt{sender: func(Sender) Sender { return snd }})
				id := "appr-redirect-" + kind
				env := h.suspend(id)
				hd := h.handle(h.ingest(env, email(alice))[0])
				h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "yes"})
				var dead, done []*store.Injection
				poll.Eventually(t, 10*time.Second, "the injection to end, or the redirect's target to be reached", func() bool {
					dead, _ = h.db.ListInjections(h.ctx, store.InjectionDead, 10)
					done, _ = h.db.ListInjections(h.ctx, store.InjectionDone, 10)
					return len(dead)+len(done) > 0 || len(tr.requests()) > 0
				})
				if got := tr.requests(); len(got) != 0 {
					t.Errorf("the redirect's target received %d requests: %q", len(got), got)
				}
				if len(done) != 0 {
					t.Fatalf("%d injections counted as delivered", len(done))
				}
				want := "agent answered a redirect to " + tr.srv.URL + " (not followed)"
				if len(dead) != 1 || !strings.HasPrefix(dead[0].LastError, "permanent") || !strings.Contains(dead[0].LastError, want) || dead[0].Attempts != 1 {
					t.Fatalf("dead letters %+v, want one with a permanent error saying %q on the first attempt", dead, want)
				}
				if n := counterValue(h.metrics.injections.WithLabelValues("done")); n != 0 {
					t.Errorf("injections done metric %v", n)
				}
				poll.Eventually(t, 10*time.Second, "the decider to be told", func() bool {
					got := h.enq.To(alice)
					return len(got) > 0 && strings.HasPrefix(got[len(got)-1], "Not taken into account")
				})
			})
		}
	}
}

// TestWebhookSenderNeverFollows: a WebhookSender given a client that
// follows redirects (http.DefaultClient) still does not.
func TestWebhookSenderNeverFollows(t *testing.T) {
	tr := newRedirectTrap(t)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, tr.srv.URL+"/x", http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	ws := &WebhookSender{URL: redirecting.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}, Client: http.DefaultClient}
	err := ws.Inject(t.Context(), "travel", "s", "t", envelope.ApprovalResponse{ApprovalID: "a1", Decision: "granted", DecidedAt: time.Now()})
	if err == nil || !PermanentHTTP(err) || !strings.Contains(err.Error(), "agent answered a redirect to "+tr.srv.URL+" (not followed)") {
		t.Fatalf("err = %v, want a permanent redirect error", err)
	}
	if got := tr.requests(); len(got) != 0 {
		t.Fatalf("the redirect's target received %q", got)
	}
}
