package postgres

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Bounds of a conversation, as the embedded store keeps them.
const (
	// convMaxParticipants bounds a conversation's participants.
	convMaxParticipants = 100
)

// Classes of the two-key advisory locks of this area (the first key); the
// second is a hash of what is locked. A collision only serialises two
// unrelated writers.
const (
	// convLockThread serialises the inbound messages of one SMS/WhatsApp
	// thread, so that two first messages at once open one conversation.
	convLockThread = 0x636e7601
	// convLockClaim serialises the turn claims of one conversation, so that
	// two replicas never put two of its turns in flight.
	convLockClaim = 0x636e7602
)

// convHash is the second key of an advisory lock on s.
func convHash(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32())
}

// convQuerier is a transaction or the pool.
type convQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// convGet reads the doc the query selects into a new T (store.ErrNotFound
// when it selects no row).
func convGet[T any](ctx context.Context, q convQuerier, sql string, args ...any) (*T, error) {
	var doc []byte
	if err := q.QueryRow(ctx, sql, args...).Scan(&doc); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(doc, v); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return v, nil
}

// convDoc is v's JSON for a doc column. The columns are json, not jsonb:
// json keeps the text as written, so a NUL in outside text (\u0000, which
// jsonb refuses) is stored and read back as it came.
func convDoc(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return data, nil
}

// RecordInbound writes an inbound message's record, its conversation and
// its turn in one transaction. A repeated (channel, message id) writes
// nothing and returns the first record with store.ErrDuplicateMessage: the
// record's row is inserted first, so a second writer of the same message
// waits on the unique constraint and then finds the first. For an
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, dup, err = s.recordInboundTx(ctx, tx, w)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record inbound message: %w", err)
	}
	if dup {
		return out, store.ErrDuplicateMessage
	}
	return out, nil
}

