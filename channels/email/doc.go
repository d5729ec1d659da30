// Package email is beachd's email channel: SMTP delivery (Sender, built on
// go-mail), the IMAP reply intake (Intake, built on go-imap/v2), the inbound
// message parser (ParseMessage) and the embedded mail server of `beachd dev`
// (DevServer).
//
// Sending. Sender implements channels.Deliverer. Every message carries a
// Message-ID derived from the delivery id and the approval token
// (<DELIVERYID.TOKEN@DOMAIN>, from the renderer), so a retry after an
// ambiguous failure sends the same Message-ID and a duplicate is
// recognisable. With DKIM configured, the message is written out once,
// signed over every header field a reader acts on, each over-signed
// (dkim.go), and those very bytes are what the SMTP transaction sends.
// Failures are classified:
//
//   - a 5xx reply to MAIL, RCPT or the end of DATA is permanent;
//   - a 4xx reply, a network, TLS or timeout error is temporary;
//   - no reply after the final "." of DATA (dropped connection, timeout,
//     cancelled context) is temporary and MaybeSent;
//   - failures before the transaction (dial, greeting, STARTTLS, AUTH, even
//     with a 5xx) are temporary: they are about our configuration or the
//     server, not the message, and an operator can retry dead letters.
//
// The server's reply (code, enhanced code, text, queue id) is the receipt.
// Receipts and error texts never contain the approval token (it is a
// credential, stored only hashed) or the recipient's address. Connections
// are kept in a pool of PoolSize and reused across messages; one idle for
// longer than MaxIdle is checked with NOOP first.
//
// Reading. Intake watches one mailbox with IDLE (polling where the server
// has no IDLE), ending and re-issuing IDLE every IdleRefresh (at most 28
// minutes), and checks for mail before and after each IDLE. Every command
// has a timeout; a connection that stops answering is closed and dialled
// again with exponential backoff. It fetches messages above the stored
// (UIDVALIDITY, last UID) cursor with BODY.PEEK[], hands each parsed message
// to the decider and only after the decider returned marks it \Seen and
// moves it to the processed mailbox (created when missing; without MOVE,
// COPY + \Deleted + EXPUNGE). A new UIDVALIDITY rescans the mailbox. A
// message that cannot be parsed, or whose Message-ID was processed before,
// is logged and moved aside; one over MaxMessageBytes is logged and left
// unread; one the decider keeps failing on is retried with backoff and left
// unread after MaxFailures. None of them stops the loop.
//
// Parsing. ParseMessage is a pure function from raw RFC 5322 bytes to an
// envelope.Inbound. It is bounded in every dimension (total bytes, header
// bytes, multipart depth, number of parts, decoded text) and never fails on
// broken mail that still has a header: what it cannot read it reports in
// Warnings (an unknown charset is read as Latin-1). It uses go-message
// (with its charset tables) rather than enmime: go-message reads the MIME
// tree as a stream, so each bound is enforced while reading, whereas enmime
// builds the whole tree in memory first and has no depth or part limit;
// enmime's extra leniency (charset sniffing) mattered for none of the
// replies in the corpus. Quoted text and signatures are trimmed by our own
// rules (TrimReply), tested on the corpus in testdata/replies. Besides the
// reply text it keeps the untrimmed text (FullText, at most 64 KiB), every
// recipient (To, Cc, Delivered-To, X-Original-To; at most 50) and the
// attachments: parts marked attachment or carrying a file name (an inline
// image without one is layout), with sanitised names and validated media
// types, at most 20, their bytes kept up to 25 MiB per message (past that
// an attachment is listed with its size alone, and a warning says so).
//
// Conversations. An answer in a conversation (a delivery whose Extra names
// envelope.ExtraConversation) goes out from the address the person wrote
// to, under their subject, threaded under their last mail, with
// Auto-Submitted: auto-replied and, as Reply-To, the conversation's signed
// reply address LOCAL+c-CNV.MAC@DOMAIN (ReplyAddress). Mail to such an
// address names its conversation (Inbound.Conversation) only when the MAC
// verifies (ConversationFromAddress); the tag cannot be taken for an
// approval token, nor a token for a conversation.
//
// Senders. A reply's From is believed only when it is one clean RFC 5322
// mailbox (one From field, one address, no group, nothing after it) and
// the Authentication-Results of the receiving server
// (ParseOptions.AuthServID) verify it: dmarc=pass for header.from the From
// domain, or, with no DMARC policy, a dkim=pass aligned with it
// (ParseOptions.DKIMAlignment, relaxed by default). Only that server's
// topmost field (and any of its fields above the first Received field) is
// read, so a field the sender forged lower down counts for nothing. Every
// other reply — no results, dmarc=none with spf=fail, permerror, temperror,
// a DMARC verdict for another domain or for none, a From that is not one
// clean mailbox, no authserv-id configured — is AuthFailed and is
// quarantined, not obeyed; authres.go states the rule in full.
// TrustUnauthenticated is the explicit opt-out for a server that adds no
// results (`beachd dev`); it still requires a clean From.
package email
