package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// kv holds small named values that channels keep between runs: IMAP cursors,
// WhatsApp session windows, opt-outs. Keys are namespaced by the caller
// ("imap/INBOX", "wa-window/+4477…").

// GetKV reads a value; ok is false when it is absent.
func (s *DB) GetKV(ctx context.Context, key string) (val []byte, ok bool, err error) {
	err = s.bolt.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bKV).Get([]byte(key))
		if v != nil {
			val, ok = append([]byte(nil), v...), true
		}
		return nil
	})
	return val, ok, err
}

// PutKV writes a value durably (shared commit).
func (s *DB) PutKV(ctx context.Context, key string, val []byte) error {
	if err := s.bolt.Batch(func(tx *bbolt.Tx) error { return tx.Bucket(bKV).Put([]byte(key), val) }); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// DeleteKV removes a value.
func (s *DB) DeleteKV(ctx context.Context, key string) error {
	if err := s.bolt.Batch(func(tx *bbolt.Tx) error { return tx.Bucket(bKV).Delete([]byte(key)) }); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
