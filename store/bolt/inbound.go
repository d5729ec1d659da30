package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

func attachKey(id string, n int) []byte {
	k := append([]byte(id), 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(k[len(id)+1:], uint32(n))
	return k
}

// RecordInbound writes an inbound message's record, its conversation and
// its turn in one transaction. A repeated (channel, message id) writes
// nothing and returns the first record with ErrDuplicateMessage. For an
// SMS/WhatsApp message that would start a new conversation while another
// is open on the same thread (two messages at once), the open one is used.
func (s *DB) RecordInbound(ctx context.Context, w store.InboundWrite) (*store.InboundWritten, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(w.Record.MessageID) > store.MaxKey {
		w.Record.MessageID = w.Record.MessageID[:store.MaxKey]
	}
	var out *store.InboundWritten
	var dup bool
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		out, dup = nil, false
		rec := w.Record
		byMsg := tx.Bucket(bInboundByMsg)
		if rec.MessageID != "" {
			if id := byMsg.Get([]byte(rec.Channel + "\x00" + rec.MessageID)); id != nil {
				var first store.InboundRecord
				if err := getJSON(tx.Bucket(bInboundRecords), id, &first); err != nil {
					return err
				}
				out, dup = &store.InboundWritten{Record: &first}, true
				return nil
			}
			if err := byMsg.Put([]byte(rec.Channel+"\x00"+rec.MessageID), []byte(rec.ID)); err != nil {
				return err
			}
		}
		out = &store.InboundWritten{}
		now := rec.ReceivedAt
		var c *store.Conversation
		if w.Conversation != nil {
			if w.New && w.ThreadKey != "" {
				if id := tx.Bucket(bConvThreads).Get([]byte(w.ThreadKey)); id != nil {
					var open store.Conversation
					if getJSON(tx.Bucket(bConversations), id, &open) == nil && now.Before(open.UpdatedAt.Add(w.IdleTimeout)) {
						w.New = false
						w.Conversation = &open
					}
				}
			}
			var prevUpdated time.Time
			if w.New {
				c = w.Conversation
				c.CreatedAt = now
			} else {
				c = &store.Conversation{}
				if err := getJSON(tx.Bucket(bConversations), []byte(w.Conversation.ID), c); err != nil {
					return fmt.Errorf("conversation %s: %w", w.Conversation.ID, err)
				}
				prevUpdated = c.UpdatedAt
			}
			rec.ConversationID, rec.Agent = c.ID, c.Agent
			c.UpdatedAt, c.LastInboundAt, c.LastFrom = now, now, rec.From
			if !slices.Contains(c.Participants, rec.From) && len(c.Participants) < 100 {
				c.Participants = append(c.Participants, rec.From)
			}
			if rec.Subject != "" {
				c.Subject = rec.Subject
			}
			if rec.Channel == envelope.ChannelEmail && rec.MessageID != "" {
				id := strings.Trim(rec.MessageID, "<>")
				c.LastInboundMessageID = id
				c.MessageIDs = store.AppendChain(c.MessageIDs, append(w.References, id)...)
				if err := tx.Bucket(bConvMsgIDs).Put([]byte(id), []byte(c.ID)); err != nil {
					return err
				}
			}
			if w.ThreadKey != "" {
				// The thread's previous conversation, closed by idleness,
				// may hold answers the person's message lets out too.
				if prev := tx.Bucket(bConvThreads).Get([]byte(w.ThreadKey)); prev != nil && string(prev) != c.ID && w.ReleaseHeld {
					n, err := releaseHeldTx(tx, string(prev), s.now())
					if err != nil {
						return err
					}
					out.Released += n
				}
				if err := tx.Bucket(bConvThreads).Put([]byte(w.ThreadKey), []byte(c.ID)); err != nil {
					return err
				}
			}
			if w.Turn != nil {
				reason, err := limitTurnTx(tx, c, w, now)
				if err != nil {
					return err
				}
				if reason != "" {
					rec.Disposition, rec.Reason = envelope.DispositionHeld, reason
					w.Turn = nil
				}
			}
			if w.Turn != nil {
				c.Turns++
			}
			if err := putConversationTx(tx, c, prevUpdated); err != nil {
				return err
			}
			if err := tx.Bucket(bConvMessages).Put(convMessageKey(c.ID, now, 'i', rec.ID), nil); err != nil {
				return err
			}
			if w.ReleaseHeld {
				n, err := releaseHeldTx(tx, c.ID, s.now())
				if err != nil {
					return err
				}
				out.Released += n
			}
		}
		if w.Turn != nil {
			t := *w.Turn
			t.ConversationID, t.InboundID, t.State = c.ID, rec.ID, store.TurnQueued
			t.CreatedAt, t.UpdatedAt = now, now
			if t.NextAttemptAt.IsZero() {
				t.NextAttemptAt = now
			}
			if err := putTurnTx(tx, &t); err != nil {
				return err
			}
			rec.TurnID = t.ID
			out.Turn = &t
		}
		for i, data := range w.Data {
			if data == nil || i >= len(rec.Attachments) {
				continue
			}
			if err := tx.Bucket(bInboundAttach).Put(attachKey(rec.ID, i), data); err != nil {
				return err
			}
			rec.Attachments[i].Stored = true
		}
		if err := putJSON(tx.Bucket(bInboundRecords), []byte(rec.ID), rec); err != nil {
			return err
		}
		out.Record, out.Conversation = &rec, c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record inbound message: %w", err)
	}
	if dup {
		return out, store.ErrDuplicateMessage
	}
	return out, nil
}

