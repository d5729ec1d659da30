package store

import (
	"time"

	"github.com/cool-ai/beachd/envelope"
)

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

// InjectionOutcome is the result of one injection attempt.
type InjectionOutcome struct {
	// State: done, pending (retry at NextAt) or dead.
	State  string
	NextAt time.Time
	Error  string
	At     time.Time
}
