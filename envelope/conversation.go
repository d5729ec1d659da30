package envelope

// Delivery extra keys (store.Delivery.Extra) that place a delivery in a
// conversation. The conversations package writes them; the channels read
// them when they compose the message.
const (
	// ExtraConversation is the conversation id (cnv_…).
	ExtraConversation = "conversation"
	// ExtraFrom is our address or number the person wrote to: the answer
	// goes out from it.
	ExtraFrom = "from"
	// ExtraSubject is the subject of an email answer ("Re: …").
	ExtraSubject = "subject"
	// ExtraInReplyTo and ExtraReferences thread an email answer under the
	// person's last message.
	ExtraInReplyTo  = "inReplyTo"
	ExtraReferences = "references"
	// ExtraThreadTS is the Slack thread (its ts) an answer is posted in;
	// the delivery's To is then the conversation id (C…, D…) of the thread.
	ExtraThreadTS = "thread_ts"
	// ExtraTemplate names a provider template to send instead of the
	// envelope: "window" is WhatsApp's window template (the answer itself
	// is held until the person writes again).
	ExtraTemplate = "template"
	// ExtraApprovalNotice marks a message an approval policy's timer sent:
	// "reminder" (rendered as a reminder) or "escalation".
	ExtraApprovalNotice = "approvalNotice"
)

// Values of ExtraApprovalNotice.
const (
	NoticeReminder   = "reminder"
	NoticeEscalation = "escalation"
)

// Inbound outcomes of conversations (InboundResult.Outcome), beside the
// approval outcomes. They are the dispositions of inbound records.
const (
	DispositionApproval  = "approval"
	DispositionTurn      = "turn"
	DispositionRejected  = "rejected"
	DispositionIgnored   = "ignored"
	DispositionHeld      = "held"
	DispositionUnrouted  = "unrouted"
	DispositionDuplicate = "duplicate"
)
