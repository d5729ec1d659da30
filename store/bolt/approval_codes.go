package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// bApprovalCodes guards the short codes of pending approvals against
// guessing. It holds one entry per (channel, number, pending approval) whose
// recipient on an SMS or WhatsApp channel is that number:
//
//	channel + 0 + number + 0 + approval id → Counter (wrong codes, lock)
//
// A wrong code from a number counts against every approval pending for that
// number (those are the codes it could have been guessing), and an entry
// that reaches the limit locks that approval's code for that number: the
// right code is then refused. The lock protects the approval, not the
// number: an approval created later has a fresh entry, so someone who can
// spoof a person's number can freeze the SMS answers of the approvals
// already open to that number (which stay open to their other recipients,
// channels and operators), not silence the person. Entries leave with the
// approval's pending state (Decide).
var bApprovalCodes = []byte("approval_codes")

func codeGuardPrefix(channel, number string) []byte {
	return []byte(channel + "\x00" + number + "\x00")
}

func codeGuardKey(channel, number, approvalID string) []byte {
	return append(codeGuardPrefix(channel, number), approvalID...)
}

// hasCodes reports whether recipients on channel answer with short codes.
func hasCodes(channel string) bool {
	spec, ok := envelope.Channel(channel)
	return ok && spec.Supports(envelope.HandleCode)
}

// putCodeGuardsTx adds the guard entries of a pending approval.
func putCodeGuardsTx(tx *bbolt.Tx, a *store.Approval) error {
	if a.State != store.ApprovalPending {
		return nil
	}
	b := tx.Bucket(bApprovalCodes)
	for _, r := range a.Recipients {
		if !hasCodes(r.Channel) {
			continue
		}
		k := codeGuardKey(r.Channel, r.Address, a.ID)
		if b.Get(k) != nil {
			continue
		}
		if err := putJSON(b, k, store.Counter{}); err != nil {
			return err
		}
	}
	return nil
}

// deleteCodeGuardsTx removes the guard entries of an approval leaving
// pending.
func deleteCodeGuardsTx(tx *bbolt.Tx, a *store.Approval) error {
	b := tx.Bucket(bApprovalCodes)
	for _, r := range a.Recipients {
		if !hasCodes(r.Channel) {
			continue
		}
		if err := b.Delete(codeGuardKey(r.Channel, r.Address, a.ID)); err != nil {
			return err
		}
	}
	return nil
}

