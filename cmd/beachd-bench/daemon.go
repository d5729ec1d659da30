package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cool-ai/beachd/stress"
)

// benchKey is the API key of every daemon the bench starts.
const benchKey = "bench-key-0123456789abcdef"

// benchWebhookSecret signs the webhooks the sink receives (beachd's and the
// River comparator's).
const benchWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// buildBeachd builds ./cmd/beachd into dir (or returns bin when set).
func buildBeachd(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "beachd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/beachd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build beachd (run from the repository root): %w", err)
	}
	return bin, nil
}

// proc is a running daemon; a sampler keeps its peak RSS.
type proc struct {
	cmd    *exec.Cmd
	base   string
	stderr *bytes.Buffer
	// Ready is how long it took from exec to /readyz answering 200.
	Ready time.Duration

	mu       sync.Mutex
	peakRSS  float64
	stopSamp chan struct{}
	sampDone chan struct{}
}

// startDaemon writes cfg (with listen/data_dir/api_keys prepended) and runs
// `beachd serve` until /readyz answers.
func startDaemon(bin, dir, dataDir, extra string, readyWithin time.Duration) (*proc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cfg := fmt.Sprintf("listen: %s\ndata_dir: %s\napi_keys: [\"%s\"]\nlog: {level: warn}\n%s", addr, dataDir, benchKey, extra)
	cfgPath := filepath.Join(dir, fmt.Sprintf("beachd-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	p := &proc{base: "http://" + addr, stderr: &bytes.Buffer{}, stopSamp: make(chan struct{}), sampDone: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	p.cmd.Stderr = p.stderr
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go p.sample()
	deadline := start.Add(readyWithin)
	for {
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				p.Ready = time.Since(start)
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("beachd not ready after %s:\n%s", readyWithin, p.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *proc) sample() {
	defer close(p.sampDone)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if r := stress.ProcStatus(p.cmd.Process.Pid, "VmHWM"); r > 0 {
			p.mu.Lock()
			p.peakRSS = max(p.peakRSS, r)
			p.mu.Unlock()
		}
		select {
		case <-p.stopSamp:
			return
		case <-t.C:
		}
	}
}

// RSS is the current resident set in MiB.
func (p *proc) RSS() float64 { return stress.ProcStatus(p.cmd.Process.Pid, "VmRSS") }

// PeakRSS is the highest resident set seen (VmHWM), in MiB.
func (p *proc) PeakRSS() float64 {
	if r := stress.ProcStatus(p.cmd.Process.Pid, "VmHWM"); r > 0 {
		p.mu.Lock()
		p.peakRSS = max(p.peakRSS, r)
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peakRSS
}

// stop sends SIGTERM and waits (SIGKILL after 30 s).
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	p.endSampling()
}

func (p *proc) kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.endSampling()
}

func (p *proc) endSampling() {
	select {
	case <-p.stopSamp:
	default:
		close(p.stopSamp)
	}
	<-p.sampDone
}

// startSink serves h as the webhook endpoint "sink" on a loopback port and
// returns the daemon configuration that delivers to it (64 dispatch workers,
// 64 in flight), and the function that stops the server.
func startSink(h http.Handler) (cfg string, stop func(), err error) {
	cfg, _, stop, err = startSinkURL(h)
	return cfg, stop, err
}

// startSinkURL is startSink that also returns the sink's URL.
func startSinkURL(h http.Handler) (cfg, url string, stop func(), err error) {
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(sl)
	url = fmt.Sprintf("http://%s/hook", sl.Addr())
	cfg = fmt.Sprintf(`dispatch: {workers: 64}
webhooks:
  endpoints:
    sink: {url: %q, secret: %q, max_concurrency: 64}
`, url, benchWebhookSecret)
	return cfg, url, func() { srv.Close() }, nil
}
