package render

import (
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// The types below are the render package's input and output contract, used
// by the channels and the approvals package. Fields may be added; the ones
// here keep their names and meaning.

// Recipient is who a rendition is for.
type Recipient struct {
	Channel string // email, sms, whatsapp, webhook
	Address string // email address, E.164 number, or webhook endpoint name
	Name    string // display name, when known
}

// ApprovalHandle is how one recipient answers one approval on one channel.
// The approvals package mints it; renderers only print it.
type ApprovalHandle struct {
	ApprovalID string
	Request    envelope.ApprovalRequest
	// Token identifies the approval in email (subject "[approval:<Token>]",
	// Message-ID, Reply-To plus-address). Never logged.
	Token string
	// Code is the short SMS code ("Reply YES 4821 or NO 4821").
	Code string
	// LinkURL opens the confirmation page (public_url + "/a/" + link token).
	LinkURL string
	// Buttons are WhatsApp quick replies, at most three.
	Buttons []Button
	// ExpiresAt is when the approval is denied by policy.
	ExpiresAt time.Time
	// Decided: the approval was decided without this recipient (by a
	// policy at ingest); Note says how. A recipient who is told of an
	// approval but not asked has Note alone ("awaits approval"); either way
	// the handle carries no token, code, link or button.
	Decided bool
	Note    string
}

// Button is a WhatsApp quick-reply button.
type Button struct {
	Title   string `json:"title"`   // ≤ 20 characters
	Payload string `json:"payload"` // approvalId:nonce
}

// Thread places an email in a conversation.
type Thread struct {
	InReplyTo  string   // Message-ID of the mail we answer
	References []string // oldest first
}

// FetchedArtifact is an artifact's bytes, fetched by the channel before
// rendering (rendering itself does no I/O).
type FetchedArtifact struct {
	ArtifactID string
	MimeType   string
	Name       string
	Bytes      []byte
	// Note explains why an artifact became a link instead (too big, slow,
	// wrong type); empty when Bytes are present.
	Note string
	// URL is where a recipient can fetch the artifact: its public URI, or
	// beachd's short-lived signed link (public_url + token) when it has none.
	// Used for SMS and WhatsApp, and in email when Bytes are absent.
	URL string
}
