package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// yaml's decoder reports its errors by line only, and of the document it
// decoded (the file after ${ENV} expansion, written out again). A line may
// hold several keys ("ops: {url: …, timeout: soon}"), so a line cannot say
// which key an error is about. describeYAMLError finds the problems again
// by walking the file's own node tree beside the Go type it decodes into:
// each problem is named by the path of its node and placed at that node's
// line and column as written.

// describeYAMLError turns a decoding error of the configuration into
// problems that each name their key and position. root is the file as
// written (after expansion in place, which keeps positions). An error that
// is not about types or keys is returned as it is.
func describeYAMLError(err error, root *yaml.Node) ([]problem, error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return nil, err
	}
	w := &nodeWalker{budget: 1 << 20}
	w.walk(root, reflect.TypeFor[Config](), "")
	if len(w.problems) == 0 {
		// The walk and yaml disagree (a case the walk does not know): yaml's
		// own words are better than nothing.
		problems := make([]problem, len(te.Errors))
		for i, e := range te.Errors {
			problems[i] = problem{reason: goTypeNames(e)}
		}
		return problems, nil
	}
	return w.problems, nil
}

// nodeWalker collects the problems yaml's decoder finds in a node tree
// decoded into a Go type, unknown keys refused.
type nodeWalker struct {
	problems []problem
	// budget is how many more nodes may be visited: aliases can make a
	// small file a large tree.
	budget int
}

var (
	yamlUnmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType            = reflect.TypeFor[time.Time]()
	stringType          = reflect.TypeFor[string]()
	yamlLinePrefix      = regexp.MustCompile(`^line \d+: `)
	configPackage       = regexp.MustCompile(`(^|[^A-Za-z0-9_.])config\.`)
)

func (w *nodeWalker) add(path string, n *yaml.Node, msg string) {
	w.problems = append(w.problems, problem{key: path, line: n.Line, col: n.Column, reason: msg})
}

// walk checks that n decodes into t; path is n's key path.
func (w *nodeWalker) walk(n *yaml.Node, t reflect.Type, path string) {
	if n == nil || w.budget <= 0 {
		return
	}
	w.budget--
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.walk(c, t, path)
		}
		return
	case yaml.AliasNode:
		w.walk(n.Alias, t, path)
		return
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return // the zero value
		}
	}
	pt := reflect.PointerTo(t)
	if t == timeType || t.Implements(yamlUnmarshalerType) || pt.Implements(yamlUnmarshalerType) ||
		n.Kind == yaml.ScalarNode && pt.Implements(textUnmarshalerType) {
		w.leaf(n, t, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(n, t.Elem(), path)
	case reflect.Interface:
		// Anything decodes into an interface.
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.leaf(n, t, path)
			return
		}
		w.mapping(n, t, path, nil)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.leaf(n, t, path)
			return
		}
		w.mapping(n, t, path, nil)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.leaf(n, t, path)
			return
		}
		for i, c := range n.Content {
			w.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		w.leaf(n, t, path)
	}
}