// recordInboundTx is RecordInbound's transaction. It changes nothing w
// points to, so that a retried transaction starts from the same write.
func (s *DB) recordInboundTx(ctx context.Context, tx pgx.Tx, w store.InboundWrite) (*store.InboundWritten, bool, error) {
	rec := w.Record
	rec.Attachments = slices.Clone(rec.Attachments)
	first, err := insertInboundTx(ctx, tx, &rec)
	if err != nil || first != nil {
		return &store.InboundWritten{Record: first}, first != nil, err
	}
	out := &store.InboundWritten{}
	var c *store.Conversation
	if w.Conversation != nil {
		if c, err = s.inboundConversationTx(ctx, tx, &w, &rec, out); err != nil {
			return nil, false, err
		}
	}
	if w.Turn != nil {
		if c == nil {
			return nil, false, fmt.Errorf("inbound %s: a turn without a conversation: %w", rec.ID, store.ErrBadState)
		}
		t := *w.Turn
		t.ConversationID, t.InboundID, t.State = c.ID, rec.ID, store.TurnQueued
		t.CreatedAt, t.UpdatedAt = rec.ReceivedAt, rec.ReceivedAt
		if t.NextAttemptAt.IsZero() {
			t.NextAttemptAt = rec.ReceivedAt
		}
		if err := putTurnTx(ctx, tx, &t, s.holder); err != nil {
			return nil, false, err
		}
		if err := s.notify(ctx, tx, store.WakeTurns); err != nil {
			return nil, false, err
		}
		rec.TurnID = t.ID
		out.Turn = &t
	}
	if out.Released > 0 {
		if err := s.notify(ctx, tx, store.WakeDeliveries); err != nil {
			return nil, false, err
		}
	}
	if err := putAttachmentsTx(ctx, tx, &rec, w.Data); err != nil {
		return nil, false, err
	}
	doc, err := convDoc(&rec)
	if err != nil {
		return nil, false, fmt.Errorf("inbound %s: %w", rec.ID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE inbound_records SET doc = $2 WHERE id = $1`, rec.ID, doc); err != nil {
		return nil, false, fmt.Errorf("write inbound %s: %w", rec.ID, err)
	}
	out.Record, out.Conversation = &rec, c
	return out, false, nil
}

// inboundMsgKey is the message-id column of rec: NULL without one.
func inboundMsgKey(rec *store.InboundRecord) any {
	if rec.MessageID == "" {
		return nil
	}
	return []byte(rec.MessageID)
}

// insertInboundTx inserts rec's row (its doc is written last) and returns
// nil, or the first record of rec's (channel, message id) when there is
// one: then nothing was inserted.
func insertInboundTx(ctx context.Context, tx pgx.Tx, rec *store.InboundRecord) (*store.InboundRecord, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO inbound_records (id, channel, msg_id, received_ns, doc)
		VALUES ($1, $2, $3, $4, '{}') ON CONFLICT (channel, msg_id) DO NOTHING`,
		rec.ID, rec.Channel, inboundMsgKey(rec), nanos(rec.ReceivedAt))
	if err != nil {
		return nil, fmt.Errorf("insert inbound %s: %w", rec.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	first, err := convGet[store.InboundRecord](ctx, tx, `SELECT doc FROM inbound_records WHERE channel = $1 AND msg_id = $2`,
		rec.Channel, inboundMsgKey(rec))
	if err != nil {
		return nil, fmt.Errorf("first record of message %q: %w", rec.MessageID, err)
	}
	return first, nil
}

// inboundConversationTx finds or creates the conversation of an inbound
// message, applies the message to it (participants, subject, Message-ID
// chain, thread, flood limits) and writes it. rec gets the conversation;
// w.Turn is cleared and rec held when a flood limit holds the turn.
func (s *DB) inboundConversationTx(ctx context.Context, tx pgx.Tx, w *store.InboundWrite, rec *store.InboundRecord, out *store.InboundWritten) (*store.Conversation, error) {
	now := rec.ReceivedAt
	thread, err := lockThreadTx(ctx, tx, w.ThreadKey)
	if err != nil {
		return nil, err
	}
	c, err := chooseConversationTx(ctx, tx, w, thread, now)
	if err != nil {
		return nil, err
	}
	rec.ConversationID, rec.Agent = c.ID, c.Agent
	c.UpdatedAt, c.LastInboundAt, c.LastFrom = now, now, rec.From
	if !slices.Contains(c.Participants, rec.From) && len(c.Participants) < convMaxParticipants {
		c.Participants = append(c.Participants, rec.From)
	}
	if rec.Subject != "" {
		c.Subject = rec.Subject
	}
	if rec.Channel == envelope.ChannelEmail && rec.MessageID != "" {
		id := strings.Trim(rec.MessageID, "<>")
		c.LastInboundMessageID = id
		c.MessageIDs = store.AppendChain(c.MessageIDs, append(slices.Clip(w.References), id)...)
		if _, err := tx.Exec(ctx, `INSERT INTO conversation_msgids (msg_id, conversation_id) VALUES ($1, $2)
			ON CONFLICT (msg_id) DO UPDATE SET conversation_id = excluded.conversation_id`, []byte(id), c.ID); err != nil {
			return nil, fmt.Errorf("index Message-ID %q: %w", id, err)
		}
	}
	if w.ThreadKey != "" {
		// The thread's previous conversation, closed by idleness, may hold
		// answers the person's message lets out too.
		if thread != "" && thread != c.ID && w.ReleaseHeld {
			n, err := s.releaseHeldTx(ctx, tx, thread, s.now())
			if err != nil {
				return nil, err
			}
			out.Released += n
		}
		if _, err := tx.Exec(ctx, `INSERT INTO conversation_threads (key, conversation_id) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET conversation_id = excluded.conversation_id`, []byte(w.ThreadKey), c.ID); err != nil {
			return nil, fmt.Errorf("index thread of %s: %w", c.ID, err)
		}
	}
	if w.Turn != nil {
		reason, err := limitTurnTx(ctx, tx, c, w, now)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			rec.Disposition, rec.Reason = envelope.DispositionHeld, reason
			w.Turn = nil
		}
	}
	if w.Turn != nil {
		c.Turns++
	}
	if err := putConversationTx(ctx, tx, c); err != nil {
		return nil, err
	}
	if err := putConversationMessageTx(ctx, tx, c.ID, now, "in", rec.ID); err != nil {
		return nil, err
	}
	if w.ReleaseHeld {
		n, err := s.releaseHeldTx(ctx, tx, c.ID, s.now())
		if err != nil {
			return nil, err
		}
		out.Released += n
	}
	return c, nil
}

// lockThreadTx takes the thread's lock until the transaction ends and
// returns the conversation the thread key names ("" when none, or when
// there is no thread key).
func lockThreadTx(ctx context.Context, tx pgx.Tx, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, convLockThread, convHash(key)); err != nil {
		return "", fmt.Errorf("lock thread: %w", err)
	}
	var id string
	err := tx.QueryRow(ctx, `SELECT conversation_id FROM conversation_threads WHERE key = $1`, []byte(key)).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read thread: %w", err)
	}
	return id, nil
}

