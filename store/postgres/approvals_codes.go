package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// The short codes of pending approvals are guarded against guessing as on
// the embedded store (store.CodeAttempt): approval_code_guards holds one
// counter per (channel, number, pending approval) whose recipient on an SMS
// or WhatsApp channel is that number. A wrong code from a number counts
// against every approval pending for it; an entry that reaches the limit
// locks that approval's code for that number. The guard rows are the locks
// that order concurrent attempts from one number on every replica: TryCode
// takes them FOR UPDATE (a wrong code) or FOR SHARE (a matching code), so
// each wrong code is counted and none slips past a lock.

// insertCodeGuardSQL adds a guard (with no wrong codes counted), keeping
// one that exists (a recipient listed twice).
const insertCodeGuardSQL = `INSERT INTO approval_code_guards (channel, number, approval_id, doc)
	VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`

// codeGuard names one guard of an approval.
type codeGuard struct{ channel, number string }

// codeGuards are the guards a pending approval has: one per recipient on a
// channel that answers with short codes; none once decided.
func codeGuards(a *store.Approval) []codeGuard {
	if a.State != store.ApprovalPending {
		return nil
	}
	var out []codeGuard
	for _, r := range a.Recipients {
		if spec, ok := envelope.Channel(r.Channel); ok && spec.Supports(envelope.HandleCode) {
			out = append(out, codeGuard{r.Channel, r.Address})
		}
	}
	return out
}

// deleteCodeGuardsTx removes the guards of an approval leaving pending.
func deleteCodeGuardsTx(ctx context.Context, tx pgx.Tx, a *store.Approval) error {
	for _, g := range codeGuards(a) {
		_, err := tx.Exec(ctx, `DELETE FROM approval_code_guards WHERE channel = $1 AND number = $2 AND approval_id = $3`,
			g.channel, g.number, a.ID)
		if err != nil {
			return fmt.Errorf("delete code guard of %s: %w", a.ID, err)
		}
	}
	return nil
}

// TryCode checks the lock, looks the code up and counts a wrong code in one
// transaction, holding the number's guard rows, so that concurrent guesses
// on any replica cannot slip past the lock: each approval's code is
// evaluated at most Max times in a window.
func (s *DB) TryCode(ctx context.Context, at store.CodeAttempt) (store.CodeResult, error) {
	if err := ctx.Err(); err != nil {
		return store.CodeResult{}, err
	}
	var out store.CodeResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tb, err := tokenBindingTx(ctx, tx, at.Hash)
		switch {
		case err == nil && tb.Kind == store.TokenKindCode && tb.Channel == at.Channel && tb.Recipient == at.Number:
			out, err = matchedCodeTx(ctx, tx, at, tb)
			return err
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		out, err = wrongCodeTx(ctx, tx, at)
		return err
	})
	if err != nil {
		return store.CodeResult{}, fmt.Errorf("try code: %w", err)
	}
	return out, nil
}

// matchedCodeTx answers a code that is one of at.Number's: the binding,
// unless the approval's code is locked for the number. The guard is read
// FOR SHARE, after any wrong code being counted against it commits.
func matchedCodeTx(ctx context.Context, tx pgx.Tx, at store.CodeAttempt, tb *store.TokenBinding) (store.CodeResult, error) {
	var c store.Counter
	err := tx.QueryRow(ctx, `SELECT doc FROM approval_code_guards WHERE channel = $1 AND number = $2 AND approval_id = $3
		FOR SHARE`, at.Channel, at.Number, tb.ApprovalID).Scan(&c)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.CodeResult{}, fmt.Errorf("read code guard of %s: %w", tb.ApprovalID, err)
	}
	var doc []byte
	if err := tx.QueryRow(ctx, `SELECT doc FROM approvals WHERE id = $1`, tb.ApprovalID).Scan(&doc); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = store.ErrNotFound
		}
		return store.CodeResult{}, fmt.Errorf("approval %q: %w", tb.ApprovalID, err)
	}
	a, err := decodeApproval(doc)
	if err != nil {
		return store.CodeResult{}, err
	}
	if c.LockedUntil.After(at.At) {
		return store.CodeResult{Approval: a, Locked: true, LockedUntil: c.LockedUntil}, nil
	}
	return store.CodeResult{Approval: a, Binding: tb}, nil
}

