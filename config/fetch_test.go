package config

import (
	"strings"
	"testing"
)

// TestFetchAllowNamesEachBadEntry: `beachd config check` names the key and
// the index of every entry of fetch.allow it cannot read.
func TestFetchAllowNamesEachBadEntry(t *testing.T) {
	raw := `api_keys: ["0123456789abcdef"]
fetch:
  allow:
    - files.internal.example
    - https://files.internal.example
    - 10.8.0.0/16
    - 10.8.1.0/16
    - "*.example.org"
    - 0.0.0.0/0
`
	cfg, err := Parse([]byte(raw), "beachd.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	got := err.Error()
	for _, want := range []string{"fetch.allow[1]: ", "is a URL", "fetch.allow[3]: ", "the network is 10.8.0.0/16",
		"fetch.allow[4]: ", "fetch.allow[5]: ", "allows every address"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	for _, ok := range []string{"fetch.allow[0]", "fetch.allow[2]"} {
		if strings.Contains(got, ok) {
			t.Errorf("good entry %s reported:\n%s", ok, got)
		}
	}

	cfg, err = Parse([]byte("api_keys: [\"0123456789abcdef\"]\nfetch: { allow: [files.internal.example, 10.8.0.0/16, \"fd00:1::/32\"] }\n"), "beachd.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatalf("good section refused: %v", err)
	}
}