// chooseConversationTx returns the conversation an inbound message joins,
// locked: the thread's open conversation when w asks for a new one on a
// thread that has one, else the new one (a copy of w's) or the stored one.
func chooseConversationTx(ctx context.Context, tx pgx.Tx, w *store.InboundWrite, thread string, now time.Time) (*store.Conversation, error) {
	if w.New && thread != "" {
		open, err := lockConversationTx(ctx, tx, thread)
		switch {
		case err == nil && now.Before(open.UpdatedAt.Add(w.IdleTimeout)):
			return open, nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("conversation %s: %w", thread, err)
		}
	}
	if w.New {
		c := *w.Conversation
		c.Participants = slices.Clone(c.Participants)
		c.MessageIDs = slices.Clone(c.MessageIDs)
		c.RecentTurns = slices.Clone(c.RecentTurns)
		c.CreatedAt = now
		return &c, nil
	}
	c, err := lockConversationTx(ctx, tx, w.Conversation.ID)
	if err != nil {
		return nil, fmt.Errorf("conversation %s: %w", w.Conversation.ID, err)
	}
	return c, nil
}

// lockConversationTx reads a conversation and locks its row until the
// transaction ends.
func lockConversationTx(ctx context.Context, tx pgx.Tx, id string) (*store.Conversation, error) {
	return convGet[store.Conversation](ctx, tx, `SELECT doc FROM conversations WHERE id = $1 FOR UPDATE`, id)
}

// putConversationTx writes c.
func putConversationTx(ctx context.Context, tx pgx.Tx, c *store.Conversation) error {
	doc, err := convDoc(c)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", c.ID, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO conversations (id, updated_ns, doc) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET updated_ns = excluded.updated_ns, doc = excluded.doc`,
		c.ID, nanos(c.UpdatedAt), doc); err != nil {
		return fmt.Errorf("write conversation %s: %w", c.ID, err)
	}
	return nil
}

// putConversationMessageTx lists a message among a conversation's.
func putConversationMessageTx(ctx context.Context, tx pgx.Tx, cnv string, at time.Time, dir, id string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO conversation_messages (conversation_id, at_ns, direction, id)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, cnv, at.UnixNano(), dir, id); err != nil {
		return fmt.Errorf("index message %s of %s: %w", id, cnv, err)
	}
	return nil
}

// putAttachmentsTx stores the attachment bytes of rec given in data (by
// index of rec.Attachments; nil: none) and marks them stored.
func putAttachmentsTx(ctx context.Context, tx pgx.Tx, rec *store.InboundRecord, data [][]byte) error {
	for i, b := range data {
		if b == nil || i >= len(rec.Attachments) {
			continue
		}
		if err := putAttachmentTx(ctx, tx, rec.ID, i, b); err != nil {
			return err
		}
		rec.Attachments[i].Stored = true
	}
	return nil
}

func putAttachmentTx(ctx context.Context, tx pgx.Tx, id string, n int, data []byte) error {
	if _, err := tx.Exec(ctx, `INSERT INTO inbound_attachments (inbound_id, n, data) VALUES ($1, $2, $3)
		ON CONFLICT (inbound_id, n) DO UPDATE SET data = excluded.data`, id, n, data); err != nil {
		return fmt.Errorf("write attachment %d of %s: %w", n, id, err)
	}
	return nil
}

// InboundByMessageID is the record of (channel, provider message id).
func (s *DB) InboundByMessageID(ctx context.Context, channel, msgID string) (*store.InboundRecord, error) {
	return convGet[store.InboundRecord](ctx, s.pool, `SELECT doc FROM inbound_records WHERE channel = $1 AND msg_id = $2`,
		channel, []byte(msgID))
}

// InboundRecord returns one inbound record.
func (s *DB) InboundRecord(ctx context.Context, id string) (*store.InboundRecord, error) {
	return convGet[store.InboundRecord](ctx, s.pool, `SELECT doc FROM inbound_records WHERE id = $1`, id)
}

