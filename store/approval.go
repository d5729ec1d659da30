package store

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/cool-ai/beachd/envelope"
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
	// Policy names the approval policy that governs it (approvals/policy);
	// "" for an approval asked as beachd always asked: everyone at once,
	// the first answer wins.
	Policy string `json:"policy,omitempty"`
	// Quorum, when positive, is how many distinct people must grant: a
	// decision that names its Person is a vote (CountVote), and Votes are
	// those counted so far. 0: the first decision decides.
	Quorum int    `json:"quorum,omitempty"`
	Votes  []Vote `json:"votes,omitempty"`
}

// ApprovalRecipient is one (recipient, channel) an approval was sent to.
type ApprovalRecipient struct {
	Channel string `json:"channel"`
	Address string `json:"address"`
	Nonce   string `json:"nonce,omitempty"`
	// Person is who this recipient is under a policy with a quorum (a
	// person asked on several channels has one recipient per channel, one
	// Person); Step is the policy step (0-based) that asked them.
	Person string `json:"person,omitempty"`
	Step   int    `json:"step,omitempty"`
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
	// Decision, when set, decides the approval in the ingest's own
	// transaction (a policy that decides at ingest), as Decide would: its
	// injection job is queued with the envelope. ApprovalID is filled in.
	Decision *Decision
	// Events start the approval's trail (who was asked, on which
	// channel), appended in the ingest's transaction.
	Events []ApprovalEvent
	// Timers are the approval's first timers (a policy's reminder and
	// escalation of its first step), written with it.
	Timers []ApprovalTimer
	// Ask are deliveries that ask this approval of people who are not
	// recipients of the request (a policy's steps). The store ignores
	// them: whoever builds the Ingest (the API's ingester) adds them to
	// its Deliveries.
	Ask []NewDelivery
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

// Sentinel errors of approvals.
var (
	// ErrDuplicateApproval: an approval with that id already exists.
	ErrDuplicateApproval = errors.New("approval id already exists")
	// ErrDuplicateInbound: this (channel, message id) was processed before.
	ErrDuplicateInbound = errors.New("inbound message already processed")
	// ErrAlreadyDecided: the approval is no longer pending.
	ErrAlreadyDecided = errors.New("approval already decided")
)

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
	// Vote, when set, is the answer this decision comes from (Kind voted,
	// its channel and evidence): Decide appends it to the approval's trail
	// in the decision's transaction, with the evidence "disposition"
	// ("decided", or "ignored" when the approval was no longer pending)
	// and, when ignored and Vote says no "why" itself, "why": the state
	// that stood in its way ("already-decided", "expired", "withdrawn").
	// Whether or not there is a Vote, a decision that takes effect appends
	// its own event (decided, expired or withdrawn) after it.
	Vote *ApprovalEvent
	// FollowUpAt, when set, makes a decision that takes effect also write
	// a TimerDecided timer due then, in its transaction: the work that
	// follows a decision (rewriting the messages that asked) is redone
	// from it if the deciding process dies before removing it.
	FollowUpAt time.Time
	// Person, on an approval with a Quorum, makes this decision a vote of
	// that person (CountVote): it decides only when it is a denial or
	// completes the quorum, and a person's second vote has no effect.
	Person string
}

// Dispositions of a vote (the evidence "disposition" of a voted event) and
// the reasons Decide gives for an ignored one (its "why").
const (
	DispositionDecided = "decided"
	DispositionIgnored = "ignored"
	WhyAlreadyDecided  = "already-decided"
	WhyExpired         = "expired"
	WhyWithdrawn       = "withdrawn"
)

// VoteIgnored is the vote of d's Vote that did not take effect on a,
// which is no longer pending.
func VoteIgnored(v ApprovalEvent, a *Approval) ApprovalEvent {
	v.Evidence = withEvidence(v.Evidence, "disposition", DispositionIgnored)
	if v.Evidence["why"] == "" {
		why := WhyAlreadyDecided
		switch a.State {
		case ApprovalExpired:
			why = WhyExpired
		case ApprovalVoid:
			why = WhyWithdrawn
		}
		v.Evidence["why"] = why
	}
	return v
}

// VoteDecided is the vote of a decision that took effect.
func VoteDecided(v ApprovalEvent) ApprovalEvent {
	v.Evidence = withEvidence(v.Evidence, "disposition", DispositionDecided)
	delete(v.Evidence, "why")
	return v
}

