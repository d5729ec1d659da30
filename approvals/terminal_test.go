package approvals

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
)

// terminalPeer is a real agent for the lost-answer tests: how the
// harness's client reaches it, and how many approval-responses it took.
type terminalPeer struct {
	name      string
	target    agent.Target // straight to the agent
	approvals func() int
}

func terminalPeers(t *testing.T) []func(t *testing.T) terminalPeer {
	js := func(bindings, binding string) func(t *testing.T) terminalPeer {
		return func(t *testing.T) terminalPeer {
			s := a2ajstest.Start(t, a2ajstest.Options{Bindings: bindings})
			u := s.JSONRPC
			if binding == "http+json" {
				u = s.REST
			}
			return terminalPeer{name: "js-1.0-" + bindings, target: agent.Target{URL: u, Version: agent.V10, Binding: binding, Timeout: 5 * time.Second},
				approvals: func() int {
					r, err := s.Received(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					return len(r.Approvals)
				}}
		}
	}
	return []func(t *testing.T) terminalPeer{
		func(t *testing.T) terminalPeer {
			s := agenttest.StartOn(nil, false)
			t.Cleanup(s.Close)
			return terminalPeer{name: "a2a-go-0.3", target: agent.Target{URL: s.URL, Version: agent.V03, Timeout: 5 * time.Second},
				approvals: func() int { return len(s.Received()) }}
		},
		js("jsonrpc", "jsonrpc"),
		js("rest", "http+json"),
	}
}

// answerProxy stands between beachd's injector and the agent. The first
// approval-response it sees is handled per mode:
//   - "lose": forwarded; once the agent has completed the task, the
//     answer is dropped (the connection closes), as a network fault
//     after the agent took the decision would;
//   - "refuse": not forwarded — the proxy answers 503 — after the task was
//     completed by another message, so the decision never reached it.
//
// Everything else is forwarded as it is. It counts task reads.
type answerProxy struct {
	srv      *httptest.Server
	mode     string
	direct   *agent.Client // to the agent, bypassing the proxy
	fired    atomic.Bool
	taskRead atomic.Int32
}

var taskIDPattern = regexp.MustCompile(`"taskId":"([^"]+)"`)

func newAnswerProxy(t *testing.T, p terminalPeer, mode string) *answerProxy {
	direct, err := agent.New(map[string]agent.Target{"travel": p.target}, nil)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := url.Parse(p.target.URL)
	ap := &answerProxy{mode: mode, direct: direct}
	ap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tasks/get"`)) || bytes.Contains(body, []byte(`"GetTask"`)) || strings.Contains(r.URL.Path, "/tasks/") {
			ap.taskRead.Add(1)
		}
		first := bytes.Contains(body, []byte(envelope.PartApprovalResponse)) && ap.fired.CompareAndSwap(false, true)
		var taskID string
		if m := taskIDPattern.FindSubmatch(body); m != nil {
			taskID = string(m[1])
		}
		if first && mode == "refuse" {
			ap.complete(t, taskID)
			http.Error(w, "agent unavailable", http.StatusServiceUnavailable)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+up.Host+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if first {
			ap.waitTerminal(t, taskID)
			panic(http.ErrAbortHandler) // the answer is lost
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	t.Cleanup(ap.srv.Close)
	return ap
}

// proxied is the target t, reached through the proxy.
func (ap *answerProxy) proxied(t agent.Target) agent.Target {
	u, _ := url.Parse(t.URL)
	t.URL = ap.srv.URL + u.RequestURI()
	return t
}

func (ap *answerProxy) waitTerminal(t *testing.T, taskID string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, err := ap.direct.Task(context.Background(), "travel", taskID)
		if err == nil && task.Status.State.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("task %s did not end: %+v, %v", taskID, task, err)
			return
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// complete ends the task with another message than the decision.
func (ap *answerProxy) complete(t *testing.T, taskID string) {
	task, err := ap.direct.Task(context.Background(), "travel", taskID)
	if err != nil {
		t.Errorf("read task %s: %v", taskID, err)
		return
	}
	if _, err := ap.direct.SendMessage(context.Background(), "travel", &agent.Message{ContextID: task.ContextID, TaskID: taskID,
		Parts: agent.Parts{agent.TextPart("never mind, cancel the trip", nil)}}); err != nil {
		t.Errorf("complete task %s: %v", taskID, err)
	}
	ap.waitTerminal(t, taskID)
}

// decide suspends a turn on the peer, has alice approve it, and waits for
// the injection to end (done or dead).
func decideThrough(t *testing.T, p terminalPeer, mode string) (*harness, *answerProxy, *store.Injection) {
	ap := newAnswerProxy(t, p, mode)
	h := newHarness(t, harnessOpt{target: &p.target, sender: func(Sender) Sender {
		c, err := agent.New(map[string]agent.Target{"travel": ap.proxied(p.target)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}})
	env := h.suspend("appr-lost-" + mode)
	hd := h.handle(h.ingest(env, email(alice))[0])
	h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "yes"})
	var ended []*store.Injection
	poll.Eventually(t, 15*time.Second, "the injection to be done or dead", func() bool {
		done, _ := h.db.ListInjections(h.ctx, store.InjectionDone, 10)
		dead, _ := h.db.ListInjections(h.ctx, store.InjectionDead, 10)
		ended = append(done, dead...)
		return len(ended) > 0
	})
	if !ap.fired.Load() {
		t.Fatal("the proxy never saw the decision: the test tested nothing")
	}
	return h, ap, ended[0]
}

// TestRetryIntoCompletedTaskAfterLostAnswer: the agent takes the decision
// and completes its task, but its answer is lost; the retry is refused
// (the task is finished: UnsupportedOperation from a 1.0 agent, invalid
// params from a2a-go 0.3). beachd reads the task, finds its own message
// in the history, and records the injection as delivered: no dead
// letter, no "not taken into account" to the decider, one decision at
// the agent.
func TestRetryIntoCompletedTaskAfterLostAnswer(t *testing.T) {
	for _, peer := range terminalPeers(t) {
		p := peer(t)
		t.Run(p.name, func(t *testing.T) {
			h, ap, inj := decideThrough(t, p, "lose")
			if inj.State != store.InjectionDone || inj.Attempts < 2 {
				t.Fatalf("injection %+v, want done after a retry", inj)
			}
			if ap.taskRead.Load() == 0 {
				t.Error("the task was never read: what confirmed the delivery?")
			}
			if n := p.approvals(); n != 1 {
				t.Errorf("the agent took %d decisions, want 1", n)
			}
			if n := counterValue(h.metrics.injections.WithLabelValues("dead")); n != 0 {
				t.Errorf("dead injections metric %v", n)
			}
			// The metric follows the recorded outcome.
			poll.Eventually(t, 5*time.Second, "the done injections metric to be 1", func() bool {
				return counterValue(h.metrics.injections.WithLabelValues("done")) == 1
			})
			h.settle()
			for _, m := range h.enq.To(alice) {
				if strings.HasPrefix(m, "Not taken into account") {
					t.Errorf("the decider was told %q", m)
				}
			}
		})
	}
}

// TestRetryIntoTaskCompletedWithoutIt: the first attempt never reached the
// agent, and its task was completed by something else meanwhile. The
// retry's refusal is real — the task's history lacks the decision — so
// the injection is dead-lettered.
func TestRetryIntoTaskCompletedWithoutIt(t *testing.T) {
	for _, peer := range terminalPeers(t) {
		p := peer(t)
		t.Run(p.name, func(t *testing.T) {
			h, ap, inj := decideThrough(t, p, "refuse")
			if inj.State != store.InjectionDead || inj.Attempts != 2 || !strings.HasPrefix(inj.LastError, "permanent") {
				t.Fatalf("injection %+v, want dead-lettered on the retry", inj)
			}
			if ap.taskRead.Load() == 0 {
				t.Error("the task was never read before dead-lettering a retry")
			}
			if n := p.approvals(); n != 0 {
				t.Errorf("the agent took %d decisions, want 0", n)
			}
			if n := counterValue(h.metrics.injections.WithLabelValues("done")); n != 0 {
				t.Errorf("done injections metric %v", n)
			}
		})
	}
}

// TestFirstAttemptIntoCompletedTask: a decision whose first attempt finds
// the task finished never reached the agent: dead-lettered at once,
// without asking the agent.
func TestFirstAttemptIntoCompletedTask(t *testing.T) {
	var mu sync.Mutex
	var reads int
	h := newHarness(t, harnessOpt{sender: func(real Sender) Sender {
		return countingConfirmer{Sender: real, confirm: real.(Confirmer), reads: func() { mu.Lock(); reads++; mu.Unlock() }}
	}})
	env := h.suspend("appr-late")
	if _, err := h.client.SendMessage(h.ctx, "travel", &agent.Message{ContextID: env.Meta.SessionID, TaskID: env.Meta.TurnID,
		Parts: agent.Parts{agent.TextPart("never mind", nil)}}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the task to end", func() bool {
		task, err := h.client.Task(h.ctx, "travel", env.Meta.TurnID)
		return err == nil && task.Status.State.Terminal()
	})
	hd := h.handle(h.ingest(env, email(alice))[0])
	h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r>", Token: hd.Token, Text: "yes"})
	var dead []*store.Injection
	poll.Eventually(t, 10*time.Second, "the injection to be dead-lettered", func() bool {
		dead, _ = h.db.ListInjections(h.ctx, store.InjectionDead, 10)
		return len(dead) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if dead[0].Attempts != 1 || reads != 0 {
		t.Fatalf("dead letter %+v after %d confirmations, want the first attempt's, none asked", dead[0], reads)
	}
}

type countingConfirmer struct {
	Sender
	confirm Confirmer
	reads   func()
}

func (c countingConfirmer) HasDecision(ctx context.Context, a, s, tu string, r envelope.ApprovalResponse) (bool, error) {
	c.reads()
	return c.confirm.HasDecision(ctx, a, s, tu, r)
}
