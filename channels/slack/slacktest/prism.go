// Package slacktest holds what the Slack tests share: Prism serving
// Slack's own description of the Web API, and request signing as Slack
// does it. Production code never imports this package.
package slacktest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cool-ai/beachd/internal/testkit/peerproc"
)

// SpecFile is Slack's OpenAPI 2.0 description of the Web API, as published
// (testdata/slack-api/README.md).
const SpecFile = "channels/slack/testdata/slack-api/slack_web_openapi_v2.json"

// StartPrism runs `prism mock` of Slack's Web API description, relaxed in
// one respect (a method's `token` parameter is not required: clients send
// Authorization: Bearer, which the description's security scheme
// accepts), on a free port, and returns the API base URL (with a
// trailing slash, as slack-go wants). Prism answers 422 to a request that
// breaks the description. scripts/peers/prism.sh installs Prism into
// .peers/node_modules (or $BEACHD_PEERS/node_modules); without it the test
// is skipped, loudly, and fails under CI.
func StartPrism(t testing.TB) string {
	t.Helper()
	root, err := peerproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	prism := prismBin(t, root)
	spec := RelaxedSpec(t, filepath.Join(root, SpecFile))
	return peerproc.Mock(t, prism, spec) + "/"
}

// PostedGets are the methods the description has as GET only that
// slack-go calls with a POST.
var PostedGets = []string{"/users.lookupByEmail"}

// RelaxedSpec writes a copy of the description at path in which no
// `token` parameter is required and PostedGets may be POSTed, and returns
// the copy's path (testdata/slack-api/README.md says why).
func RelaxedSpec(t testing.TB, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read Slack's description: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decode Slack's description: %v", err)
	}
	relaxed := 0
	paths, _ := doc["paths"].(map[string]any)
	// Slack accepts every method as a POST with a form body, which is how
	// slack-go calls users.lookupByEmail; the description has it as a GET
	// only. The copy adds the POST, its query parameters in the form.
	for _, name := range PostedGets {
		p, _ := paths[name].(map[string]any)
		get, ok := p["get"].(map[string]any)
		if !ok {
			t.Fatalf("Slack's description has no GET %s: the relaxation is out of date", name)
		}
		post := map[string]any{}
		for k, v := range get {
			post[k] = v
		}
		var params []any
		for _, prm := range get["parameters"].([]any) {
			m := map[string]any{}
			for k, v := range prm.(map[string]any) {
				m[k] = v
			}
			if m["in"] == "query" {
				m["in"] = "formData"
			}
			params = append(params, m)
		}
		post["parameters"] = params
		post["consumes"] = []any{"application/x-www-form-urlencoded"}
		post["operationId"] = fmt.Sprint(get["operationId"]) + "_post"
		p["post"] = post
	}
	for _, p := range paths {
		ops, _ := p.(map[string]any)
		for _, op := range ops {
			o, _ := op.(map[string]any)
			params, _ := o["parameters"].([]any)
			for _, prm := range params {
				m, _ := prm.(map[string]any)
				if m["name"] == "token" && m["required"] == true {
					m["required"] = false
					relaxed++
				}
			}
		}
	}
	if relaxed == 0 {
		t.Fatal("Slack's description declares no required token: the relaxation is out of date")
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "slack_web_openapi_v2.relaxed.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func prismBin(t testing.TB, root string) string {
	t.Helper()
	missing := func(why string) {
		msg := "SKIPPING Slack contract test: " + why + " (run scripts/peers/prism.sh)"
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
		dir = filepath.Join(root, ".peers")
	}
	prism := filepath.Join(dir, "node_modules", ".bin", "prism")
	if _, err := os.Stat(prism); err != nil {
		missing("prism is not installed in " + filepath.Dir(prism))
	}
	return prism
}
