package a2ui

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// evaluator resolves dynamic values (literals, {"path"} bindings, function
// calls and logic expressions) against one surface's data model.
type evaluator struct {
	r     *renderer
	sid   string // surface id, for warnings
	data  any
	depth int
}

// value evaluates a dynamic value in the scope of base (the absolute pointer
// of the current list-template item, "" at the root).
func (e *evaluator) value(v any, base string) any {
	if l, ok := v.(literal); ok {
		return l.v
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if !e.r.spend(0, 1, "evaluating its values") {
		return nil
	}
	if e.depth >= maxEvalDepth {
		e.r.warn("surface %q: expressions nested deeper than %d were not evaluated", e.sid, maxEvalDepth)
		return nil
	}
	e.depth++
	defer func() { e.depth-- }()
	if p, ok := m["path"].(string); ok {
		return e.lookup(p, base)
	}
	for _, k := range []string{"literalString", "literalNumber", "literalBoolean", "literalArray"} {
		if v, ok := m[k]; ok && len(m) == 1 { // the v0.8 shape, still sent by older agents
			return v
		}
	}
	if name, ok := m["call"].(string); ok {
		return e.call(name, m["args"], base)
	}
	if l, ok := m["and"].([]any); ok {
		return e.logic("and", l, base)
	}
	if l, ok := m["or"].([]any); ok {
		return e.logic("or", l, base)
	}
	if x, ok := m["not"]; ok {
		return !truthy(e.value(x, base))
	}
	if len(m) == 1 {
		if t, ok := m["true"]; ok {
			return truthy(t)
		}
		if _, ok := m["false"]; ok {
			return false
		}
	}
	return v
}

func (e *evaluator) lookup(p, base string) any {
	// The pointer is built and scanned: a long one, repeated in every
	// item of a list, costs its length each time.
	if !e.r.spend(len(base)+len(p), 1, "a binding") {
		return nil
	}
	abs := joinPath(base, p)
	v, ok := getPointer(e.data, abs)
	if !ok {
		if _, err := pointerTokens(abs); err != nil {
			e.r.warn("surface %q: bad JSON Pointer %q: %v", e.sid, p, err)
		} else {
			e.r.warn("surface %q: no data at %s", e.sid, abs)
		}
		return nil
	}
	return v
}

// text evaluates v to display text.
func (e *evaluator) text(v any, base string) string {
	return e.str(e.value(v, base), "a value")
}

// str is toString charged to the budget: a string is shared, not copied,
// but an object or a list is written out as JSON.
func (e *evaluator) str(v any, what string) string {
	switch v.(type) {
	case map[string]any, []any:
		s := toString(v)
		if !e.r.spend(len(s), 1, what) {
			return ""
		}
		return s
	}
	return toString(v)
}

func (e *evaluator) boolean(v any, base string) bool {
	return truthy(e.value(v, base))
}

func (e *evaluator) logic(op string, list []any, base string) bool {
	for _, x := range list {
		b := truthy(e.value(x, base))
		if op == "and" && !b {
			return false
		}
		if op == "or" && b {
			return true
		}
	}
	return op == "and"
}

// positional names the arguments of each function, for calls written with
// positional arguments (formatDate(${/d}, 'yyyy')).
var positional = map[string][]string{
	"required":       {"value"},
	"regex":          {"value", "pattern"},
	"length":         {"value", "min", "max"},
	"numeric":        {"value", "min", "max"},
	"email":          {"value"},
	"formatString":   {"value"},
	"formatNumber":   {"value", "decimals", "grouping"},
	"formatCurrency": {"value", "currency", "decimals", "grouping"},
	"formatDate":     {"value", "format"},
	"pluralize":      {"value", "other"},
	"openUrl":        {"url"},
	"not":            {"value"},
}

// args gives a function its evaluated arguments by name.
type args struct {
	e     *evaluator
	base  string
	named map[string]any
	list  []any // and/or written positionally
}

func (a args) get(name string) (any, bool) {
	v, ok := a.named[name]
	if !ok {
		return nil, false
	}
	return a.e.value(v, a.base), true
}

func (a args) text(name string) (string, bool) {
	v, ok := a.get(name)
	return a.e.str(v, "a function argument"), ok
}

func (e *evaluator) makeArgs(name string, raw any, base string) args {
	a := args{e: e, base: base, named: map[string]any{}}
	switch t := raw.(type) {
	case map[string]any:
		a.named = t
	case []any:
		names := positional[name]
		a.list = t
		for i, v := range t {
			if i < len(names) {
				a.named[names[i]] = v
			}
		}
	}
	return a
}

// call evaluates a catalog function. Errors are warned and degrade: the
// formatting functions fall back to the raw value, checks to false.
func (e *evaluator) call(name string, raw any, base string) any {
	return e.callArgs(name, e.makeArgs(name, raw, base))
}

func (e *evaluator) callArgs(name string, a args) any {
	switch name {
	case "required":
		v, _ := a.get("value")
		return isPresent(v)
	case "regex":
		v, _ := a.text("value")
		pat, _ := a.text("pattern")
		if len(pat) > maxRegexLen {
			e.r.warn("surface %q: regex pattern longer than %d characters; check fails", e.sid, maxRegexLen)
			return false
		}
		re, err := e.r.regex(pat)
		if err != nil {
			e.r.warn("surface %q: regex %q: %v", e.sid, pat, err)
			return false
		}
		if !e.r.spend(len(v), 1, "regex") {
			return false
		}
		return re.MatchString(v)
	case "length":
		v, _ := a.text("value")
		if !e.r.spend(len(v), 1, "length") {
			return false
		}
		n := float64(utf8.RuneCountInString(v))
		return inRange(n, a)
	case "numeric":
		v, _ := a.get("value")
		f, ok := toFloat(v)
		if !ok {
			return false
		}
		return inRange(f, a)
	case "email":
		v, _ := a.text("value")
		if !e.r.spend(len(v), 1, "email") {
			return false
		}
		return emailRE.MatchString(v)
	case "formatString":
		v, _ := a.text("value")
		return e.interpolate(v, a.base)
	case "formatNumber", "formatCurrency":
		s := e.fnFormatNumber(a, name == "formatCurrency")
		if !e.r.spend(len(s), 1, name) {
			return nil
		}
		return s
	case "formatDate":
		return e.fnFormatDate(a)
	case "pluralize":
		return e.fnPluralize(a)
	case "openUrl":
		return nil // an action; Button turns it into a link
	case "and", "or":
		list, _ := a.named["values"].([]any)
		if list == nil {
			list = a.list
		}
		return e.logic(name, list, a.base)
	case "not":
		v, _ := a.get("value")
		return !truthy(v)
	case "now":
		return e.r.opt.Now.In(e.r.opt.TimeZone).Format("2006-01-02T15:04:05Z07:00")
	}
	e.r.warn("surface %q: unknown function %q; its value is empty", e.sid, name)
	return nil
}

// regex compiles pat once per Render (at most maxRegexps patterns are
// kept). A pattern is refused when its program would hold more than
// maxRegexProg instructions (repetitions multiply: a thousand-character
// pattern can otherwise take hundreds of megabytes) or its character
// classes more than maxRegexRunes range bounds (\pL alone has some 1,300).
func (r *renderer) regex(pat string) (*regexp.Regexp, error) {
	if re, ok := r.regexps[pat]; ok {
		return re, nil
	}
	parsed, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, err
	}
	insts, runes := regexSize(parsed)
	if insts > maxRegexProg || runes > maxRegexRunes {
		return nil, errRegexLarge
	}
	if !r.spend(len(pat)+runes, insts, "regex") {
		return nil, r.budget.err
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	if r.regexps == nil {
		r.regexps = map[string]*regexp.Regexp{}
	}
	if len(r.regexps) < maxRegexps {
		r.regexps[pat] = re
	}
	return re, nil
}

var errRegexLarge = fmt.Errorf("the pattern is too large once compiled (more than %d instructions or %d character-class bounds)", maxRegexProg, maxRegexRunes)

// regexSize estimates the instructions of a parsed pattern's program and
// the range bounds its character classes hold, each saturating past its
// limit. A repeated class shares its ranges, so only instructions
// multiply.
func regexSize(re *syntax.Regexp) (insts, runes int) {
	const overInsts, overRunes = maxRegexProg + 1, maxRegexRunes + 1
	for _, s := range re.Sub {
		i, r := regexSize(s)
		insts, runes = min(insts+i+1, overInsts), min(runes+r, overRunes)
	}
	switch re.Op {
	case syntax.OpLiteral:
		insts += len(re.Rune)
	case syntax.OpCharClass:
		insts++
		runes += len(re.Rune)
	case syntax.OpRepeat:
		times := max(re.Min, re.Max, 1)
		if insts > overInsts/times {
			return overInsts, min(runes, overRunes)
		}
		insts *= times
	default:
		insts++
	}
	return min(insts, overInsts), min(runes, overRunes)
}

var emailRE = regexp.MustCompile(`^[^\s@]+@[^\s@]+\.[^\s@]+$`)

func isPresent(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case string:
		return strings.TrimSpace(t) != ""
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return true
}

func inRange(n float64, a args) bool {
	if v, ok := a.get("min"); ok {
		if m, ok := toFloat(v); ok && n < m {
			return false
		}
	}
	if v, ok := a.get("max"); ok {
		if m, ok := toFloat(v); ok && n > m {
			return false
		}
	}
	return true
}

func (e *evaluator) fnFormatNumber(a args, currency bool) string {
	name := "formatNumber"
	if currency {
		name = "formatCurrency"
	}
	v, _ := a.get("value")
	f, ok := toFloat(v)
	if !ok {
		e.r.warn("surface %q: %s: %s is not a number", e.sid, name, compactJSON(v, 40))
		return e.str(v, name)
	}
	decimals := -1
	if d, ok := a.get("decimals"); ok {
		if n, ok := toFloat(d); ok && !math.IsNaN(n) {
			decimals = int(max(0, min(n, 20)))
		}
	}
	grouping := true
	if g, ok := a.get("grouping"); ok && g != nil {
		grouping = truthy(g)
	}
	if !currency {
		return e.r.loc.number(f, decimals, grouping)
	}
	code, _ := a.text("currency")
	return e.r.loc.currency(f, code, decimals, grouping)
}

func (e *evaluator) fnFormatDate(a args) any {
	v, _ := a.get("value")
	format, _ := a.text("format")
	t, ok := parseTime(v, e.r.opt)
	if !ok {
		if isPresent(v) {
			e.r.warn("surface %q: formatDate: cannot read %s as a date", e.sid, compactJSON(v, 40))
		}
		return e.str(v, "formatDate")
	}
	if format == "" {
		format = "d MMM yyyy"
	}
	// A pattern letter can stand for a word ("EEEE"): the output is kept
	// within the value bound and charged in full.
	out, n := formatTR35(t.In(e.r.opt.TimeZone), format, e.r.loc.names(), e.r.opt.MaxOutputBytes)
	if !e.r.spend(len(format)+n, 1, "formatDate") {
		return nil
	}
	if n > len(out) {
		e.r.warn("surface %q: formatDate output cut at %d bytes", e.sid, e.r.opt.MaxOutputBytes)
		return out + "…"
	}
	return out
}

func (e *evaluator) fnPluralize(a args) any {
	v, _ := a.get("value")
	n, ok := toFloat(v)
	if !ok {
		e.r.warn("surface %q: pluralize: %s is not a number", e.sid, compactJSON(v, 40))
	}
	if n == 0 {
		if s, ok := a.text("zero"); ok {
			return s
		}
	}
	if s, ok := a.text(e.r.loc.plural(n)); ok {
		return s
	}
	s, _ := a.text("other")
	return s
}

// listLen is the number of items of a template list (an array or an
// object), 0 for anything else.
func listLen(v any) int {
	switch t := v.(type) {
	case []any:
		return len(t)
	case map[string]any:
		return len(t)
	}
	return 0
}

// sortedPaths returns the pointers of the first limit items of a template
// list: an array's elements in order, or an object's members sorted by
// their "pos" member (A2UI's fractional indexing) and then by key.
func sortedPaths(v any, base string, limit int) (paths []string) {
	switch t := v.(type) {
	case []any:
		for i := range min(len(t), limit) {
			paths = append(paths, base+"/"+itoa(i))
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			pi, pj := posOf(t[keys[i]]), posOf(t[keys[j]])
			if pi != pj {
				return pi < pj
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys[:min(len(keys), limit)] {
			paths = append(paths, base+"/"+escapeToken(k))
		}
	}
	return paths
}

func posOf(v any) string {
	m, _ := v.(map[string]any)
	return str(m["pos"])
}

func escapeToken(k string) string {
	k = strings.ReplaceAll(k, "~", "~0")
	return strings.ReplaceAll(k, "/", "~1")
}

func itoa(i int) string { return strconv.Itoa(i) }
