package envelope

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// FieldError is a JSON member that does not fit where it is — an unknown
// member, or a value of the wrong kind — at Path, in the form problems use
// (to[0].channel, parts[1].data). StrictUnmarshal's errors are FieldErrors
// when the decoder knows the place.
type FieldError struct {
	Path   string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// ProblemOf is err as a Problem: a FieldError's path and reason, or err's
// text without a path. prefix, when given, goes before the path
// (envelope.parts[0]…).
func ProblemOf(prefix string, err error) Problem {
	var fe *FieldError
	if errors.As(err, &fe) {
		return Problem{Path: joinProblemPath(prefix, fe.Path), Reason: fe.Reason}
	}
	return Problem{Path: prefix, Reason: err.Error()}
}

func joinProblemPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

// problemPath turns a JSON pointer into the path problems use: object
// members joined by dots, array indexes in brackets (/to/0/type is
// to[0].type). A token of digits alone is taken for an index.
func problemPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 32); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// unknownField is the reason for an unknown member name in an object that
// decodes into t: "unknown field", and the member meant when one is near
// enough to guess ("did you mean "channel"?").
func unknownField(t reflect.Type, name string) string {
	if s := suggestMember(jsonMembers(t), name); s != "" {
		return fmt.Sprintf("unknown field; did you mean %q?", s)
	}
	return "unknown field"
}

// memberAliases are names people write for a member that has another name
// here: a recipient's channel is not its "type".
var memberAliases = map[string][]string{
	"type": {"channel", "partType"}, "kind": {"channel", "partType"}, "medium": {"channel"}, "transport": {"channel"},
	"email": {"address"}, "phone": {"address"}, "number": {"address"}, "recipient": {"address"},
	"url": {"endpoint"}, "webhook": {"endpoint"},
	"recipients": {"to"}, "envelopes": {"envelope"}, "message": {"envelope"},
	"content": {"text"}, "body": {"text"}, "meta_data": {"metadata"},
}

// suggestMember is the member of known that name most likely meant, or "".
func suggestMember(known []string, name string) string {
	if len(known) == 0 {
		return ""
	}
	has := func(s string) bool {
		for _, k := range known {
			if k == s {
				return true
			}
		}
		return false
	}
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	for _, k := range known {
		if norm(k) == norm(name) {
			return k // approval_id, Channel
		}
	}
	for _, a := range memberAliases[strings.ToLower(name)] {
		if has(a) {
			return a
		}
	}
	best, bestD := "", 3
	if len(name) <= 4 {
		bestD = 2
	}
	for _, k := range known {
		if d := editDistance(norm(k), norm(name)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// jsonMembers lists the JSON member names a struct type decodes.
func jsonMembers(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _ := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,") {
			out = append(out, jsonMembers(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
