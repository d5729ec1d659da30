package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/envelope"
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

// Approval states.
const (
	ApprovalPending = "pending"
	ApprovalGranted = "granted"
	ApprovalDenied  = "denied"
	ApprovalExpired = "expired"
	ApprovalVoid    = "void"
)

// Approval is a pending or decided approval request.
type Approval struct {
	ID         string          `json:"id"`
	EnvelopeID string          `json:"envelopeId"`
	Agent      string          `json:"agent,omitempty"`
	Request    json.RawMessage `json:"request"`
	Session    string          `json:"session,omitempty"`
	Turn       string          `json:"turn,omitempty"`
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"createdAt"`
	ExpiresAt  time.Time       `json:"expiresAt"`
	DecidedAt  time.Time       `json:"decidedAt,omitzero"`
	DecidedBy  string          `json:"decidedBy,omitempty"`
	Channel    string          `json:"channel,omitempty"`
	MessageID  string          `json:"messageId,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	// Recipients are who was asked, on which channel; Nonce is the per-
	// recipient secret input from which their tokens are derived (with the
	// server's key, which is not stored here).
	Recipients []ApprovalRecipient `json:"recipients,omitempty"`
	// InjectionID is the injection job queued by the decision.
	InjectionID string `json:"injectionId,omitempty"`
}

// ApprovalRecipient is one (recipient, channel) an approval was sent to.
type ApprovalRecipient struct {
	Channel string `json:"channel"`
	Address string `json:"address"`
	Nonce   string `json:"nonce,omitempty"`
}

// Decision returns the approval-response decision of a decided approval
// ("granted" or "denied"; expired approvals are denied).
func (a *Approval) Decision() string {
	switch a.State {
	case ApprovalGranted:
		return envelope.DecisionGranted
	case ApprovalDenied, ApprovalExpired:
		return envelope.DecisionDenied
	}
	return ""
}

// TokenBinding is what a token hash resolves to: the approval, and the
// recipient and channel it was issued to.
type TokenBinding struct {
	ApprovalID string `json:"approvalId"`
	Channel    string `json:"channel"`
	Recipient  string `json:"recipient"`
	Kind       string `json:"kind"` // token, code, button, link
	// Decision is set for a WhatsApp button: pressing it decides this.
	Decision string `json:"decision,omitempty"`
}

// NewApproval is an approval to create at ingest, with its token hashes.
type NewApproval struct {
	Approval Approval
	Tokens   map[string]TokenBinding // token hash (see approvals) → binding
}

