package render

import (
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render/a2ui"
)

// visibleTextProbe is appended to the email HTML in this test only: it
// copies what the browser lays out as visible text (innerText honours
// display, visibility and collapsed whitespace) into the DOM that
// --dump-dom prints. The HTML we send contains no script.
const visibleTextProbe = `<script>(function(){var t=document.body.innerText;var p=document.createElement("pre");p.id="beachd-visible-text";p.textContent=t;document.documentElement.appendChild(p);})();</script>`

var reProbe = regexp.MustCompile(`(?s)<pre id="beachd-visible-text">(.*?)</pre>`)

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is missing and CI is set: run scripts/peers/chromium.sh")
	}
	t.Skip("SKIPPING the headless-browser check of the email HTML: /usr/bin/chromium is missing (install it with scripts/peers/chromium.sh)")
	return ""
}

// visibleText loads page in headless Chromium and returns its visible text.
func visibleText(t *testing.T, chromium, page string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "email.html")
	body := strings.Replace(page, "</body>", visibleTextProbe+"</body>", 1)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+file)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chromium: %v\n%s", err, stderr)
	}
	m := reProbe.FindSubmatch(out)
	if m == nil {
		t.Fatalf("chromium printed no visible-text probe; the page's own markup may have broken the document:\n%.2000s", out)
	}
	return html.UnescapeString(string(m[1]))
}

func normSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestEmailHTMLInChromium renders the email HTML of several envelopes in a
// real browser and checks that every text of their surfaces, the response
// text and the approval instructions are visible on the page.
func TestEmailHTMLInChromium(t *testing.T) {
	chromium := chromiumPath(t)
	envs := loadEnvelopes(t)
	r := newTestRenderer(t, Config{})
	// Some of the specification's own example surfaces, sent bare.
	for _, ex := range []string{"03_calendar-day", "05_product-card", "13_coffee-order", "17_event-detail"} {
		b, err := os.ReadFile(filepath.Join("a2ui", "testdata", "examples", ex+".json"))
		if err != nil {
			t.Fatalf("A2UI example %s: %v", ex, err)
		}
		envs[ex] = &envelope.Envelope{Role: "agent",
			Parts: []envelope.Part{{Data: json.RawMessage(b), Metadata: map[string]any{"partType": envelope.PartA2UISurface}}},
			Meta:  envelope.Meta{SessionID: "s", TurnID: "t", ProducedAt: testNow, FinalizedBy: "complete"}}
	}
	for _, name := range []string{"flight-results", "approval-request", "artifacts", "non-latin", "long-text",
		"03_calendar-day", "05_product-card", "13_coffee-order", "17_event-detail"} {
		env := envs[name]
		if env == nil {
			t.Fatalf("sample envelope %s missing", name)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := testInput(t, name, env, envelope.ChannelEmail)
			e, err := r.Email(in)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, p := range env.PartsOf(envelope.PartA2UISurface) {
				res := a2ui.Render(p.Data, a2ui.Options{Now: in.Now})
				if len(res.Texts) == 0 {
					t.Fatalf("surface of %s reports no texts", name)
				}
				want = append(want, res.Texts...)
			}
			// The agent's words and the approval block must be visible too.
			want = append(want, visibleLines(env.Text(envelope.PartResponse))...)
			if len(in.Approvals) > 0 {
				want = append(want, "APPROVE", "DENY", "[approval:"+testToken+"]", in.Approvals[0].Request.Summary)
			}
			for _, p := range env.PartsOf(envelope.PartArtifact) {
				var a envelope.Artifact
				if err := p.DecodeData(&a); err != nil {
					t.Fatal(err)
				}
				want = append(want, a.Name)
			}
			got := normSpace(visibleText(t, chromium, e.HTML))
			if strings.Contains(got, "<") && strings.Contains(got, "style=") {
				t.Errorf("markup leaked into the visible text: %.300s", got)
			}
			missing := 0
			for _, w := range want {
				if w = normSpace(w); w != "" && !strings.Contains(got, w) {
					missing++
					t.Errorf("not visible in Chromium: %q", w)
				}
			}
			if missing > 0 {
				t.Logf("visible text was:\n%s", got)
			}
			t.Logf("%d texts checked visible", len(want))
		})
	}
}

// visibleLines is what a reader sees of Markdown-ish src in HTML, line by
// line: markers gone, links as their labels.
func visibleLines(src string) []string {
	var out []string
	for _, b := range parseBlocks(src) {
		for _, l := range b.lines {
			out = append(out, labelsOnly(parseInline(l)))
		}
	}
	return out
}

func labelsOnly(sp []span) string {
	var b strings.Builder
	for _, s := range sp {
		switch s.kind {
		case sBold, sItalic:
			b.WriteString(labelsOnly(s.kids))
		default:
			b.WriteString(s.text)
		}
	}
	return b.String()
}
