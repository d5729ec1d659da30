package bolt

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Conversation buckets (schema 6). The conversations package owns their
// meaning; this file keeps them consistent: an inbound message's record,
// its conversation and the turn it queues are written in one transaction.
var (
	bConversations  = []byte("conversations")        // conversation id → Conversation
	bConvThreads    = []byte("conversation_threads") // channel + 0 + our address + 0 + their address → conversation id (SMS, WhatsApp)
	bConvMsgIDs     = []byte("conversation_msgids")  // Message-ID (no brackets) → conversation id (email received)
	bConvMessages   = []byte("conversation_messages")
	bInboundRecords = []byte("inbound_records")       // inbound id → InboundRecord
	bInboundByMsg   = []byte("inbound_by_msgid")      // channel + 0 + provider message id → inbound id
	bInboundAttach  = []byte("inbound_attachments")   // inbound id + 0 + be32(n) → bytes
	bTurns          = []byte("turns")                 // turn id → Turn
	bTurnDue        = []byte("turn_due")              // be64(next ns) + turn id → nil (queued and sending turns)
	bTurnActive     = []byte("turn_active")           // conversation id → turn id of the turn in flight
	bConvByActivity = []byte("conversation_activity") // be64(UpdatedAt ns) + conversation id → nil
)

// bConvMessages: conversation id + 0 + be64(at ns) + 'i'|'o' + inbound or
// delivery id → nil, the messages of a conversation both ways in time order.

func convMessageKey(cnv string, at time.Time, dir byte, id string) []byte {
	k := make([]byte, 0, len(cnv)+10+len(id))
	k = append(append(k, cnv...), 0)
	k = append(k, be64(at)...)
	k = append(k, dir)
	return append(k, id...)
}

// byIndex reads the record of bucket records whose id the bucket index
// holds under key (ErrNotFound when it holds none).
func byIndex[T any](s *DB, index, key, records []byte) (*T, error) {
	var v T
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		id := tx.Bucket(index).Get(key)
		if id == nil {
			return store.ErrNotFound
		}
		return getJSON(tx.Bucket(records), id, &v)
	})
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// Conversation returns one conversation.
func (s *DB) Conversation(ctx context.Context, id string) (*store.Conversation, error) {
	var c store.Conversation
	if err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bConversations), []byte(id), &c) }); err != nil {
		return nil, err
	}
	return &c, nil
}

// ListConversations lists conversations most recently active first
// (UpdatedAt: the latest message either way), those keep accepts, at most
// limit, reading at most scan. before is the cursor of the previous page
// (ConversationCursor of its last conversation; "" from the latest).
func (s *DB) ListConversations(ctx context.Context, before string, limit, scan int, keep func(*store.Conversation) bool) ([]*store.Conversation, error) {
	var out []*store.Conversation
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		convs := tx.Bucket(bConversations)
		c := tx.Bucket(bConvByActivity).Cursor()
		k, _ := c.Last()
		if before != "" {
			from, err := hex.DecodeString(before)
			if err != nil || len(from) < 9 {
				return fmt.Errorf("conversation cursor %q: %w", before, store.ErrBadState)
			}
			k, _ = c.Seek(from)
			if k == nil {
				k, _ = c.Last()
			}
			if k != nil && bytes.Compare(k, from) >= 0 {
				k, _ = c.Prev()
			}
		}
		for n := 0; k != nil && len(out) < limit && n < scan; k, _ = c.Prev() {
			n++
			if len(k) <= 8 {
				continue
			}
			var cv store.Conversation
			if getJSON(convs, k[8:], &cv) != nil {
				continue
			}
			if keep == nil || keep(&cv) {
				out = append(out, &cv)
			}
		}
		return nil
	})
	return out, err
}

// ConversationByThread is the conversation indexed under an SMS/WhatsApp
// thread key (ThreadKey), whether or not it is still open.
func (s *DB) ConversationByThread(ctx context.Context, key string) (*store.Conversation, error) {
	return byIndex[store.Conversation](s, bConvThreads, []byte(key), bConversations)
}

// ConversationByMessageID is the conversation an inbound email Message-ID
// (no brackets) was received in.
func (s *DB) ConversationByMessageID(ctx context.Context, msgID string) (*store.Conversation, error) {
	return byIndex[store.Conversation](s, bConvMsgIDs, []byte(msgID), bConversations)
}

