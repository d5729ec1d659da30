// Package slack delivers envelopes to Slack through one app's bot token and
// takes button clicks (and, where wired, messages) back through Slack's
// signed requests.
//
// Sending. Sender renders the envelope to Block Kit (render.Slack: escaped
// mrkdwn, at most 50 blocks, Approve and Deny buttons carrying each
// approval's payload) and posts it with chat.postMessage. A recipient is a
// channel (C…, G…), a user (U…, W… — Slack opens the direct message when
// channel is a user id) or a user's email address, which is resolved once
// with users.lookupByEmail and kept in the store (Resolver), so that the
// next message and the click that answers it find the same user. The
// message carries the delivery id in its metadata (event type
// beachd_delivery), the stable id a repeat after a crash can be recognised
// by; Slack has no idempotency key, so a job that may have been sent and
// whose ts was never recorded is sent again (at-least-once). The provider
// id is "<channel>/<ts>": where chat.update finds the message later.
//
// Errors are classified from Slack's error codes: ratelimited (HTTP 429,
// honouring Retry-After), 5xx, timeouts and Slack's own transient errors
// (internal_error, fatal_error, service_unavailable, request_timeout) are
// temporary; an unknown channel or user, a channel the bot is not in, an
// archived channel, a bad or revoked token and a missing scope are
// permanent, each with its code in the receipt. Nothing is retried inside
// an attempt: the dispatcher schedules the next.
//
// Updating. Updater.ApprovalDecided rewrites every Slack message that
// asked about an approval once it is decided, on any channel: its buttons
// are replaced by a line saying who decided what, and when (chat.update).
//
// Receiving. Verify checks Slack's v0 request signature (HMAC-SHA256 of
// "v0:<timestamp>:<body>" with the signing secret, compared in constant
// time) and refuses a timestamp more than five minutes from our clock,
// before anything of the request is read as Slack's. InteractionHandler
// serves the interactivity endpoint: a verified block_actions payload
// whose action is one of beachd's buttons becomes an inbound message for
// the approvals service, from the Slack user who clicked; what the service
// made of it comes back to that user as an ephemeral note when it decided
// nothing (expired, already decided, not the person asked).
package slack