// TryCode checks the lock, looks the code up and counts a wrong code in one
// write transaction, so that concurrent guesses cannot slip past the lock:
// each approval's code is evaluated at most Max times in a window.
func (s *DB) TryCode(ctx context.Context, at store.CodeAttempt) (store.CodeResult, error) {
	if err := ctx.Err(); err != nil {
		return store.CodeResult{}, err
	}
	var out store.CodeResult
	err := s.bolt.Update(func(tx *bbolt.Tx) error {
		out = store.CodeResult{}
		guards := tx.Bucket(bApprovalCodes)
		var tb store.TokenBinding
		err := getJSON(tx.Bucket(bApprovalTokens), []byte(at.Hash), &tb)
		switch {
		case err == nil && tb.Kind == store.TokenKindCode && tb.Channel == at.Channel && tb.Recipient == at.Number:
			var a store.Approval
			if err := getJSON(tx.Bucket(bApprovals), []byte(tb.ApprovalID), &a); err != nil {
				return fmt.Errorf("approval %q: %w", tb.ApprovalID, err)
			}
			out.Approval = &a
			if v := guards.Get(codeGuardKey(at.Channel, at.Number, a.ID)); v != nil {
				var c store.Counter
				if err := json.Unmarshal(v, &c); err != nil {
					return fmt.Errorf("decode code guard of %s: %w", a.ID, err)
				}
				if c.LockedUntil.After(at.At) {
					out.Locked, out.LockedUntil = true, c.LockedUntil
					return nil
				}
			}
			out.Binding = &tb
			return nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		// A wrong code: count it against every approval pending for the
		// number whose code is not locked yet.
		type entry struct {
			k []byte
			c store.Counter
		}
		var entries []entry
		prefix := codeGuardPrefix(at.Channel, at.Number)
		c := guards.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var ct store.Counter
			if err := json.Unmarshal(v, &ct); err != nil {
				return fmt.Errorf("decode code guard %q: %w", k, err)
			}
			entries = append(entries, entry{append([]byte(nil), k...), ct})
		}
		locked := 0
		for _, e := range entries {
			ct := e.c
			id := string(e.k[len(prefix):])
			if ct.LockedUntil.After(at.At) {
				locked++
				out.LockedUntil = later(out.LockedUntil, ct.LockedUntil)
				out.Wrong = max(out.Wrong, ct.Count)
				out.Pending = append(out.Pending, store.PendingCode{ApprovalID: id, Counter: ct})
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
				out.LockedUntil = later(out.LockedUntil, ct.LockedUntil)
				if err := putAuditTx(tx, store.AuditEntry{At: at.At, ApprovalID: id, Event: "code-locked", Channel: at.Channel,
					Actor: at.Number, Detail: fmt.Sprintf("%d wrong codes: this approval's code is refused from this number until %s",
						ct.Count, ct.LockedUntil.UTC().Format(time.RFC3339))}); err != nil {
					return err
				}
			}
			out.Wrong = max(out.Wrong, ct.Count)
			out.Pending = append(out.Pending, store.PendingCode{ApprovalID: id, Counter: ct, LockedNow: lockedNow})
			if err := putJSON(guards, e.k, ct); err != nil {
				return err
			}
		}
		out.Locked = len(entries) > 0 && locked == len(entries)
		return nil
	})
	if err != nil {
		return store.CodeResult{}, fmt.Errorf("try code: %w", err)
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
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
	var ok bool
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		err := getJSON(tx.Bucket(bApprovalCodes), codeGuardKey(channel, number, id), &c)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		ok = err == nil
		return err
	})
	return c, ok, err
}

// migrate4to5: schema 5 guards short codes per (number, approval)
// (bApprovalCodes) where schema 4 counted wrong codes per number alone
// ("code-fail/…" counters in bApprovalLimits). Every pending approval gets
// its guard entries with no wrong codes counted, and the old per-number
// counters and locks are dropped.
func migrate4to5(tx *bbolt.Tx) error {
	err := tx.Bucket(bApprovals).ForEach(func(k, v []byte) error {
		var a store.Approval
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("approval %s: %w", k, err)
		}
		return putCodeGuardsTx(tx, &a)
	})
	if err != nil {
		return fmt.Errorf("migrate to schema 5: %w", err)
	}
	limits := tx.Bucket(bApprovalLimits)
	var old [][]byte
	prefix := []byte("code-fail/")
	c := limits.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := limits.Delete(k); err != nil {
			return fmt.Errorf("migrate to schema 5: %w", err)
		}
	}
	return nil
}

// checkCodeGuardsTx: every pending approval has a guard entry for each of
// its SMS and WhatsApp recipients, and every entry belongs to such a
// recipient of a pending approval.
func checkCodeGuardsTx(tx *bbolt.Tx) error {
	guards := tx.Bucket(bApprovalCodes)
	want := 0
	err := tx.Bucket(bApprovals).ForEach(func(k, v []byte) error {
		var a store.Approval
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		if a.State != store.ApprovalPending {
			return nil
		}
		seen := map[string]bool{}
		for _, r := range a.Recipients {
			if !hasCodes(r.Channel) {
				continue
			}
			gk := string(codeGuardKey(r.Channel, r.Address, a.ID))
			if seen[gk] {
				continue
			}
			seen[gk] = true
			want++
			if guards.Get([]byte(gk)) == nil {
				return fmt.Errorf("pending approval %s has no code guard for its %s recipient", a.ID, r.Channel)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := guards.Stats().KeyN; n != want {
		return fmt.Errorf("code guard index has %d entries, pending approvals have %d SMS/WhatsApp recipients", n, want)
	}
	return nil
}
