// Package channels holds the delivery contract every buffered channel
// implements (Deliverer) and the dispatcher that drives it.
//
// The dispatcher's loop, per job:
//
//  1. Claim: in one transaction, take due jobs (state sending, lease until T).
//  2. Deliver: outside any transaction, the channel renders and sends.
//  3. Record: in another transaction, store the attempt and the next state.
//
// Retry specification: an error is temporary unless the channel marks it
// permanent (Permanent). A temporary failure is retried after the channel
// policy's delay for that attempt, with ±20% jitter, or after the peer's
// Retry-After when that is longer, until the policy's lifetime (counted from
// the job's creation, or from an operator's retry) runs out; then the job is
// dead, with the last error as its reason. A permanent failure is dead at
// once. A job whose lease runs out (a crashed or hung worker) is claimed
// again: delivery is at-least-once, and each channel sends a stable id
// (Message-ID, webhook-id, the Twilio SID it recorded) so that a duplicate is
// recognisable.
package channels
