package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	if len(w.Record.MessageID) > maxStoredKey {
		w.Record.MessageID = w.Record.MessageID[:maxStoredKey]
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
				recent := c.RecentTurns[:0:0]
				for _, t := range c.RecentTurns {
					if now.Sub(t) < time.Hour {
						recent = append(recent, t)
					}
				}
				lastMinute := 0
				for _, t := range recent {
					if now.Sub(t) < time.Minute {
						lastMinute++
					}
				}
				switch {
				case w.PerMinute > 0 && lastMinute >= w.PerMinute:
					rec.Disposition, rec.Reason = envelope.DispositionHeld, fmt.Sprintf("more than %d turns a minute in this conversation", w.PerMinute)
					w.Turn = nil
				case w.PerHour > 0 && len(recent) >= w.PerHour:
					rec.Disposition, rec.Reason = envelope.DispositionHeld, fmt.Sprintf("more than %d turns an hour in this conversation", w.PerHour)
					w.Turn = nil
				default:
					recent = append(recent, now)
					if len(recent) > store.MaxRecentTurns {
						recent = recent[len(recent)-store.MaxRecentTurns:]
					}
				}
				c.RecentTurns = recent
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

func putTurnTx(tx *bbolt.Tx, t *store.Turn) error {
	if t.State == store.TurnQueued || t.State == store.TurnSending {
		if err := tx.Bucket(bTurnDue).Put(timeKey(t.NextAttemptAt, t.ID), nil); err != nil {
			return err
		}
	}
	return putJSON(tx.Bucket(bTurns), []byte(t.ID), t)
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
	if cnv == "" || len(cnv) > maxStoredKey {
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

// ClaimTurns takes up to max turns due at now, at most one per
// conversation in flight (a conversation's turns go to the agent one after
// the other). A claimed turn stays in the due index, moved to now+lease, so
// a turn whose worker dies is taken again when its lease runs out.
func (s *DB) ClaimTurns(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*store.Turn, error) {
	var out []*store.Turn
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		out = out[:0]
		due, active := tx.Bucket(bTurnDue), tx.Bucket(bTurnActive)
		limit := be64(now)
		var keys [][]byte
		c := due.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0 && len(keys) < 4*max+16; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if len(out) == max {
				break
			}
			var t store.Turn
			if err := getJSON(tx.Bucket(bTurns), k[8:], &t); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					if err := due.Delete(k); err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("due turn %s: %w", k[8:], err)
			}
			if id := active.Get([]byte(t.ConversationID)); id != nil && string(id) != t.ID {
				var other store.Turn
				if getJSON(tx.Bucket(bTurns), id, &other) == nil && other.State == store.TurnSending && other.LeaseUntil.After(now) {
					continue // the conversation's earlier turn is in flight
				}
			}
			if err := due.Delete(k); err != nil {
				return err
			}
			t.Attempts++
			t.Claims++
			t.State = store.TurnSending
			t.NextAttemptAt = now.Add(lease)
			t.LeaseUntil = t.NextAttemptAt
			t.UpdatedAt = now
			if err := putTurnTx(tx, &t); err != nil {
				return err
			}
			if err := active.Put([]byte(t.ConversationID), []byte(t.ID)); err != nil {
				return err
			}
			out = append(out, &t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim turns: %w", err)
	}
	return out, nil
}

// NextTurn is when the earliest turn is due, if any.
func (s *DB) NextTurn() (time.Time, bool) { return s.firstTime(bTurnDue) }

// claimedTurnTx loads a turn and checks that the caller's claim still holds.
func claimedTurnTx(tx *bbolt.Tx, claimed *store.Turn) (*store.Turn, error) {
	var t store.Turn
	if err := getJSON(tx.Bucket(bTurns), []byte(claimed.ID), &t); err != nil {
		return nil, err
	}
	if t.State != store.TurnSending || t.Claims != claimed.Claims {
		return nil, store.ErrLeaseLost
	}
	return &t, nil
}

// SetTurnTask records the agent's task id of a claimed turn, so that after
// a restart the turn's task is polled instead of sending the message again.
func (s *DB) SetTurnTask(ctx context.Context, claimed *store.Turn, taskID string) error {
	if len(taskID) > maxStoredKey {
		return fmt.Errorf("turn %s: task id of %d bytes; at most %d", claimed.ID, len(taskID), maxStoredKey)
	}
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		t, err := claimedTurnTx(tx, claimed)
		if err != nil {
			return err
		}
		t.TaskID = taskID
		return putJSON(tx.Bucket(bTurns), []byte(t.ID), t)
	})
	if err != nil {
		return fmt.Errorf("set task of turn %s: %w", claimed.ID, err)
	}
	claimed.TaskID = taskID
	return nil
}

