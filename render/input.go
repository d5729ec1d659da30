package render

import (
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// Input is everything one rendition depends on. Rendering does no I/O: the
// channel fetches artifacts and the approvals package mints handles first.
type Input struct {
	Envelope *envelope.Envelope
	// Registry decides which parts reach the channel; nil means the
	// canonical registry.
	Registry  *envelope.Registry
	Recipient Recipient
	// DeliveryID goes into the email Message-ID.
	DeliveryID string
	// Approvals are this recipient's handles for the envelope's
	// approval-request parts, matched by ApprovalID.
	Approvals []ApprovalHandle
	// Reminder: the message reminds its recipient of an approval they
	// have not answered (an approval policy's reminder); its text starts
	// with ReminderLine, and an email's default subject with "Reminder:".
	Reminder bool
	// Artifacts are fetched artifacts, matched by ArtifactID.
	Artifacts []FetchedArtifact
	Thread    *Thread
	// Conversation: the message answers a person who wrote to the agent,
	// and their reply continues the conversation (the email footer says
	// so, instead of "replies are read only to answer approval requests").
	Conversation bool
	// Now is the rendering time (expiry phrases, Date). Zero means
	// Envelope.Meta.ProducedAt.
	Now time.Time

	// Email. From is an RFC 5322 address ("Name <a@b>" or "a@b").
	// ReplyTo is the base reply address (local@replydomain); when the
	// message carries an approval token the renderer makes it
	// local+TOKEN@replydomain. MessageIDDomain defaults to From's domain.
	From, ReplyTo, MessageIDDomain string

	// Consumes is a webhook endpoint's consumes list.
	Consumes []string

	// FullMessageURL is where a reader finds the whole message when an
	// SMS, a WhatsApp message or an email had to be cut; without it the
	// message just ends in "..." (an email, in a note of what was left out).
	FullMessageURL string

	// Page renders the email channel's HTML for the full-message web page
	// (FullMessageURL): no reply footer, nothing attached, approvals
	// pointing back to the message that carried their handle.
	Page bool

	// WhatsAppWindowOpen: a free-form message is allowed (the recipient
	// wrote within 24 hours). When false and WhatsAppTemplate is set, the
	// rendition carries ContentSID and ContentVariables.
	WhatsAppWindowOpen bool
	WhatsAppTemplate   *ContentTemplate
}

// ContentTemplate is a pre-approved WhatsApp (Twilio Content API) template.
// Variable values are text/template strings evaluated against the View
// (e.g. "{{.Subject}}"), so that configuration can name what goes where.
type ContentTemplate struct {
	ContentSID string
	Variables  map[string]string
}

// Email is the rendition of one email. Headers holds Message-ID,
// Auto-Submitted, X-Auto-Response-Suppress and, when they apply,
// In-Reply-To, References and Reply-To; From, To, Subject and Date are the
// sender's business. MessageID is the Message-ID header value, with angle
// brackets.
type Email struct {
	Subject     string            `json:"subject"`
	Text        string            `json:"text"`
	HTML        string            `json:"html"`
	Attachments []Attachment      `json:"attachments"`
	Headers     map[string]string `json:"headers"`
	MessageID   string            `json:"-"`
	Warnings    []string          `json:"warnings,omitempty"`
}

// Attachment is one email attachment.
type Attachment struct {
	Filename string `json:"filename"`
	MimeType string `json:"mimeType"`
	Bytes    []byte `json:"-"`
}

// SMS is the rendition of one SMS. Body is what is sent (with policy
// "split", Parts are sent in order instead, each within the cap). Segments
// is what the whole costs in Encoding.
type SMS struct {
	Body      string   `json:"body"`
	Encoding  string   `json:"encoding"`
	Segments  int      `json:"segments"`
	Truncated bool     `json:"truncated"`
	Parts     []string `json:"parts,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// WhatsApp is the rendition of one WhatsApp message. ContentSID, when set,
// means the 24-hour window is closed: send the content template with
// ContentVariables instead of Body (Body is kept for the record).
type WhatsApp struct {
	Body             string            `json:"body"`
	Buttons          []Button          `json:"buttons"`
	MediaURLs        []string          `json:"mediaUrls"`
	ContentSID       string            `json:"contentSid,omitempty"`
	ContentVariables map[string]string `json:"contentVariables,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
}

// ReminderLine opens a reminder's text (Input.Reminder).
const ReminderLine = "Reminder: this request still awaits your answer."
