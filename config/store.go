package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/internal/singleton"
	"github.com/cool-ai/beachd/store/postgres"
)

// The store drivers.
const (
	DriverBolt     = "bolt"
	DriverPostgres = "postgres"
)

// StoreConfig is the `store:` section: where beachd keeps its records
// (docs/replicas.md).
//
//	store:
//	  driver: postgres                  # bolt (default): data_dir/beachd.db
//	  dsn: "postgres://beachd@db.internal:5432/beachd?sslmode=verify-full"
//	  lease_ttl: 15s                    # singletons' lease, default 15s
type StoreConfig struct {
	// Driver is bolt (the embedded file under data_dir, one process) or
	// postgres (several replicas on one database).
	Driver string `yaml:"driver"`
	// DSN is the PostgreSQL connection string (postgres only).
	DSN string `yaml:"dsn"`
	// LeaseTTL is the length of the singletons' leases: a replica that
	// dies holding one is replaced after at most this long.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// Bounds of store.lease_ttl: renewals every ttl/3 must not load the
// database, and a dead holder must be replaced soon.
const (
	minLeaseTTL = 3 * time.Second
	maxLeaseTTL = 10 * time.Minute
)

// defaults fills the driver.
func (s *StoreConfig) defaults() {
	if s.Driver == "" {
		s.Driver = DriverBolt
	}
}

// validate checks the section.
func (s *StoreConfig) validate(v *validator) {
	switch s.Driver {
	case DriverBolt:
		if s.DSN != "" {
			v.errorf("store.dsn", "only with driver postgres (driver bolt keeps data_dir/beachd.db)")
		}
	case DriverPostgres:
		if strings.TrimSpace(s.DSN) == "" {
			v.errorf("store.dsn", "required with driver postgres: a connection string such as postgres://user@host:5432/beachd")
		} else if _, err := postgres.PoolConfig(s.DSN, 0); err != nil {
			v.errorf("store.dsn", "not a PostgreSQL connection string beachd can use: %v", unwrapAll(err))
		}
	default:
		v.errorf("store.driver", "must be bolt or postgres, got %q", s.Driver)
	}
	if s.LeaseTTL != 0 && (s.LeaseTTL < minLeaseTTL || s.LeaseTTL > maxLeaseTTL) {
		v.errorf("store.lease_ttl", "must be between %s and %s (0: the default, %s), got %s", minLeaseTTL, maxLeaseTTL, singleton.DefaultTTL, s.LeaseTTL)
	}
}

// unwrapAll is err's innermost cause: pgx's parse errors repeat the
// connection string, which may hold a password.
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// BoltPath is the embedded store's file.
func (c *Config) BoltPath() string { return filepath.Join(c.DataDir, "beachd.db") }

// Probe connects to the configured PostgreSQL without changing it and
// says which schema version it has; "" for driver bolt.
func (s *StoreConfig) Probe(ctx context.Context) (string, error) {
	if s.Driver != DriverPostgres {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pcfg, err := postgres.PoolConfig(s.DSN, 0) // takes out the pool's own parameters (pool_max_conns)
	if err != nil {
		return "", fmt.Errorf("not a PostgreSQL connection string: %w", unwrapAll(err))
	}
	cfg := pcfg.ConnConfig
	server := fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("cannot connect to %s: %w", server, unwrapAll(err))
	}
	defer conn.Close(context.Background())
	var schema string
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT current_schema(), to_regclass('beachd_schema') IS NOT NULL`).Scan(&schema, &exists); err != nil {
		return "", fmt.Errorf("%s: read the current schema: %w", server, err)
	}
	want := postgres.SchemaVersion()
	if !exists {
		return fmt.Sprintf("store: postgres %s (schema %q): no beachd tables yet; beachd serve creates them (schema version %d)", server, schema, want), nil
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM beachd_schema`).Scan(&have); err != nil {
		return "", fmt.Errorf("%s: read the schema version: %w", server, err)
	}
	switch {
	case have > want:
		return "", fmt.Errorf("%s: the database has schema version %d, this beachd understands up to %d: run the newer beachd", server, have, want)
	case have < want:
		return fmt.Sprintf("store: postgres %s (schema %q): schema version %d; beachd serve upgrades it to %d", server, schema, have, want), nil
	}
	return fmt.Sprintf("store: postgres %s (schema %q): schema version %d, up to date", server, schema, have), nil
}
