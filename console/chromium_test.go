package console

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cool-ai/beachd/internal/testkit/browser"
)

// Every screen rendered from the fixtures in headless Chromium: the states a
// live daemon rarely shows (a dead injection, an open breaker, a retrying
// delivery) included. axe-core must find no serious or critical violation;
// desktop (1280×800) and phone (390×844) screenshots go to
// $BEACHD_SCREENSHOTS (prefixed fixture-), else a temporary directory. The
// live daemon's screens and actions are driven in
// cmd/beachd/console_chromium_test.go.

func TestFixtureScreensInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser")
	}
	axe, dir := browser.Axe(t), browser.ScreenshotDir(t)
	f := newFixture(t, "http://beachd.test")
	bctx := browser.Start(t)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	// Sign in through the form.
	run(chromedp.Navigate(f.srv.URL+"/ui/"), chromedp.SetValue(chromedp.CSS("#key"), fullKey))
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`form[action="/ui/login"] button`))); err != nil {
		t.Fatal(err)
	}
	cancel()

	paths := make([]string, 0)
	for p := range f.screens() {
		if !strings.HasSuffix(p, "/mime") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		name := "fixture-" + strings.Trim(strings.NewReplacer("/ui/", "", "/", "-", "?", "-", "=", "-", "&", "-", ":", "").Replace(p), "-")
		if name == "fixture-" {
			name = "fixture-overview"
		}
		if strings.Contains(p, "/deliveries/") {
			name = "fixture-delivery-" + map[string]string{f.sent["email"]: "email", f.sent["sms"]: "sms", f.dead[0]: "dead"}[strings.TrimPrefix(p, "/ui/deliveries/")]
		}
		run(chromedp.Navigate(f.srv.URL + p))
		ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
		// Read in the page, not through a node id, which may still be the
		// previous document's right after a navigation.
		body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("main") || {innerText: "no main element"}).innerText`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(body, "Something went wrong") || strings.Contains(body, "Not Found") {
			t.Errorf("%s: %s", p, body)
		}
		// How each agent answer arrived (push or poll): on a conversation,
		// per message of the person; on the schedules, per last run.
		if want, ok := map[string]string{"/ui/conversations/cnv_email1": "answered by push", "/ui/conversations/cnv_wa1": "answered by poll",
			"/ui/schedules": "answered by push"}[p]; ok && !strings.Contains(body, want) {
			t.Errorf("%s lacks %q: %s", p, want, body)
		}
		for _, vp := range []struct {
			suffix string
			w, h   int64
			mobile bool
		}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
			vopts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
			if vp.mobile {
				vopts = append(vopts, chromedp.EmulateMobile)
			}
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.w, vp.h, vopts...)); err != nil {
				t.Fatal(err)
			}
			res, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
				Violations []struct {
					ID, Impact, Help string
					Nodes            []struct{ Target []any }
				}
			}](axe+`;axe.run(document, {resultTypes: ["violations"]})`, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatalf("%s: axe: %v", p, err)
			}
			for _, v := range res.Violations {
				if v.Impact == "serious" || v.Impact == "critical" {
					t.Errorf("%s (%s): axe %s violation %s: %s at %v", p, vp.suffix, v.Impact, v.ID, v.Help, v.Nodes)
				}
			}
			// Addresses wrap only at sensible points (after a dot, slash
			// or plus, before the @), never inside a word.
			breaks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](midWordBreaks))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			for _, b := range breaks {
				t.Errorf("%s (%s): an address wraps mid-word: %s", p, vp.suffix, b)
			}
			// Nothing is wider than the screen: a wide table scrolls in its box.
			if w, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.documentElement.scrollWidth - %d`, vp.w))); err != nil || w > 0 {
				t.Errorf("%s (%s): the page is %d px wider than the screen (%v)", p, vp.suffix, w, err)
			}
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, vp.suffix)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
	}
}

// midWordBreaks lists the places where an address (.addr) wraps between
// two characters that are not a sensible break: the line changes between
// characters where neither a dot, slash, plus, ?, &, comma, hyphen or space
// ends the first line nor an @ starts the next.
const midWordBreaks = `(() => {
  const bad = [];
  document.querySelectorAll(".addr").forEach(el => {
    const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let top = null, prev = "";
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      for (let i = 0; i < n.length; i++) {
        const r = document.createRange();
        r.setStart(n, i); r.setEnd(n, i + 1);
        const rect = r.getClientRects()[0];
        if (!rect || rect.width === 0) { continue; }
        const ch = n.data[i];
        if (top !== null && rect.top > top + 2 && !/[.\/+?&,\-\s]/.test(prev) && ch !== "@" && !/\s/.test(ch)) {
          bad.push(JSON.stringify(el.textContent) + " between " + JSON.stringify(prev + ch));
        }
        top = rect.top; prev = ch;
      }
    }
  });
  return bad;
})()`
