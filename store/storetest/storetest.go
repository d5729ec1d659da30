// Package storetest opens stores for tests: a fresh database in the test's
// temporary directory that is checked and closed when the test ends. Every
// test that needs a store outside package store/bolt opens it here, so every
// such test also proves the outbox invariants (bolt.DB.CheckInvariants)
// still hold after it ran. Production code never imports this package.
package storetest

import (
	"errors"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store/bolt"
)

// Open opens a new store in t.TempDir() with opts. When the test ends the
// store's invariants are checked (a violation fails the test) and it is
// closed.
func Open(t testing.TB, opts bolt.Options) *bolt.DB {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "beachd.db"), opts)
}

// OpenAt opens the store at path, for tests that close and reopen one
// database as a restarted process would. When the test ends the
// invariants are checked and the store closed; a store the test already
// closed is reopened for the check, so a test that ends on a crash and a
// restart is checked too.
func OpenAt(t testing.TB, path string, opts bolt.Options) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("open test store: %v", err)
	}
	t.Cleanup(func() {
		err := db.CheckInvariants()
		if errors.Is(err, bbolt.ErrDatabaseNotOpen) {
			check(t, path)
			return
		}
		if err != nil {
			t.Errorf("store invariants at the end of the test: %v", err)
		}
		if err := db.CheckConversationInvariants(); err != nil {
			t.Errorf("conversation invariants at the end of the test: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close test store: %v", err)
		}
	})
	return db
}

// check reopens the closed store at path and checks its invariants.
func check(t testing.TB, path string) {
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Errorf("reopen test store to check it: %v", err)
		return
	}
	defer db.Close()
	if err := db.CheckInvariants(); err != nil {
		t.Errorf("store invariants at the end of the test: %v", err)
	}
	if err := db.CheckConversationInvariants(); err != nil {
		t.Errorf("conversation invariants at the end of the test: %v", err)
	}
}