// InboundByMessageID is the record of (channel, provider message id).
func (s *DB) InboundByMessageID(ctx context.Context, channel, msgID string) (*store.InboundRecord, error) {
	return byIndex[store.InboundRecord](s, bInboundByMsg, []byte(channel+"\x00"+msgID), bInboundRecords)
}

// InboundRecord returns one inbound record.
func (s *DB) InboundRecord(ctx context.Context, id string) (*store.InboundRecord, error) {
	var rec store.InboundRecord
	if err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bInboundRecords), []byte(id), &rec) }); err != nil {
		return nil, err
	}
	return &rec, nil
}

// InboundAttachment returns the stored bytes of attachment n of an inbound
// message.
func (s *DB) InboundAttachment(ctx context.Context, id string, n int) ([]byte, error) {
	var out []byte
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bInboundAttach).Get(attachKey(id, n))
		if v == nil {
			return store.ErrNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// PutInboundAttachment stores bytes for attachment n of an inbound message
// (media fetched from a provider when its turn was built).
func (s *DB) PutInboundAttachment(ctx context.Context, id string, n int, data []byte) error {
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		var rec store.InboundRecord
		if err := getJSON(tx.Bucket(bInboundRecords), []byte(id), &rec); err != nil {
			return err
		}
		if n < 0 || n >= len(rec.Attachments) {
			return fmt.Errorf("inbound %s has no attachment %d: %w", id, n, store.ErrNotFound)
		}
		rec.Attachments[n].Stored = true
		rec.Attachments[n].Size = int64(len(data))
		if err := tx.Bucket(bInboundAttach).Put(attachKey(id, n), data); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bInboundRecords), []byte(id), rec)
	})
	if err != nil {
		return fmt.Errorf("store attachment %d of %s: %w", n, id, err)
	}
	return nil
}

