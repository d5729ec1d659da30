package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// lockedBuffer is a log destination the daemon's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A shutdown is logged: why it began (the signal), each part stopping, and
// "stopped" with how long it took.
func TestShutdownIsLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := devConfig(ln.Addr().String(), t.TempDir(), "dev-test-key-0123456789", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	reg, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a, err := buildApp(ctx, cfg, reg, log, io.Discard, true, ln)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	poll.Eventually(t, 10*time.Second, "the daemon to be ready", func() bool { return a.readyErr() == nil })
	// signal.NotifyContext cancels with this cause.
	cancel(errors.New("terminated signal received"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop")
	}
	got := logs.String()
	want := []string{`msg="shutting down" reason="terminated signal received"`, `msg="http server stopped"`}
	for _, w := range a.workers {
		if w.name == "agent-cards" {
			// One-shot: it reads the cards at start and is usually done
			// long before the shutdown (then it logs no shutdown line).
			continue
		}
		want = append(want, `msg="worker stopped" worker=`+w.name+" after=")
	}
	want = append(want, `msg=stopped after=`)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("log lacks %s", w)
		}
	}
	if i, j := strings.Index(got, "shutting down"), strings.Index(got, "msg=stopped"); i < 0 || j < i {
		t.Errorf("stopped logged before the shutdown began")
	}
	// Every shutdown line comes after "shutting down", and a clean stop
	// warns of nothing (the dev mail server's closed IDLE connection).
	if i, j := strings.Index(got, "shutting down"), strings.Index(got, `msg="worker stopped"`); j >= 0 && j < i {
		t.Errorf("a worker's stop was logged before the shutdown began")
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("a clean stop logged: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", got)
	}
}
