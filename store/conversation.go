package store

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"time"
)

// Turn states.
const (
	TurnQueued   = "queued"
	TurnSending  = "sending"
	TurnAnswered = "answered"
	TurnDead     = "dead"
)

// Bounds of conversation records.
const (
	// MaxMessageIDChain bounds a conversation's Message-ID chain.
	MaxMessageIDChain = 50
	// MaxInboundText bounds the text stored of an inbound message.
	MaxInboundText = 64 << 10
	// MaxInboundAttachments bounds the attachments kept of one message.
	MaxInboundAttachments = 20
	// MaxInboundAttachmentBytes bounds the attachment bytes stored of one message.
	MaxInboundAttachmentBytes = 25 << 20
	// MaxRecentTurns bounds the turn times a conversation keeps for its
	// flood limits.
	MaxRecentTurns = 1000
)

// Conversation is a thread between people and one agent on one channel.
type Conversation struct {
	ID      string `json:"id"`
	Agent   string `json:"agent"`
	Channel string `json:"channel"`
	// OurAddress is the agent's address or number the people wrote to.
	OurAddress string `json:"ourAddress"`
	// Participants are the people's addresses or numbers, first writer first.
	Participants []string `json:"participants"`
	// LastFrom is who wrote last: the answer goes to them.
	LastFrom string `json:"lastFrom,omitempty"`
	Subject  string `json:"subject,omitempty"`
	// MessageIDs is the email References chain (no brackets), capped at
	// MaxMessageIDChain (the first and the latest).
	MessageIDs           []string  `json:"messageIds,omitempty"`
	LastInboundMessageID string    `json:"lastInboundMessageId,omitempty"`
	CreatedAt            time.Time `json:"createdAt"`
	UpdatedAt            time.Time `json:"updatedAt"`
	LastInboundAt        time.Time `json:"lastInboundAt,omitzero"`
	Turns                int       `json:"turns"`
	// RecentTurns are when the turns of the last hour were queued (flood limits).
	RecentTurns []time.Time `json:"recentTurns,omitempty"`
}

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
	// Note says why the bytes are not kept (over the bound).
	Note string `json:"note,omitempty"`
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

// Turn is one queued A2A turn: an inbound message to send to the agent, in
// the conversation's context, and the answer to ingest.
type Turn struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversationId"`
	Agent          string `json:"agent"`
	InboundID      string `json:"inboundId"`
	// MessageID is the A2A messageId, derived from the provider's id so
	// that a message delivered twice is one turn.
	MessageID        string    `json:"messageId"`
	State            string    `json:"state"`
	Attempts         int       `json:"attempts"`
	Claims           int       `json:"claims"`
	NextAttemptAt    time.Time `json:"nextAttemptAt,omitzero"`
	LeaseUntil       time.Time `json:"leaseUntil,omitzero"`
	LastError        string    `json:"lastError,omitempty"`
	TaskID           string    `json:"taskId,omitempty"`
	AnswerEnvelopeID string    `json:"answerEnvelopeId,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
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

// InboundWritten is what RecordInbound stored.
type InboundWritten struct {
	Record       *InboundRecord
	Conversation *Conversation
	Turn         *Turn
	Released     int
}

// ThreadKey is the key an SMS or WhatsApp conversation is found by.
func ThreadKey(channel, ours, theirs string) string {
	return channel + "\x00" + ours + "\x00" + theirs
}

// AppendChain appends id to a Message-ID chain unless present, keeping the
// first and the latest ids within MaxMessageIDChain.
func AppendChain(chain []string, ids ...string) []string {
	for _, id := range ids {
		if id == "" || slices.Contains(chain, id) {
			continue
		}
		chain = append(chain, id)
		if len(chain) > MaxMessageIDChain {
			chain = append(chain[:1], chain[len(chain)-MaxMessageIDChain+1:]...)
		}
	}
	return chain
}

// ConversationCursor is the ListConversations cursor that continues after c.
func ConversationCursor(c *Conversation) string {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(c.ID)), uint64(c.UpdatedAt.UnixNano()))
	return hex.EncodeToString(append(k, c.ID...))
}

// ConversationMessage is one entry of a conversation's message index.
type ConversationMessage struct {
	At        time.Time
	Direction string // "in" or "out"
	ID        string // inbound id or delivery id
}

// TurnOutcome is the result of one attempt of a turn.
type TurnOutcome struct {
	// State: answered, queued (retry at NextAt) or dead.
	State            string
	NextAt           time.Time
	Error            string
	AnswerEnvelopeID string
	At               time.Time
}