// mapping checks a mapping node decoded into a struct or a map. done holds
// the keys already set by the mapping a merge ("<<: *defaults") is for:
// as in yaml, a merged key that the mapping sets itself is not looked at.
func (w *nodeWalker) mapping(n *yaml.Node, t reflect.Type, path string, done map[string]bool) {
	// Like yaml, a mapping with a repeated key is not looked into further.
	dup := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		for j := i + 2; j+1 < len(n.Content); j += 2 {
			ki, kj := n.Content[i], n.Content[j]
			if ki.Kind == kj.Kind && ki.Value == kj.Value {
				w.add(joinKey(path, kj.Value), kj, fmt.Sprintf("repeats the key already defined at line %d, column %d", ki.Line, ki.Column))
				dup = true
			}
		}
	}
	if dup {
		return
	}
	var fields []yamlField
	var inline reflect.Type // a struct's inline map, or the map itself
	if t.Kind() == reflect.Struct {
		fields, inline = yamlFields(t)
	} else {
		inline = t
	}
	if done == nil {
		done = map[string]bool{}
	}
	var merge *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merge = v // as in yaml, the last one counts
			continue
		}
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!null" {
			continue // yaml skips a null key
		}
		if inline == nil && k.Kind != yaml.ScalarNode {
			w.leaf(k, stringType, path) // a struct's keys are strings
			continue
		}
		if done[k.Value] {
			continue
		}
		done[k.Value] = true
		p := joinKey(path, k.Value)
		if f, ok := findField(fields, k.Value); ok {
			w.walk(v, f.typ, p)
			continue
		}
		if inline != nil {
			w.leaf(k, inline.Key(), p)
			w.walk(v, inline.Elem(), p)
			continue
		}
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		w.add(p, k, "is not a known key (known keys here: "+strings.Join(names, ", ")+")")
	}
	if merge == nil {
		return
	}
	// "<<: *a" or "<<: [*a, *b]": the merged mappings' keys are this
	// mapping's, and are named by its path.
	merged := []*yaml.Node{merge}
	if merge.Kind == yaml.SequenceNode {
		merged = merge.Content
	}
	for _, m := range merged {
		if m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		if m == nil || m.Kind != yaml.MappingNode || w.budget <= 0 {
			continue // yaml refuses it outright (not a TypeError)
		}
		w.budget--
		w.mapping(m, t, path, done)
	}
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// leaf decodes n into a new t with yaml itself and records what it
// refuses, in plain words.
func (w *nodeWalker) leaf(n *yaml.Node, t reflect.Type, path string) {
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		w.add(path, n, err.Error())
		return
	}
	if want := wantedValue(t); want != "" {
		w.add(path, n, "want "+want+", got "+gotValue(n, t))
		return
	}
	for _, e := range te.Errors {
		w.add(path, n, goTypeNames(yamlLinePrefix.ReplaceAllString(e, "")))
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// wantedValue names, for a person, what a value of type t is written as;
// "" for a type it has no words for.
func wantedValue(t reflect.Type) string {
	if t.Implements(yamlUnmarshalerType) || reflect.PointerTo(t).Implements(yamlUnmarshalerType) {
		return "" // its own words
	}
	switch t {
	case durationType:
		return "a duration such as 30s, 5m or 24h"
	case timeType:
		return "a date and time such as 2026-01-31T08:00:00Z"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return wantedValue(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a single value (text)"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map:
		return "a map of names to values (name: value)"
	case reflect.Struct:
		return "a section of keys (key: value)"
	}
	return ""
}

// maxQuoted bounds a value quoted in a problem.
const maxQuoted = 60

// gotValue describes what node n holds: a scalar as written (quoted when
// it is text), else its shape.
func gotValue(n *yaml.Node, t reflect.Type) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len([]rune(v)) > maxQuoted {
		v = string([]rune(v)[:maxQuoted]) + "…"
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		// A number where a number is wanted did not fit.
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if k := t.Kind(); t != durationType && (k >= reflect.Int && k <= reflect.Float64) {
			return v + " (out of range)"
		}
		return v
	case "!!bool", "!!null":
		return v
	}
	return strconv.Quote(v)
}

// goTypeNames drops this package's name from Go type names in yaml's
// messages ("into config.EmailConfig").
func goTypeNames(msg string) string {
	return configPackage.ReplaceAllString(msg, "$1")
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlField is a struct field as yaml's decoder sees it.
type yamlField struct {
	name string
	typ  reflect.Type
}

func findField(fields []yamlField, name string) (yamlField, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return yamlField{}, false
}

// yamlFields lists t's fields by their yaml names, following yaml's rules
// (the yaml tag's name, else the lowercased field name; "-" skipped;
// ",inline" structs merged in), and returns the type of an inline map that
// takes the other keys, if any.
func yamlFields(t reflect.Type) (fields []yamlField, inlineMap reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.PkgPath != "" && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" && !strings.Contains(string(f.Tag), ":") {
			tag = string(f.Tag)
		}
		if tag == "-" {
			continue
		}
		name, flags, _ := strings.Cut(tag, ",")
		if strings.Contains(","+flags+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Map:
				inlineMap = ft
			case reflect.Struct:
				sub, m := yamlFields(ft)
				fields = append(fields, sub...)
				if m != nil {
					inlineMap = m
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields = append(fields, yamlField{name: name, typ: f.Type})
	}
	return fields, inlineMap
}
