// Package webhook delivers envelopes to HTTP endpoints signed as Standard
// Webhooks (https://www.standardwebhooks.com/) and accepts signed approval
// decisions back.
//
// Outbound, each attempt POSTs
//
//	{"type":"beach.envelope","timestamp":"<attempt time, RFC 3339>",
//	 "data":{"deliveryId":"<delivery id>","envelope":<filtered envelope>}}
//
// with the headers webhook-id (the delivery id: the same on every retry, so a
// receiver recognises duplicates), webhook-timestamp (the attempt's unix
// seconds) and webhook-signature ("v1,<base64 HMAC-SHA256>" of
// "id.timestamp.body", one per configured secret, space-separated, so that a
// secret can be rotated without downtime). The envelope is filtered by the
// part-type registry for the webhook channel and the endpoint's consumes list.
//
// Classification of an attempt (the dispatcher schedules retries):
//
//   - 2xx: delivered. The status line is the receiver's acknowledgement; a
//     response body cut off afterwards does not undo it.
//   - 410 Gone: permanent, and the endpoint is disabled in memory until
//     Enable is called or the process restarts; later deliveries to it fail
//     permanently at once without a network call (the Standard Webhooks
//     spec asks senders to stop sending after 410). Disabled deliveries are
//     dead-lettered and an operator can retry them.
//   - 3xx: permanent. Redirects are never followed; fix the configured URL.
//   - 429, 5xx, timeouts, connection errors: temporary, honouring
//     Retry-After (seconds or an HTTP date, capped at 24 hours).
//   - other 4xx: permanent.
//
// Every answer is kept as a receipt {data: {status, body}, meta: {source:
// "http", status, headers}}, with the body read to at most 64 KiB.
//
// A per-endpoint circuit breaker stops hammering an endpoint that is down:
// after Threshold consecutive temporary failures it opens for a cool-down
// (30 s doubling to 10 min); while open, Deliver fails at once as temporary
// with RetryAfter set to the remaining cool-down; then one probe is let
// through (half-open), whose success closes the circuit.
//
// A 2xx answer, or a 4xx other than 429, shows the endpoint alive and
// closes the count; an attempt cancelled by the caller (shutdown) is no
// verdict either way.
//
// Concurrency per endpoint (max_concurrency) is enforced at claim time
// (channels.Admitter): the dispatcher calls Admit inside its claim
// transaction, which reserves a slot and refuses jobs of an endpoint whose
// circuit is open, and Done once the attempt is over (or the claim is
// abandoned). Deliver itself does not count slots; it is the breaker's
// authority (Admit only peeks at it).
//
// Secrets are "whsec_" + base64 of 24 to 64 random bytes, as the spec asks;
// a Secret never prints its key. The Sink is a receiver for `beachd dev` and
// tests: it verifies, records and counts duplicates by webhook-id.
//
// Inbound, InboundHandler accepts POST /v1/inbound/webhook/{endpoint} bodies
// signed with the endpoint's secret and hands the decision to approvals.
package webhook
