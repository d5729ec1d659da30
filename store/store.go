package store

import (
	"context"
	"time"
)

// Store is everything beachd keeps: the contract every backend (the
// embedded bbolt file, PostgreSQL) fulfils, and the conformance suite in
// store/storetest proves. The rest of beachd takes the smaller interfaces
// below, or its own narrower ones, never a backend's concrete type.
type Store interface {
	Deliveries
	Approvals
	ApprovalTimers
	Injections
	Conversations
	Turns
	Schedules
	KV
	Retention
	Leases

	// NewID returns a new sortable id with the prefix ("env_", "dlv_", …):
	// 48 bits of milliseconds, then 80 random bits.
	NewID(prefix string) string
	// Shared reports whether other processes may use the store at the same
	// time (several replicas on one PostgreSQL). A shared store's claims
	// belong to whoever holds their lease: a starting process re-queues only
	// expired leases, never every lease as the single embedded process may.
	Shared() bool
	// Wakeups delivers a topic (WakeDeliveries, WakeTurns, WakeInjections)
	// when another process made work of that kind due. The embedded store
	// has no other process and returns nil.
	Wakeups() <-chan string
	// CheckInvariants reports the first broken invariant of the records
	// (indexes agree with records, every job in exactly one state, …).
	CheckInvariants() error
	Close() error
}

// Topics of Store.Wakeups.
const (
	WakeDeliveries = "deliveries"
	WakeTurns      = "turns"
	WakeInjections = "injections"
)

// Deliveries are envelopes, their deliveries and the delivery outbox.
type Deliveries interface {
	Ingest(ctx context.Context, in Ingest) (*IngestResult, error)
	IngestBulk(ctx context.Context, ins []Ingest) ([]*IngestResult, error)
	Claim(ctx context.Context, max int, lease time.Duration, admit func(*Delivery) bool) ([]*Delivery, error)
	ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*Delivery) Admission) ([]*Delivery, error)
	Record(ctx context.Context, id string, leaseUntil time.Time, o Outcome) (*Delivery, error)
	Release(ctx context.Context, id string, leaseUntil, at time.Time) error
	RequeueExpired(ctx context.Context, before time.Time) (int, error)
	NextDue() (t time.Time, ok bool)
	DeliveryByProviderID(ctx context.Context, channel, pid string) (*Delivery, error)
	SetProviderStatus(ctx context.Context, id, status, detail string) (*Delivery, error)
	UpdateProviderStatus(ctx context.Context, id string, decide func(d *Delivery) (status, detail string, ok bool)) (*Delivery, bool, error)
	Envelope(ctx context.Context, id string) (*EnvelopeRecord, error)
	// Envelopes reads several envelope records at once (one read
	// transaction, one query), in the order of ids; an id with no envelope
	// gives nil in its place.
	Envelopes(ctx context.Context, ids []string) ([]*EnvelopeRecord, error)
	Delivery(ctx context.Context, id string) (*Delivery, error)
	Attempts(ctx context.Context, id string) ([]Attempt, error)
	ListDeliveries(ctx context.Context, st State, after string, limit int) ([]*Delivery, error)
	CountByState(ctx context.Context) (map[State]int, error)
	Retry(ctx context.Context, id string) (*Delivery, error)
	QueryDeliveries(ctx context.Context, f DeliveryFilter, limit int) (out []*Delivery, more bool, err error)
	DeliveryStats(ctx context.Context, now time.Time) (*DeliveryStats, error)
	DeadSince(ctx context.Context, since time.Time, channel string) (ids []string, more bool, err error)
	RetryDeadSince(ctx context.Context, since time.Time, channel string) (int, error)
	ReleaseHeld(ctx context.Context, conversationID string) (int, error)
	// MarkSeen records key (a provider callback's id) and reports whether it
	// is the first time; ForgetSeen undoes it when the callback's work failed.
	MarkSeen(ctx context.Context, key string) (first bool, err error)
	ForgetSeen(ctx context.Context, key string) error
}

