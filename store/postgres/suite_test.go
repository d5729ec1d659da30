package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
	"github.com/cool-ai/beachd/store/storetest"
)

// TestConformance runs the storage conformance suite on PostgreSQL, each
// case on a fresh schema.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) store.Store {
		db, err := Open(context.Background(), pgtest.DSN(t), Options{Now: now})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
