package storetest

import (
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
)

// TestEmbeddedStore runs the conformance suite against the embedded bbolt
// store.
func TestEmbeddedStore(t *testing.T) {
	Run(t, func(t testing.TB, now func() time.Time) store.Store {
		return Open(t, bolt.Options{Now: now})
	})
}