// Approvals are approval requests, their decisions, audit and codes.
type Approvals interface {
	Approval(ctx context.Context, id string) (*Approval, error)
	ListApprovals(ctx context.Context, st, after string, limit int) ([]*Approval, error)
	ApprovalAudit(ctx context.Context, id string) ([]AuditEntry, error)
	TokenBinding(ctx context.Context, hash string) (*TokenBinding, error)
	TokenExists(ctx context.Context, hash string) (bool, error)
	InboundSeen(ctx context.Context, channel, msgID string) (bool, error)
	// Note records e (and appends events to e's approval's trail) in one
	// transaction; see the backends.
	Note(ctx context.Context, e AuditEntry, events ...ApprovalEvent) error
	Decide(ctx context.Context, d Decision) (*Approval, *Injection, error)
	// AppendApprovalEvent appends e to approval id's trail: the store sets
	// Seq and PrevHash from the trail's head and computes Hash in the
	// transaction that moves the head, so appends from any number of
	// processes form one chain. It returns the event as stored.
	// ErrNotFound: no such approval; ErrBadEvent: e is malformed.
	AppendApprovalEvent(ctx context.Context, id string, e ApprovalEvent) (ApprovalEvent, error)
	// ApprovalEvents returns approval id's trail, oldest first, and its
	// head, as of one moment. ErrNotFound: no such approval.
	ApprovalEvents(ctx context.Context, id string) ([]ApprovalEvent, ApprovalEventHead, error)
	DueExpiries(ctx context.Context, now time.Time, max int) ([]string, error)
	NextExpiry() (time.Time, bool)
	TryCode(ctx context.Context, at CodeAttempt) (CodeResult, error)
	CodeGuard(ctx context.Context, channel, number, id string) (Counter, bool, error)
	Once(ctx context.Context, key string, now time.Time) (bool, error)
}

// Injections are the outbox of approval-responses to agents.
type Injections interface {
	ClaimInjections(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*Injection, error)
	NextInjection() (time.Time, bool)
	RecordInjection(ctx context.Context, claimed *Injection, o InjectionOutcome) (*Injection, error)
	ReleaseInjection(ctx context.Context, claimed *Injection, at time.Time) error
	RequeueClaimedInjections(ctx context.Context, before, at time.Time) (int, error)
	Injection(ctx context.Context, id string) (*Injection, error)
	ListInjections(ctx context.Context, st string, limit int) ([]*Injection, error)
	RetryInjection(ctx context.Context, id string, at time.Time) (*Injection, error)
}

// Conversations are inbound messages, the conversations they belong to and
// their attachments.
type Conversations interface {
	RecordInbound(ctx context.Context, w InboundWrite) (*InboundWritten, error)
	InboundByMessageID(ctx context.Context, channel, msgID string) (*InboundRecord, error)
	InboundRecord(ctx context.Context, id string) (*InboundRecord, error)
	InboundAttachment(ctx context.Context, id string, n int) ([]byte, error)
	PutInboundAttachment(ctx context.Context, id string, n int, data []byte) error
	// NoteInboundAttachment records a failed fetch of attachment n's URL:
	// failures is its FetchFailures now, note (when not "") why the bytes
	// will not be fetched. ErrNotFound: no such record or attachment.
	NoteInboundAttachment(ctx context.Context, id string, n int, failures int, note string) error
	ListInboundRecords(ctx context.Context, before string, limit, scan int, keep func(*InboundRecord) bool) ([]*InboundRecord, error)
	Conversation(ctx context.Context, id string) (*Conversation, error)
	ListConversations(ctx context.Context, before string, limit, scan int, keep func(*Conversation) bool) ([]*Conversation, error)
	ConversationByThread(ctx context.Context, key string) (*Conversation, error)
	ConversationByMessageID(ctx context.Context, msgID string) (*Conversation, error)
	ConversationMessages(ctx context.Context, id string, limit int) ([]ConversationMessage, error)
	// ReleaseInbound queues turn for a held inbound message (an operator's
	// decision: no flood limit applies) and marks the record a turn, in one
	// transaction. ErrNotFound: no such record; ErrBadState: the record is
	// not held, or belongs to no conversation.
	ReleaseInbound(ctx context.Context, id string, turn Turn, at time.Time) (*InboundWritten, error)
}

