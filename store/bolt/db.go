package bolt

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/cool-ai/beachd/internal/cpubusy"
	"github.com/cool-ai/beachd/store"
)

// SchemaVersion is the layout this beachd writes. Bump it with a migration
// in migrate().
const SchemaVersion = 9

// Bucket names. Every bucket is created at Open.
var (
	bMeta           = []byte("meta")
	bEnvelopes      = []byte("envelopes")       // envelope id → EnvelopeRecord (without the body)
	bEnvelopeBodies = []byte("envelope_bodies") // envelope id → the envelope's JSON as accepted
	bDeliveries     = []byte("deliveries")      // delivery id → Delivery (codec.go)
	bAttempts       = []byte("attempts")        // delivery id + be32(n) → Attempt
	bDue            = []byte("due")             // channel + 0 + be64(next attempt ns) + delivery id → channel + 0 + recipient
	bLeases         = []byte("leases")          // delivery id → be64(lease until ns), for jobs in flight
	bByState        = []byte("by_state")        // state + 0 + delivery id → nil
	bIdempotency    = []byte("idempotency")     // key → idemRecord
	bProviderIDs    = []byte("provider_ids")    // channel + 0 + provider id → delivery id
	bKV             = []byte("kv")              // small named values (cursors, windows), see kv.go

	// bDeliveryPIDs lists every provider id a delivery was given (one per
	// attempt that reached the provider, one per part of a split SMS), so
	// that pruning the delivery removes all of its bProviderIDs entries.
	bDeliveryPIDs = []byte("delivery_provider_ids") // delivery id + 0 + provider id → nil
)

// allBuckets lists every top-level bucket. A package file that adds a bucket
// adds it here so that Open creates it.
var allBuckets = [][]byte{bMeta, bEnvelopes, bEnvelopeBodies, bDeliveries, bAttempts, bDue, bLeases, bByState,
	bIdempotency, bProviderIDs, bDeliveryPIDs, bKV,
	bTwilioSeen,
	bApprovals, bApprovalTokens, bApprovalAudit, bInjections, bInjectionDue, bInbound, bApprovalExpiry, bApprovalLimits, bApprovalCodes,
	bSchedules, bScheduleRuns,
	bConversations, bConvThreads, bConvMsgIDs, bConvMessages, bInboundRecords, bInboundByMsg, bInboundAttach,
	bTurns, bTurnDue, bTurnActive, bConvByActivity, bTurnLimits,
	bSingletons,
	bApprovalEvents, bApprovalEventHeads,
	bApprovalTimers}

var keySchema = []byte("schema_version")

// Options tune Open. The zero value is sensible.
type Options struct {
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Rand is the randomness for ids; default crypto/rand.
	Rand io.Reader
	// MaxBatchSize bounds the calls one group commit carries (group.go and
	// bbolt Batch); MaxBatchDelay is bbolt Batch's wait for company, used by
	// the writes off the hot path (approvals, schedules). Defaults 1000 and
	// 2ms.
	MaxBatchSize  int
	MaxBatchDelay time.Duration
	// OpenTimeout bounds the wait for the file lock; default 1s.
	OpenTimeout time.Duration
	// NoSync disables fsync. Only benchmarks of the raw store use it.
	NoSync bool
}

// DB is the embedded store.Store: one bbolt file, opened by one process.
type DB struct {
	bolt *bbolt.DB
	now  func() time.Time
	rand io.Reader
	path string
	// group is the hot path's shared writer, see group.go.
	group group
	// pruneNext is the envelope key the next Prune walks on from (nil: the
	// first), see retention.go. In memory only: after a restart the walk
	// starts at the beginning again.
	pruneMu   sync.Mutex
	pruneNext []byte
}

var _ store.Store = (*DB)(nil)

