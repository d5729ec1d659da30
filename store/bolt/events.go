package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/store"
)

// The approval trail (schema 8): each approval's hash-chained events and
// its head, the last event appended. bbolt has one writer at a time, so
// reading the head and appending after it in one transaction is atomic.
var (
	bApprovalEvents     = []byte("approval_events")      // approval id + 0 + be64(seq) → ApprovalEvent
	bApprovalEventHeads = []byte("approval_event_heads") // approval id → ApprovalEventHead
)

func eventKey(id string, seq int64) []byte {
	k := make([]byte, 0, len(id)+9)
	k = append(append(k, id...), 0)
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

// appendEventTx appends e to approval id's trail after its head, in tx,
// and returns it as stored (sealed: Seq, PrevHash, Hash). The caller has
// checked that the approval exists.
func appendEventTx(tx *bbolt.Tx, id string, e store.ApprovalEvent, now time.Time) (store.ApprovalEvent, error) {
	heads := tx.Bucket(bApprovalEventHeads)
	var head store.ApprovalEventHead
	if v := heads.Get([]byte(id)); v != nil {
		if err := json.Unmarshal(v, &head); err != nil {
			return e, fmt.Errorf("decode trail head of %s: %w: %v", id, store.ErrCorrupt, err)
		}
	}
	e, err := store.SealApprovalEvent(e, head, now)
	if err != nil {
		return e, err
	}
	if err := putJSON(tx.Bucket(bApprovalEvents), eventKey(id, e.Seq), e); err != nil {
		return e, err
	}
	return e, putJSON(heads, []byte(id), store.ApprovalEventHead{Seq: e.Seq, Hash: e.Hash})
}

// appendEventsTx appends events in order.
func appendEventsTx(tx *bbolt.Tx, id string, events []store.ApprovalEvent, now time.Time) error {
	for _, e := range events {
		if _, err := appendEventTx(tx, id, e, now); err != nil {
			return err
		}
	}
	return nil
}

// AppendApprovalEvent appends e to approval id's trail (store.Approvals).
func (s *DB) AppendApprovalEvent(ctx context.Context, id string, e store.ApprovalEvent) (store.ApprovalEvent, error) {
	if err := ctx.Err(); err != nil {
		return e, err
	}
	var out store.ApprovalEvent
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		if tx.Bucket(bApprovals).Get([]byte(id)) == nil {
			return fmt.Errorf("approval %q: %w", id, store.ErrNotFound)
		}
		var err error
		out, err = appendEventTx(tx, id, e, s.now())
		return err
	})
	if err != nil {
		return e, fmt.Errorf("append approval event: %w", err)
	}
	return out, nil
}

// ApprovalEvents returns approval id's trail, in the order of its keys
// (Seq), and its head, from one read transaction (store.Approvals).
// ErrNotFound when there is no such approval.
func (s *DB) ApprovalEvents(ctx context.Context, id string) ([]store.ApprovalEvent, store.ApprovalEventHead, error) {
	var out []store.ApprovalEvent
	var head store.ApprovalEventHead
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bApprovals).Get([]byte(id)) == nil {
			return fmt.Errorf("approval %q: %w", id, store.ErrNotFound)
		}
		if v := tx.Bucket(bApprovalEventHeads).Get([]byte(id)); v != nil {
			if err := json.Unmarshal(v, &head); err != nil {
				return fmt.Errorf("decode trail head of %s: %w: %v", id, store.ErrCorrupt, err)
			}
		}
		prefix := append([]byte(id), 0)
		c := tx.Bucket(bApprovalEvents).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var e store.ApprovalEvent
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("trail of %s: %w", id, &store.ChainError{Position: len(out) + 1, Reason: "unreadable: " + err.Error()})
			}
			out = append(out, e)
		}
		return nil
	})
	return out, head, err
}