// AuditEntry is one event in an approval's life.
type AuditEntry struct {
	At         time.Time `json:"at"`
	ApprovalID string    `json:"approvalId"`
	// Event: created, decided, expired, voided, duplicate, already-decided,
	// wrong-sender, quarantined, ignored, not-understood, wrong-code,
	// rate-limited, opt-out, injected, injection-failed, injection-dead,
	// injection-retry.
	Event     string `json:"event"`
	Channel   string `json:"channel,omitempty"`
	Actor     string `json:"actor,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	Decision  string `json:"decision,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Injection states.
const (
	InjectionPending = "pending"
	InjectionDone    = "done"
	InjectionDead    = "dead"
)

// Injection is the durable job that delivers a decision to the agent.
type Injection struct {
	ID         string                    `json:"id"`
	ApprovalID string                    `json:"approvalId"`
	Agent      string                    `json:"agent"`
	Session    string                    `json:"session"`
	Turn       string                    `json:"turn"`
	Response   envelope.ApprovalResponse `json:"response"`
	State      string                    `json:"state"`
	Attempts   int                       `json:"attempts"`
	// Claims counts claims and releases: the lease token a worker's
	// record must match.
	Claims int `json:"claims"`
	// LeasedUntil is set while a worker holds the job.
	LeasedUntil time.Time `json:"leasedUntil,omitzero"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	NextAt      time.Time `json:"nextAt,omitzero"`
	DoneAt      time.Time `json:"doneAt,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
}

// Sentinel errors of approvals.
var (
	// ErrDuplicateApproval: an approval with that id already exists.
	ErrDuplicateApproval = errors.New("approval id already exists")
	// ErrDuplicateInbound: this (channel, message id) was processed before.
	ErrDuplicateInbound = errors.New("inbound message already processed")
	// ErrAlreadyDecided: the approval is no longer pending.
	ErrAlreadyDecided = errors.New("approval already decided")
)

// checkApprovalsTx refuses, before anything is written, approvals whose id
// or token is already stored (or repeated among them).
func checkApprovalsTx(tx *bolt.Tx, as []NewApproval) error {
	ids, tokens := map[string]bool{}, map[string]bool{}
	for _, na := range as {
		id := na.Approval.ID
		if id == "" || len(id) > maxStoredKey {
			return refuse(fmt.Errorf("approval id %q: empty or longer than %d bytes", id, maxStoredKey))
		}
		if ids[id] || tx.Bucket(bApprovals).Get([]byte(id)) != nil {
			return refuse(fmt.Errorf("approval %q: %w", id, ErrDuplicateApproval))
		}
		ids[id] = true
		for h := range na.Tokens {
			if h == "" || len(h) > maxStoredKey {
				return refuse(fmt.Errorf("approval %q: empty or oversize token hash", id))
			}
			if tokens[h] || tx.Bucket(bApprovalTokens).Get([]byte(h)) != nil {
				return refuse(fmt.Errorf("approval %q: token collision: %w", id, ErrDuplicateApproval))
			}
			tokens[h] = true
		}
	}
	return nil
}

// putApprovalsTx writes approvals that checkApprovalsTx has let through in
// the same transaction.
func (s *DB) putApprovalsTx(tx *bolt.Tx, envID string, as []NewApproval, now time.Time) error {
	for _, na := range as {
		a := na.Approval
		a.EnvelopeID = envID
		if a.State == "" {
			a.State = ApprovalPending
		}
		if a.CreatedAt.IsZero() {
			a.CreatedAt = now
		}
		if err := putJSON(tx.Bucket(bApprovals), []byte(a.ID), a); err != nil {
			return err
		}
		if a.State == ApprovalPending && !a.ExpiresAt.IsZero() {
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
		if err := putAuditTx(tx, AuditEntry{At: now, ApprovalID: a.ID, Event: "created",
			Detail: fmt.Sprintf("%d recipient(s), expires %s", len(a.Recipients), a.ExpiresAt.UTC().Format(time.RFC3339))}); err != nil {
			return err
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

func putAuditTx(tx *bolt.Tx, e AuditEntry) error {
	b := tx.Bucket(bApprovalAudit)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return putJSON(b, auditKey(e.ApprovalID, e.At, seq), e)
}

// Approval returns the approval with that id.
func (s *DB) Approval(ctx context.Context, id string) (*Approval, error) {
	var a Approval
	err := s.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bApprovals), []byte(id), &a) })
	if err != nil {
		return nil, fmt.Errorf("approval %q: %w", id, err)
	}
	return &a, nil
}

// ListApprovals lists approvals in id order after the cursor `after`,
// optionally only those in state st.
func (s *DB) ListApprovals(ctx context.Context, st, after string, limit int) ([]*Approval, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []*Approval
	err := s.bolt.View(func(tx *bolt.Tx) error {
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
			var a Approval
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
func (s *DB) ApprovalAudit(ctx context.Context, id string) ([]AuditEntry, error) {
	var out []AuditEntry
	err := s.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bApprovalAudit).Cursor()
		prefix := append([]byte(id), 0)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var e AuditEntry
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
func (s *DB) TokenBinding(ctx context.Context, hash string) (*TokenBinding, error) {
	var tb TokenBinding
	err := s.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bApprovalTokens), []byte(hash), &tb) })
	if err != nil {
		return nil, err
	}
	return &tb, nil
}

// TokenExists reports whether a token hash is bound (collision checks at
// minting time).
func (s *DB) TokenExists(ctx context.Context, hash string) (bool, error) {
	var ok bool
	err := s.bolt.View(func(tx *bolt.Tx) error { ok = tx.Bucket(bApprovalTokens).Get([]byte(hash)) != nil; return nil })
	return ok, err
}

