package store

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Close writes the free-page list, so that the next Open reads it rather
// than walking the file. bbolt opening a file without the list, with list
// syncing on, commits once to write it: the transaction id tells whether
// that happened.
func TestCloseWritesFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db := openTest(t, path, newClock())
	ingestOne(t, db, 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	txid := func(opt *bolt.Options) int {
		t.Helper()
		b, err := bolt.Open(path, 0o600, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		id := 0
		b.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid(&bolt.Options{ReadOnly: true})
	if after := txid(&bolt.Options{FreelistType: bolt.FreelistMapType}); after != before {
		t.Fatalf("opening with free-page list syncing committed (transaction %d → %d): Close left the list out", before, after)
	}
}
