// Package a2ajstest runs beachd's A2A 1.0 test peer — a Beach-like agent
// on the official JavaScript SDK (@a2a-js/sdk 1.x, JSON-RPC binding and,
// on request, HTTP+JSON, without the 0.3 compatibility layer;
// testdata/a2a-js-agent/agent.mjs) — for tests. scripts/peers/a2a-js.sh
// installs the SDK. When node or the SDK is missing, Start skips the test
// with the reason, or fails it when CI is set.
package a2ajstest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Server is a running JS agent.
type Server struct {
	// Origin is http://127.0.0.1:PORT; the card is at Origin + /.well-known/agent-card.json.
	Origin string
	// JSONRPC and REST are the two bindings' endpoints.
	JSONRPC, REST string
	Port          int
	cmd           *exec.Cmd
	done          chan struct{}
	stderr        lockedBuffer
}

// lockedBuffer keeps the last 64 KiB written to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 64<<10 {
		l.b = l.b[len(l.b)-64<<10:]
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// Options of Start.
type Options struct {
	// Port to listen on; 0 picks one.
	Port int
	// Bindings the card offers: "jsonrpc" (default), "rest" or "both".
	Bindings string
	// Push makes the card say capabilities.pushNotifications: the agent
	// posts every task update to the push URL SendMessage gives.
	Push bool
	// Slow is how long a "slow:" task works before it completes; 0 means
	// 400ms.
	Slow time.Duration
	// SlowJitter is added at random to a "slow:" task's time.
	SlowJitter time.Duration
}

// Received is what the agent recorded.
type Received struct {
	Requests []struct {
		Path       string  `json:"path"`
		HTTPMethod string  `json:"httpMethod"`
		Version    *string `json:"version"`
	} `json:"requests"`
	Messages  []Seen     `json:"messages"`
	Approvals []Approval `json:"approvals"`
	// Events are, in order, the SendMessage and GetTask calls the agent
	// served (Kind "call", Method) and the pushes it sent (Kind "push",
	// Update: task, statusUpdate, artifactUpdate or message; State).
	Events []Event `json:"events"`
	// Finals say when the agent published each completed task's final
	// status: the task's brief (the text after "slow:") and Unix ms.
	Finals []struct {
		Brief string `json:"brief"`
		At    int64  `json:"at"`
	} `json:"finals"`
}

// Calls counts the calls of method (SendMessage, GetTask) the agent
// served.
func (r *Received) Calls(method string) int {
	n := 0
	for _, e := range r.Events {
		if e.Kind == "call" && e.Method == method {
			n++
		}
	}
	return n
}

// Event is one call the agent served or one push it sent.
type Event struct {
	Seq    int     `json:"seq"`
	Kind   string  `json:"kind"`
	Method string  `json:"method,omitempty"`
	Update string  `json:"update,omitempty"`
	State  *string `json:"state"`
}

