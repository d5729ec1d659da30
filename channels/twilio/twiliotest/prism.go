package twiliotest

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/peerproc"
)

// Twilio's own OpenAPI descriptions (npm @twilio-alpha/mcp,
// twilio-oai/spec/json/…) that StartPrism serves.
const (
	SpecMessages = "twilio_api_v2010.json"
	SpecContent  = "twilio_content_v1.json"
)

// StartPrism runs `prism mock` of the named description on a free port and
// returns its base URL. Prism answers 422 to a request that breaks the
// description, so a request shaped wrongly fails the test.
// scripts/peers/prism.sh installs Prism and the descriptions into
// .peers/node_modules at the module root (or $BEACHD_PEERS/node_modules).
// Without them the test is skipped, loudly — what names it in the message —
// and under CI it fails. Prism is stopped when the test ends.
func StartPrism(t testing.TB, what, spec string) string {
	t.Helper()
	prism, path := prismPeer(t, what, spec)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out peerproc.Log
	// Without --errors: Prism still answers 422 to a request that breaks
	// the description (and 401 without credentials), but does not turn
	// Twilio's own example responses, whose relative URIs break their
	// format "uri", into 500s.
	cmd := exec.Command(prism, "mock", "-h", "127.0.0.1", "-p", fmt.Sprint(port), path)
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

// prismPeer finds Prism and the named description, or skips (fails under
// CI).
func prismPeer(t testing.TB, what, name string) (prism, spec string) {
	t.Helper()
	missing := func(why string) {
		msg := "SKIPPING " + what + ": " + why + " (run scripts/peers/prism.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not installed")
	}
	dir := os.Getenv("BEACHD_PEERS")
	if dir == "" {
		root, err := peerproc.ModuleRoot()
		if err != nil {
			missing(err.Error())
		}
		dir = filepath.Join(root, ".peers")
	}
	peers := filepath.Join(dir, "node_modules")
	prism = filepath.Join(peers, ".bin", "prism")
	if _, err := os.Stat(prism); err != nil {
		missing("prism is not installed in " + peers)
	}
	filepath.WalkDir(filepath.Join(peers, "@twilio-alpha", "mcp"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, filepath.Join("twilio-oai", "spec", "json", name)) {
			spec = p
			return fs.SkipAll
		}
		return nil
	})
	if spec == "" {
		missing("@twilio-alpha/mcp's " + name + " is not installed in " + peers)
	}
	return prism, spec
}
