package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Approval buckets. The approvals package owns their meaning.
var (
	bApprovals      = []byte("approvals")       // approval id → Approval
	bApprovalTokens = []byte("approval_tokens") // token hash → TokenBinding
	bApprovalAudit  = []byte("approval_audit")  // approval id + be64(ns) → AuditEntry
	bInjections     = []byte("injections")      // injection id → Injection
	bInjectionDue   = []byte("injection_due")   // be64(next ns) + injection id → nil
	bInbound        = []byte("inbound_ids")     // channel + 0 + message id → first seen
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
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"createdAt"`
	ExpiresAt  time.Time       `json:"expiresAt"`
	DecidedAt  time.Time       `json:"decidedAt,omitzero"`
	DecidedBy  string          `json:"decidedBy,omitempty"`
	Channel    string          `json:"channel,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// TokenBinding is what a token hash resolves to: the approval, and the
// recipient and channel it was issued to.
type TokenBinding struct {
	ApprovalID string `json:"approvalId"`
	Channel    string `json:"channel"`
	Recipient  string `json:"recipient"`
	Kind       string `json:"kind"` // token, sms-code, button, link
}

// NewApproval is an approval to create at ingest, with its token hashes.
type NewApproval struct {
	Approval Approval
	Tokens   map[string]TokenBinding // hex(sha256(token)) → binding
}

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
		b := tx.Bucket(bApprovals)
		if b.Get([]byte(a.ID)) != nil {
			return fmt.Errorf("approval %q: %w", a.ID, ErrDuplicateApproval)
		}
		if err := putJSON(b, []byte(a.ID), a); err != nil {
			return err
		}
		for h, tb := range na.Tokens {
			if err := putJSON(tx.Bucket(bApprovalTokens), []byte(h), tb); err != nil {
				return err
			}
		}
	}
	return nil
}

// ErrDuplicateApproval: an approval with that id already exists.
var ErrDuplicateApproval = errors.New("approval id already exists")
