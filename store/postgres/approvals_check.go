package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
)

// checkApprovals verifies that every approval's and every injection's
// columns follow its doc (a pending approval with an expiry is due to
// expire then and no other is; a pending job is due and a leased one holds
// its lease; no other is), and that the code guards are exactly those of
// the pending approvals' SMS and WhatsApp recipients. It reads in one
// snapshot.
func (s *DB) checkApprovals(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		want, err := checkApprovalRowsTx(ctx, tx)
		if err != nil {
			return err
		}
		if err := checkInjectionRowsTx(ctx, tx); err != nil {
			return err
		}
		return checkCodeGuardRowsTx(ctx, tx, want)
	})
}

// checkApprovalRowsTx checks the approvals' columns and returns the code
// guards their pending approvals must have.
func checkApprovalRowsTx(ctx context.Context, tx pgx.Tx) (map[[3]string]bool, error) {
	rows, err := tx.Query(ctx, `SELECT id, state, expires_ns, doc FROM approvals`)
	if err != nil {
		return nil, fmt.Errorf("check approvals: %w", err)
	}
	defer rows.Close()
	guards := map[[3]string]bool{}
	for rows.Next() {
		var id, state string
		var expires *int64
		var doc []byte
		if err := rows.Scan(&id, &state, &expires, &doc); err != nil {
			return nil, fmt.Errorf("check approvals: %w", err)
		}
		var a store.Approval
		if err := json.Unmarshal(doc, &a); err != nil {
			return nil, fmt.Errorf("approval %s: %w: %v", id, store.ErrCorrupt, err)
		}
		if a.ID != id || a.State != state {
			return nil, fmt.Errorf("approval row %s (%s) holds approval %s (%s)", id, state, a.ID, a.State)
		}
		if !sameNanos(expires, approvalExpiry(&a)) {
			return nil, fmt.Errorf("%s approval %s expiring %v is due to expire at %v", a.State, id, a.ExpiresAt, optTime(expires))
		}
		for _, g := range codeGuards(&a) {
			guards[[3]string{g.channel, g.number, a.ID}] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check approvals: %w", err)
	}
	return guards, nil
}

// checkInjectionRowsTx checks the injections' columns.
func checkInjectionRowsTx(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT id, state, next_ns, lease_until_ns, updated_ns, doc FROM injections`)
	if err != nil {
		return fmt.Errorf("check injections: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, state string
		var next, lease *int64
		var updated int64
		var doc []byte
		if err := rows.Scan(&id, &state, &next, &lease, &updated, &doc); err != nil {
			return fmt.Errorf("check injections: %w", err)
		}
		var inj store.Injection
		if err := json.Unmarshal(doc, &inj); err != nil {
			return fmt.Errorf("injection %s: %w: %v", id, store.ErrCorrupt, err)
		}
		wantNext, wantLease, _, err := injectionColumns(&inj)
		if err != nil {
			return err
		}
		switch {
		case inj.ID != id || inj.State != state:
			return fmt.Errorf("injection row %s (%s) holds injection %s (%s)", id, state, inj.ID, inj.State)
		case !sameNanos(next, wantNext):
			return fmt.Errorf("%s injection %s due at %v, its record says %v", state, id, optTime(next), inj.NextAt)
		case !sameNanos(lease, wantLease):
			return fmt.Errorf("injection %s leased until %v, its record says %v", id, optTime(lease), inj.LeasedUntil)
		case updated != nanos(inj.UpdatedAt):
			return fmt.Errorf("injection %s updated at %v, its record says %v", id, fromNanos(updated), inj.UpdatedAt)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check injections: %w", err)
	}
	return nil
}

// checkCodeGuardRowsTx checks that the guards are exactly want.
func checkCodeGuardRowsTx(ctx context.Context, tx pgx.Tx, want map[[3]string]bool) error {
	rows, err := tx.Query(ctx, `SELECT channel, number, approval_id FROM approval_code_guards`)
	if err != nil {
		return fmt.Errorf("check code guards: %w", err)
	}
	n := 0
	for rows.Next() {
		var k [3]string
		if err := rows.Scan(&k[0], &k[1], &k[2]); err != nil {
			rows.Close()
			return fmt.Errorf("check code guards: %w", err)
		}
		if !want[k] {
			rows.Close()
			return fmt.Errorf("code guard of %s for its %s recipient belongs to no pending approval's recipient", k[2], k[0])
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check code guards: %w", err)
	}
	if n != len(want) {
		return fmt.Errorf("code guards: %d rows, pending approvals have %d SMS/WhatsApp recipients", n, len(want))
	}
	return nil
}

func sameNanos(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// optTime shows an optional _ns column.
func optTime(n *int64) any {
	if n == nil {
		return "never"
	}
	return fromNanos(*n)
}
