package a2ui

import (
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The probe is added to the test page only (the renditions carry no
// script): it copies each example's visible text (innerText honours
// display, visibility and whitespace collapsing) into a <pre> that
// --dump-dom prints.
const probe = `<script>(function(){var ds=document.querySelectorAll("div[data-example]");for(var i=0;i<ds.length;i++){var p=document.createElement("pre");p.setAttribute("data-visible",ds[i].getAttribute("data-example"));p.textContent=ds[i].innerText;document.documentElement.appendChild(p);}})();</script>`

var reVisible = regexp.MustCompile(`(?s)<pre data-visible="([^"]+)">(.*?)</pre>`)

// TestExamplesVisibleInChromium lays the HTML of the twenty examples and of
// every component case out in headless Chromium and checks that every
// string in Result.Texts is visible text of its surface, so Texts can be
// trusted by the email test.
func TestExamplesVisibleInChromium(t *testing.T) {
	chromium := ""
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is missing and CI is set: run scripts/peers/chromium.sh")
		}
		t.Skip("SKIPPING the headless-browser check of the A2UI HTML: /usr/bin/chromium is missing (install it with scripts/peers/chromium.sh)")
	}
	var page strings.Builder
	page.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>`)
	want := map[string][]string{}
	for _, f := range exampleFiles(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res := Render(data, goldenOptions())
		if len(res.Texts) == 0 {
			t.Errorf("%s: no Texts", name)
		}
		want[name] = res.Texts
		fmt.Fprintf(&page, `<div data-example="%s">%s</div>`, name, res.HTML)
	}
	for _, tc := range componentCases {
		res := renderTest(t, tc.components, tc.data)
		name := "component-" + tc.name
		want[name] = res.Texts
		fmt.Fprintf(&page, `<div data-example="%s">%s</div>`, name, res.HTML)
	}
	page.WriteString(probe + `</body></html>`)

	dir := t.TempDir()
	file := filepath.Join(dir, "examples.html")
	if err := os.WriteFile(file, []byte(page.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+file).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	got := map[string]string{}
	for _, m := range reVisible.FindAllSubmatch(out, -1) {
		got[string(m[1])] = strings.Join(strings.Fields(html.UnescapeString(string(m[2]))), " ")
	}
	if len(got) != len(want) {
		t.Fatalf("chromium showed %d examples, want %d:\n%.2000s", len(got), len(want), out)
	}
	checked := 0
	for name, texts := range want {
		for _, s := range texts {
			s = strings.Join(strings.Fields(s), " ")
			if !strings.Contains(got[name], s) {
				t.Errorf("%s: %q is not visible; the page shows:\n%s", name, s, got[name])
			}
			checked++
		}
	}
	t.Logf("%d texts of %d surfaces visible in Chromium", checked, len(want))
}