// ConversationMessages lists a conversation's messages in time order, at
// most limit (the latest).
func (s *DB) ConversationMessages(ctx context.Context, id string, limit int) ([]store.ConversationMessage, error) {
	var out []store.ConversationMessage
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		prefix := append([]byte(id), 0)
		c := tx.Bucket(bConvMessages).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			rest := k[len(prefix):]
			if len(rest) < 9 {
				continue
			}
			dir := "in"
			if rest[8] == 'o' {
				dir = "out"
			}
			out = append(out, store.ConversationMessage{At: unbe64(rest[:8]), Direction: dir, ID: string(rest[9:])})
		}
		return nil
	})
	if len(out) > limit && limit > 0 {
		out = out[len(out)-limit:]
	}
	return out, err
}

// indexConversationDeliveryTx lists a delivery that carries a conversation
// (Extra "conversation") among that conversation's messages and marks the
// conversation updated. Ingest calls it for every delivery.
func indexConversationDeliveryTx(tx *bbolt.Tx, d *store.Delivery) error {
	cnv := d.Extra[envelope.ExtraConversation]
	if cnv == "" || len(cnv) > store.MaxKey {
		return nil
	}
	if err := tx.Bucket(bConvMessages).Put(convMessageKey(cnv, d.CreatedAt, 'o', d.ID), nil); err != nil {
		return err
	}
	var c store.Conversation
	if getJSON(tx.Bucket(bConversations), []byte(cnv), &c) != nil {
		return nil
	}
	if d.Extra[envelope.ExtraTemplate] != "" {
		return nil
	}
	prev := c.UpdatedAt
	c.UpdatedAt = d.CreatedAt
	return putConversationTx(tx, &c, prev)
}

// putConversationTx writes c and moves its activity entry from prev (zero:
// none) to c.UpdatedAt.
func putConversationTx(tx *bbolt.Tx, c *store.Conversation, prev time.Time) error {
	act := tx.Bucket(bConvByActivity)
	if !prev.IsZero() {
		if err := act.Delete(timeKey(prev, c.ID)); err != nil {
			return err
		}
	}
	if err := act.Put(timeKey(c.UpdatedAt, c.ID), nil); err != nil {
		return err
	}
	return putJSON(tx.Bucket(bConversations), []byte(c.ID), c)
}

// ReleaseHeld queues now every held delivery of a conversation and returns
// how many it queued.
func (s *DB) ReleaseHeld(ctx context.Context, conversationID string) (int, error) {
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var err error
		n, err = releaseHeldTx(tx, conversationID, s.now())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release held deliveries of %s: %w", conversationID, err)
	}
	return n, nil
}

func releaseHeldTx(tx *bbolt.Tx, cnv string, now time.Time) (int, error) {
	prefix := stateKey(store.StateHeld, "")
	var held []store.Delivery
	c := tx.Bucket(bByState).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		var d store.Delivery
		if err := getDelivery(tx.Bucket(bDeliveries), k[len(prefix):], &d); err != nil {
			continue
		}
		if d.Extra[envelope.ExtraConversation] == cnv {
			held = append(held, d)
		}
	}
	for i := range held {
		d := &held[i]
		d.State, d.NextAttemptAt, d.UpdatedAt = store.StateQueued, now, now
		if err := putDeliveryTx(tx, d, store.StateHeld); err != nil {
			return 0, err
		}
	}
	return len(held), nil
}

// CheckConversationInvariants verifies that every queued or sending turn
// has exactly its due entry and no other turn has one, and that every
// inbound record's message id and conversation exist as indexed.
func (s *DB) CheckConversationInvariants() error {
	return s.bolt.View(func(tx *bbolt.Tx) error {
		due := tx.Bucket(bTurnDue)
		pending := 0
		err := tx.Bucket(bTurns).ForEach(func(k, v []byte) error {
			var t store.Turn
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("turn %s: %w", k, err)
			}
			has := due.Get(timeKey(t.NextAttemptAt, t.ID)) != nil
			switch t.State {
			case store.TurnQueued, store.TurnSending:
				pending++
				if !has {
					return fmt.Errorf("%s turn %s has no due entry", t.State, t.ID)
				}
			default:
				if has {
					return fmt.Errorf("%s turn %s still has a due entry", t.State, t.ID)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if due.Stats().KeyN != pending {
			return fmt.Errorf("turn due index has %d entries, %d queued or sending turns", due.Stats().KeyN, pending)
		}
		return tx.Bucket(bInboundByMsg).ForEach(func(k, v []byte) error {
			var rec store.InboundRecord
			if err := getJSON(tx.Bucket(bInboundRecords), v, &rec); err != nil {
				return fmt.Errorf("inbound index %q → %s: %w", k, v, err)
			}
			if rec.ConversationID != "" && tx.Bucket(bConversations).Get([]byte(rec.ConversationID)) == nil {
				return fmt.Errorf("inbound %s names missing conversation %s", rec.ID, rec.ConversationID)
			}
			return nil
		})
	})
}
