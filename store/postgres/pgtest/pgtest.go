// Package pgtest gives each test its own empty schema on the test
// PostgreSQL server. The server is $BEACHD_TEST_POSTGRES, by default
// postgres://127.0.0.1:5432/test?sslmode=disable (scripts/peers/postgres.sh
// starts one where none runs). Without a reachable server a test is skipped
// with a loud message, or fails when $CI is set: CI must run them.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is the test server's DSN.
func Server() string {
	if v := os.Getenv("BEACHD_TEST_POSTGRES"); v != "" {
		return v
	}
	return "postgres://127.0.0.1:5432/test?sslmode=disable"
}

// DSN creates a fresh schema on the test server and returns a DSN whose
// search_path is that schema. The schema is dropped when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	return DSNNamed(t, "beachd_t_"+hex.EncodeToString(b[:]))
}

// DSNNamed is DSN with the schema's name chosen by the test (a name
// PostgreSQL takes unquoted: lower-case letters, digits and underscores, at
// most 63 bytes).
func DSNNamed(t testing.TB, schema string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, Server())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL test server %s: %v (CI must run the PostgreSQL tests)", Server(), err)
		}
		t.Skipf("SKIPPED: no PostgreSQL test server at %s (%v); run scripts/peers/postgres.sh or set BEACHD_TEST_POSTGRES", Server(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, Server())
		if err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(Server())
	if err != nil {
		t.Fatalf("test server DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
