package twiliotest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	return peerproc.Mock(t, prism, path)
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
