package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExampleConfigIsValid(t *testing.T) {
	raw, err := os.ReadFile("../beachd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cfg, err := Parse(raw, "beachd.example.yaml", env(map[string]string{
		"BEACHD_API_KEY": "0123456789abcdef0123", "BILLING_WEBHOOK_SECRET": secret, "OPS_WEBHOOK_SECRET": secret,
		"SMTP_PASSWORD": "p", "IMAP_PASSWORD": "p", "TWILIO_ACCOUNT_SID": "AC00000000000000000000000000000000", "TWILIO_AUTH_TOKEN": "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("the repository's example configuration is invalid: %v", err)
	}
	if cfg.APIKeys[0].Key != "0123456789abcdef0123" || cfg.Email.SMTP.Password != "p" {
		t.Errorf("env not expanded: %+v", cfg.APIKeys)
	}
}

func TestConfigErrorsNameTheirKeys(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\nlisten_addr: x\n", []string{"line 3", "listen_addr", "is not a known key"}},
		{"unknown nested key", "api_keys: [\"0123456789abcdef\"]\nwebhooks:\n  endpoints:\n    ops: {url: \"https://x.org/\", secret: \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\", retries: 3}\n", []string{"line 4", "retries"}},
		{"missing env", "api_keys: [\"${NOPE}\"]\n", []string{"api_keys[0]: environment variable NOPE is not set"}},
		{"bad yaml", "api_keys: [\n", []string{"yaml"}},
		{"wrong type", "api_keys: 5\n", []string{"api_keys"}},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), "test.yaml", env(nil))
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	y := `listen: nowhere
public_url: ftp://x
api_keys: ["short"]
log: {format: xml}
part_types:
  - {id: itinerary}
webhooks:
  endpoints:
    ops: {url: "http://example.org/hook", secret: "nope", consumes: [no-such-type]}
schedules:
  - {name: brief, cron: "0 8 30 2 *", agent: ghost, message: hi, to: []}
`
	cfg, err := Parse([]byte(y), "test.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, key := range []string{"listen:", "public_url:", "api_keys[0]:", "log.format:", "part_types[0]:",
		"webhooks.endpoints.ops.consumes[0]:", "webhooks.endpoints.ops", "schedules"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("no problem reported for %s in:\n%v", key, err)
		}
	}
}

func TestEnvExpansionKeepsTypes(t *testing.T) {
	cfg, err := Parse([]byte("api_keys: [\"${K}\"]\ndispatch:\n  workers: ${W}\n"), "t.yaml", env(map[string]string{"K": "0123456789abcdef: # not yaml", "W": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIKeys[0].Key != "0123456789abcdef: # not yaml" || cfg.Dispatch.Workers != 7 {
		t.Fatalf("got %q %d", cfg.APIKeys[0].Key, cfg.Dispatch.Workers)
	}
}

func FuzzParseConfig(f *testing.F) {
	if raw, err := os.ReadFile("../beachd.example.yaml"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte("listen: 127.0.0.1:1\napi_keys: [\"${X}\"]\n"))
	f.Add([]byte("schedules: [{name: a, cron: '@daily'}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b, "fuzz.yaml", env(map[string]string{"X": "0123456789abcdef"}))
		if err != nil {
			return
		}
		cfg.Validate() // must not panic
	})
}

// Without public_url, links are built from the listen address; an
// unspecified host would make links to nowhere ("http://:8025").
func TestDefaultPublicURL(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:8025": "http://127.0.0.1:8025",
		":8025":          "http://localhost:8025",
		"0.0.0.0:8025":   "http://localhost:8025",
		"[::]:8025":      "http://localhost:8025",
		"beachd.lan:80":  "http://beachd.lan:80",
	} {
		c := &Config{Listen: listen}
		c.FillDefaults()
		if c.PublicURL != want {
			t.Errorf("listen %s: public_url %s, want %s", listen, c.PublicURL, want)
		}
	}
}
