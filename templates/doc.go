// Package templates holds beachd's message templates: the defaults embedded
// in the binary and the loading of an operator's override directory over
// them.
//
// Layout (the same in the embedded defaults and in an override directory):
//
//	<channel>/<kind>.<part>.tmpl      one template, e.g. email/result.html.tmpl
//	<channel>/_<name>.<flavor>.tmpl   partials ({{define}} blocks) shared by
//	                                  every template of that channel and flavor
//
// channel is email, sms, whatsapp or slack (Slack's notification text; its blocks
// are built by the renderer); kind is result, clarification, error,
// approval-request, approval-confirmation, already-decided or not-understood;
// part is subject, txt or html. Files ending in .html.tmpl are parsed with
// html/template (escaping by context); every other file with text/template.
//
// Every template gets a render.View (render/view.go documents its fields:
// Kind, Subject, Text, HTML, Surfaces, Approvals, Artifacts, Citations,
// Notice, …). Besides the built-in functions, templates have trunc, join,
// upper, lower and default (funcs.go). Text output is tidied afterwards
// (trailing blanks trimmed, runs of blank lines folded), so templates need
// not fight whitespace.
//
// Guarantees:
//   - An override file replaces the default of the same name, whole; an
//     override may add partials (names starting with "_") but no other new
//     names, so that a typo in a file name is an error, not a silent no-op.
//   - Load reports a broken template with its file and line (*Error), and
//     checks html/template's contextual escaping at load time, not at the
//     first send.
//   - A Set is immutable after Load and safe for concurrent use.
//   - Execute bounds a template's output size and its running time.
package templates
