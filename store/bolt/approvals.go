package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Approval buckets. The approvals package owns their meaning; this file owns
// their consistency: a decision, its audit entry, the inbound message id and
// the injection job are written in one transaction.
var (
	bApprovals      = []byte("approvals")       // approval id → Approval
	bApprovalTokens = []byte("approval_tokens") // token hash → TokenBinding
	bApprovalAudit  = []byte("approval_audit")  // approval id + 0 + be64(ns) + be64(seq) → AuditEntry
	bInjections     = []byte("injections")      // injection id → Injection
	bInjectionDue   = []byte("injection_due")   // be64(next ns) + injection id → nil
	bInbound        = []byte("inbound_ids")     // channel + 0 + message id → first seen
	bApprovalExpiry = []byte("approval_expiry") // be64(expiresAt ns) + approval id → nil (pending only)
	bApprovalLimits = []byte("approval_limits") // rate-limit counters and once-a-day markers → Counter
)

// checkApprovalsTx refuses, before anything is written, approvals whose id
// or token is already stored (or repeated among them).
func checkApprovalsTx(tx *bbolt.Tx, as []store.NewApproval) error {
	ids, tokens := map[string]bool{}, map[string]bool{}
	for _, na := range as {
		id := na.Approval.ID
		if id == "" || len(id) > store.MaxKey {
			return refuse(fmt.Errorf("approval id %q: empty or longer than %d bytes", id, store.MaxKey))
		}
		if ids[id] || tx.Bucket(bApprovals).Get([]byte(id)) != nil {
			return refuse(fmt.Errorf("approval %q: %w", id, store.ErrDuplicateApproval))
		}
		ids[id] = true
		for h := range na.Tokens {
			if h == "" || len(h) > store.MaxKey {
				return refuse(fmt.Errorf("approval %q: empty or oversize token hash", id))
			}
			if tokens[h] || tx.Bucket(bApprovalTokens).Get([]byte(h)) != nil {
				return refuse(fmt.Errorf("approval %q: token collision: %w", id, store.ErrDuplicateApproval))
			}
			tokens[h] = true
		}
	}
	return nil
}

// putApprovalsTx writes approvals that checkApprovalsTx has let through in
// the same transaction.
func (s *DB) putApprovalsTx(tx *bbolt.Tx, envID string, as []store.NewApproval, now time.Time) error {
	for _, na := range as {
		a := na.Approval
		a.EnvelopeID = envID
		if a.State == "" {
			a.State = store.ApprovalPending
		}
		if a.CreatedAt.IsZero() {
			a.CreatedAt = now
		}
		if err := putJSON(tx.Bucket(bApprovals), []byte(a.ID), a); err != nil {
			return err
		}
		if a.State == store.ApprovalPending && !a.ExpiresAt.IsZero() {
			if err := tx.Bucket(bApprovalExpiry).Put(timeKey(a.ExpiresAt, a.ID), nil); err != nil {
				return err
			}
		}
		for h, tb := range na.Tokens {
			if err := putJSON(tx.Bucket(bApprovalTokens), []byte(h), tb); err != nil {
				return err
			}
		}
		if err := putCodeGuardsTx(tx, &a); err != nil {
			return err
		}
		if err := putAuditTx(tx, store.AuditEntry{At: now, ApprovalID: a.ID, Event: "created",
			Detail: fmt.Sprintf("%d recipient(s), expires %s", len(a.Recipients), a.ExpiresAt.UTC().Format(time.RFC3339))}); err != nil {
			return err
		}
		if err := appendEventsTx(tx, a.ID, na.Events, now); err != nil {
			return err
		}
		if a.State == store.ApprovalPending && na.Decision == nil {
			if err := putTimersTx(tx, na.Timers); err != nil {
				return err
			}
		}
		if d := na.Decision; d != nil {
			d.ApprovalID = a.ID
			if _, _, _, err := decideTx(tx, *d); err != nil {
				return err
			}
		}
	}
	return nil
}

func auditKey(id string, at time.Time, seq uint64) []byte {
	k := make([]byte, 0, len(id)+17)
	k = append(k, id...)
	k = append(k, 0)
	k = append(k, be64(at)...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func putAuditTx(tx *bbolt.Tx, e store.AuditEntry) error {
	b := tx.Bucket(bApprovalAudit)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return putJSON(b, auditKey(e.ApprovalID, e.At, seq), e)
}

// Approval returns the approval with that id.
func (s *DB) Approval(ctx context.Context, id string) (*store.Approval, error) {
	var a store.Approval
	err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bApprovals), []byte(id), &a) })
	if err != nil {
		return nil, fmt.Errorf("approval %q: %w", id, err)
	}
	return &a, nil
}

