package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
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

// TurnLimit is a flood limit across conversations that an inbound turn
// counts against: every turn queued under Key (one sender's turns with an
// agent, all the turns of an agent) within the last minute and the last
// hour. RecordInbound checks it, and counts the turn, in the transaction
// that records the message, so that messages at once, on any replica,
// cannot get past it.
type TurnLimit struct {
	// Key names the counter ("sender\x00agent\x00address", "agent\x00agent":
	// SenderLimitKey, AgentLimitKey); at most MaxKey bytes.
	Key string
	// PerMinute and PerHour bound the turns counted under Key (0: no bound).
	PerMinute, PerHour int
	// Name says which limit it is in a held record's reason: "sender limit"
	// gives "sender limit: 5 turns a minute".
	Name string
}

// SenderLimitKey is the TurnLimit key of one sender's turns with an agent,
// across its conversations and channels (from is the normalised address or
// number: the same number on SMS and WhatsApp is one sender).
func SenderLimitKey(agent, from string) string { return "sender\x00" + agent + "\x00" + from }

// AgentLimitKey is the TurnLimit key of all the turns an agent's inbound
// messages start.
func AgentLimitKey(agent string) string { return "agent\x00" + agent }

// RecentTurnWindow is how long a flood limit remembers a turn: the longest
// of its windows, an hour.
const RecentTurnWindow = time.Hour

// MaxLimitTurns bounds the turn times one TurnLimit keeps: a limit of more
// turns an hour than this counts at most this many.
const MaxLimitTurns = 100_000

// TrimTurns drops from recent (oldest first) the turn times that no longer
// count at now, and says how many fall in the last minute.
func TrimTurns(recent []time.Time, now time.Time) (kept []time.Time, lastMinute int) {
	kept = recent[:0:0]
	for _, t := range recent {
		if now.Sub(t) < RecentTurnWindow {
			kept = append(kept, t)
			if now.Sub(t) < time.Minute {
				lastMinute++
			}
		}
	}
	return kept, lastMinute
}

// LimitReason is why a flood limit holds a turn, or "" when the limit lets
// it through: lastMinute and lastHour turns already counted, against
// perMinute and perHour (0: no bound). name "sender limit" gives "sender
// limit: 5 turns a minute".
func LimitReason(name string, perMinute, perHour, lastMinute, lastHour int) string {
	switch {
	case perMinute > 0 && lastMinute >= perMinute:
		return fmt.Sprintf("%s: %d turns a minute", name, perMinute)
	case perHour > 0 && lastHour >= perHour:
		return fmt.Sprintf("%s: %d turns an hour", name, perHour)
	}
	return ""
}

// AddTurn appends a turn at now to recent, keeping at most max times (the
// latest).
func AddTurn(recent []time.Time, now time.Time, max int) []time.Time {
	recent = append(recent, now)
	if len(recent) > max {
		recent = recent[len(recent)-max:]
	}
	return recent
}

// ConversationLimitReason is why a conversation's own turn limits hold a
// turn ("" when they do not).
func ConversationLimitReason(perMinute, perHour, lastMinute, lastHour int) string {
	switch {
	case perMinute > 0 && lastMinute >= perMinute:
		return fmt.Sprintf("more than %d turns a minute in this conversation", perMinute)
	case perHour > 0 && lastHour >= perHour:
		return fmt.Sprintf("more than %d turns an hour in this conversation", perHour)
	}
	return ""
}