// lockedGuard is a guard row taken for update.
type lockedGuard struct {
	approvalID string
	c          store.Counter
}

// wrongCodeTx counts a wrong code against every approval pending for
// at.Number whose code is not locked yet, locking those that reach Max.
func wrongCodeTx(ctx context.Context, tx pgx.Tx, at store.CodeAttempt) (store.CodeResult, error) {
	rows, err := tx.Query(ctx, `SELECT approval_id, doc FROM approval_code_guards WHERE channel = $1 AND number = $2
		ORDER BY approval_id FOR UPDATE`, at.Channel, at.Number)
	if err != nil {
		return store.CodeResult{}, fmt.Errorf("lock code guards: %w", err)
	}
	guards, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockedGuard, error) {
		var g lockedGuard
		err := r.Scan(&g.approvalID, &g.c)
		return g, err
	})
	if err != nil {
		return store.CodeResult{}, fmt.Errorf("lock code guards: %w", err)
	}
	var out store.CodeResult
	locked := 0
	for _, g := range guards {
		ct := g.c
		if ct.LockedUntil.After(at.At) {
			locked++
			out.LockedUntil = laterOf(out.LockedUntil, ct.LockedUntil)
			out.Wrong = max(out.Wrong, ct.Count)
			out.Pending = append(out.Pending, store.PendingCode{ApprovalID: g.approvalID, Counter: ct})
			continue
		}
		if at.At.Sub(ct.WindowStart) >= at.Window || ct.Count == 0 {
			ct = store.Counter{WindowStart: at.At}
		}
		ct.Count++
		lockedNow := false
		if at.Max > 0 && ct.Count >= at.Max {
			ct.LockedUntil = at.At.Add(at.LockFor)
			locked++
			lockedNow = true
			out.LockedUntil = laterOf(out.LockedUntil, ct.LockedUntil)
			if err := putAuditTx(ctx, tx, store.AuditEntry{At: at.At, ApprovalID: g.approvalID, Event: "code-locked",
				Channel: at.Channel, Actor: at.Number,
				Detail: fmt.Sprintf("%d wrong codes: this approval's code is refused from this number until %s",
					ct.Count, ct.LockedUntil.UTC().Format(time.RFC3339))}); err != nil {
				return store.CodeResult{}, err
			}
		}
		out.Wrong = max(out.Wrong, ct.Count)
		out.Pending = append(out.Pending, store.PendingCode{ApprovalID: g.approvalID, Counter: ct, LockedNow: lockedNow})
		if err := updateGuardTx(ctx, tx, at, g.approvalID, ct); err != nil {
			return store.CodeResult{}, err
		}
	}
	out.Locked = len(guards) > 0 && locked == len(guards)
	return out, nil
}

func updateGuardTx(ctx context.Context, tx pgx.Tx, at store.CodeAttempt, id string, c store.Counter) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode code guard of %s: %w", id, err)
	}
	_, err = tx.Exec(ctx, `UPDATE approval_code_guards SET doc = $4 WHERE channel = $1 AND number = $2 AND approval_id = $3`,
		at.Channel, at.Number, id, doc)
	if err != nil {
		return fmt.Errorf("write code guard of %s: %w", id, err)
	}
	return nil
}

// laterOf is the later of two times.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// CodeGuard returns the wrong-code counter of approval id's code for number
// on channel, and whether the approval has one (it is pending and was sent
// to that number there).
func (s *DB) CodeGuard(ctx context.Context, channel, number, id string) (store.Counter, bool, error) {
	var c store.Counter
	err := s.pool.QueryRow(ctx, `SELECT doc FROM approval_code_guards WHERE channel = $1 AND number = $2 AND approval_id = $3`,
		channel, number, id).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Counter{}, false, nil
	}
	if err != nil {
		return store.Counter{}, false, fmt.Errorf("code guard of %s: %w", id, err)
	}
	return c, true, nil
}
