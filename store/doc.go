// Package store is beachd's only use of bbolt: envelopes, delivery jobs and
// their attempts, idempotency keys, approvals and tokens, inbound message ids,
// IMAP cursors and schedule runs.
//
// Contract:
//   - A write that returns nil is on disk (fsync'd). Ingest uses bbolt's Batch,
//     so concurrent ingests share one commit; a Batch function may run more
//     than once and is written to be idempotent.
//   - No network I/O and no rendering happen inside a write transaction:
//     callers Claim jobs, act outside the store, then Record the outcome.
//   - A delivery moves queued → sending → sent | retrying | dead, and
//     retrying → sending, dead → queued (operator retry). Every job in state
//     queued or retrying has exactly one entry in the due index; every job in
//     state sending has exactly one entry in the lease index. CheckInvariants
//     verifies this.
//   - Open refuses a file with a newer schema version or one bbolt cannot
//     read, and never rewrites it.
package store
