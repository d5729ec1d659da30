package a2ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// surface is one replayed surface: its components by id and its data model.
type surface struct {
	id        string
	catalogID string
	rootID    string // from createSurface in older shapes; "root" otherwise
	theme     map[string]any
	comps     map[string]map[string]any
	order     []string // component ids in first-seen order
	data      any
	deleted   bool
}

var (
	errPointerSyntax = errors.New("a JSON Pointer must start with /")
	errPointerLong   = fmt.Errorf("JSON Pointer has more than %d segments", maxPointerTokens)
	errScalarParent  = errors.New("cannot set a member inside a string, number or boolean")
	errBadIndex      = errors.New("array index out of range")
)

// pointerTokens splits an RFC 6901 pointer. "" and "/" both mean the root
// (A2UI uses "/" for the whole model); a trailing "/" is ignored.
func pointerTokens(p string) ([]string, error) {
	if p == "" || p == "/" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, errPointerSyntax
	}
	p = strings.TrimSuffix(p[1:], "/")
	parts := strings.Split(p, "/")
	if len(parts) > maxPointerTokens {
		return nil, errPointerLong
	}
	for i, t := range parts {
		if strings.Contains(t, "~") {
			t = strings.ReplaceAll(t, "~1", "/")
			t = strings.ReplaceAll(t, "~0", "~")
		}
		parts[i] = t
	}
	return parts, nil
}

// getPointer reads the value at an absolute pointer. ok is false when the
// pointer does not resolve.
func getPointer(root any, p string) (any, bool) {
	toks, err := pointerTokens(p)
	if err != nil {
		return nil, false
	}
	cur := root
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// setPointer sets (or, with del, removes) the value at p and returns the new
// root. Missing intermediate objects are created.
func setPointer(root any, p string, val any, del bool) (any, error) {
	toks, err := pointerTokens(p)
	if err != nil {
		return root, err
	}
	return setIn(root, toks, val, del)
}

func setIn(cur any, toks []string, val any, del bool) (any, error) {
	if len(toks) == 0 {
		if del {
			return nil, nil
		}
		return val, nil
	}
	t := toks[0]
	switch c := cur.(type) {
	case nil:
		if del {
			return nil, nil
		}
		child, err := setIn(nil, toks[1:], val, del)
		if err != nil {
			return cur, err
		}
		return map[string]any{t: child}, nil
	case map[string]any:
		if del && len(toks) == 1 {
			delete(c, t)
			return c, nil
		}
		child, err := setIn(c[t], toks[1:], val, del)
		if err != nil {
			return cur, err
		}
		c[t] = child
		return c, nil
	case []any:
		if t == "-" {
			if del {
				return c, nil
			}
			child, err := setIn(nil, toks[1:], val, del)
			if err != nil {
				return cur, err
			}
			return append(c, child), nil
		}
		i, err := strconv.Atoi(t)
		if err != nil || i < 0 || i > len(c) {
			return cur, errBadIndex
		}
		if del && len(toks) == 1 {
			if i == len(c) {
				return c, nil
			}
			return append(c[:i:i], c[i+1:]...), nil
		}
		if i == len(c) {
			child, err := setIn(nil, toks[1:], val, del)
			if err != nil {
				return cur, err
			}
			return append(c, child), nil
		}
		child, err := setIn(c[i], toks[1:], val, del)
		if err != nil {
			return cur, err
		}
		c[i] = child
		return c, nil
	default:
		return cur, errScalarParent
	}
}

// joinPath resolves a binding path against the scope of the enclosing list
// template item (base, an absolute pointer; "" at the root scope).
func joinPath(base, p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	p = strings.TrimPrefix(p, "./")
	if p == "" || p == "." {
		if base == "" {
			return "/"
		}
		return base
	}
	return base + "/" + p
}

// str returns v when it is a string, "" otherwise.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// toString converts an evaluated value to display text the way A2UI
// interpolation does: null is "", numbers and booleans in their plain form,
// objects and arrays as JSON.
func toString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case json.Number:
		return t.String()
	case float64:
		return formatPlainFloat(t)
	case int:
		return strconv.Itoa(t)
	case bool:
		return strconv.FormatBool(t)
	default:
		return compactJSON(v, 1<<16)
	}
}

func formatPlainFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "∞"
	}
	if math.IsInf(f, -1) {
		return "-∞"
	}
	if math.IsNaN(f) {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// compactJSON writes v as JSON, stopping (with "…") once limit bytes are
// written, so that stringifying a large data model costs O(limit).
func compactJSON(v any, limit int) string {
	var b strings.Builder
	if !writeJSON(&b, v, limit) {
		return cutUTF8(b.String(), limit) + "…"
	}
	return b.String()
}

// writeJSON appends v to b; false means it stopped at the limit.
func writeJSON(b *strings.Builder, v any, limit int) bool {
	if b.Len() > limit {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if !writeJSON(b, k, limit) {
				return false
			}
			b.WriteByte(':')
			if !writeJSON(b, t[k], limit) {
				return false
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if !writeJSON(b, x, limit) {
				return false
			}
		}
		b.WriteByte(']')
	case string:
		cut := cutUTF8(t, limit-b.Len()+1)
		q, _ := json.Marshal(cut)
		b.Write(q)
		if len(cut) < len(t) {
			return false
		}
	default:
		q, err := json.Marshal(t)
		if err != nil {
			b.WriteString(fmt.Sprint(t))
		} else {
			b.Write(q)
		}
	}
	return b.Len() <= limit
}

// toFloat reads a number from a JSON number, a float, or a numeric string.
func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case float64:
		return t, true
	case int:
		return float64(t), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		return f, err == nil
	case bool:
		if t {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// truthy follows JavaScript truthiness, which A2UI clients use for booleans.
func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != "" && t != "false"
	case json.Number, float64, int:
		f, _ := toFloat(t)
		return f != 0 && !math.IsNaN(f)
	default:
		return true
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