func inboundKey(channel, msgID string) []byte { return []byte(channel + "\x00" + msgID) }

// InboundSeen reports whether (channel, message id) was processed.
func (s *DB) InboundSeen(ctx context.Context, channel, msgID string) (bool, error) {
	if msgID == "" {
		return false, nil
	}
	var ok bool
	err := s.bolt.View(func(tx *bolt.Tx) error { ok = tx.Bucket(bInbound).Get(inboundKey(channel, msgID)) != nil; return nil })
	return ok, err
}

// markInboundTx records (channel, msgID); ErrDuplicateInbound when it was
// recorded before. An empty msgID is not recorded.
func markInboundTx(tx *bolt.Tx, channel, msgID string, now time.Time) error {
	if msgID == "" {
		return nil
	}
	b := tx.Bucket(bInbound)
	k := inboundKey(channel, msgID)
	if b.Get(k) != nil {
		return ErrDuplicateInbound
	}
	return b.Put(k, be64(now))
}

// Note records an event that changes no approval state (a wrong sender, a
// quarantined reply, a message not understood) and marks the inbound
// message id as processed, in one transaction. approvalID may be empty (an
// unknown token): then only the message id is recorded. ErrDuplicateInbound
// when the message was processed before.
func (s *DB) Note(ctx context.Context, e AuditEntry) error {
	err := s.bolt.Batch(func(tx *bolt.Tx) error {
		if err := markInboundTx(tx, e.Channel, e.MessageID, e.At); err != nil {
			return err
		}
		if e.ApprovalID == "" {
			return nil
		}
		return putAuditTx(tx, e)
	})
	if err != nil && !errors.Is(err, ErrDuplicateInbound) {
		return fmt.Errorf("note approval event: %w", err)
	}
	return err
}

// Decision is a decision to apply to a pending approval.
type Decision struct {
	ApprovalID string
	// State: granted, denied, expired (denied by policy) or void (withdrawn:
	// nothing is injected).
	State     string
	Reason    string
	DecidedBy string
	Channel   string
	MessageID string
	At        time.Time
	// InjectionID names the injection job to queue (ignored for void).
	InjectionID string
	// ClaimFor, when positive, creates the injection job already claimed
	// for that long (its first attempt counted), so that the caller can hand
	// it straight to a worker without a second transaction; if the worker
	// never records it, it is claimed again when the lease runs out.
	ClaimFor time.Duration
}