// RecordTurn records an attempt of a claimed turn (claimed as ClaimTurns
// returned it); ErrLeaseLost when it was claimed again since.
func (s *DB) RecordTurn(ctx context.Context, claimed *store.Turn, o store.TurnOutcome) (*store.Turn, error) {
	if o.State == store.TurnQueued && o.NextAt.IsZero() {
		return nil, fmt.Errorf("record turn %s: %w: queued without a next attempt time", claimed.ID, store.ErrBadState)
	}
	var out store.Turn
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		t, err := claimedTurnTx(tx, claimed)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bTurnDue).Delete(timeKey(t.NextAttemptAt, t.ID)); err != nil {
			return err
		}
		if id := tx.Bucket(bTurnActive).Get([]byte(t.ConversationID)); string(id) == t.ID {
			if err := tx.Bucket(bTurnActive).Delete([]byte(t.ConversationID)); err != nil {
				return err
			}
		}
		t.State, t.UpdatedAt, t.LastError, t.LeaseUntil = o.State, o.At, o.Error, time.Time{}
		switch o.State {
		case store.TurnAnswered:
			t.NextAttemptAt, t.AnswerEnvelopeID = time.Time{}, o.AnswerEnvelopeID
		case store.TurnDead:
			t.NextAttemptAt = time.Time{}
		default:
			t.State, t.NextAttemptAt = store.TurnQueued, o.NextAt
		}
		if err := putTurnTx(tx, t); err != nil {
			return err
		}
		out = *t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record turn %s: %w", claimed.ID, err)
	}
	return &out, nil
}

// RequeueClaimedTurns makes every turn still claimed with a claim taken
// before `before` due at `at`. The worker calls it when it starts: bbolt
// admits one process, so such a claim belongs to a process that is gone.
func (s *DB) RequeueClaimedTurns(ctx context.Context, before, at time.Time) (int, error) {
	n := 0
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		n = 0
		var held []store.Turn
		if err := tx.Bucket(bTurns).ForEach(func(k, v []byte) error {
			var t store.Turn
			if json.Unmarshal(v, &t) == nil && t.State == store.TurnSending && t.UpdatedAt.Before(before) {
				held = append(held, t)
			}
			return nil
		}); err != nil {
			return err
		}
		for i := range held {
			t := &held[i]
			if err := tx.Bucket(bTurnDue).Delete(timeKey(t.NextAttemptAt, t.ID)); err != nil {
				return err
			}
			if err := tx.Bucket(bTurnActive).Delete([]byte(t.ConversationID)); err != nil {
				return err
			}
			t.State, t.NextAttemptAt, t.LeaseUntil, t.UpdatedAt = store.TurnQueued, at, time.Time{}, at
			t.Claims++
			if err := putTurnTx(tx, t); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue claimed turns: %w", err)
	}
	return n, nil
}

// Turn returns one turn.
func (s *DB) Turn(ctx context.Context, id string) (*store.Turn, error) {
	var t store.Turn
	if err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bTurns), []byte(id), &t) }); err != nil {
		return nil, fmt.Errorf("turn %q: %w", id, err)
	}
	return &t, nil
}

// ListTurns lists turns oldest first, optionally in one state, at most limit.
func (s *DB) ListTurns(ctx context.Context, state string, limit int) ([]*store.Turn, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []*store.Turn
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bTurns).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var t store.Turn
			if json.Unmarshal(v, &t) != nil {
				continue
			}
			if state == "" || t.State == state {
				out = append(out, &t)
			}
		}
		return nil
	})
	return out, err
}

// RetryTurn makes a dead turn due again at `at` (operator action).
func (s *DB) RetryTurn(ctx context.Context, id string, at time.Time) (*store.Turn, error) {
	var out store.Turn
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		var t store.Turn
		if err := getJSON(tx.Bucket(bTurns), []byte(id), &t); err != nil {
			return err
		}
		if t.State != store.TurnDead {
			return fmt.Errorf("turn is %s: %w", t.State, store.ErrBadState)
		}
		t.State, t.NextAttemptAt, t.UpdatedAt, t.Attempts = store.TurnQueued, at, at, 0
		if err := putTurnTx(tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retry turn %s: %w", id, err)
	}
	return &out, nil
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

// PruneInbound removes up to max inbound records received before
// `before`, with their stored attachment bytes, their message-id entry,
// their place in their conversation and their turn, once that turn is
// answered or dead (a record whose turn is still queued or in flight is
// kept, and so are the records after it). Conversations and their
// Message-ID index stay: they are small, and a late reply still threads.
// Call it until it returns 0.
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
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune inbound records: %w", err)
	}
	return n, nil
}