// NoteInboundAttachment records a failed fetch of attachment n's URL: its
// failure count and, when note is not "", why it will not be fetched.
func (s *DB) NoteInboundAttachment(ctx context.Context, id string, n int, failures int, note string) error {
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var rec store.InboundRecord
		if err := getJSON(tx.Bucket(bInboundRecords), []byte(id), &rec); err != nil {
			return err
		}
		if n < 0 || n >= len(rec.Attachments) {
			return fmt.Errorf("inbound %s has no attachment %d: %w", id, n, store.ErrNotFound)
		}
		rec.Attachments[n].FetchFailures = failures
		if note != "" {
			rec.Attachments[n].Note = note
		}
		return putJSON(tx.Bucket(bInboundRecords), []byte(id), rec)
	})
	if err != nil {
		return fmt.Errorf("note attachment %d of %s: %w", n, id, err)
	}
	return nil
}

// ListInboundRecords lists inbound records newest first, before the id
// `before` ("" from the newest), those keep accepts, at most limit, reading
// at most scan records.
func (s *DB) ListInboundRecords(ctx context.Context, before string, limit, scan int, keep func(*store.InboundRecord) bool) ([]*store.InboundRecord, error) {
	var out []*store.InboundRecord
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bInboundRecords).Cursor()
		k, v := c.Last()
		if before != "" {
			k, v = c.Seek([]byte(before))
			if k == nil {
				k, v = c.Last()
			}
			if k != nil && bytes.Compare(k, []byte(before)) >= 0 {
				k, v = c.Prev()
			}
		}
		for n := 0; k != nil && len(out) < limit && n < scan; k, v = c.Prev() {
			n++
			var rec store.InboundRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				continue
			}
			if keep == nil || keep(&rec) {
				out = append(out, &rec)
			}
		}
		return nil
	})
	return out, err
}

// PruneInbound removes up to max inbound records received before
// `before`, with their stored attachment bytes, their message-id entry,
// their place in their conversation and their turn, once that turn is
// answered or dead (a record whose turn is still queued or in flight is
// kept, and so are the records after it). Conversations and their
// Message-ID index stay: they are small, and a late reply still threads.
// Within the same max it removes the flood limits' counters whose latest
// turn came before `before` (counted in the result). Call it until it
// returns 0.
func (s *DB) PruneInbound(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = 1000
	}
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		recs, turns := tx.Bucket(bInboundRecords), tx.Bucket(bTurns)
		var doomed []store.InboundRecord
		c := recs.Cursor()
		for k, v := c.First(); k != nil && len(doomed) < max; k, v = c.Next() {
			var rec store.InboundRecord
			if json.Unmarshal(v, &rec) != nil {
				continue // CheckConversationInvariants names it
			}
			if !rec.ReceivedAt.Before(before) {
				break // ids sort by creation time
			}
			if rec.TurnID != "" {
				var t store.Turn
				if getJSON(turns, []byte(rec.TurnID), &t) == nil && t.State != store.TurnAnswered && t.State != store.TurnDead {
					break
				}
			}
			doomed = append(doomed, rec)
		}
		for _, rec := range doomed {
			if err := recs.Delete([]byte(rec.ID)); err != nil {
				return err
			}
			mk := []byte(rec.Channel + "\x00" + rec.MessageID)
			if rec.MessageID != "" && string(tx.Bucket(bInboundByMsg).Get(mk)) == rec.ID {
				if err := tx.Bucket(bInboundByMsg).Delete(mk); err != nil {
					return err
				}
			}
			for i := range rec.Attachments {
				if err := tx.Bucket(bInboundAttach).Delete(attachKey(rec.ID, i)); err != nil {
					return err
				}
			}
			if rec.ConversationID != "" {
				if err := tx.Bucket(bConvMessages).Delete(convMessageKey(rec.ConversationID, rec.ReceivedAt, 'i', rec.ID)); err != nil {
					return err
				}
			}
			if rec.TurnID != "" {
				if err := turns.Delete([]byte(rec.TurnID)); err != nil {
					return err
				}
			}
			n++
		}
		if n < max {
			pruned, err := pruneTurnLimitsTx(tx, before, max-n)
			if err != nil {
				return err
			}
			n += pruned
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune inbound records: %w", err)
	}
	return n, nil
}
