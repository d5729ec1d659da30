package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
)

// maxUnknown bounds the unknown arguments named one by one.
const maxUnknown = 10

// args reads a tool's arguments and collects every problem with them,
// each naming its argument, so that one answer lists them all (as the
// API's 400 does).
type args struct {
	fields map[string]json.RawMessage
	probs  []envelope.Problem
}

// readArgs decodes raw (a JSON object, or nothing) and names every
// argument that is not among allowed.
func readArgs(raw json.RawMessage, allowed ...string) *args {
	a := &args{fields: map[string]json.RawMessage{}}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return a
	}
	if err := json.Unmarshal(raw, &a.fields); err != nil {
		a.add("", "the arguments must be a JSON object")
		return a
	}
	var unknown []string
	for k := range a.fields {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for i, k := range unknown {
		if i == maxUnknown {
			a.add("", "%d more unknown arguments", len(unknown)-maxUnknown)
			break
		}
		a.add(clip(k, 64), "unknown argument: the arguments are %s", strings.Join(allowed, ", "))
	}
	return a
}

func (a *args) add(path, format string, v ...any) {
	a.probs = append(a.probs, envelope.Problem{Path: path, Reason: fmt.Sprintf(format, v...)})
}

// has reports whether name was given (and is not null).
func (a *args) has(name string) bool {
	v, ok := a.fields[name]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// str reads a string argument of at most max bytes; required ones must
// not be blank.
func (a *args) str(name string, required bool, max int) string {
	if !a.has(name) {
		if required {
			a.add(name, "required")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(a.fields[name], &s); err != nil {
		a.add(name, "must be a string")
		return ""
	}
	switch {
	case required && strings.TrimSpace(s) == "":
		a.add(name, "must not be empty")
	case len(s) > max:
		a.add(name, "longer than %d bytes", max)
	case !utf8.ValidString(s):
		a.add(name, "not valid UTF-8")
	}
	return s
}

// integer reads an optional integer argument from min to max; def when
// absent.
func (a *args) integer(name string, min, max, def int) int {
	if !a.has(name) {
		return def
	}
	var f float64
	if err := json.Unmarshal(a.fields[name], &f); err != nil || f != float64(int(f)) || f < float64(min) || f > float64(max) {
		a.add(name, "must be an integer from %d to %d", min, max)
		return def
	}
	return int(f)
}

// object reads an optional JSON object argument.
func (a *args) object(name string) map[string]any {
	if !a.has(name) {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(a.fields[name], &m); err != nil {
		a.add(name, "must be a JSON object")
		return nil
	}
	return m
}

// list reads a required array of objects as raw JSON, for a decoder that
// checks its items (the API's recipients).
func (a *args) list(name string, what string) json.RawMessage {
	if !a.has(name) {
		a.add(name, "required: %s", what)
		return nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(a.fields[name], &items); err != nil {
		a.add(name, "must be an array of %s", what)
		return nil
	}
	return a.fields[name]
}

// raw is an argument as given.
func (a *args) raw(name string) json.RawMessage {
	if !a.has(name) {
		return nil
	}
	return a.fields[name]
}

// err is the problems found, as the API's 400, or nil.
func (a *args) err() error {
	if len(a.probs) == 0 {
		return nil
	}
	return &envelope.ValidationError{Problems: a.probs}
}

// canonical is the arguments with sorted keys: what an idempotency key is
// bound to.
func (a *args) canonical() []byte {
	b, _ := json.Marshal(a.fields)
	return b
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