// InboundAttachment returns the stored bytes of attachment n of an inbound
// message.
func (s *DB) InboundAttachment(ctx context.Context, id string, n int) ([]byte, error) {
	if n < 0 || n > math.MaxInt32 {
		return nil, store.ErrNotFound
	}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM inbound_attachments WHERE inbound_id = $1 AND n = $2`, id, n).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("attachment %d of %s: %w", n, id, err)
	}
	return data, nil
}

// PutInboundAttachment stores bytes for attachment n of an inbound message
// (media fetched from a provider when its turn was built).
func (s *DB) PutInboundAttachment(ctx context.Context, id string, n int, data []byte) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rec, err := convGet[store.InboundRecord](ctx, tx, `SELECT doc FROM inbound_records WHERE id = $1 FOR UPDATE`, id)
		if err != nil {
			return err
		}
		if n < 0 || n >= len(rec.Attachments) {
			return fmt.Errorf("inbound %s has no attachment %d: %w", id, n, store.ErrNotFound)
		}
		rec.Attachments[n].Stored = true
		rec.Attachments[n].Size = int64(len(data))
		if err := putAttachmentTx(ctx, tx, id, n, data); err != nil {
			return err
		}
		doc, err := convDoc(rec)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE inbound_records SET doc = $2 WHERE id = $1`, id, doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("store attachment %d of %s: %w", n, id, err)
	}
	return nil
}

// NoteInboundAttachment records a failed fetch of attachment n's URL: its
// failure count and, when note is not "", why it will not be fetched.
func (s *DB) NoteInboundAttachment(ctx context.Context, id string, n int, failures int, note string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rec, err := convGet[store.InboundRecord](ctx, tx, `SELECT doc FROM inbound_records WHERE id = $1 FOR UPDATE`, id)
		if err != nil {
			return err
		}
		if n < 0 || n >= len(rec.Attachments) {
			return fmt.Errorf("inbound %s has no attachment %d: %w", id, n, store.ErrNotFound)
		}
		rec.Attachments[n].FetchFailures = failures
		if note != "" {
			rec.Attachments[n].Note = note
		}
		doc, err := convDoc(rec)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE inbound_records SET doc = $2 WHERE id = $1`, id, doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("note attachment %d of %s: %w", n, id, err)
	}
	return nil
}

// convCollect reads up to scan docs from rows and returns, in order, those
// keep accepts, at most limit.
func convCollect[T any](rows pgx.Rows, limit int, keep func(*T) bool) ([]*T, error) {
	defer rows.Close()
	var out []*T
	for rows.Next() && len(out) < limit {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		v := new(T)
		if json.Unmarshal(doc, v) != nil {
			continue
		}
		if keep == nil || keep(v) {
			out = append(out, v)
		}
	}
	return out, rows.Err()
}

// ListInboundRecords lists inbound records newest first, before the id
// `before` ("" from the newest), those keep accepts, at most limit, reading
// at most scan records.
func (s *DB) ListInboundRecords(ctx context.Context, before string, limit, scan int, keep func(*store.InboundRecord) bool) ([]*store.InboundRecord, error) {
	if limit <= 0 || scan <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM inbound_records WHERE $1 = '' OR id < $1 ORDER BY id DESC LIMIT $2`, before, scan)
	if err != nil {
		return nil, fmt.Errorf("list inbound records: %w", err)
	}
	out, err := convCollect(rows, limit, keep)
	if err != nil {
		return nil, fmt.Errorf("list inbound records: %w", err)
	}
	return out, nil
}

// Conversation returns one conversation.
func (s *DB) Conversation(ctx context.Context, id string) (*store.Conversation, error) {
	return convGet[store.Conversation](ctx, s.pool, `SELECT doc FROM conversations WHERE id = $1`, id)
}

