package config

import (
	"strings"
	"testing"
)

func TestOrganisationName(t *testing.T) {
	cfg, _, err := CheckBytes([]byte("api_keys: [\"0123456789abcdef\"]\norganisation:\n  name: Acme Travel\n"), "t.yaml", env(nil), false)
	if err != nil || cfg.Organisation.Name != "Acme Travel" {
		t.Fatalf("organisation.name: %q, %v", cfg.Organisation.Name, err)
	}
	if cfg, _, err := CheckBytes([]byte("api_keys: [\"0123456789abcdef\"]\n"), "t.yaml", env(nil), false); err != nil || cfg.Organisation.Name != "" {
		t.Fatalf("unset: %q, %v", cfg.Organisation.Name, err)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"blank":     {`"   "`, "only white space"},
		"too long":  {strings.Repeat("a", 101), "at most 100 characters, got 101"},
		"two lines": {`"Acme\nTravel"`, "one line"},
		"control":   {`"Acme\u0007"`, "one line"},
	} {
		y := "api_keys: [\"0123456789abcdef\"]\norganisation:\n  name: " + tc.yaml + "\n"
		_, _, err := CheckBytes([]byte(y), "t.yaml", env(nil), false)
		if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "organisation.name: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := CheckBytes([]byte("api_keys: [\"0123456789abcdef\"]\norganisation:\n  title: Acme\n"), "t.yaml", env(nil), false); err == nil ||
		!strings.Contains(err.Error(), "title") {
		t.Errorf("an unknown key under organisation: %v", err)
	}
}
