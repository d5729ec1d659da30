// Package email is beachd's email channel: SMTP delivery (Sender, built on
// go-mail), the IMAP reply intake (Intake, built on go-imap/v2), the inbound
// message parser (ParseMessage) and the embedded mail server of `beachd dev`
// (DevServer).
//
// Sending. Sender implements channels.Deliverer. Every message carries a
// Message-ID derived from the delivery id (and the approval token), so a
// retry after an ambiguous failure sends the same Message-ID and a duplicate
// is recognisable. Failures are classified: an SMTP 4xx reply, a network,
// TLS or timeout error is temporary; a 5xx reply is permanent; a failure
// after the final "." of DATA without a reply is temporary and MaybeSent.
// Connections are kept in a small pool and reused across messages.
//
// Reading. Intake watches one mailbox with IDLE (polling where the server
// has no IDLE), fetches new messages with BODY.PEEK[] above the stored
// (UIDVALIDITY, last UID) cursor, hands each parsed message to the decider,
// and only after the decider returned marks it \Seen and moves it to the
// processed mailbox. A message that cannot be parsed, is too big, or was
// already processed (same Message-ID) is logged and moved aside; it never
// stops the loop.
//
// Parsing. ParseMessage is a pure function from raw RFC 5322 bytes to an
// envelope.Inbound. It is bounded in every dimension (total bytes, header
// bytes, multipart depth, number of parts, decoded text) and never fails on
// broken mail that still has a header: what it cannot read it reports in
// Warnings. It uses go-message rather than enmime because go-message reads
// the MIME tree as a stream, so the bounds are enforced while reading;
// enmime builds the whole tree in memory first and has no depth or part
// limit.
package email