// Turns are the outbox of agent turns started by inbound messages.
type Turns interface {
	ClaimTurns(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*Turn, error)
	NextTurn() (time.Time, bool)
	SetTurnTask(ctx context.Context, claimed *Turn, taskID, pushID string) error
	RecordTurn(ctx context.Context, claimed *Turn, o TurnOutcome) (*Turn, error)
	RequeueClaimedTurns(ctx context.Context, before, at time.Time) (int, error)
	Turn(ctx context.Context, id string) (*Turn, error)
	ListTurns(ctx context.Context, state string, limit int) ([]*Turn, error)
	RetryTurn(ctx context.Context, id string, at time.Time) (*Turn, error)
}

// Schedules are each schedule's cursor and runs.
type Schedules interface {
	ScheduleState(ctx context.Context, name string) (st ScheduleState, ok bool, err error)
	InitScheduleState(ctx context.Context, name string, now time.Time) (ScheduleState, error)
	ClaimScheduleSlot(ctx context.Context, run ScheduleRun) (ScheduleState, error)
	UpdateScheduleRun(ctx context.Context, run ScheduleRun) error
	ScheduleRuns(ctx context.Context, name string, limit int) ([]ScheduleRun, error)
	InterruptScheduleRuns(ctx context.Context, now time.Time, reason string) ([]ScheduleRun, error)
	RewindScheduleCursor(ctx context.Context, name string, to time.Time) (ScheduleState, error)
	SetSchedulePaused(ctx context.Context, name string, paused bool, by string, now time.Time) (ScheduleState, error)
}

// KV is a small key-value space for state that is not a record (an IMAP
// mailbox's cursor, a created content SID).
type KV interface {
	GetKV(ctx context.Context, key string) (val []byte, ok bool, err error)
	PutKV(ctx context.Context, key string, val []byte) error
	DeleteKV(ctx context.Context, key string) error
}

// Retention removes finished records older than a time.
type Retention interface {
	// Prune removes envelopes whose deliveries all finished before before.
	Prune(ctx context.Context, before time.Time, max int) (int, error)
	// PruneRecords removes other finished records (approvals, audit, runs…).
	PruneRecords(ctx context.Context, before time.Time, max int) (int, error)
	PruneInbound(ctx context.Context, before time.Time, max int) (int, error)
}

// Lease is one singleton's lease: who holds it, until when, and its
// generation, which goes up at every change of holder (a fencing token: a
// holder whose generation is no longer the lease's has lost it).
type Lease struct {
	Name       string    `json:"name"`
	Holder     string    `json:"holder"`
	Generation uint64    `json:"generation"`
	Until      time.Time `json:"until"`
}

// Leases hand each singleton (the scheduler, one mailbox's intake, the
// expiry sweeper, retention) to one process at a time.
type Leases interface {
	// AcquireLease takes the lease name for holder until now+ttl, or renews
	// it when holder holds it at gen (0 for a first take). ok is false when
	// another holder's lease has not run out, or when holder's own lease
	// moved to another generation.
	AcquireLease(ctx context.Context, name, holder string, gen uint64, ttl time.Duration) (l Lease, ok bool, err error)
	// ReleaseLease ends holder's lease at gen, so another process may take
	// it at once; a lease no longer held is left alone.
	ReleaseLease(ctx context.Context, name, holder string, gen uint64) error
	// ListLeases returns every lease, held or run out.
	ListLeases(ctx context.Context) ([]Lease, error)
}
