// Package bolt is the embedded store.Store: one bbolt file holding
// envelopes, delivery jobs and their attempts, idempotency keys, approvals
// and tokens, inbound messages and conversations, turns, IMAP cursors and
// schedule runs. It is beachd's only use of bbolt.
//
// Contract:
//   - A write that returns nil is on disk (fsync'd). Ingest, Claim, Record
//     and Release share one writer (group.go): each commit carries every
//     call queued while the previous one ran, so concurrent ingests, claims
//     and outcome records share one fsync pair. A call that refuses (stale
//     lease, idempotency conflict, duplicate approval) writes nothing and
//     fails alone; a failure after writing aborts its whole commit. Other
//     writes use bbolt's Batch, whose functions may run more than once.
//   - No network I/O and no rendering happen inside a write transaction:
//     callers Claim jobs, act outside the store, then Record the outcome.
//   - A delivery is stored as queued, retrying, sent or dead. A job in
//     flight keeps its stored state (queued or retrying) and trades its due
//     entry for a lease entry (id → lease end); reads show it as sending.
//     Record rewrites the job once, with its outcome. Every stored queued or
//     retrying job has exactly one due entry or one lease; CheckInvariants
//     verifies this. A lease found at start-up means the send may have
//     reached its peer: RequeueExpired makes the job due, maybe-sent.
//   - Delivery records are binary (codec.go) since schema 2; older files
//     are migrated at open.
//   - Every provider id a delivery was given (each attempt's, each part's of
//     a split SMS) finds it until retention prunes the delivery, and goes
//     with it (since schema 3). Prune walks on from where it stopped, so
//     old unfinished envelopes cannot hide finished ones from it.
//   - Open refuses a file with a newer schema version or one bbolt cannot
//     read, and never rewrites it.
package bolt
