package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

// Without a version set at build time, `beachd version` says what the Go
// toolchain recorded: module version, commit, its time, uncommitted changes.
func TestVersionString(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "394a2ae5f0e1d2c3b4a5968778695a4b3c2d1e0f"},
		{Key: "vcs.time", Value: "2026-11-24T01:50:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for name, tt := range map[string]struct {
		ldflags string
		info    *debug.BuildInfo
		want    string
	}{
		"ldflags win":     {"v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v1.3.0"}}, "v1.4.0"},
		"go install @tag": {"", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.3.0"}}, "v1.3.0 (go1.26.0)"},
		"checkout build": {"", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"(devel) (commit 394a2ae5f0e1, 2026-11-24T01:50:00Z, modified, go1.26.0)"},
		"no build info": {"", nil, "dev (no build information)"},
		// go build in a git checkout (Go 1.24 and later): a pseudo-version
		// naming the commit, +dirty with uncommitted changes.
		"checkout build, pseudo-version": {"", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261124015000-394a2ae5f0e1+dirty"}, Settings: vcs},
			"v0.0.0-20261124015000-394a2ae5f0e1+dirty (commit 394a2ae5f0e1, 2026-11-24T01:50:00Z, modified, go1.26.8)"},
		"go install @commit": {"", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261124015000-394a2ae5f0e1"}},
			"v0.0.0-20261124015000-394a2ae5f0e1 (go1.26.8)"},
		// go run records no commit: say how to get one.
		"go run": {"", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"(devel) (no commit recorded: `go build ./cmd/beachd` in a git checkout records it, go1.26.8)"},
	} {
		if got := versionString(tt.ldflags, tt.info); got != tt.want {
			t.Errorf("%s: %q, want %q", name, got, tt.want)
		}
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"version"}, env(nil), &out, &out); code != 0 || out.String() == "beachd dev\n" || !strings.HasPrefix(out.String(), "beachd ") {
		t.Errorf("beachd version: %d %q", code, out.String())
	}
}
