package a2ui

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrOverBudget is matched (errors.Is) by every *LimitError: the surface
// asks for more work than one rendering may do, so it is refused rather
// than rendered in part.
var ErrOverBudget = errors.New("a2ui: surface exceeds the rendering budget")

// Defaults of Options.MaxEvalBytes and Options.MaxEvalSteps.
const (
	// DefaultMaxEvalBytes is twice the largest envelope beachd accepts by
	// default: an ordinary surface shows each byte of its data model once
	// or twice, and a surface that asks for more is amplifying.
	DefaultMaxEvalBytes = 16 << 20
	// DefaultMaxEvalSteps is ten times what the largest surface that can
	// be laid out (10,000 components, a few bindings each) takes; the
	// example surfaces take under a hundred. At the bound a rendering
	// costs about a tenth of a second of CPU.
	DefaultMaxEvalSteps = 1_000_000
)

// LimitError says which budget a surface exhausted, and where.
type LimitError struct {
	Surface   string // surface id
	Component string // component being built, "" when none was
	// What was being evaluated: "formatString", "regex", "a list
	// template", "components"...
	What  string
	Bound string // "bytes" or "steps"
	Limit int64
}

func (e *LimitError) Error() string {
	where := "surface " + strconv.Quote(e.Surface)
	if e.Component != "" {
		where += ", component " + strconv.Quote(e.Component)
	}
	if e.Bound == BoundBytes {
		return fmt.Sprintf("%s: %s asks for more than %s of text in all (a surface may evaluate at most that much)", where, e.What, sizeString(e.Limit))
	}
	return fmt.Sprintf("%s: %s takes more than %d evaluation steps in all (a surface may take at most that many)", where, e.What, e.Limit)
}

// Is makes every LimitError match ErrOverBudget.
func (e *LimitError) Is(target error) bool { return target == ErrOverBudget }

// The bounds a LimitError names.
const (
	BoundBytes = "bytes" // Options.MaxEvalBytes
	BoundSteps = "steps" // Options.MaxEvalSteps
)

func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// budget is what is left of one Render's evaluation allowance. Bytes are
// charged for every string an evaluation produces or scans, at its full
// length even when only a bounded prefix is kept, so that the verdict does
// not depend on the output bound; steps for every value evaluated, every
// interpolated expression, list item and component built.
type budget struct {
	bytes, steps       int64
	maxBytes, maxSteps int64
	err                *LimitError
}

func newBudget(maxBytes, maxSteps int64) budget {
	return budget{bytes: maxBytes, steps: maxSteps, maxBytes: maxBytes, maxSteps: maxSteps}
}

// spend charges n bytes and k steps for what, and reports whether the
// rendering may go on. The first overrun is kept as r.budget.err; from
// then on every charge fails.
func (r *renderer) spend(n, k int, what string) bool {
	b := &r.budget
	if b.err != nil {
		return false
	}
	b.bytes -= int64(n)
	b.steps -= int64(k)
	if b.bytes >= 0 && b.steps >= 0 {
		return true
	}
	e := &LimitError{Surface: clip(r.at.surface, maxIDInMessage), Component: clip(r.at.component, maxIDInMessage), What: clip(what, maxIDInMessage)}
	if b.bytes < 0 {
		e.Bound, e.Limit = BoundBytes, b.maxBytes
	} else {
		e.Bound, e.Limit = BoundSteps, b.maxSteps
	}
	b.err = e
	return false
}

// over reports whether the budget is exhausted.
func (r *renderer) over() bool { return r.budget.err != nil }

// location is where the rendering is, for a LimitError.
type location struct{ surface, component string }

// maxIDInMessage bounds an id (or any string from the surface) quoted in
// a warning or an error.
const maxIDInMessage = 80
