package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

// Injection jobs keep their lease in the row: a claimed job is pending with
// next_ns at the end of its lease, so a job whose worker died is due, and
// claimable by any replica, when the lease runs out. The job's Claims
// counter is the lease token a worker's record or release must match.

// injectionColumns are the columns of inj that follow its doc.
func injectionColumns(inj *store.Injection) (next, leaseUntil *int64, doc []byte, err error) {
	if inj.State == store.InjectionPending {
		n := nanos(inj.NextAt)
		next = &n
	}
	if !inj.LeasedUntil.IsZero() {
		n := nanos(inj.LeasedUntil)
		leaseUntil = &n
	}
	doc, err = json.Marshal(inj)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode injection %s: %w", inj.ID, err)
	}
	return next, leaseUntil, doc, nil
}

// insertInjectionTx stores a new job; one leased already (claimed by its
// decision) names holder, this replica, as its lease's holder.
func insertInjectionTx(ctx context.Context, tx pgx.Tx, inj *store.Injection, holder string) error {
	next, lease, doc, err := injectionColumns(inj)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO injections (id, approval_id, state, next_ns, lease_until_ns, updated_ns, doc, lease_holder)
		VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $5::bigint IS NULL THEN NULL ELSE NULLIF($8, '') END)`,
		inj.ID, inj.ApprovalID, inj.State, next, lease, nanos(inj.UpdatedAt), doc, holder)
	if err != nil {
		return fmt.Errorf("store injection %s: %w", inj.ID, err)
	}
	return nil
}

// updateInjectionSQL writes a job over its row.
const updateInjectionSQL = `UPDATE injections SET state = $2, next_ns = $3, lease_until_ns = $4, updated_ns = $5, doc = $6,
	lease_holder = CASE WHEN $4::bigint IS NULL THEN NULL ELSE lease_holder END WHERE id = $1`

// updateInjectionTx writes inj over its row.
func updateInjectionTx(ctx context.Context, tx pgx.Tx, inj *store.Injection) error {
	next, lease, doc, err := injectionColumns(inj)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, updateInjectionSQL, inj.ID, inj.State, next, lease, nanos(inj.UpdatedAt), doc); err != nil {
		return fmt.Errorf("write injection %s: %w", inj.ID, err)
	}
	return nil
}

// lockInjectionTx reads job id and locks its row until the transaction
// ends.
func lockInjectionTx(ctx context.Context, tx pgx.Tx, id string) (*store.Injection, error) {
	var inj store.Injection
	err := tx.QueryRow(ctx, `SELECT doc FROM injections WHERE id = $1 FOR UPDATE`, id).Scan(&inj)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("injection %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("lock injection %q: %w", id, err)
	}
	return &inj, nil
}

// lockClaimedTx locks the job claimed was claimed as: ErrLeaseLost when it
// is no longer pending or was claimed, released or requeued since.
func lockClaimedTx(ctx context.Context, tx pgx.Tx, claimed *store.Injection) (*store.Injection, error) {
	inj, err := lockInjectionTx(ctx, tx, claimed.ID)
	if err != nil {
		return nil, err
	}
	if inj.State != store.InjectionPending || inj.Claims != claimed.Claims {
		return nil, store.ErrLeaseLost
	}
	return inj, nil
}

// ClaimInjections takes up to max injection jobs due at now, in due order,
// skipping rows another replica holds (FOR UPDATE SKIP LOCKED). A claimed
// job stays due, moved to now+lease, so a job whose worker dies is taken
// again, by any replica, when its lease runs out (at-least-once).
func (s *DB) ClaimInjections(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*store.Injection, error) {
	if max <= 0 {
		return nil, nil
	}
	var out []*store.Injection
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		// Due jobs, and jobs leased by a replica whose liveness lease ran
		// out (it died): they need not wait for their own leases.
		rows, err := tx.Query(ctx, `SELECT doc FROM injections i WHERE next_ns <= $1
			OR (lease_holder IS NOT NULL AND EXISTS (SELECT 1 FROM singleton_leases l
				WHERE l.name = $3 || i.lease_holder AND l.until_ns <= $1))
			ORDER BY next_ns, id LIMIT $2 FOR UPDATE SKIP LOCKED`, nanos(now), max, store.LivenessLease(""))
		if err != nil {
			return err
		}
		jobs, err := pgx.CollectRows(rows, pgx.RowTo[store.Injection])
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for i := range jobs {
			inj := &jobs[i]
			inj.Attempts++
			inj.Claims++
			inj.NextAt = now.Add(lease)
			inj.LeasedUntil = inj.NextAt
			inj.UpdatedAt = now
			next, until, doc, err := injectionColumns(inj)
			if err != nil {
				return err
			}
			b.Queue(updateInjectionSQL, inj.ID, inj.State, next, until, nanos(inj.UpdatedAt), doc)
			b.Queue(`UPDATE injections SET lease_holder = NULLIF($2, '') WHERE id = $1`, inj.ID, s.holder)
			out = append(out, inj)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("claim injections: %w", err)
	}
	return out, nil
}

// NextInjection is the earliest due injection, if any.
func (s *DB) NextInjection() (time.Time, bool) {
	return s.firstNanos(`SELECT next_ns FROM injections WHERE next_ns IS NOT NULL ORDER BY next_ns LIMIT 1`)
}

// RecordInjection records an attempt of a claimed job (claimed is the job as
// ClaimInjections returned it) and audits it. ErrLeaseLost when the job was
// claimed again since.
func (s *DB) RecordInjection(ctx context.Context, claimed *store.Injection, o store.InjectionOutcome) (*store.Injection, error) {
	var out *store.Injection
	err := s.tx(ctx, func(tx pgx.Tx) error {
		inj, err := lockClaimedTx(ctx, tx, claimed)
		if err != nil {
			return err
		}
		inj.State, inj.UpdatedAt, inj.LastError, inj.LeasedUntil = o.State, o.At, o.Error, time.Time{}
		event, actor := store.InjectionAudit(inj)
		switch o.State {
		case store.InjectionDone:
			inj.DoneAt, inj.NextAt = o.At, time.Time{}
		case store.InjectionDead:
			inj.NextAt = time.Time{}
			event = "injection-dead"
		default:
			inj.State, inj.NextAt = store.InjectionPending, o.NextAt
			event = "injection-failed"
			if err := s.notify(ctx, tx, store.WakeInjections); err != nil {
				return err
			}
		}
		if err := updateInjectionTx(ctx, tx, inj); err != nil {
			return err
		}
		out = inj
		if o.State == store.InjectionDone {
			if _, err := appendEventsTx(ctx, tx, inj.ApprovalID, []store.ApprovalEvent{store.InjectedEvent(inj, o.At)}, o.At); err != nil {
				return err
			}
		}
		return putAuditTx(ctx, tx, store.AuditEntry{At: o.At, ApprovalID: inj.ApprovalID, Event: event, Actor: actor,
			Detail: fmt.Sprintf("attempt %d %s", inj.Attempts, o.Error)})
	})
	if err != nil {
		return nil, fmt.Errorf("record injection %s: %w", claimed.ID, err)
	}
	return out, nil
}

// ReleaseInjection makes a job claimed by Decide (ClaimFor) due at once,
// for a caller that could not hand it to a worker after all; its attempt
// is not counted. ErrLeaseLost when the job was claimed again since.
func (s *DB) ReleaseInjection(ctx context.Context, claimed *store.Injection, at time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		inj, err := lockClaimedTx(ctx, tx, claimed)
		if err != nil {
			return err
		}
		inj.Attempts--
		inj.Claims++
		inj.NextAt, inj.LeasedUntil = at, time.Time{}
		if err := updateInjectionTx(ctx, tx, inj); err != nil {
			return err
		}
		return s.notify(ctx, tx, store.WakeInjections)
	})
	if err != nil {
		return fmt.Errorf("release injection %s: %w", claimed.ID, err)
	}
	return nil
}

// RequeueClaimedInjections makes every job claimed before `before` and
// still held by a worker due at `at`; the workers' records of them are
// then refused (ErrLeaseLost). The injector calls it when it starts, with
// `before` its own start.
func (s *DB) RequeueClaimedInjections(ctx context.Context, before, at time.Time) (int, error) {
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT doc FROM injections WHERE lease_until_ns IS NOT NULL AND updated_ns < $1
			ORDER BY id FOR UPDATE`, nanos(before))
		if err != nil {
			return err
		}
		held, err := pgx.CollectRows(rows, pgx.RowTo[store.Injection])
		if err != nil {
			return err
		}
		for i := range held {
			inj := &held[i]
			inj.NextAt, inj.LeasedUntil, inj.UpdatedAt = at, time.Time{}, at
			inj.Claims++
			if err := updateInjectionTx(ctx, tx, inj); err != nil {
				return err
			}
		}
		n = len(held)
		if n == 0 {
			return nil
		}
		return s.notify(ctx, tx, store.WakeInjections)
	})
	if err != nil {
		return 0, fmt.Errorf("requeue claimed injections: %w", err)
	}
	return n, nil
}