// Decide applies d in one transaction: the approval moves from pending to
// d.State, the other tokens become void (the approval is no longer
// pending), the inbound message id is recorded, an audit entry is written
// and the injection job is queued, due at once. When the approval is no
// longer pending it returns the approval as it is and ErrAlreadyDecided
// (an "already-decided" audit entry is written); ErrDuplicateInbound when
// the message was processed before. The injection job is returned too (nil
// for void).
func (s *DB) Decide(ctx context.Context, d Decision) (*Approval, *Injection, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var out *Approval
	var job *Injection
	var already bool
	err := s.bolt.Batch(func(tx *bolt.Tx) error {
		out, job, already = nil, nil, false
		if err := markInboundTx(tx, d.Channel, d.MessageID, d.At); err != nil {
			return err
		}
		var a Approval
		if err := getJSON(tx.Bucket(bApprovals), []byte(d.ApprovalID), &a); err != nil {
			return fmt.Errorf("approval %q: %w", d.ApprovalID, err)
		}
		if a.State != ApprovalPending {
			out, already = &a, true
			return putAuditTx(tx, AuditEntry{At: d.At, ApprovalID: a.ID, Event: "already-decided", Channel: d.Channel,
				Actor: d.DecidedBy, MessageID: d.MessageID, Decision: d.State,
				Detail: "approval is " + a.State + " since " + a.DecidedAt.UTC().Format(time.RFC3339)})
		}
		if err := tx.Bucket(bApprovalExpiry).Delete(timeKey(a.ExpiresAt, a.ID)); err != nil {
			return err
		}
		if err := deleteCodeGuardsTx(tx, &a); err != nil {
			return err
		}
		a.State, a.Reason, a.DecidedBy, a.Channel, a.MessageID, a.DecidedAt = d.State, d.Reason, d.DecidedBy, d.Channel, d.MessageID, d.At
		event := "decided"
		switch d.State {
		case ApprovalExpired:
			event = "expired"
		case ApprovalVoid:
			event = "voided"
		}
		if d.State != ApprovalVoid {
			a.InjectionID = d.InjectionID
			inj := Injection{ID: d.InjectionID, ApprovalID: a.ID, Agent: a.Agent, Session: a.Session, Turn: a.Turn,
				Response: envelope.ApprovalResponse{ApprovalID: a.ID, Decision: a.Decision(), Reason: d.Reason,
					DecidedBy: d.DecidedBy, DecidedAt: d.At},
				State: InjectionPending, CreatedAt: d.At, UpdatedAt: d.At, NextAt: d.At}
			if d.ClaimFor > 0 {
				inj.Attempts, inj.Claims, inj.NextAt, inj.LeasedUntil = 1, 1, d.At.Add(d.ClaimFor), d.At.Add(d.ClaimFor)
			}
			job = &inj
			if err := putJSON(tx.Bucket(bInjections), []byte(inj.ID), inj); err != nil {
				return err
			}
			if err := tx.Bucket(bInjectionDue).Put(timeKey(inj.NextAt, inj.ID), nil); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bApprovals), []byte(a.ID), a); err != nil {
			return err
		}
		out = &a
		return putAuditTx(tx, AuditEntry{At: d.At, ApprovalID: a.ID, Event: event, Channel: d.Channel,
			Actor: d.DecidedBy, MessageID: d.MessageID, Decision: d.State, Detail: d.Reason})
	})
	if err != nil {
		if errors.Is(err, ErrDuplicateInbound) || errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("decide approval: %w", err)
	}
	if already {
		return out, nil, ErrAlreadyDecided
	}
	return out, job, nil
}

// ReleaseInjection makes a job claimed by Decide (ClaimFor) due at once,
// for a caller that could not hand it to a worker after all.
func (s *DB) ReleaseInjection(ctx context.Context, claimed *Injection, at time.Time) error {
	err := s.bolt.Batch(func(tx *bolt.Tx) error {
		var inj Injection
		if err := getJSON(tx.Bucket(bInjections), []byte(claimed.ID), &inj); err != nil {
			return err
		}
		if inj.State != InjectionPending || inj.Claims != claimed.Claims {
			return ErrLeaseLost
		}
		if err := tx.Bucket(bInjectionDue).Delete(timeKey(inj.NextAt, inj.ID)); err != nil {
			return err
		}
		inj.Attempts--
		inj.Claims++
		inj.NextAt, inj.LeasedUntil = at, time.Time{}
		if err := tx.Bucket(bInjectionDue).Put(timeKey(at, inj.ID), nil); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bInjections), []byte(inj.ID), inj)
	})
	if err != nil {
		return fmt.Errorf("release injection %s: %w", claimed.ID, err)
	}
	return nil
}

// DueExpiries returns the ids of pending approvals whose expiry is at or
// before now, oldest first, at most max.
func (s *DB) DueExpiries(ctx context.Context, now time.Time, max int) ([]string, error) {
	var out []string
	err := s.bolt.View(func(tx *bolt.Tx) error {
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

// NextInjection is the earliest due injection, if any.
func (s *DB) NextInjection() (time.Time, bool) {
	return s.firstTime(bInjectionDue)
}

func (s *DB) firstTime(bucket []byte) (t time.Time, ok bool) {
	_ = s.bolt.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucket).Cursor().First()
		if len(k) >= 8 {
			t, ok = unbe64(k[:8]), true
		}
		return nil
	})
	return t, ok
}

