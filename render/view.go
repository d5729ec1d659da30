package render

import (
	"html/template"
	"time"
)

// View is what every template sees (templates/ documents the files). Text
// fields are plain text; HTML fields are already escaped, email-safe HTML.
// Templates of every channel get the same View; fields that make no sense on
// a channel are empty there.
type View struct {
	// Kind is result, clarification, error, approval-request,
	// approval-confirmation, already-decided or not-understood.
	Kind      string
	Channel   string
	Recipient Recipient
	Now       time.Time
	// DefaultSubject is the subject beachd would use (email): the first
	// sentence of the text, the surface's title, or a phrase for the kind.
	// The approval tag is added after the subject template runs.
	DefaultSubject string
	Subject        string
	// Text and HTML are the agent's response, clarify and error texts,
	// rendered from Markdown-ish (WhatsApp's Text uses *bold* and _italic_).
	Text string
	HTML template.HTML
	// Surfaces are the A2UI surfaces (email only).
	Surfaces  []SurfaceView
	Approvals []ApprovalView
	Artifacts []ArtifactView
	Citations []CitationView
	// Attached names data attached as files (domain-data JSON, consumer
	// data parts), for a line such as "Attached: flights.json".
	Attached []string
	// MoreURL is set when an SMS had to be cut: where the rest is.
	MoreURL string
	// Cut is true when Text was shortened to fit the channel.
	Cut bool
	// Reminder: the message reminds its recipient of an approval they have
	// not answered (Input.Reminder); Text opens with ReminderLine.
	Reminder bool
	// Notice is set for approval-confirmation, already-decided and
	// not-understood messages.
	Notice *NoticeView
	// Page: the email rendition shown as the full-message web page (no
	// reply footer, nothing attached).
	Page bool
	// NoReplies: nobody reads replies to this message (email without a
	// reply intake): say so, and never ask for one.
	NoReplies bool
	// Conversation: replies to this message continue a conversation with
	// the agent (Input.Conversation).
	Conversation bool
}

// SurfaceView is one rendered A2UI surface.
type SurfaceView struct {
	firstText string // first visible text, a subject of last resort
	Title     string
	Text      string
	HTML      template.HTML
}

// ApprovalView is one approval request as the recipient should read it.
type ApprovalView struct {
	ApprovalID string
	// What: Summary, or "Run <Tool>" with Args.
	Summary string
	Tool    string
	Args    []Arg
	// Why: the request's reason, when the agent gave one.
	Why string
	// Handler is who asked: the configured agent the delivery named
	// (approvals.Service.Handles), never the handler the envelope claims.
	Handler string
	// Expires is the expiry in the configured zone ("Sat 15 Aug 2026, 09:00
	// UTC"), ExpiresIn relative to Now ("in 2 hours"); empty without expiry.
	Expires   string
	ExpiresIn string
	// Expired: the expiry has passed (ExpiresIn is then empty).
	Expired bool
	// Answering. Token and SubjectTag ("[approval:…]") for email, Code for
	// SMS, LinkURL for the confirmation page, Buttons for WhatsApp. Empty
	// when no handle was minted for this recipient, and when Expired.
	Token      string
	SubjectTag string
	Code       string
	LinkURL    string
	Buttons    []Button
	// Answerable: a handle exists for this recipient on this channel.
	Answerable bool
	// Decided: decided without this recipient (a policy at ingest); Note
	// says how, or, when not Decided, that others are asked and this
	// recipient is only told.
	Decided bool
	Note    string
	// ByReply: this approval can be answered by replying to the message
	// (email carries one token per message: the first approval's).
	ByReply bool
}

// Arg is one tool argument, its value as compact text.
type Arg struct {
	Name  string
	Value string
}

// ArtifactView is one artifact: attached, or a link.
type ArtifactView struct {
	ID       string
	Name     string
	MimeType string
	Size     string // "1.2 MB", empty when unknown
	URL      string
	Attached bool
	Note     string
}

// CitationView is one numbered source.
type CitationView struct {
	N     int
	Title string
	URL   string
	Text  string
}

// NoticeView is what a notice is about.
type NoticeView struct {
	Summary   string
	Decision  string // granted or denied
	DecidedBy string
	DecidedAt string
	Reason    string
	// How to answer, for not-understood: the SMS code, the email subject
	// tag, the confirmation page.
	Code       string
	SubjectTag string
	LinkURL    string
}
