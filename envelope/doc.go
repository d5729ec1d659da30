// Package envelope holds beachd's domain: the Beach response envelope (an A2A
// message whose parts carry a Beach partType), the open part-type and
// turn-state registries, the per-channel delivery rules derived from them, and
// the approval-request / approval-response / artifact part schemas.
//
// It imports nothing of beachd. Everything here is a value: registries are
// built in main (canonical set plus consumer types from config) and passed in.
//
// Guarantees callers rely on:
//   - Decode never reads more than Limits.MaxBytes and rejects trailing data,
//     unknown top-level fields and parts that are neither text nor data.
//   - Validate reports every problem it finds, each with a JSON path such as
//     "parts[2].metadata.partType", never only the first.
//   - Filter is a pure function: given the same envelope, channel and consumes
//     list it returns the same parts, in their original order.
package envelope
