// Package conversations lets people write to an agent: a new mail to the
// agent's inbound address, an SMS or WhatsApp message to its number starts
// or continues an A2A conversation (contextId = the conversation id), and
// the agent's answer goes back on the same channel, in the same thread.
//
// The Router is the inbound decider of the IMAP intake and the Twilio
// webhook. It offers every message to approvals first (approvals always
// win), routes the rest — to the thread it answers, else to the agent
// whose inbound address it was sent to — checks the sender against the
// agent's allow list and the flood limits (the conversation's, the
// sender's across their conversations, the agent's), and records the
// message with its disposition and the turn it queues in one store
// transaction before it answers: a channel acknowledges a message only
// after that. Run is the turn outbox worker: it sends each turn to the
// agent (a messageId derived from the provider's id, so a message
// delivered twice is one turn), waits for the answer and ingests it as an
// ordinary delivery carrying the conversation's Extra keys
// (envelope.Extra*), which the channels use to thread the reply.
//
// Dispositions of inbound messages: approval, turn, held (over a flood
// limit; ReleaseInbound lets one start its turn), rejected (not
// authenticated, not allowed, not a participant), ignored (automatic mail,
// bounces, our own addresses), unrouted, duplicate.
package conversations
