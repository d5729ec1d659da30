package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitDirectives reads a systemd unit's Key=Value lines, every value of a
// key in order.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not Key=Value: %q", path, line)
		}
		out[k] = append(out[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnitHardening pins what the unit promises in docs/deployment.md: an
// unprivileged transient user, a state directory as the only writable place,
// and the sandboxing directives.
func TestUnitHardening(t *testing.T) {
	d := unitDirectives(t, "beachd.service")
	want := map[string]string{
		"ExecStart":               "/usr/local/bin/beachd serve --config /etc/beachd/beachd.yaml",
		"DynamicUser":             "yes",
		"StateDirectory":          "beachd",
		"WorkingDirectory":        "/var/lib/beachd",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"CapabilityBoundingSet":   "",
		"MemoryDenyWriteExecute":  "yes",
		"SystemCallArchitectures": "native",
		"Restart":                 "on-failure",
	}
	for k, v := range want {
		got, ok := d[k]
		if !ok {
			t.Errorf("%s is missing (want %s=%s)", k, k, v)
			continue
		}
		if got[len(got)-1] != v {
			t.Errorf("%s=%s, want %s", k, got[len(got)-1], v)
		}
	}
	// Go raises its descriptor limit with setrlimit at start-up: a filter
	// that removes @resources would kill beachd with SIGSYS before main.
	for _, f := range d["SystemCallFilter"] {
		if strings.HasPrefix(f, "~") && strings.Contains(f, "@resources") {
			t.Errorf("SystemCallFilter=%s removes setrlimit, which the Go runtime calls at start-up", f)
		}
	}
}

// systemdAnalyze finds systemd-analyze (scripts/peers/systemd.sh installs
// it). Without it the unit checks skip, and fail under CI, where the peer
// script has run.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("systemd-analyze is not installed (Debian package systemd; scripts/peers/systemd.sh installs it), and CI is set")
	}
	t.Skip("SKIPPED: systemd-analyze is not installed (Debian package systemd; scripts/peers/systemd.sh installs it): the unit's syntax was not checked")
	return ""
}

// TestUnitVerifies runs systemd-analyze verify on the unit, with ExecStart
// pointed at an executable that exists here (verify checks that it does).
// Any warning about the unit is a failure: verify exits 0 on an unknown key
// or a value it cannot parse, and only says so.
func TestUnitVerifies(t *testing.T) {
	analyze := systemdAnalyze(t)
	unit, err := os.ReadFile("beachd.service")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/beachd ", self+" ")
	path := filepath.Join(t.TempDir(), "beachd.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "beachd.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}

// TestUnitVerifyCatchesMistakes shows that TestUnitVerifies can fail: the
// same check on a unit with a misspelt key reports it.
func TestUnitVerifyCatchesMistakes(t *testing.T) {
	analyze := systemdAnalyze(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "beachd.service")
	unit := "[Service]\nExecStart=" + self + "\nProtectSytem=strict\n"
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if !strings.Contains(string(out), "ProtectSytem") {
		t.Fatalf("systemd-analyze verify said nothing of a misspelt key:\n%s", out)
	}
}

// TestDockerfile pins the image's shape where no engine can build it: a
// static binary built in a Go stage, a final stage that runs as a non-root
// user, a volume for the data and a health check.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	var froms []string
	final := ""
	for _, line := range strings.Split(df, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "FROM ") {
			froms = append(froms, line)
			final = ""
		}
		final += line + "\n"
	}
	if len(froms) < 2 || !strings.Contains(froms[0], "golang:") {
		t.Fatalf("want a multi-stage build starting from a golang image, got %q", froms)
	}
	for _, s := range []string{"CGO_ENABLED=0", "./cmd/beachd", "./deploy/healthcheck"} {
		if !strings.Contains(df, s) {
			t.Errorf("Dockerfile does not mention %s", s)
		}
	}
	for _, s := range []string{"USER ", "VOLUME ", "HEALTHCHECK ", "ENTRYPOINT ", "EXPOSE 8025"} {
		if !strings.Contains(final, s) {
			t.Errorf("final stage has no %s", strings.TrimSpace(s))
		}
	}
	for _, line := range strings.Split(final, "\n") {
		if u, ok := strings.CutPrefix(line, "USER "); ok && (u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:")) {
			t.Errorf("final stage runs as root: %s", line)
		}
	}
}

// docker runs the docker CLI and returns its trimmed output.
func docker(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// TestContainerImage builds the image, starts it with a minimal
// configuration and waits until both its HEALTHCHECK and /readyz through the
// published port say it is up. It needs a Docker engine; the engine is an
// optional peer, so without one the test skips (under CI too) and says so.
func TestContainerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the container image was not built")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("SKIPPED: no docker CLI: the container image was not built or started")
	}
	probe, cancelProbe := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelProbe()
	if out, err := exec.CommandContext(probe, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: no Docker engine answers (%v: %s): the container image was not built or started", err, bytes.TrimSpace(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tag := fmt.Sprintf("beachd-test:%d", time.Now().UnixNano())
	docker(t, ctx, "build", "-t", tag, "..")
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })

	dir := t.TempDir()
	config := "listen: 0.0.0.0:8025\ndata_dir: /var/lib/beachd\napi_keys: [\"${BEACHD_API_KEY}\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "beachd.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	id := docker(t, ctx, "run", "-d", "-e", "BEACHD_API_KEY=container-test-key-0123456789",
		"-v", dir+":/etc/beachd:ro", "-p", "127.0.0.1::8025", tag)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", id).CombinedOutput()
			t.Logf("container logs:\n%s", out)
		}
		exec.Command("docker", "rm", "-f", id).Run()
	})
	hostPort := docker(t, ctx, "port", id, "8025/tcp")
	if i := strings.Index(hostPort, "\n"); i >= 0 {
		hostPort = hostPort[:i]
	}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		t.Fatalf("docker port: %q: %v", hostPort, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	health, ready := "", 0
	for time.Now().Before(deadline) && (health != "healthy" || ready != http.StatusOK) {
		health = docker(t, ctx, "inspect", "--format", "{{if .State.Health}}{{.State.Health.Status}}{{end}}", id)
		if health == "unhealthy" {
			t.Fatalf("the container's HEALTHCHECK says unhealthy")
		}
		if res, err := http.Get("http://" + hostPort + "/readyz"); err == nil {
			ready = res.StatusCode
			res.Body.Close()
		}
		if health != "healthy" || ready != http.StatusOK {
			time.Sleep(time.Second) // polling the engine, not waiting for an outcome
		}
	}
	if health != "healthy" || ready != http.StatusOK {
		t.Fatalf("after 3 minutes: health %q, /readyz %d", health, ready)
	}
	// The binary in the image is the one built from this checkout.
	if out := docker(t, ctx, "exec", id, "/usr/local/bin/beachd", "version"); !strings.HasPrefix(out, "beachd ") {
		t.Fatalf("beachd version in the container: %q", out)
	}
}
