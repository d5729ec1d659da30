package bolt

import (
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// bTwilioSeen remembers the Twilio webhooks already acted on, so that a
// retried webhook has no second effect: key → first-seen time (RFC 3339).
// Keys are the channel's own ("msg/<MessageSid>", "status/<sid>/<status>").
var bTwilioSeen = []byte("twilio_seen")

// MarkSeen records key as seen and reports whether this was the first time.
// The check and the write are one transaction, so of two concurrent
// duplicates exactly one is first.
func (s *DB) MarkSeen(ctx context.Context, key string) (first bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := s.now().UTC().Format(time.RFC3339Nano)
	err = s.bolt.Batch(func(tx *bbolt.Tx) error {
		first = false // Batch may run this function again
		b := tx.Bucket(bTwilioSeen)
		if b.Get([]byte(key)) != nil {
			return nil
		}
		first = true
		return b.Put([]byte(key), []byte(now))
	})
	if err != nil {
		return false, fmt.Errorf("mark %s seen: %w", key, err)
	}
	return first, nil
}

// ForgetSeen removes key, so that a webhook whose handling failed is acted
// on when the provider retries it.
func (s *DB) ForgetSeen(ctx context.Context, key string) error {
	if err := s.bolt.Batch(func(tx *bbolt.Tx) error { return tx.Bucket(bTwilioSeen).Delete([]byte(key)) }); err != nil {
		return fmt.Errorf("forget %s: %w", key, err)
	}
	return nil
}