// DecisionEvent is the event of decision d taking effect: decided
// (granted or denied), expired or withdrawn (void); its actor is
// d.DecidedBy.
func DecisionEvent(d Decision) ApprovalEvent {
	e := ApprovalEvent{At: d.At, Kind: EventDecided, Actor: d.DecidedBy, Channel: d.Channel, Evidence: map[string]string{}}
	switch d.State {
	case ApprovalExpired:
		e.Kind = EventExpired
	case ApprovalVoid:
		e.Kind = EventWithdrawn
	default:
		e.Evidence["decision"] = d.State
	}
	if d.Reason != "" {
		e.Evidence["reason"] = d.Reason
	}
	return e
}

// MCPSession is the session of the approvals asked through the MCP tool
// ask_for_approval: they belong to no suspended turn, and their decisions
// are read with get_approval instead of being injected into an agent.
const MCPSession = "beachd-mcp"

// InjectedEvent is the event of an injection that the agent took, on its
// attempt-th attempt — or, for an approval asked through MCP (session
// MCPSession), the event that its decision was kept for the MCP caller
// (kind returned, actor and channel mcp): no agent took it.
func InjectedEvent(inj *Injection, at time.Time) ApprovalEvent {
	if inj.Session == MCPSession {
		return ApprovalEvent{At: at, Kind: EventReturned, Actor: "mcp", Channel: "mcp",
			Evidence: map[string]string{"injection": inj.ID, "decision": inj.Response.Decision,
				"to": "the MCP caller (get_approval)"}}
	}
	return ApprovalEvent{At: at, Kind: EventInjected, Actor: "agent:" + inj.Agent, Channel: "a2a",
		Evidence: map[string]string{"injection": inj.ID, "attempt": strconv.Itoa(inj.Attempts), "decision": inj.Response.Decision}}
}

// InjectionAudit is the audit event and actor of an injection recorded
// done: injected by agent:NAME, or returned (kept for the MCP caller) for
// an approval asked through MCP.
func InjectionAudit(inj *Injection) (event, actor string) {
	if inj.Session == MCPSession {
		return EventReturned, "mcp"
	}
	return EventInjected, "agent:" + inj.Agent
}

// withEvidence is ev (copied) with k set to v.
func withEvidence(ev map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(ev)+1)
	for a, b := range ev {
		out[a] = b
	}
	out[k] = v
	return out
}

// Counter is a wrong-code counter (TryCode, CodeGuard) or a once-only
// marker.
type Counter struct {
	Count       int       `json:"count"`
	WindowStart time.Time `json:"windowStart"`
	LockedUntil time.Time `json:"lockedUntil,omitzero"`
}

// TokenKindCode is TokenBinding.Kind of a short SMS/WhatsApp code.
const TokenKindCode = "code"

// CodeAttempt is one SMS or WhatsApp message presenting a short code.
type CodeAttempt struct {
	Channel string
	// Number is the sender, normalised as the recipients are.
	Number string
	// Hash is the token hash the presented code yields for Number.
	Hash string
	At   time.Time
	// Max wrong codes within Window lock an approval's code for Number for
	// LockFor. Max ≤ 0 never locks.
	Max     int
	Window  time.Duration
	LockFor time.Duration
}

// CodeResult is what TryCode found.
type CodeResult struct {
	// Binding and Approval are set when the code matched one of Number's
	// codes and that approval's code is not locked for Number (the
	// approval may be decided already: the caller says so).
	Binding  *TokenBinding
	Approval *Approval
	// Locked: the code matched an approval whose code is locked for
	// Number (Approval is set, Binding is not), or this wrong code locked
	// or found locked every approval pending for Number. LockedUntil is
	// the latest lock concerned.
	Locked      bool
	LockedUntil time.Time
	// Wrong is the highest count of wrong codes among Number's pending
	// approvals after this attempt (0 when it matched).
	Wrong int
	// Pending lists, after a wrong code, every approval pending for Number
	// on Channel with its counter after this attempt, by approval id: the
	// requests the person may have meant (empty when none is pending).
	Pending []PendingCode
}

// PendingCode is one approval pending for a number, as a wrong code found
// it.
type PendingCode struct {
	ApprovalID string
	Counter    Counter
	// LockedNow: this attempt locked the approval's code for the number.
	LockedNow bool
}