// ListApprovals lists approvals in id order after the cursor `after`,
// optionally only those in state st.
func (s *DB) ListApprovals(ctx context.Context, st, after string, limit int) ([]*store.Approval, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []*store.Approval
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bApprovals).Cursor()
		var k, v []byte
		if after == "" {
			k, v = c.First()
		} else {
			k, v = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, v = c.Next()
			}
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			var a store.Approval
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode approval %s: %w", k, err)
			}
			if st == "" || a.State == st {
				out = append(out, &a)
			}
		}
		return nil
	})
	return out, err
}

// ApprovalAudit returns an approval's audit trail, oldest first.
func (s *DB) ApprovalAudit(ctx context.Context, id string) ([]store.AuditEntry, error) {
	var out []store.AuditEntry
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bApprovalAudit).Cursor()
		prefix := append([]byte(id), 0)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var e store.AuditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// TokenBinding resolves a token hash. ErrNotFound when unknown.
func (s *DB) TokenBinding(ctx context.Context, hash string) (*store.TokenBinding, error) {
	var tb store.TokenBinding
	err := s.bolt.View(func(tx *bbolt.Tx) error { return getJSON(tx.Bucket(bApprovalTokens), []byte(hash), &tb) })
	if err != nil {
		return nil, err
	}
	return &tb, nil
}

// TokenExists reports whether a token hash is bound (collision checks at
// minting time).
func (s *DB) TokenExists(ctx context.Context, hash string) (bool, error) {
	var ok bool
	err := s.bolt.View(func(tx *bbolt.Tx) error { ok = tx.Bucket(bApprovalTokens).Get([]byte(hash)) != nil; return nil })
	return ok, err
}

func inboundKey(channel, msgID string) []byte { return []byte(channel + "\x00" + msgID) }

// InboundSeen reports whether (channel, message id) was processed.
func (s *DB) InboundSeen(ctx context.Context, channel, msgID string) (bool, error) {
	if msgID == "" {
		return false, nil
	}
	var ok bool
	err := s.bolt.View(func(tx *bbolt.Tx) error { ok = tx.Bucket(bInbound).Get(inboundKey(channel, msgID)) != nil; return nil })
	return ok, err
}

// markInboundTx records (channel, msgID); ErrDuplicateInbound when it was
// recorded before. An empty msgID is not recorded.
func markInboundTx(tx *bbolt.Tx, channel, msgID string, now time.Time) error {
	if msgID == "" {
		return nil
	}
	b := tx.Bucket(bInbound)
	k := inboundKey(channel, msgID)
	if b.Get(k) != nil {
		return store.ErrDuplicateInbound
	}
	return b.Put(k, be64(now))
}

// Note records an event that changes no approval state (a wrong sender, a
// quarantined reply, a message not understood) and marks the inbound
// message id as processed, in one transaction. approvalID may be empty (an
// unknown token): then only the message id is recorded. events (a vote
// that had no effect) are appended to the approval's trail in the same
// transaction. ErrDuplicateInbound when the message was processed before.
func (s *DB) Note(ctx context.Context, e store.AuditEntry, events ...store.ApprovalEvent) error {
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		if err := markInboundTx(tx, e.Channel, e.MessageID, e.At); err != nil {
			return err
		}
		if e.ApprovalID == "" {
			return nil
		}
		if len(events) > 0 {
			if tx.Bucket(bApprovals).Get([]byte(e.ApprovalID)) == nil {
				return fmt.Errorf("approval %q: %w", e.ApprovalID, store.ErrNotFound)
			}
			if err := appendEventsTx(tx, e.ApprovalID, events, e.At); err != nil {
				return err
			}
		}
		return putAuditTx(tx, e)
	})
	if err != nil && !errors.Is(err, store.ErrDuplicateInbound) {
		return fmt.Errorf("note approval event: %w", err)
	}
	return err
}

