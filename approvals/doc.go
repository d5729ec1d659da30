// Package approvals turns approval-request parts into pending approvals,
// asks each recipient on each channel through a token of their own, reads
// their answers, and injects the first valid decision into the suspended
// agent turn as an approval-response part.
//
// Invariants:
//   - A token (email token, SMS code, WhatsApp button nonce, link token) is
//     bound to one (approval, recipient, channel). Only its SHA-256 hash is
//     stored; lookups compare hashes in constant time. Tokens never appear
//     in logs.
//   - The first valid decision wins across all channels. Storing it, voiding
//     the other tokens, writing the audit entry and queuing the injection job
//     happen in one bbolt transaction; the injection worker then delivers it
//     at least once, with retries, and dead-letters it visibly, never drops it.
//     A retry refused after an earlier attempt's answer was lost counts as
//     delivered only when the agent's own record holds the decision
//     (Confirmer); a first attempt's refusal always stands.
//   - A short code is checked, and a wrong one counted, in one store
//     transaction with its lock: each pending approval's code is tried at
//     most MaxWrongCodes times from a number before it is locked for that
//     number. The lock is per (number, approval), so it cannot be used to
//     silence a number for the approvals sent to it later.
//   - A decider is told a decision took effect only when the agent took it;
//     otherwise the confirmation says it is recorded and not yet confirmed,
//     or that it had no effect (dead-lettered).
//   - Nothing an inbound message says is obeyed unless its sender is the
//     recipient the token was issued to. A message that fails this has no
//     effect and its sender learns nothing that helps an attacker.
//   - Every step of an approval is in its event trail (trail.go), appended in
//     the transaction of the change it records: who was asked, every vote
//     with its channel, evidence and disposition, the decision, expiry or
//     withdrawal, and the injection the agent took. Each event carries the
//     hash of the one before; Verify names the first changed or missing one.
//   - ParseDecision is pure: the first non-empty line decides, opt-out words
//     never do, ambiguity means no decision.
//
// See THREATS.md for the threats to approvals and the tests covering each.
package approvals
