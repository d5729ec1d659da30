package store

import (
	"errors"
	"time"
)

// AttachmentInfo describes one attachment of an inbound message. Its bytes,
// when beachd has them, are stored beside the record (InboundAttachment).
type AttachmentInfo struct {
	Filename  string `json:"filename,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Size      int64  `json:"size"`
	// URL is the provider's media URL (Twilio), fetched when the turn is built.
	URL string `json:"url,omitempty"`
	// Stored: the bytes are stored beside the record.
	Stored bool `json:"stored,omitempty"`
	// Note says why the bytes are not kept (over the bound) or could not be
	// fetched: the turn goes to the agent without them, saying so.
	Note string `json:"note,omitempty"`
	// FetchFailures counts the fetches of URL that failed and may succeed
	// later (a provider's 5xx, a timeout).
	FetchFailures int `json:"fetchFailures,omitempty"`
}

// InboundRecord is one inbound message and what beachd made of it.
type InboundRecord struct {
	ID          string           `json:"id"`
	Channel     string           `json:"channel"`
	From        string           `json:"from"`
	To          string           `json:"to,omitempty"`
	MessageID   string           `json:"messageId,omitempty"`
	Subject     string           `json:"subject,omitempty"`
	Text        string           `json:"text,omitempty"`
	FullText    string           `json:"fullText,omitempty"`
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	ReceivedAt  time.Time        `json:"receivedAt"`
	// Disposition: envelope.Disposition* (approval, turn, rejected, ignored,
	// held, unrouted, duplicate).
	Disposition    string `json:"disposition"`
	Reason         string `json:"reason,omitempty"`
	Agent          string `json:"agent,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	ApprovalID     string `json:"approvalId,omitempty"`
	TurnID         string `json:"turnId,omitempty"`
}

// ErrDuplicateMessage: an inbound record for this (channel, message id)
// exists; RecordInbound returns it with the error.
var ErrDuplicateMessage = errors.New("inbound message already recorded")

// InboundWrite is everything one inbound message writes.
type InboundWrite struct {
	Record InboundRecord
	// Data are the attachment bytes by index of Record.Attachments (nil:
	// none stored).
	Data [][]byte
	// Conversation: for a new conversation, the record to create (ID set);
	// for an existing one, its ID alone (the stored record is updated). Nil
	// when the message belongs to none.
	Conversation *Conversation
	New          bool
	// Turn, when set, is queued (Record.Disposition must be turn) unless a
	// flood limit holds it: then the record's disposition becomes held.
	Turn *Turn
	// PerMinute and PerHour are the conversation's turn limits (0: none).
	PerMinute, PerHour int
	// Limits are the flood limits across conversations the turn counts
	// against too (a sender's, the agent's), checked in order after the
	// conversation's. A turn any limit holds is counted by none; one they
	// all let through is counted by each.
	Limits []TurnLimit
	// ThreadKey indexes an SMS/WhatsApp conversation by (channel, our
	// number, their number); IdleTimeout is how long it stays open.
	ThreadKey   string
	IdleTimeout time.Duration
	// ReleaseHeld queues the conversation's held deliveries (the person
	// wrote again: WhatsApp's window is open).
	ReleaseHeld bool
	// References (email, no brackets) are the message's References: they
	// join the conversation's chain before its own Message-ID.
	References []string
}

// ReleasedBy is how a released record's reason begins: an operator let a
// held message start its turn ("released by an operator; held: <why>").
const ReleasedBy = "released by an operator"

// InboundWritten is what RecordInbound stored.
type InboundWritten struct {
	Record       *InboundRecord
	Conversation *Conversation
	Turn         *Turn
	Released     int
}
