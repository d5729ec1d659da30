package config

import (
	"strings"
	"testing"
)

const storeConfigBase = "listen: 127.0.0.1:1\napi_keys: [\"0123456789abcdef\"]\n"

// The store section is checked like the other keys: each problem names its
// key and its place in the file, and a password in a DSN is never shown.
func TestConfigStoreSection(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string // empty: valid
	}{
		{"default", "", nil},
		{"bolt", "store: {driver: bolt}\n", nil},
		{"postgres", "store:\n  driver: postgres\n  dsn: postgres://beachd:pw@db.internal:5432/beachd\n  lease_ttl: 30s\n", nil},
		{"unknown driver", "store:\n  driver: mysql\n", []string{"line 4, column 11: store.driver: must be bolt or postgres"}},
		{"postgres without dsn", "store:\n  driver: postgres\n", []string{"store.dsn: required with driver postgres"}},
		{"dsn with bolt", "store:\n  dsn: postgres://db/x\n", []string{"line 4, column 8: store.dsn: only with driver postgres"}},
		{"bad dsn", "store:\n  driver: postgres\n  dsn: \"postgres://u:secretpw@host:notaport/db\"\n", []string{"line 5, column 8: store.dsn: not a PostgreSQL connection string"}},
		{"pool size", "store:\n  driver: postgres\n  dsn: postgres://beachd:pw@db.internal:5432/beachd?pool_max_conns=4\n", nil},
		{"pool of one", "store:\n  driver: postgres\n  dsn: postgres://beachd:secretpw@db.internal:5432/beachd?pool_max_conns=1\n", []string{"store.dsn: not a PostgreSQL connection string beachd can use: pool_max_conns=1: beachd needs at least 2 connections"}},
		{"pool not a number", "store:\n  driver: postgres\n  dsn: postgres://beachd:secretpw@db.internal:5432/beachd?pool_max_conns=many\n", []string{"store.dsn: not a PostgreSQL connection string"}},
		{"short ttl", "store:\n  lease_ttl: 1s\n", []string{"line 4, column 14: store.lease_ttl: must be between 3s and 10m0s"}},
		{"unknown key", "store:\n  ttl: 1s\n", []string{"store.ttl", "not a known key"}},
	} {
		_, _, err := CheckBytes([]byte(storeConfigBase+tt.yaml), "c.yaml", env(nil), false)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: the error shows the password: %v", tt.name, err)
		}
	}
}