// Injection returns an injection job.
func (s *DB) Injection(ctx context.Context, id string) (*store.Injection, error) {
	var inj store.Injection
	err := s.pool.QueryRow(ctx, `SELECT doc FROM injections WHERE id = $1`, id).Scan(&inj)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("injection %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("injection %q: %w", id, err)
	}
	return &inj, nil
}

// ListInjections lists injection jobs in id order, optionally in one state.
func (s *DB) ListInjections(ctx context.Context, st string, limit int) ([]*store.Injection, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM injections WHERE $1 = '' OR state = $1 ORDER BY id LIMIT $2`, st, limit)
	if err != nil {
		return nil, fmt.Errorf("list injections: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToAddrOf[store.Injection])
	if err != nil {
		return nil, fmt.Errorf("list injections: %w", err)
	}
	return out, nil
}

// RetryInjection makes a dead injection due again at `at` (operator action).
func (s *DB) RetryInjection(ctx context.Context, id string, at time.Time) (*store.Injection, error) {
	var out *store.Injection
	err := s.tx(ctx, func(tx pgx.Tx) error {
		inj, err := lockInjectionTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if inj.State != store.InjectionDead {
			return fmt.Errorf("injection is %s: %w", inj.State, store.ErrBadState)
		}
		inj.State, inj.NextAt, inj.UpdatedAt, inj.CreatedAt = store.InjectionPending, at, at, at
		if err := updateInjectionTx(ctx, tx, inj); err != nil {
			return err
		}
		out = inj
		if err := s.notify(ctx, tx, store.WakeInjections); err != nil {
			return err
		}
		return putAuditTx(ctx, tx, store.AuditEntry{At: at, ApprovalID: inj.ApprovalID, Event: "injection-retry", Actor: "operator"})
	})
	if err != nil {
		return nil, fmt.Errorf("retry injection %s: %w", id, err)
	}
	return out, nil
}
