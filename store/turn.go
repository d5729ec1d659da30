package store

import "time"

// Turn states.
const (
	TurnQueued   = "queued"
	TurnSending  = "sending"
	TurnAnswered = "answered"
	TurnDead     = "dead"
)

// Turn is one queued A2A turn: an inbound message to send to the agent, in
// the conversation's context, and the answer to ingest.
type Turn struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversationId"`
	Agent          string `json:"agent"`
	InboundID      string `json:"inboundId"`
	// MessageID is the A2A messageId, derived from the provider's id so
	// that a message delivered twice is one turn.
	MessageID     string    `json:"messageId"`
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	Claims        int       `json:"claims"`
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	LeaseUntil    time.Time `json:"leaseUntil,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	TaskID        string    `json:"taskId,omitempty"`
	// PushID is the turn's A2A push id (agent.Turn.PushID), recorded with
	// TaskID so that a turn resumed after a restart accepts the agent's
	// pushes again.
	PushID           string `json:"pushId,omitempty"`
	AnswerEnvelopeID string `json:"answerEnvelopeId,omitempty"`
	// AnsweredBy says how the agent's answer arrived: send (the answer to
	// SendMessage itself), push (an A2A push notification) or poll
	// (GetTask); set when the turn is answered.
	AnsweredBy string    `json:"answeredBy,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// TurnOutcome is the result of one attempt of a turn.
type TurnOutcome struct {
	// State: answered, queued (retry at NextAt) or dead.
	State            string
	NextAt           time.Time
	Error            string
	AnswerEnvelopeID string
	// AnsweredBy (answered): how the answer arrived (Turn.AnsweredBy).
	AnsweredBy string
	At         time.Time
}
