// Package browser starts the headless Chromium that browser tests drive
// (chromedp), and finds the peers they use with it: axe-core and the
// screenshot directory. A missing Chromium or axe-core skips the test with
// a loud reason, and fails it when CI is set (scripts/peers/chromium.sh and
// axe.sh install them).
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// Path is Debian's Chromium, or skips (fails under CI).
func Path(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	missing(t, "chromium is not installed; run scripts/peers/chromium.sh as root")
	return ""
}

// Start launches a headless Chromium with a profile of its own (its own
// cookies) and returns its context, ended when the test ends. The flags keep
// it off the network: this machine's closed network refuses Chromium's
// background connections.
func Start(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Path(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("hide-scrollbars", true), chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser without a deadline
		t.Fatal(err)
	}
	return ctx
}

// Axe is axe-core's script from the repository's .peers (scripts/peers/axe.sh),
// or skips (fails under CI).
func Axe(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
	b, err := os.ReadFile(filepath.Join(dir, ".peers", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		missing(t, "axe-core is not installed; run scripts/peers/axe.sh")
	}
	return string(b)
}

// ScreenshotDir is $BEACHD_SCREENSHOTS (created), else a temporary directory.
func ScreenshotDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("BEACHD_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip("SKIPPED LOUDLY: " + why)
}