// Decide applies d in one transaction: the approval moves from pending to
// d.State, the other tokens become void (the approval is no longer
// pending), the inbound message id is recorded, an audit entry is written,
// the vote and the decision are appended to the approval's trail and the
// injection job is queued, due at once. When the approval is no
// longer pending it returns the approval as it is and ErrAlreadyDecided
// (an "already-decided" audit entry is written); ErrDuplicateInbound when
// the message was processed before. The injection job is returned too (nil
// for void).
func (s *DB) Decide(ctx context.Context, d store.Decision) (*store.Approval, *store.Injection, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var out *store.Approval
	var job *store.Injection
	var stop int
	err := s.bolt.Batch(func(tx *bbolt.Tx) error {
		var err error
		out, job, stop, err = decideTx(tx, d)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrDuplicateInbound) || errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("decide approval: %w", err)
	}
	return decided(out, job, stop)
}

// stopAlready is decideTx's stop for an approval no longer pending.
const stopAlready = -1

// decided is Decide's answer for decideTx's stop: the approval was
// decided (0), was no longer pending, counted a vote without deciding
// (store.VoteCounted) or refused a person's second vote.
func decided(a *store.Approval, job *store.Injection, stop int) (*store.Approval, *store.Injection, error) {
	switch stop {
	case stopAlready:
		return a, nil, store.ErrAlreadyDecided
	case store.VoteSecond:
		return a, nil, store.ErrSecondVote
	}
	return a, job, nil
}

// decideTx is Decide's transaction. stop is stopAlready for an approval
// that was no longer pending: it is returned as it is and nothing else
// changes but the trail, the audit entry and the message id; for a vote
// on an approval with a quorum, it is store.VoteCounted when the vote was
// counted and decided nothing, store.VoteSecond when the person had voted.
func decideTx(tx *bbolt.Tx, d store.Decision) (out *store.Approval, job *store.Injection, stop int, err error) {
	if err := markInboundTx(tx, d.Channel, d.MessageID, d.At); err != nil {
		return nil, nil, 0, err
	}
	var a store.Approval
	if err := getJSON(tx.Bucket(bApprovals), []byte(d.ApprovalID), &a); err != nil {
		return nil, nil, 0, fmt.Errorf("approval %q: %w", d.ApprovalID, err)
	}
	if a.State != store.ApprovalPending {
		if d.Vote != nil {
			if _, err := appendEventTx(tx, a.ID, store.VoteIgnored(*d.Vote, &a), d.At); err != nil {
				return nil, nil, 0, err
			}
		}
		return &a, nil, stopAlready, putAuditTx(tx, store.AuditEntry{At: d.At, ApprovalID: a.ID, Event: "already-decided", Channel: d.Channel,
			Actor: d.DecidedBy, MessageID: d.MessageID, Decision: d.State,
			Detail: "approval is " + a.State + " since " + a.DecidedAt.UTC().Format(time.RFC3339)})
	}
	if a.Quorum > 0 && d.Person != "" && (d.State == store.ApprovalGranted || d.State == store.ApprovalDenied) {
		switch v := store.CountVote(&a, &d); v {
		case store.VoteSecond, store.VoteCounted:
			ev, event := store.VoteCountedEvent(store.VoteEventOf(d), &a), "counted"
			if v == store.VoteSecond {
				ev, event = store.VoteSecondEvent(store.VoteEventOf(d)), store.WhySecondVote
			} else if err := putJSON(tx.Bucket(bApprovals), []byte(a.ID), a); err != nil {
				return nil, nil, 0, err
			}
			if _, err := appendEventTx(tx, a.ID, ev, d.At); err != nil {
				return nil, nil, 0, err
			}
			return &a, nil, v, putAuditTx(tx, store.AuditEntry{At: d.At, ApprovalID: a.ID, Event: event, Channel: d.Channel,
				Actor: d.Person, MessageID: d.MessageID, Decision: d.State})
		}
	}
	if err := tx.Bucket(bApprovalExpiry).Delete(timeKey(a.ExpiresAt, a.ID)); err != nil {
		return nil, nil, 0, err
	}
	if err := deleteCodeGuardsTx(tx, &a); err != nil {
		return nil, nil, 0, err
	}
	a.State, a.Reason, a.DecidedBy, a.Channel, a.MessageID, a.DecidedAt = d.State, d.Reason, d.DecidedBy, d.Channel, d.MessageID, d.At
	event := "decided"
	switch d.State {
	case store.ApprovalExpired:
		event = "expired"
	case store.ApprovalVoid:
		event = "voided"
	}
	if d.State != store.ApprovalVoid {
		a.InjectionID = d.InjectionID
		inj := store.Injection{ID: d.InjectionID, ApprovalID: a.ID, Agent: a.Agent, Session: a.Session, Turn: a.Turn,
			Response: envelope.ApprovalResponse{ApprovalID: a.ID, Decision: a.Decision(), Reason: d.Reason,
				DecidedBy: d.DecidedBy, DecidedAt: d.At},
			State: store.InjectionPending, CreatedAt: d.At, UpdatedAt: d.At, NextAt: d.At}
		if d.ClaimFor > 0 {
			inj.Attempts, inj.Claims, inj.NextAt, inj.LeasedUntil = 1, 1, d.At.Add(d.ClaimFor), d.At.Add(d.ClaimFor)
		}
		job = &inj
		if err := putJSON(tx.Bucket(bInjections), []byte(inj.ID), inj); err != nil {
			return nil, nil, 0, err
		}
		if err := tx.Bucket(bInjectionDue).Put(timeKey(inj.NextAt, inj.ID), nil); err != nil {
			return nil, nil, 0, err
		}
	}
	if err := putJSON(tx.Bucket(bApprovals), []byte(a.ID), a); err != nil {
		return nil, nil, 0, err
	}
	if d.Vote != nil {
		if _, err := appendEventTx(tx, a.ID, store.VoteDecided(*d.Vote), d.At); err != nil {
			return nil, nil, 0, err
		}
	}
	if _, err := appendEventTx(tx, a.ID, store.DecisionEvent(d), d.At); err != nil {
		return nil, nil, 0, err
	}
	if !d.FollowUpAt.IsZero() {
		if err := putTimersTx(tx, []store.ApprovalTimer{{ApprovalID: a.ID, Kind: store.TimerDecided, Due: d.FollowUpAt}}); err != nil {
			return nil, nil, 0, err
		}
	}
	return &a, job, 0, putAuditTx(tx, store.AuditEntry{At: d.At, ApprovalID: a.ID, Event: event, Channel: d.Channel,
		Actor: d.DecidedBy, MessageID: d.MessageID, Decision: d.State, Detail: d.Reason})
}

