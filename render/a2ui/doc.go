// Package a2ui renders A2UI v0.9 basic-catalog surfaces to plain text and to
// email-safe HTML, for channels that have no A2UI client (email above all).
//
// Render takes the data of an a2ui-surface part in any of the shapes agents
// send: one object holding createSurface / updateComponents / updateDataModel
// (/ deleteSurface) keys, a JSON list of such messages, an object
// {"messages": [...]}, or a JSONL stream of messages. It replays the messages
// into surfaces (component maps and data models), evaluates data bindings
// (RFC 6901 JSON Pointers, relative inside list templates) and the catalog's
// functions, and lays each surface out.
//
// Contract:
//   - Render never panics on any input; what it cannot render it reports in
//     Result.Warnings and degrades (unknown components show their text and
//     children, dangling ids and cycles are skipped, bad pointers read as
//     empty, failing functions show the raw value).
//   - Work is bounded by a budget carried through evaluation: every string a
//     binding or function produces or scans is charged at its full length
//     (Options.MaxEvalBytes, 16 MiB by default), and every value, expression,
//     list item and component a step (Options.MaxEvalSteps, 1,000,000). Each
//     evaluated value is kept only up to Options.MaxOutputBytes. A surface
//     that asks for more than the budget is refused, not rendered in part:
//     Result.Err is a *LimitError (matching ErrOverBudget) saying which
//     surface, component and function exceeded which bound. Check gives the
//     same verdict without laying the surface out, for refusing it early.
//   - Result.Text and Result.HTML are each at most Options.MaxOutputBytes long;
//     past the bound they end with a truncation note, and the HTML stays well
//     formed.
//   - The HTML uses tables and inline styles only: no scripts, no external CSS,
//     no forms, no event-handler attributes. Every string that comes from the
//     surface is escaped, and only http(s) and mailto URLs become links or
//     images.
//   - Result.Texts lists every string the HTML shows (each visible text,
//     label, value and button label), so a browser test can check they are
//     visible.
//
// Output depends only on the input and Options (Now, Locale, TimeZone), so it
// is deterministic and suitable for golden tests.
package a2ui
