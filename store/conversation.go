package store

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"
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