// ClaimInjections takes up to max injection jobs due at now. A claimed job
// stays in the due index, moved to now+lease, so a job whose worker dies is
// taken again when its lease runs out (at-least-once).
func (s *DB) ClaimInjections(ctx context.Context, now time.Time, max int, lease time.Duration) ([]*Injection, error) {
	var out []*Injection
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		out = out[:0]
		due := tx.Bucket(bInjectionDue)
		c := due.Cursor()
		limit := be64(now)
		var keys [][]byte
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], limit) <= 0 && len(keys) < max; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			id := k[8:]
			var inj Injection
			if err := getJSON(tx.Bucket(bInjections), id, &inj); err != nil {
				return fmt.Errorf("due injection %s: %w", id, err)
			}
			if err := due.Delete(k); err != nil {
				return err
			}
			inj.Attempts++
			inj.Claims++
			inj.NextAt = now.Add(lease)
			inj.LeasedUntil = inj.NextAt
			inj.UpdatedAt = now
			if err := due.Put(timeKey(inj.NextAt, inj.ID), nil); err != nil {
				return err
			}
			if err := putJSON(tx.Bucket(bInjections), id, inj); err != nil {
				return err
			}
			out = append(out, &inj)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim injections: %w", err)
	}
	return out, nil
}

// InjectionOutcome is the result of one injection attempt.
type InjectionOutcome struct {
	// State: done, pending (retry at NextAt) or dead.
	State  string
	NextAt time.Time
	Error  string
	At     time.Time
}

// RecordInjection records an attempt of a claimed job (claimed is the job as
// ClaimInjections returned it) and audits it.
func (s *DB) RecordInjection(ctx context.Context, claimed *Injection, o InjectionOutcome) (*Injection, error) {
	var out Injection
	err := s.bolt.Batch(func(tx *bolt.Tx) error {
		var inj Injection
		if err := getJSON(tx.Bucket(bInjections), []byte(claimed.ID), &inj); err != nil {
			return err
		}
		if inj.State != InjectionPending || inj.Claims != claimed.Claims {
			return ErrLeaseLost
		}
		if err := tx.Bucket(bInjectionDue).Delete(timeKey(inj.NextAt, inj.ID)); err != nil {
			return err
		}
		inj.State, inj.UpdatedAt, inj.LastError, inj.LeasedUntil = o.State, o.At, o.Error, time.Time{}
		event := "injected"
		switch o.State {
		case InjectionDone:
			inj.DoneAt, inj.NextAt = o.At, time.Time{}
		case InjectionDead:
			inj.NextAt = time.Time{}
			event = "injection-dead"
		default:
			inj.State, inj.NextAt = InjectionPending, o.NextAt
			event = "injection-failed"
			if err := tx.Bucket(bInjectionDue).Put(timeKey(inj.NextAt, inj.ID), nil); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bInjections), []byte(inj.ID), inj); err != nil {
			return err
		}
		out = inj
		return putAuditTx(tx, AuditEntry{At: o.At, ApprovalID: inj.ApprovalID, Event: event, Actor: "agent:" + inj.Agent,
			Detail: fmt.Sprintf("attempt %d %s", inj.Attempts, o.Error)})
	})
	if err != nil {
		return nil, fmt.Errorf("record injection %s: %w", claimed.ID, err)
	}
	return &out, nil
}

// RequeueClaimedInjections makes every job claimed before `before` and
// still held by a worker due at `at`. The injector calls it when it starts,
// with `before` its own start: bbolt admits one process, so a lease taken
// before then belongs to a process that is gone.
func (s *DB) RequeueClaimedInjections(ctx context.Context, before, at time.Time) (int, error) {
	n := 0
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		b, due := tx.Bucket(bInjections), tx.Bucket(bInjectionDue)
		var held []Injection
		err := b.ForEach(func(k, v []byte) error {
			var inj Injection
			if err := json.Unmarshal(v, &inj); err != nil {
				return err
			}
			if inj.State == InjectionPending && !inj.LeasedUntil.IsZero() && inj.UpdatedAt.Before(before) {
				held = append(held, inj)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, inj := range held {
			if err := due.Delete(timeKey(inj.NextAt, inj.ID)); err != nil {
				return err
			}
			inj.NextAt, inj.LeasedUntil, inj.UpdatedAt = at, time.Time{}, at
			inj.Claims++
			if err := due.Put(timeKey(at, inj.ID), nil); err != nil {
				return err
			}
			if err := putJSON(b, []byte(inj.ID), inj); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue claimed injections: %w", err)
	}
	return n, nil
}

// Injection returns an injection job.
func (s *DB) Injection(ctx context.Context, id string) (*Injection, error) {
	var inj Injection
	err := s.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bInjections), []byte(id), &inj) })
	if err != nil {
		return nil, fmt.Errorf("injection %q: %w", id, err)
	}
	return &inj, nil
}

