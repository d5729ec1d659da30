package bolt

import (
	"fmt"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"
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
	txid := func(opt *bbolt.Options) int {
		t.Helper()
		b, err := bbolt.Open(path, 0o600, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		id := 0
		b.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid(&bbolt.Options{ReadOnly: true})
	if after := txid(&bbolt.Options{FreelistType: bbolt.FreelistMapType}); after != before {
		t.Fatalf("opening with free-page list syncing committed (transaction %d → %d): Close left the list out", before, after)
	}
}

// BenchmarkFreelistSync is both sides of leaving the free-page list out of
// commits: the pipeline with commits that write it (as bbolt does by
// default) and without, on a fresh file and on one with 40,000 free pages
// (a file that retention has pruned).
func BenchmarkFreelistSync(b *testing.B) {
	for _, free := range []int{0, 40000} {
		for _, sync := range []bool{false, true} {
			b.Run(fmt.Sprintf("free=%d/sync=%v", free, sync), func(b *testing.B) {
				db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				if free > 0 {
					err := db.bolt.Update(func(tx *bbolt.Tx) error {
						s, err := tx.CreateBucket([]byte("scratch"))
						if err != nil {
							return err
						}
						v := make([]byte, 3000)
						for i := range free {
							if err := s.Put(fmt.Appendf(nil, "%08d", i), v); err != nil {
								return err
							}
						}
						return nil
					})
					if err == nil {
						err = db.bolt.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("scratch")) })
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				db.bolt.NoFreelistSync = !sync
				runPipeline(b, db, 0)
			})
		}
	}
}
