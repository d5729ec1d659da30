// Package peerproc holds what the tests' helpers that run a peer as a
// process (Prism for Twilio's and Slack's descriptions) share: finding the
// module's root, where the peers are installed, and keeping the process's
// output for a failure message.
package peerproc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
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
