package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

func (s *DB) Attempts(ctx context.Context, id string) (_ []store.Attempt, err error) {
	err = errors.New("postgres: Attempts is not built yet")
	return
}

func (s *DB) Claim(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) bool) (_ []*store.Delivery, err error) {
	err = errors.New("postgres: Claim is not built yet")
	return
}

func (s *DB) ClaimAdmitting(ctx context.Context, max int, lease time.Duration, admit func(*store.Delivery) store.Admission) (_ []*store.Delivery, err error) {
	err = errors.New("postgres: ClaimAdmitting is not built yet")
	return
}

func (s *DB) CountByState(ctx context.Context) (_ map[store.State]int, err error) {
	err = errors.New("postgres: CountByState is not built yet")
	return
}

func (s *DB) DeadSince(ctx context.Context, since time.Time, channel string) (_ []string, _ bool, err error) {
	err = errors.New("postgres: DeadSince is not built yet")
	return
}

func (s *DB) Delivery(ctx context.Context, id string) (_ *store.Delivery, err error) {
	err = errors.New("postgres: Delivery is not built yet")
	return
}

func (s *DB) DeliveryByProviderID(ctx context.Context, channel string, pid string) (_ *store.Delivery, err error) {
	err = errors.New("postgres: DeliveryByProviderID is not built yet")
	return
}

func (s *DB) DeliveryStats(ctx context.Context, now time.Time) (_ *store.DeliveryStats, err error) {
	err = errors.New("postgres: DeliveryStats is not built yet")
	return
}

func (s *DB) Envelope(ctx context.Context, id string) (_ *store.EnvelopeRecord, err error) {
	err = errors.New("postgres: Envelope is not built yet")
	return
}

func (s *DB) Ingest(ctx context.Context, in store.Ingest) (_ *store.IngestResult, err error) {
	err = errors.New("postgres: Ingest is not built yet")
	return
}

func (s *DB) IngestBulk(ctx context.Context, ins []store.Ingest) (_ []*store.IngestResult, err error) {
	err = errors.New("postgres: IngestBulk is not built yet")
	return
}

func (s *DB) ListDeliveries(ctx context.Context, st store.State, after string, limit int) (_ []*store.Delivery, err error) {
	err = errors.New("postgres: ListDeliveries is not built yet")
	return
}

func (s *DB) NextDue() (_ time.Time, _ bool) {
	return
}

func (s *DB) QueryDeliveries(ctx context.Context, f store.DeliveryFilter, limit int) (_ []*store.Delivery, _ bool, err error) {
	err = errors.New("postgres: QueryDeliveries is not built yet")
	return
}

func (s *DB) Record(ctx context.Context, id string, leaseUntil time.Time, o store.Outcome) (_ *store.Delivery, err error) {
	err = errors.New("postgres: Record is not built yet")
	return
}

func (s *DB) Release(ctx context.Context, id string, leaseUntil time.Time, at time.Time) (err error) {
	err = errors.New("postgres: Release is not built yet")
	return
}

func (s *DB) ReleaseHeld(ctx context.Context, conversationID string) (_ int, err error) {
	err = errors.New("postgres: ReleaseHeld is not built yet")
	return
}

func (s *DB) RequeueExpired(ctx context.Context, before time.Time) (_ int, err error) {
	err = errors.New("postgres: RequeueExpired is not built yet")
	return
}

func (s *DB) Retry(ctx context.Context, id string) (_ *store.Delivery, err error) {
	err = errors.New("postgres: Retry is not built yet")
	return
}

func (s *DB) RetryDeadSince(ctx context.Context, since time.Time, channel string) (_ int, err error) {
	err = errors.New("postgres: RetryDeadSince is not built yet")
	return
}

func (s *DB) SetProviderStatus(ctx context.Context, id string, status string, detail string) (_ *store.Delivery, err error) {
	err = errors.New("postgres: SetProviderStatus is not built yet")
	return
}

func (s *DB) UpdateProviderStatus(ctx context.Context, id string, decide func(d *store.Delivery) (status string, detail string, ok bool)) (_ *store.Delivery, _ bool, err error) {
	err = errors.New("postgres: UpdateProviderStatus is not built yet")
	return
}

func (s *DB) Prune(ctx context.Context, before time.Time, max int) (_ int, err error) {
	err = errors.New("postgres: Prune is not built yet")
	return
}

func (s *DB) checkDeliveries(ctx context.Context) error { return nil }

// releaseHeldTx makes the conversation's held deliveries due now, in the
// caller's transaction (RecordInbound), and returns how many.
func (s *DB) releaseHeldTx(ctx context.Context, tx pgx.Tx, conversationID string, now time.Time) (int, error) {
	return 0, errors.New("postgres: releaseHeldTx is not built yet")
}
