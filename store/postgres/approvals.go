package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

func (s *DB) Approval(ctx context.Context, id string) (_ *store.Approval, err error) {
	err = errors.New("postgres: Approval is not built yet")
	return
}

func (s *DB) ApprovalAudit(ctx context.Context, id string) (_ []store.AuditEntry, err error) {
	err = errors.New("postgres: ApprovalAudit is not built yet")
	return
}

func (s *DB) CodeGuard(ctx context.Context, channel string, number string, id string) (_ store.Counter, _ bool, err error) {
	err = errors.New("postgres: CodeGuard is not built yet")
	return
}

func (s *DB) Decide(ctx context.Context, d store.Decision) (_ *store.Approval, _ *store.Injection, err error) {
	err = errors.New("postgres: Decide is not built yet")
	return
}

func (s *DB) DueExpiries(ctx context.Context, now time.Time, max int) (_ []string, err error) {
	err = errors.New("postgres: DueExpiries is not built yet")
	return
}

func (s *DB) InboundSeen(ctx context.Context, channel string, msgID string) (_ bool, err error) {
	err = errors.New("postgres: InboundSeen is not built yet")
	return
}

func (s *DB) ListApprovals(ctx context.Context, st string, after string, limit int) (_ []*store.Approval, err error) {
	err = errors.New("postgres: ListApprovals is not built yet")
	return
}

func (s *DB) NextExpiry() (_ time.Time, _ bool) {
	return
}

func (s *DB) Note(ctx context.Context, e store.AuditEntry) (err error) {
	err = errors.New("postgres: Note is not built yet")
	return
}

func (s *DB) Once(ctx context.Context, key string, now time.Time) (_ bool, err error) {
	err = errors.New("postgres: Once is not built yet")
	return
}

func (s *DB) TokenBinding(ctx context.Context, hash string) (_ *store.TokenBinding, err error) {
	err = errors.New("postgres: TokenBinding is not built yet")
	return
}

func (s *DB) TokenExists(ctx context.Context, hash string) (_ bool, err error) {
	err = errors.New("postgres: TokenExists is not built yet")
	return
}

func (s *DB) TryCode(ctx context.Context, at store.CodeAttempt) (_ store.CodeResult, err error) {
	err = errors.New("postgres: TryCode is not built yet")
	return
}

func (s *DB) ClaimInjections(ctx context.Context, now time.Time, max int, lease time.Duration) (_ []*store.Injection, err error) {
	err = errors.New("postgres: ClaimInjections is not built yet")
	return
}

func (s *DB) Injection(ctx context.Context, id string) (_ *store.Injection, err error) {
	err = errors.New("postgres: Injection is not built yet")
	return
}

func (s *DB) ListInjections(ctx context.Context, st string, limit int) (_ []*store.Injection, err error) {
	err = errors.New("postgres: ListInjections is not built yet")
	return
}

func (s *DB) NextInjection() (_ time.Time, _ bool) {
	return
}

func (s *DB) RecordInjection(ctx context.Context, claimed *store.Injection, o store.InjectionOutcome) (_ *store.Injection, err error) {
	err = errors.New("postgres: RecordInjection is not built yet")
	return
}

func (s *DB) ReleaseInjection(ctx context.Context, claimed *store.Injection, at time.Time) (err error) {
	err = errors.New("postgres: ReleaseInjection is not built yet")
	return
}

func (s *DB) RequeueClaimedInjections(ctx context.Context, before time.Time, at time.Time) (_ int, err error) {
	err = errors.New("postgres: RequeueClaimedInjections is not built yet")
	return
}

func (s *DB) RetryInjection(ctx context.Context, id string, at time.Time) (_ *store.Injection, err error) {
	err = errors.New("postgres: RetryInjection is not built yet")
	return
}

func (s *DB) checkApprovals(ctx context.Context) error { return nil }

// checkApprovalsTx refuses approvals an ingest may not store (a token
// already bound, …), before anything is written.
func (s *DB) checkApprovalsTx(ctx context.Context, tx pgx.Tx, as []store.NewApproval) error {
	return errors.New("postgres: checkApprovalsTx is not built yet")
}

// putApprovalsTx stores an ingested envelope's approvals in its transaction.
func (s *DB) putApprovalsTx(ctx context.Context, tx pgx.Tx, envID string, as []store.NewApproval, now time.Time) error {
	return errors.New("postgres: putApprovalsTx is not built yet")
}