// Open opens or creates the database at path.
func Open(path string, opt Options) (*DB, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Rand == nil {
		opt.Rand = rand.Reader
	}
	if opt.MaxBatchSize <= 0 {
		opt.MaxBatchSize = 1000
	}
	if opt.MaxBatchDelay <= 0 {
		opt.MaxBatchDelay = 2 * time.Millisecond
	}
	if opt.OpenTimeout <= 0 {
		opt.OpenTimeout = time.Second
	}
	fresh := false
	if st, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fresh = true
	} else if err == nil && st.Size() == 0 {
		fresh = true
	}
	// Commits leave bbolt's free-page list out (NoFreelistSync): with it,
	// every commit would write the whole list, which grows with the free
	// pages of a file that has been pruned. Close writes it once; after a
	// crash Open rebuilds it by walking every page (seconds for a million
	// queued deliveries).
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opt.OpenTimeout, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		switch {
		case errors.Is(err, bolterrors.ErrTimeout):
			return nil, fmt.Errorf("open %s: %w", path, store.ErrLocked)
		case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum),
			errors.Is(err, bolterrors.ErrVersionMismatch), strings.Contains(err.Error(), "invalid"):
			return nil, fmt.Errorf("open %s: %w (%v); beachd will not rewrite it: move it aside or restore a backup", path, store.ErrCorrupt, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	bdb.MaxBatchSize = opt.MaxBatchSize
	bdb.MaxBatchDelay = opt.MaxBatchDelay
	bdb.NoSync = opt.NoSync
	s := &DB{bolt: bdb, now: opt.Now, rand: opt.Rand, path: path, group: group{max: opt.MaxBatchSize, linger: lingerMax, cpu: cpubusy.New()}}
	if err := s.prepare(fresh); err != nil {
		bdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

func (s *DB) prepare(fresh bool) error {
	// Read the version first, in a read transaction, so that a newer file is
	// refused without a single write.
	var version uint64
	var hasMeta bool
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m == nil {
			return nil
		}
		hasMeta = true
		if v := m.Get(keySchema); len(v) == 8 {
			version = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !fresh && !hasMeta {
		// A bbolt file that is not ours: refuse rather than adopt it.
		var names []string
		s.bolt.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(n []byte, _ *bbolt.Bucket) error { names = append(names, string(n)); return nil })
		})
		if len(names) > 0 {
			return fmt.Errorf("%w: no beachd schema (buckets %v); beachd will not rewrite it", store.ErrCorrupt, names)
		}
	}
	if version > SchemaVersion {
		return fmt.Errorf("%w: file has schema %d, this beachd understands up to %d; run the newer beachd or restore a backup", store.ErrNewerSchema, version, SchemaVersion)
	}
	return s.bolt.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if err := migrate(tx, version, s.now()); err != nil {
			return err
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], SchemaVersion)
		return tx.Bucket(bMeta).Put(keySchema, v[:])
	})
}

// migrate brings a file from version `from` to SchemaVersion. Version 0 is a
// fresh file.
func migrate(tx *bbolt.Tx, from uint64, now time.Time) error {
	switch from {
	case 0, SchemaVersion:
		return nil
	case 1:
		if err := migrate1to2(tx, now); err != nil {
			return err
		}
		fallthrough
	case 2:
		if err := migrate2to3(tx); err != nil {
			return err
		}
		fallthrough
	case 3:
		if err := migrate3to4(tx); err != nil {
			return err
		}
		fallthrough
	case 4:
		if err := migrate4to5(tx); err != nil { // approval_codes.go
			return err
		}
		fallthrough
	case 5, 6, 7, 8:
		// Schema 6 only adds the conversation buckets, schema 7 the turn
		// limits' counters (bTurnLimits), schema 8 the approvals' event
		// trails (events.go), schema 9 the approvals' timers (timers.go):
		// prepare created them. An approval from
		// before schema 8 has an empty trail; its audit entries remain.
		return nil
	}
	return fmt.Errorf("no migration from schema %d", from)
}

// migrate1to2: schema 1 stored jobs in flight as state "sending" with a
// lease entry keyed be64(until)+id; schema 2 keeps the stored state and a
// lease entry keyed by id. Every schema-1 lease is stale (the file was
// closed), so its job is re-queued due now and marked maybe-sent, as
// RequeueExpired does at start-up. Delivery records stay JSON until they are
// next written (decodeDelivery reads both).
func migrate1to2(tx *bbolt.Tx, now time.Time) error {
	leases := tx.Bucket(bLeases)
	var keys [][]byte
	if err := leases.ForEach(func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := leases.Delete(k); err != nil {
			return err
		}
		if len(k) <= 8 {
			continue
		}
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), k[8:], &d); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			return fmt.Errorf("migrate to schema 2: %w", err)
		}
		if d.State != store.StateSending {
			continue
		}
		d.State = store.StateQueued
		if d.Attempts > 0 {
			d.State = store.StateRetrying
		}
		d.MaybeSent = true
		d.NextAttemptAt = now
		d.UpdatedAt = now
		if err := putDeliveryTx(tx, &d, store.StateSending); err != nil {
			return fmt.Errorf("migrate to schema 2: %w", err)
		}
	}
	return nil
}

