// Package render turns a settled envelope into what one buffered channel
// sends: an email (subject, text and HTML alternatives, attachments,
// threading and auto-reply headers), an SMS (body, GSM-7/UCS-2 encoding,
// segment count), a WhatsApp message (body, quick-reply buttons, media,
// content template) or a webhook's filtered envelope. render/a2ui draws A2UI
// surfaces; templates/ holds the message templates.
//
// Contract:
//   - Every method is a pure function of its Input and the Config: no I/O,
//     no clock (Input.Now), no randomness. Channels fetch artifacts and
//     approvals mints handles before calling.
//   - What reaches a channel is decided by Registry.Filter (docs/envelope.md);
//     setState never leaves.
//   - Everything from an envelope is escaped in HTML; only http(s) and mailto
//     links are made; the HTML has no script, form or external style sheet.
//   - An email subject is one line of 1 to 78 characters and ends with
//     "[approval:TOKEN]" when the mail carries a token; the Message-ID is
//     <DELIVERYID.TOKEN@DOMAIN> (or <DELIVERYID@DOMAIN>).
//   - An SMS body stays within Config.SMSMaxChars units (policy truncate) or
//     is split into at most ten Parts each within it (policy split); approval
//     instructions survive truncation. A WhatsApp body stays within 1,024
//     characters with buttons and 4,096 without. However long the text, it is
//     cut before the templates run, so it is delivered cut, never failed.
//   - What a rendition holds is bounded whatever the envelope: an email's
//     text and surfaces fit the template output bound less 64 KiB (surfaces
//     at most half, each at most MaxSurfaceBytes; a longer text is cut with a
//     note or Input.FullMessageURL), a full-message page shows up to 4 MiB,
//     and Markdown is rendered only as far as it can be used.
//   - The surfaces of one envelope share one A2UI evaluation budget
//     (render/a2ui); CheckSurfaces gives ingest the verdict without layout.
//   - A surface that cannot be fully rendered degrades and is reported in
//     Warnings; rendering fails only for a nil envelope (ErrNoEnvelope), an
//     envelope with nothing for the channel (ErrEmpty), surfaces over the
//     evaluation budget (matching a2ui.ErrOverBudget; a delivery should be
//     failed permanently) or a template error (template output and run time
//     are bounded).
//
// Notice renders the short messages the approvals package sends back to a
// person who answered: approval-confirmation, already-decided and
// not-understood.
package render
