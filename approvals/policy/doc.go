// Package policy holds the operator's approval policies: which approval
// requests they govern (the delivery's agent, the request's tool and a CEL
// expression), and what they do with them (decide at once, or ask the
// people of their steps until a quorum grants or one of them denies).
//
// Invariants:
//   - Policies come from the operator's configuration only. A policy is
//     chosen from the delivery's agent (never the part's handler), the
//     part's toolName and the CEL expression; nothing else in an envelope
//     can choose, skip or weaken one.
//   - Expressions are compiled and type-checked once, when the
//     configuration loads, and evaluated under a cost limit. An expression
//     that fails at run time does not match (the next policy is tried), so
//     an error never grants; the failure is logged once per policy.
//   - A person counts once toward a quorum however many channels they were
//     asked on; one denial denies.
package policy