// ListInjections lists injection jobs, optionally in one state.
func (s *DB) ListInjections(ctx context.Context, st string, limit int) ([]*Injection, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []*Injection
	err := s.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bInjections).ForEach(func(k, v []byte) error {
			if len(out) >= limit {
				return nil
			}
			var inj Injection
			if err := json.Unmarshal(v, &inj); err != nil {
				return err
			}
			if st == "" || inj.State == st {
				out = append(out, &inj)
			}
			return nil
		})
	})
	return out, err
}

// RetryInjection makes a dead injection due again at `at` (operator action).
func (s *DB) RetryInjection(ctx context.Context, id string, at time.Time) (*Injection, error) {
	var out Injection
	err := s.bolt.Update(func(tx *bolt.Tx) error {
		var inj Injection
		if err := getJSON(tx.Bucket(bInjections), []byte(id), &inj); err != nil {
			return err
		}
		if inj.State != InjectionDead {
			return fmt.Errorf("injection is %s: %w", inj.State, ErrBadState)
		}
		inj.State, inj.NextAt, inj.UpdatedAt, inj.CreatedAt = InjectionPending, at, at, at
		if err := tx.Bucket(bInjectionDue).Put(timeKey(at, inj.ID), nil); err != nil {
			return err
		}
		out = inj
		if err := putJSON(tx.Bucket(bInjections), []byte(id), inj); err != nil {
			return err
		}
		return putAuditTx(tx, AuditEntry{At: at, ApprovalID: inj.ApprovalID, Event: "injection-retry", Actor: "operator"})
	})
	if err != nil {
		return nil, fmt.Errorf("retry injection %s: %w", id, err)
	}
	return &out, nil
}

// Counter is a wrong-code counter (approval_codes.go) or a once-only
// marker.
type Counter struct {
	Count       int       `json:"count"`
	WindowStart time.Time `json:"windowStart"`
	LockedUntil time.Time `json:"lockedUntil,omitzero"`
}

// Once records key and reports whether this was the first time (for "at
// most one reply per address per day", the caller puts the day in the key).
func (s *DB) Once(ctx context.Context, key string, now time.Time) (bool, error) {
	first := false
	err := s.bolt.Batch(func(tx *bolt.Tx) error {
		first = false
		b := tx.Bucket(bApprovalLimits)
		if b.Get([]byte(key)) != nil {
			return nil
		}
		first = true
		return putJSON(b, []byte(key), Counter{Count: 1, WindowStart: now})
	})
	return first, err
}

// CheckApprovalInvariants verifies that every pending approval with an
// expiry has exactly its expiry index entry, that no decided approval has
// one, that every pending injection has exactly one due entry, and that
// the code guards are exactly those of pending approvals. Tests
// call it when they end.
func (s *DB) CheckApprovalInvariants() error {
	return s.bolt.View(func(tx *bolt.Tx) error {
		exp := tx.Bucket(bApprovalExpiry)
		n := 0
		err := tx.Bucket(bApprovals).ForEach(func(k, v []byte) error {
			var a Approval
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			has := exp.Get(timeKey(a.ExpiresAt, a.ID)) != nil
			if a.State == ApprovalPending && !a.ExpiresAt.IsZero() {
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
			var inj Injection
			if err := json.Unmarshal(v, &inj); err != nil {
				return err
			}
			has := due.Get(timeKey(inj.NextAt, inj.ID)) != nil
			if inj.State == InjectionPending {
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
