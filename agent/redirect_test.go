package agent_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
)

// trap is a listener that records every request that reaches it: the
// origin a redirecting agent points at. Nothing beachd sends to an agent
// may ever arrive here.
type trap struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // method, path, credential headers and body size of each request
}

func newTrap(t *testing.T) *trap {
	tr := &trap{}
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tr.mu.Lock()
		tr.got = append(tr.got, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization")+
			" X-Agent-Key="+r.Header.Get("X-Agent-Key")+" body="+string(body))
		tr.mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(tr.srv.Close)
	return tr
}

func (tr *trap) requests() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.got...)
}

// redirector is an agent that answers every request with status and a
// Location on the trap's origin, except (when card is set) its agent card,
// which names an HTTP+JSON 1.0 interface on its own origin.
func redirector(t *testing.T, status int, to string, card bool) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if card && r.URL.Path == agent.CardPath {
			io.WriteString(w, `{"supportedInterfaces":[{"url":"`+srv.URL+`/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}]}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Location", to+r.URL.Path)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var agentCredentials = map[string]string{"Authorization": "Bearer s3cret", "X-Agent-Key": "k3y"}

// TestRedirectsAreNotFollowed: an agent that answers a redirect (302 or
// 307, to another port of the same host) gets a failure that says so and
// is permanent, and the redirect's target receives nothing — no
// credentials, no body — for the card read, SendMessage over 1.0 JSON-RPC
// and HTTP+JSON, 0.3 message/send, an injected decision and GetTask
// polling.
func TestRedirectsAreNotFollowed(t *testing.T) {
	resp := envelope.ApprovalResponse{ApprovalID: "appr-1", Decision: "granted", DecidedAt: time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)}
	ops := []struct {
		name    string
		version string
		card    bool // the agent serves a card naming HTTP+JSON (and redirects the rest)
		run     func(ctx context.Context, c *agent.Client) error
	}{
		{"card read", "auto", false, func(ctx context.Context, c *agent.Client) error {
			c.Resolve(ctx)
			st, _ := c.Status("travel")
			if st.CardError == "" {
				return nil
			}
			return errors.New(st.CardError)
		}},
		{"SendMessage 1.0 JSON-RPC", "1.0", false, func(ctx context.Context, c *agent.Client) error {
			_, err := c.StartTurn(ctx, "travel", "hello", "")
			return err
		}},
		{"SendMessage 1.0 HTTP+JSON", "auto", true, func(ctx context.Context, c *agent.Client) error {
			_, err := c.StartTurn(ctx, "travel", "hello", "")
			return err
		}},
		{"message/send 0.3", "0.3", false, func(ctx context.Context, c *agent.Client) error {
			_, err := c.StartTurn(ctx, "travel", "hello", "")
			return err
		}},
		{"inject 1.0", "1.0", false, func(ctx context.Context, c *agent.Client) error {
			return c.Inject(ctx, "travel", "s1", "t1", resp)
		}},
		{"inject 0.3", "0.3", false, func(ctx context.Context, c *agent.Client) error {
			return c.Inject(ctx, "travel", "s1", "t1", resp)
		}},
		{"GetTask polling 1.0", "1.0", false, func(ctx context.Context, c *agent.Client) error {
			_, err := c.WaitTurn(ctx, "travel", &agent.Turn{TaskID: "t1", Task: &agent.Task{ID: "t1", Status: agent.TaskStatus{State: agent.StateWorking}}}, time.Millisecond)
			return err
		}},
		{"GetTask polling HTTP+JSON", "auto", true, func(ctx context.Context, c *agent.Client) error {
			_, err := c.WaitTurn(ctx, "travel", &agent.Turn{TaskID: "t1", Task: &agent.Task{ID: "t1", Status: agent.TaskStatus{State: agent.StateWorking}}}, time.Millisecond)
			return err
		}},
		{"tasks/get polling 0.3", "0.3", false, func(ctx context.Context, c *agent.Client) error {
			_, err := c.WaitTurn(ctx, "travel", &agent.Turn{TaskID: "t1", Task: &agent.Task{ID: "t1", Status: agent.TaskStatus{State: agent.StateWorking}}}, time.Millisecond)
			return err
		}},
	}
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		for _, op := range ops {
			t.Run(http.StatusText(status)+"/"+op.name, func(t *testing.T) {
				tr := newTrap(t)
				ag := redirector(t, status, tr.srv.URL, op.card)
				c, err := agent.New(map[string]agent.Target{"travel": {URL: ag.URL + "/rpc", Version: op.version,
					Headers: agentCredentials, Timeout: 5 * time.Second}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err = op.run(ctx, c)
				want := "agent answered a redirect to " + tr.srv.URL + " (not followed)"
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want one that says %q", err, want)
				}
				if op.name != "card read" && !agent.IsPermanent(err) {
					t.Errorf("err = %v, want a permanent error (the same request gets the same redirect)", err)
				}
				if got := tr.requests(); len(got) != 0 {
					t.Errorf("the redirect's target received %d requests: %q", len(got), got)
				}
			})
		}
	}
}
