// Package api is beachd's HTTP surface (docs/operations.md): ingest, delivery
// queries and operator actions, health and metrics, and the routes other
// packages contribute (approvals, schedules, inbound provider webhooks).
//
// Every /v1 route but the inbound provider webhooks requires
// "Authorization: Bearer <key>", compared in constant time against every
// configured key. A read-only key (Config.ReadKeys) passes GET and HEAD and is
// refused 403 on anything else, whichever package contributed the route.
// Errors are JSON {"error": "...", "problems": [...]}, mapped
// from typed errors in one place (writeError); provider and internal error
// text never reaches a caller raw.
//
// Ingest acknowledges (202) only after the envelope, its deliveries, its
// approvals and its idempotency key are committed in one transaction.
package api
