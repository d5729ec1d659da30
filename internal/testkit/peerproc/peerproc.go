// Package peerproc holds what the tests' helpers that run a peer as a
// process (Prism for Twilio's and Slack's descriptions) share: finding the
// module's root, where the peers are installed, and keeping the process's
// output for a failure message.
package peerproc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ModuleRoot is the nearest directory at or above the working directory
// that holds go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}

// Log keeps a process's output (at most 1 MiB) for a failure message; the
// process writes it while the test may read it.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Mock runs `prism mock` (the binary at prism) on spec on a free loopback
// port until the test ends, and returns its base URL ("http://host:port")
// once it listens. Without --errors: Prism still answers 422 to a request
// that breaks the description (and 401 without credentials), but does not
// turn a description's own examples that break their formats into 500s.
func Mock(t testing.TB, prism, spec string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out Log
	cmd := exec.Command(prism, "mock", "-h", "127.0.0.1", "-p", fmt.Sprint(port), spec)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prism: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("prism exited:\n%s", out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("prism did not listen within 90s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