// ListConversations lists conversations most recently active first
// (UpdatedAt: the latest message either way), those keep accepts, at most
// limit, reading at most scan. before is the cursor of the previous page
// (store.ConversationCursor of its last conversation; "" from the latest).
func (s *DB) ListConversations(ctx context.Context, before string, limit, scan int, keep func(*store.Conversation) bool) ([]*store.Conversation, error) {
	// The cursor is the embedded store's activity key: be64(UpdatedAt) + id.
	fromNS, fromID := int64(1<<63-1), ""
	if before != "" {
		from, err := hex.DecodeString(before)
		if err != nil || len(from) < 9 || !utf8.Valid(from[8:]) {
			return nil, fmt.Errorf("conversation cursor %q: %w", before, store.ErrBadState)
		}
		fromNS, fromID = int64(binary.BigEndian.Uint64(from[:8])), string(from[8:])
	}
	if limit <= 0 || scan <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM conversations WHERE $1 = '' OR (updated_ns, id) < ($2, $1)
		ORDER BY updated_ns DESC, id DESC LIMIT $3`, fromID, fromNS, scan)
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	out, err := convCollect(rows, limit, keep)
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	return out, nil
}

// ConversationByThread is the conversation indexed under an SMS/WhatsApp
// thread key (store.ThreadKey), whether or not it is still open.
func (s *DB) ConversationByThread(ctx context.Context, key string) (*store.Conversation, error) {
	return convGet[store.Conversation](ctx, s.pool, `SELECT c.doc FROM conversation_threads t
		JOIN conversations c ON c.id = t.conversation_id WHERE t.key = $1`, []byte(key))
}

// ConversationByMessageID is the conversation an inbound email Message-ID
// (no brackets) was received in.
func (s *DB) ConversationByMessageID(ctx context.Context, msgID string) (*store.Conversation, error) {
	return convGet[store.Conversation](ctx, s.pool, `SELECT c.doc FROM conversation_msgids m
		JOIN conversations c ON c.id = m.conversation_id WHERE m.msg_id = $1`, []byte(msgID))
}

// ConversationMessages lists a conversation's messages in time order, at
// most limit (the latest).
func (s *DB) ConversationMessages(ctx context.Context, id string, limit int) ([]store.ConversationMessage, error) {
	sql := `SELECT at_ns, direction, id FROM conversation_messages WHERE conversation_id = $1
		ORDER BY at_ns DESC, direction DESC, id DESC`
	args := []any{id}
	if limit > 0 {
		sql += ` LIMIT $2`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("messages of conversation %s: %w", id, err)
	}
	defer rows.Close()
	var out []store.ConversationMessage
	for rows.Next() {
		var m store.ConversationMessage
		var at int64
		if err := rows.Scan(&at, &m.Direction, &m.ID); err != nil {
			return nil, fmt.Errorf("messages of conversation %s: %w", id, err)
		}
		m.At = time.Unix(0, at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages of conversation %s: %w", id, err)
	}
	slices.Reverse(out)
	return out, nil
}

// indexConversationDeliveryTx lists a delivery that carries a conversation
// (Extra "conversation") among that conversation's messages and marks the
// conversation updated, unless it is a window template. Ingest calls it
// for every delivery, in its transaction.
func (s *DB) indexConversationDeliveryTx(ctx context.Context, tx pgx.Tx, d *store.Delivery) error {
	cnv := d.Extra[envelope.ExtraConversation]
	if cnv == "" || len(cnv) > store.MaxKey {
		return nil
	}
	if err := putConversationMessageTx(ctx, tx, cnv, d.CreatedAt, "out", d.ID); err != nil {
		return err
	}
	c, err := lockConversationTx(ctx, tx, cnv)
	if errors.Is(err, store.ErrNotFound) || err == nil && d.Extra[envelope.ExtraTemplate] != "" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("conversation %s of delivery %s: %w", cnv, d.ID, err)
	}
	c.UpdatedAt = d.CreatedAt
	return putConversationTx(ctx, tx, c)
}

// PruneInbound removes up to max inbound records received before
// `before`, oldest first, with their stored attachment bytes, their
// message-id entry, their place in their conversation and their turn, once
// that turn is answered or dead (a record whose turn is still queued or in
// flight is kept, and so are the records after it). Conversations and
// their Message-ID index stay: they are small, and a late reply still
// threads. Within the same max it removes the flood limits' counters whose
// latest turn came before `before` (counted in the result). Call it until
// it returns 0.
func (s *DB) PruneInbound(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = 1000
	}
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		doomed, err := s.prunableInboundTx(ctx, tx, before, max)
		if err != nil {
			return err
		}
		n = len(doomed)
		if err := s.deleteInboundTx(ctx, tx, doomed); err != nil {
			return err
		}
		if n < max {
			pruned, err := pruneTurnLimitsTx(ctx, tx, before, max-n)
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

// prunableInboundTx locks the oldest max inbound records and their turns,
// and returns those PruneInbound removes.
func (s *DB) prunableInboundTx(ctx context.Context, tx pgx.Tx, before time.Time, max int) ([]*store.InboundRecord, error) {
	rows, err := tx.Query(ctx, `SELECT doc FROM inbound_records ORDER BY id LIMIT $1 FOR UPDATE`, max)
	if err != nil {
		return nil, err
	}
	recs, err := convCollect[store.InboundRecord](rows, max, nil)
	if err != nil {
		return nil, err
	}
	var turnIDs []string
	for _, rec := range recs {
		if rec.TurnID != "" {
			turnIDs = append(turnIDs, rec.TurnID)
		}
	}
	states := map[string]string{}
	rows, err = tx.Query(ctx, `SELECT id, state FROM turns WHERE id = ANY($1) ORDER BY id FOR UPDATE`, s.planEach, turnIDs)
	if err != nil {
		return nil, err
	}
	var id, state string
	if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error { states[id] = state; return nil }); err != nil {
		return nil, err
	}
	for i, rec := range recs {
		if !rec.ReceivedAt.Before(before) {
			return recs[:i], nil // ids sort by creation time
		}
		if st, ok := states[rec.TurnID]; ok && st != store.TurnAnswered && st != store.TurnDead {
			return recs[:i], nil
		}
	}
	return recs, nil
}

// deleteInboundTx removes inbound records with their attachments, their
// conversation entries and their turns.
func (s *DB) deleteInboundTx(ctx context.Context, tx pgx.Tx, recs []*store.InboundRecord) error {
	if len(recs) == 0 {
		return nil
	}
	var ids, turns, cnvs, inConv []string
	var ats []int64
	for _, rec := range recs {
		ids = append(ids, rec.ID)
		if rec.TurnID != "" {
			turns = append(turns, rec.TurnID)
		}
		if rec.ConversationID != "" {
			cnvs, ats, inConv = append(cnvs, rec.ConversationID), append(ats, rec.ReceivedAt.UnixNano()), append(inConv, rec.ID)
		}
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM inbound_records WHERE id = ANY($1)`, []any{ids}},
		{`DELETE FROM inbound_attachments WHERE inbound_id = ANY($1)`, []any{ids}},
		{`DELETE FROM conversation_messages m USING unnest($1::text[], $2::bigint[], $3::text[]) AS u(cnv, at, id)
			WHERE m.conversation_id = u.cnv AND m.at_ns = u.at AND m.direction = 'in' AND m.id = u.id`, []any{cnvs, ats, inConv}},
		{`DELETE FROM turns WHERE id = ANY($1)`, []any{turns}},
	} {
		if _, err := tx.Exec(ctx, q.sql, append([]any{s.planEach}, q.args...)...); err != nil {
			return err
		}
	}
	return nil
}

