package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/cool-ai/beachd/store"
)

func (s *DB) DeleteKV(ctx context.Context, key string) (err error) {
	err = errors.New("postgres: DeleteKV is not built yet")
	return
}

func (s *DB) GetKV(ctx context.Context, key string) (_ []byte, _ bool, err error) {
	err = errors.New("postgres: GetKV is not built yet")
	return
}

func (s *DB) PutKV(ctx context.Context, key string, val []byte) (err error) {
	err = errors.New("postgres: PutKV is not built yet")
	return
}

func (s *DB) ClaimScheduleSlot(ctx context.Context, run store.ScheduleRun) (_ store.ScheduleState, err error) {
	err = errors.New("postgres: ClaimScheduleSlot is not built yet")
	return
}

func (s *DB) InitScheduleState(ctx context.Context, name string, now time.Time) (_ store.ScheduleState, err error) {
	err = errors.New("postgres: InitScheduleState is not built yet")
	return
}

func (s *DB) InterruptScheduleRuns(ctx context.Context, now time.Time, reason string) (_ []store.ScheduleRun, err error) {
	err = errors.New("postgres: InterruptScheduleRuns is not built yet")
	return
}

func (s *DB) RewindScheduleCursor(ctx context.Context, name string, to time.Time) (_ store.ScheduleState, err error) {
	err = errors.New("postgres: RewindScheduleCursor is not built yet")
	return
}

func (s *DB) ScheduleRuns(ctx context.Context, name string, limit int) (_ []store.ScheduleRun, err error) {
	err = errors.New("postgres: ScheduleRuns is not built yet")
	return
}

func (s *DB) ScheduleState(ctx context.Context, name string) (_ store.ScheduleState, _ bool, err error) {
	err = errors.New("postgres: ScheduleState is not built yet")
	return
}

func (s *DB) SetSchedulePaused(ctx context.Context, name string, paused bool, by string, now time.Time) (_ store.ScheduleState, err error) {
	err = errors.New("postgres: SetSchedulePaused is not built yet")
	return
}

func (s *DB) UpdateScheduleRun(ctx context.Context, run store.ScheduleRun) (err error) {
	err = errors.New("postgres: UpdateScheduleRun is not built yet")
	return
}

func (s *DB) AcquireLease(ctx context.Context, name string, holder string, gen uint64, ttl time.Duration) (_ store.Lease, _ bool, err error) {
	err = errors.New("postgres: AcquireLease is not built yet")
	return
}

func (s *DB) ListLeases(ctx context.Context) (_ []store.Lease, err error) {
	err = errors.New("postgres: ListLeases is not built yet")
	return
}

func (s *DB) ReleaseLease(ctx context.Context, name string, holder string, gen uint64) (err error) {
	err = errors.New("postgres: ReleaseLease is not built yet")
	return
}

func (s *DB) PruneRecords(ctx context.Context, before time.Time, max int) (_ int, err error) {
	err = errors.New("postgres: PruneRecords is not built yet")
	return
}

func (s *DB) MarkSeen(ctx context.Context, key string) (first bool, err error) {
	err = errors.New("postgres: MarkSeen is not built yet")
	return
}

func (s *DB) ForgetSeen(ctx context.Context, key string) (err error) {
	err = errors.New("postgres: ForgetSeen is not built yet")
	return
}