// migrate2to3: schema 3 lists each delivery's provider ids (bDeliveryPIDs)
// so that retention removes them all; schema 2 removed only the latest, and
// left the ids of earlier attempts pointing at deliveries long pruned. Those
// are removed now, and every other entry is listed under its delivery.
func migrate2to3(tx *bbolt.Tx) error {
	pids, dels, lists := tx.Bucket(bProviderIDs), tx.Bucket(bDeliveries), tx.Bucket(bDeliveryPIDs)
	var orphans, listed [][]byte
	err := pids.ForEach(func(k, v []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 || dels.Get(v) == nil {
			orphans = append(orphans, append([]byte(nil), k...))
			return nil
		}
		listed = append(listed, deliveryPIDKey(string(v), string(k[i+1:])))
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate to schema 3: %w", err)
	}
	for _, k := range orphans {
		if err := pids.Delete(k); err != nil {
			return fmt.Errorf("migrate to schema 3: %w", err)
		}
	}
	// In key order: bbolt splits nodes only at commit, so keys put at
	// random places of a growing node cost time by the square of their
	// number (a million took minutes); in order they are appended.
	slices.SortFunc(listed, bytes.Compare)
	for _, k := range listed {
		if err := lists.Put(k, nil); err != nil {
			return fmt.Errorf("migrate to schema 3: %w", err)
		}
	}
	return nil
}

// migrate3to4: schema 4 keys the due index by channel first (dueKey), so
// that a claim can pass over a channel that admits nothing now (a paced
// SMS sender, a busy mail server) without walking its backlog. Entries
// migrate1to2 wrote in this same transaction already have the new form.
func migrate3to4(tx *bbolt.Tx) error {
	type entry struct{ k, v []byte }
	var all []entry
	dels := tx.Bucket(bDeliveries)
	err := tx.Bucket(bDue).ForEach(func(k, v []byte) error {
		if _, _, _, ok := splitDueKey(k); ok {
			all = append(all, entry{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		}
		if len(k) < 9 {
			return nil // not a due entry of any schema: dropped
		}
		// The job's channel and recipient: from the entry, or (schema 1
		// wrote none) from its record. An entry whose job is gone, or
		// unreadable, is dropped, as Claim would drop or pass it over.
		val := append([]byte(nil), v...)
		ch, _, _ := bytes.Cut(v, []byte{0})
		if len(ch) == 0 {
			var d store.Delivery
			if err := getDelivery(dels, k[8:], &d); err != nil {
				return nil
			}
			ch, val = []byte(d.Channel), dueValue(&d)
		}
		nk := make([]byte, 0, len(ch)+1+len(k))
		nk = append(append(append(nk, ch...), 0), k...)
		all = append(all, entry{nk, val})
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate to schema 4: %w", err)
	}
	if err := tx.DeleteBucket(bDue); err != nil {
		return fmt.Errorf("migrate to schema 4: %w", err)
	}
	due, err := tx.CreateBucket(bDue)
	if err != nil {
		return fmt.Errorf("migrate to schema 4: %w", err)
	}
	slices.SortFunc(all, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
	for _, e := range all {
		if err := due.Put(e.k, e.v); err != nil {
			return fmt.Errorf("migrate to schema 4: %w", err)
		}
	}
	return nil
}

// Close closes the database. Its last commit writes bbolt's free-page list,
// which the hot path's commits leave out (NoFreelistSync, see Open): the
// next Open then reads the list instead of walking every page of the file
// to rebuild it (seconds for a million queued deliveries). After a crash
// the list is rebuilt as before.
func (s *DB) Close() error {
	_ = s.bolt.Update(func(*bbolt.Tx) error {
		// Read by this transaction's commit, under the writer's lock.
		s.bolt.NoFreelistSync = false
		return nil
	})
	return s.bolt.Close()
}

// Path is the file the database lives in.
func (s *DB) Path() string { return s.path }

// NewID returns prefix + a 26-character id that sorts by creation time
// (store.NewIDAt with the store's clock and randomness).
func (s *DB) NewID(prefix string) string { return store.NewIDAt(s.now(), s.rand, prefix) }

// unbe64 reads a time written by be64 (8 bytes).
func unbe64(b []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(b))) }

func be64(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	return b[:]
}

func timeKey(t time.Time, id string) []byte {
	k := make([]byte, 0, 8+len(id))
	k = append(k, be64(t)...)
	return append(k, id...)
}

func putJSON(b *bbolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return b.Put(key, data)
}

func getJSON(b *bbolt.Bucket, key []byte, v any) error {
	data := b.Get(key)
	if data == nil {
		return store.ErrNotFound
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

func (s *DB) firstTime(bucket []byte) (t time.Time, ok bool) {
	_ = s.bolt.View(func(tx *bbolt.Tx) error {
		k, _ := tx.Bucket(bucket).Cursor().First()
		if len(k) >= 8 {
			t, ok = unbe64(k[:8]), true
		}
		return nil
	})
	return t, ok
}