// DueExpiries returns the ids of pending approvals whose expiry is at or
// before now, oldest first, at most max.
func (s *DB) DueExpiries(ctx context.Context, now time.Time, max int) ([]string, error) {
	var out []string
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bApprovalExpiry).Cursor()
		limit := be64(now)
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0 && len(out) < max; k, _ = c.Next() {
			out = append(out, string(k[8:]))
		}
		return nil
	})
	return out, err
}

// NextExpiry is the earliest pending expiry, if any.
func (s *DB) NextExpiry() (time.Time, bool) {
	return s.firstTime(bApprovalExpiry)
}

// CheckApprovalInvariants verifies that every pending approval with an
// expiry has exactly its expiry index entry, that no decided approval has
// one, that every pending injection has exactly one due entry, and that
// the code guards are exactly those of pending approvals. Tests
// call it when they end.
func (s *DB) CheckApprovalInvariants() error {
	return s.bolt.View(func(tx *bbolt.Tx) error {
		exp := tx.Bucket(bApprovalExpiry)
		n := 0
		err := tx.Bucket(bApprovals).ForEach(func(k, v []byte) error {
			var a store.Approval
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			has := exp.Get(timeKey(a.ExpiresAt, a.ID)) != nil
			if a.State == store.ApprovalPending && !a.ExpiresAt.IsZero() {
				n++
				if !has {
					return fmt.Errorf("pending approval %s has no expiry entry", a.ID)
				}
			} else if has {
				return fmt.Errorf("%s approval %s still has an expiry entry", a.State, a.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if exp.Stats().KeyN != n {
			return fmt.Errorf("expiry index has %d entries, %d pending approvals", exp.Stats().KeyN, n)
		}
		due := tx.Bucket(bInjectionDue)
		pending := 0
		err = tx.Bucket(bInjections).ForEach(func(k, v []byte) error {
			var inj store.Injection
			if err := json.Unmarshal(v, &inj); err != nil {
				return err
			}
			has := due.Get(timeKey(inj.NextAt, inj.ID)) != nil
			if inj.State == store.InjectionPending {
				pending++
				if !has {
					return fmt.Errorf("pending injection %s has no due entry", inj.ID)
				}
			} else if has {
				return fmt.Errorf("%s injection %s still has a due entry", inj.State, inj.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if due.Stats().KeyN != pending {
			return fmt.Errorf("injection due index has %d entries, %d pending injections", due.Stats().KeyN, pending)
		}
		return checkCodeGuardsTx(tx)
	})
}