// WaitSettledPush waits until the agent has sent n pushes whose state is
// settled (completed, failed, canceled, rejected, input or auth required):
// the SDK notes a push once it is sent, a moment after beachd has it.
func (s *Server) WaitSettledPush(ctx context.Context, n int) (*Received, error) {
	for {
		r, err := s.Received(ctx)
		if err == nil {
			seen := 0
			for _, e := range r.Events {
				if e.Kind == "push" && e.State != nil && settledStates[*e.State] {
					seen++
				}
			}
			if seen >= n {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("no push of a settled task: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var settledStates = map[string]bool{"TASK_STATE_COMPLETED": true, "TASK_STATE_FAILED": true, "TASK_STATE_CANCELED": true,
	"TASK_STATE_REJECTED": true, "TASK_STATE_INPUT_REQUIRED": true, "TASK_STATE_AUTH_REQUIRED": true}

// AfterLastPush returns the calls of method served after the last push
// (all of them when there was no push) and the number of pushes.
func (r *Received) AfterLastPush(method string) (calls, pushes int) {
	for _, e := range r.Events {
		switch {
		case e.Kind == "push":
			pushes++
			calls = 0
		case e.Kind == "call" && e.Method == method:
			calls++
		}
	}
	return calls, pushes
}

// Seen is one message the agent received, without the bytes of its
// files. A message "echo:…" is answered with a data part (partType "echo")
// of this shape.
type Seen struct {
	MessageID string         `json:"messageId"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Metadata  map[string]any `json:"metadata"`
	Parts     []PartSeen     `json:"parts"`
}

// PartSeen is one part of a received message: its kind (text, raw, url or
// data), attributes, and the size of raw bytes.
type PartSeen struct {
	Kind      string         `json:"kind"`
	Filename  string         `json:"filename"`
	MediaType string         `json:"mediaType"`
	Metadata  map[string]any `json:"metadata"`
	Text      string         `json:"text,omitempty"`
	Size      int            `json:"size,omitempty"`
	URL       string         `json:"url,omitempty"`
	Data      any            `json:"data,omitempty"`
}

// Approval is one approval-response the agent received.
type Approval struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	MessageID string         `json:"messageId"`
	Response  map[string]any `json:"response"`
	Metadata  map[string]any `json:"metadata"`
}

// Dir is the directory of agent.mjs (testdata/a2a-js-agent at the module root).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "a2a-js-agent"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// Available reports why the peer cannot run ("" when it can).
func Available() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	dir, err := Dir()
	if err != nil {
		return err.Error()
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		return "@a2a-js/sdk is not installed (run scripts/peers/a2a-js.sh)"
	}
	return ""
}

// Skip skips t (or fails it under CI) when the peer cannot run.
func Skip(t testing.TB) {
	t.Helper()
	if why := Available(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("A2A 1.0 JS peer unavailable under CI: %s", why)
		}
		t.Skipf("SKIPPING: A2A 1.0 JS peer unavailable: %s", why)
	}
}

// Start runs the agent until the test ends.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	Skip(t)
	s, err := start(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("JS agent stderr:\n%s", s.stderr.String())
		}
	})
	return s
}

func start(opt Options) (*Server, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	if opt.Bindings == "" {
		opt.Bindings = "jsonrpc"
	}
	args := []string{filepath.Join(dir, "agent.mjs"), "--port", strconv.Itoa(opt.Port), "--bindings", opt.Bindings}
	if opt.Push {
		args = append(args, "--push")
	}
	if opt.Slow > 0 {
		args = append(args, "--slow", strconv.FormatInt(opt.Slow.Milliseconds(), 10))
	}
	if opt.SlowJitter > 0 {
		args = append(args, "--slow-jitter", strconv.FormatInt(opt.SlowJitter.Milliseconds(), 10))
	}
	cmd := exec.Command("node", args...)
	s := &Server{cmd: cmd, done: make(chan struct{})}
	// The SDK logs every refused request; keep it for a failing test.
	cmd.Stderr = &s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start JS agent: %w", err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				first = false
				var v struct{ Port int }
				if err := json.Unmarshal(sc.Bytes(), &v); err != nil || v.Port == 0 {
					ready <- fmt.Errorf("JS agent said %q, want {\"port\":N}", sc.Text())
					continue
				}
				s.Port = v.Port
				ready <- nil
			}
		}
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case err := <-ready:
		if err != nil {
			s.Close()
			return nil, err
		}
	case <-s.done:
		return nil, fmt.Errorf("JS agent exited before listening")
	case <-time.After(30 * time.Second):
		s.Close()
		return nil, fmt.Errorf("JS agent did not listen within 30s")
	}
	s.Origin = fmt.Sprintf("http://127.0.0.1:%d", s.Port)
	s.JSONRPC, s.REST = s.Origin+"/a2a/jsonrpc", s.Origin+"/a2a/rest"
	return s, nil
}

// Close stops the agent and waits for it to exit.
func (s *Server) Close() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Received fetches what the agent recorded.
func (s *Server) Received(ctx context.Context) (*Received, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Origin+"/received", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r Received
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode /received: %w", err)
	}
	return &r, nil
}

// Release completes the "hold:" tasks at work and returns how many.
func (s *Server) Release(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Origin+"/release", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v struct{ Released int }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("decode /release: %w", err)
	}
	return v.Released, nil
}

// WaitApprovals polls until the agent holds at least n approval-responses.
func (s *Server) WaitApprovals(ctx context.Context, n int) ([]Approval, error) {
	for {
		r, err := s.Received(ctx)
		if err == nil && len(r.Approvals) >= n {
			return r.Approvals, nil
		}
		select {
		case <-ctx.Done():
			got := 0
			if r != nil {
				got = len(r.Approvals)
			}
			return nil, fmt.Errorf("agent holds %d approval-responses, want %d: %w", got, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
