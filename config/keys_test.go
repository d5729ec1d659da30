package config

import (
	"strings"
	"testing"
)

func TestAPIKeyRoles(t *testing.T) {
	raw := "data_dir: d\npublic_url: http://localhost\napi_keys:\n  - full-key-0123456789\n  - {key: read-key-0123456789, role: read}\n  - key: other-full-0123456789\n    role: full\n"
	cfg, err := Parse([]byte(raw), "t.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	full, read := KeysOf(cfg.APIKeys, RoleFull), KeysOf(cfg.APIKeys, RoleRead)
	if strings.Join(full, ",") != "full-key-0123456789,other-full-0123456789" || strings.Join(read, ",") != "read-key-0123456789" {
		t.Fatalf("full %v, read %v", full, read)
	}
	for _, c := range []struct{ yaml, want string }{
		{"api_keys:\n  - {key: read-key-0123456789, role: admin}\n", "api_keys[0].role"},
		{"api_keys:\n  - {key: read-key-0123456789, role: read}\n", "at least one full-access key"},
		{"api_keys:\n  - {key: short, role: read}\n  - full-key-0123456789\n", "api_keys[0]"},
		{"api_keys:\n  - {key: read-key-0123456789, rol: read}\n", "field rol not found"},
		{"api_keys:\n  - [a, b]\n", "a string or {key"},
	} {
		cfg, err := Parse([]byte("data_dir: d\npublic_url: http://localhost\n"+c.yaml), "t.yaml", env(nil))
		if err == nil {
			_, err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