// checkConversations verifies that every turn's columns agree with its
// record (a queued or sending turn due at its next attempt, no other turn
// due), that every conversation's activity is its UpdatedAt, and that
// every inbound record's conversation exists.
func (s *DB) checkConversations(ctx context.Context) error {
	if err := s.checkTurns(ctx); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, updated_ns, doc FROM conversations`)
	if err != nil {
		return fmt.Errorf("check conversations: %w", err)
	}
	var id string
	var updated int64
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &updated, &doc}, func() error {
		var c store.Conversation
		if err := json.Unmarshal(doc, &c); err != nil {
			return fmt.Errorf("conversation %s: %w", id, err)
		}
		if c.ID != id || nanos(c.UpdatedAt) != updated {
			return fmt.Errorf("conversation %s: row (%s, %d) disagrees with its record", c.ID, id, updated)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The records' conversation ids are read in Go: the doc column keeps
	// outside text as written, which json's operators may refuse to unescape.
	rows, err = s.pool.Query(ctx, `SELECT id, doc FROM inbound_records`)
	if err != nil {
		return fmt.Errorf("check inbound records: %w", err)
	}
	named := map[string]string{} // conversation id → an inbound record naming it
	_, err = pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
		var r struct {
			ConversationID string `json:"conversationId"`
		}
		if err := json.Unmarshal(doc, &r); err != nil {
			return fmt.Errorf("inbound %s: %w", id, err)
		}
		if r.ConversationID != "" {
			named[r.ConversationID] = id
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check inbound records: %w", err)
	}
	for cnv, id := range named {
		var ok bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conversations WHERE id = $1)`, cnv).Scan(&ok); err != nil {
			return fmt.Errorf("check inbound records: %w", err)
		}
		if !ok {
			return fmt.Errorf("inbound %s names missing conversation %s", id, cnv)
		}
	}
	return nil
}
