// Package twilio delivers envelopes as SMS and WhatsApp messages through
// Twilio and takes answers and delivery statuses back through Twilio's signed
// webhooks.
//
// Sending. SMS and WhatsApp share one Client (credentials, connection pool,
// API base URL, timeout). Each Deliver call renders the envelope, checks the
// recipient has not opted out, waits for a token from the sender's token
// bucket (a burst is paced, never rejected: when the wait would outlast the
// attempt, the attempt ends early with a RetryAfter the dispatcher honours),
// and creates one Message. Twilio has no idempotency key, so a job marked
// MaybeSent (a timeout after the POST, or a lease that ran out mid-send) is
// looked up first — by the SID we recorded, or by listing recent messages to
// that number from our sender since the delivery was created and matching
// the body — and is not sent again when Twilio already has it.
//
// A message sent from a content template cannot be matched by body, so a
// maybe-sent template message whose SID was never recorded is sent again
// (at-least-once). WhatsApp quick-reply buttons go out only inside a
// content (Twilio's Messages API has no other way): the approval template
// when one is configured, else the quick-reply content described below.
//
// Conversations. A delivery's Extra "from" (envelope.ExtraFrom) picks the
// sending number: it must be the channel's configured sender or one of
// Config.SMSNumbers / Config.WhatsAppNumbers (the agents' inbound numbers),
// else the delivery fails permanently naming it. Extra "template":
// "window" sends Config.WindowTemplate (a content SID) instead of the
// envelope, for a WhatsApp answer held while the person's 24-hour window
// is closed. Twilio's 63016 (outside the window) is permanent.
//
// Quick replies. A WhatsApp approval inside the window, with no approval
// template configured, goes out with quick-reply buttons: the deliverer
// creates a twilio/quick-reply content once through the Content API (body
// variable 1, each button's id a variable carrying the approvalId:nonce
// payload the webhook reads back as ButtonPayload), keeps its SID in the
// Store under a key derived from the definition, and reuses it. When the
// creation fails (tried again after five minutes) or Twilio refuses the
// message, the approval goes out as text with a code.
//
// Errors are classified from Twilio's error codes and HTTP statuses:
// invalid, unreachable, landline and opted-out recipients are permanent;
// throttles (429, 20429, 63017), 5xx and unreadable error bodies are
// temporary, honouring Retry-After.
//
// Receiving. Handler serves POST /v1/inbound/twilio. It bounds the body,
// verifies X-Twilio-Signature against the configured public URL before it
// acts on anything, answers with empty TwiML, and then either records a
// status callback on the delivery it belongs to or hands an inbound message
// to the decider (approvals first, then conversations): the To number as
// its recipient, the body untrimmed as its full text, and at most ten media
// (MediaUrlN, MediaContentTypeN) as attachments, URL and media type only;
// a media URL not on https://api.twilio.com is dropped and logged.
// Client.FetchMedia downloads such media later: only from Twilio's API
// host, with the account's credentials, following Twilio's redirect to its
// media store through the guarded fetch client without them, bounded in
// size and time; its errors (MediaError) say whether a later try could
// fetch the media (a 5xx, a timeout) or not (a 4xx, a refused address).
// A MessageSid seen before has no second effect.
// STOP-family words opt the number out of further sends on that channel;
// START and UNSTOP opt it back in. Neither is ever a decision.
//
// Development. Recorder is a Deliverer that keeps what it would have sent;
// DevHandler lists those messages and turns a local form post into the same
// inbound message a real webhook would produce.
package twilio
