package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

func (s *DB) Conversation(ctx context.Context, id string) (_ *store.Conversation, err error) {
	err = errors.New("postgres: Conversation is not built yet")
	return
}

func (s *DB) ConversationByMessageID(ctx context.Context, msgID string) (_ *store.Conversation, err error) {
	err = errors.New("postgres: ConversationByMessageID is not built yet")
	return
}

func (s *DB) ConversationByThread(ctx context.Context, key string) (_ *store.Conversation, err error) {
	err = errors.New("postgres: ConversationByThread is not built yet")
	return
}

func (s *DB) ConversationMessages(ctx context.Context, id string, limit int) (_ []store.ConversationMessage, err error) {
	err = errors.New("postgres: ConversationMessages is not built yet")
	return
}

func (s *DB) InboundAttachment(ctx context.Context, id string, n int) (_ []byte, err error) {
	err = errors.New("postgres: InboundAttachment is not built yet")
	return
}

func (s *DB) InboundByMessageID(ctx context.Context, channel string, msgID string) (_ *store.InboundRecord, err error) {
	err = errors.New("postgres: InboundByMessageID is not built yet")
	return
}

func (s *DB) InboundRecord(ctx context.Context, id string) (_ *store.InboundRecord, err error) {
	err = errors.New("postgres: InboundRecord is not built yet")
	return
}

func (s *DB) ListConversations(ctx context.Context, before string, limit int, scan int, keep func(*store.Conversation) bool) (_ []*store.Conversation, err error) {
	err = errors.New("postgres: ListConversations is not built yet")
	return
}

func (s *DB) ListInboundRecords(ctx context.Context, before string, limit int, scan int, keep func(*store.InboundRecord) bool) (_ []*store.InboundRecord, err error) {
	err = errors.New("postgres: ListInboundRecords is not built yet")
	return
}

func (s *DB) PutInboundAttachment(ctx context.Context, id string, n int, data []byte) (err error) {
	err = errors.New("postgres: PutInboundAttachment is not built yet")
	return
}

func (s *DB) RecordInbound(ctx context.Context, w store.InboundWrite) (_ *store.InboundWritten, err error) {
	err = errors.New("postgres: RecordInbound is not built yet")
	return
}

func (s *DB) ClaimTurns(ctx context.Context, now time.Time, max int, lease time.Duration) (_ []*store.Turn, err error) {
	err = errors.New("postgres: ClaimTurns is not built yet")
	return
}

func (s *DB) ListTurns(ctx context.Context, state string, limit int) (_ []*store.Turn, err error) {
	err = errors.New("postgres: ListTurns is not built yet")
	return
}

func (s *DB) NextTurn() (_ time.Time, _ bool) {
	return
}

func (s *DB) RecordTurn(ctx context.Context, claimed *store.Turn, o store.TurnOutcome) (_ *store.Turn, err error) {
	err = errors.New("postgres: RecordTurn is not built yet")
	return
}

func (s *DB) RequeueClaimedTurns(ctx context.Context, before time.Time, at time.Time) (_ int, err error) {
	err = errors.New("postgres: RequeueClaimedTurns is not built yet")
	return
}

func (s *DB) RetryTurn(ctx context.Context, id string, at time.Time) (_ *store.Turn, err error) {
	err = errors.New("postgres: RetryTurn is not built yet")
	return
}

func (s *DB) SetTurnTask(ctx context.Context, claimed *store.Turn, taskID string) (err error) {
	err = errors.New("postgres: SetTurnTask is not built yet")
	return
}

func (s *DB) Turn(ctx context.Context, id string) (_ *store.Turn, err error) {
	err = errors.New("postgres: Turn is not built yet")
	return
}

func (s *DB) PruneInbound(ctx context.Context, before time.Time, max int) (_ int, err error) {
	err = errors.New("postgres: PruneInbound is not built yet")
	return
}

func (s *DB) checkConversations(ctx context.Context) error { return nil }

// indexConversationDeliveryTx records, in an ingest's transaction, that a
// delivery belongs to a conversation (its answer), for the conversation's
// messages and threading.
func (s *DB) indexConversationDeliveryTx(ctx context.Context, tx pgx.Tx, d *store.Delivery) error {
	return errors.New("postgres: indexConversationDeliveryTx is not built yet")
}
