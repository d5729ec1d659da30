package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// Prune removes finished envelopes older than before: those whose
// deliveries are all sent or dead, with those deliveries, their attempts and
// index entries. An envelope with a delivery still queued, sending or
// retrying is kept whatever its age. Each call removes at most max
// envelopes in one transaction; call it until it returns 0. PruneRecords
// does the rest.
//
// The kept envelopes may be many (a long retry lifetime, a backlog), and
// they are the oldest, so Prune walks the envelopes on from where its
// previous call stopped, wrapping round at the newest one older than
// before, and reads at most pruneScan*max of them per transaction. A call
// returns when it has removed some, or with 0 once its walk has gone round
// every envelope older than before. When ctx ends between transactions it
// returns 0 and no error: the next call walks on from there.
func (s *DB) Prune(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = 1000
	}
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	start := s.pruneNext
	from, wrapped := start, start == nil
	for ctx.Err() == nil {
		var stop []byte
		if wrapped {
			stop = start // round to where this call began
		}
		n, next, err := s.pruneWindow(from, stop, before, max)
		if err != nil {
			return 0, fmt.Errorf("prune: %w", err)
		}
		s.pruneNext = next
		if n > 0 {
			return n, nil
		}
		if next == nil {
			if wrapped {
				return 0, nil
			}
			wrapped = true
		}
		from = next
	}
	return 0, nil
}

// pruneScan bounds the envelopes one prune transaction reads, per envelope
// it may remove.
const pruneScan = 20

// pruneWindow removes up to max finished envelopes older than before,
// reading in id order from the key from (nil: the first) at most
// pruneScan*max envelopes, and none at or after the key stop (when set).
// next is the first envelope it did not read, nil when it reached the end
// of the old ones or stop.
//
// It looks in a read transaction, so that a window with nothing to remove
// holds up no writer, and removes in a write transaction what is still
// finished then. An envelope record that does not decode is passed over
// (CheckInvariants names it): one damaged record must not stop retention.
func (s *DB) pruneWindow(from, stop []byte, before time.Time, max int) (n int, next []byte, err error) {
	var doomed [][]byte
	err = s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bEnvelopes).Cursor()
		k, v := c.First()
		if from != nil {
			k, v = c.Seek(from)
		}
		for scanned := 0; k != nil && (stop == nil || bytes.Compare(k, stop) < 0); k, v = c.Next() {
			if len(doomed) == max || scanned == pruneScan*max {
				next = append([]byte(nil), k...)
				break
			}
			scanned++
			var rec store.EnvelopeRecord
			if decodeEnvelope(k, v, &rec) != nil {
				continue
			}
			if !rec.CreatedAt.Before(before) {
				break // ids sort by creation time
			}
			if finished(tx, rec.DeliveryIDs) {
				doomed = append(doomed, append([]byte(nil), k...))
			}
		}
		return nil
	})
	if err != nil || len(doomed) == 0 {
		return 0, next, err
	}
	err = s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		envs := tx.Bucket(bEnvelopes)
		for _, k := range doomed {
			var rec store.EnvelopeRecord
			v := envs.Get(k)
			if v == nil || decodeEnvelope(k, v, &rec) != nil || !finished(tx, rec.DeliveryIDs) {
				continue // gone, or retried by an operator since
			}
			if err := deleteEnvelopeTx(tx, &rec); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, next, err
}

// PruneRecords removes the records older than before that only guard
// against repeats: idempotency keys (a replay after the retention period is
// a new request), handled inbound message ids (mail Message-IDs) and
// acted-on Twilio webhooks (a copy arriving that late finds its approval
// long decided or expired). Each call removes at most max of each kind;
// call it until it returns 0. Their keys do not sort by time, so each call
// reads the buckets through: run it once per retention cycle, not per
// request.
func (s *DB) PruneRecords(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = 10000
	}
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		for _, p := range []struct {
			bucket []byte
			at     func([]byte) (time.Time, bool)
		}{
			{bIdempotency, func(v []byte) (time.Time, bool) {
				var r idemRecord
				return r.CreatedAt, json.Unmarshal(v, &r) == nil
			}},
			{bInbound, func(v []byte) (time.Time, bool) { return unbe64(v), len(v) == 8 }},
			{bTwilioSeen, func(v []byte) (time.Time, bool) {
				t, err := time.Parse(time.RFC3339Nano, string(v))
				return t, err == nil
			}},
		} {
			m, err := pruneByTime(tx.Bucket(p.bucket), before, max, p.at)
			if err != nil {
				return err
			}
			n += m
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune records: %w", err)
	}
	return n, nil
}

// pruneByTime deletes up to limit entries of b whose value, read by at,
// is a time before `before`. Entries whose value it cannot read are kept.
func pruneByTime(b *bbolt.Bucket, before time.Time, limit int, at func([]byte) (time.Time, bool)) (int, error) {
	var keys [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(keys) < limit; k, v = c.Next() {
		if t, ok := at(v); ok && t.Before(before) {
			keys = append(keys, append([]byte(nil), k...))
		}
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

func finished(tx *bbolt.Tx, ids []string) bool {
	for _, id := range ids {
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err != nil {
			continue // already gone
		}
		if d.State != store.StateSent && d.State != store.StateDead {
			return false
		}
	}
	return true
}

func deleteEnvelopeTx(tx *bbolt.Tx, rec *store.EnvelopeRecord) error {
	for _, id := range rec.DeliveryIDs {
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), []byte(id), &d); err == nil {
			if err := tx.Bucket(bByState).Delete(stateKey(d.State, d.ID)); err != nil {
				return err
			}
			if err := deleteProviderIDsTx(tx, &d); err != nil {
				return err
			}
			if err := tx.Bucket(bDeliveries).Delete([]byte(id)); err != nil {
				return err
			}
		}
		prefix := []byte(id + "/")
		ac := tx.Bucket(bAttempts).Cursor()
		for k, _ := ac.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = ac.Seek(prefix) {
			if err := ac.Delete(); err != nil {
				return err
			}
		}
	}
	if err := tx.Bucket(bEnvelopeBodies).Delete([]byte(rec.ID)); err != nil {
		return err
	}
	return tx.Bucket(bEnvelopes).Delete([]byte(rec.ID))
}
