package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A configuration file is checked in one pass that reports every problem
// it can find, each naming its key path and, when the key is in the file,
// its line and column, sorted by position:
//
//  1. yaml syntax: a file that is not yaml stops here (nothing else can be
//     read from it).
//  2. ${ENV} expansion: every unset variable is a problem at its key; the
//     value becomes "" and the pass goes on.
//  3. decoding: unknown keys and values of the wrong type (named in plain
//     words by the node walk in paths.go); the keys that decoded
//     keep their values and the pass goes on.
//  4. validation: Config.check and each section's validate method report
//     through validator.errorf(key, …), with the key path as written in
//     the file. A key whose value was already refused in 2 or 3 (or a key
//     under it) is not judged again: its value is not the one written.
//
// A new key takes part by being a field with a yaml tag (steps 2 and 3
// cover it with no code) and by checking its value in its section's
// validate method with v.errorf("section.key", …); the position is found
// from the key path.

// problem is one thing wrong with the configuration.
type problem struct {
	key    string // "email.smtp.port", "schedules[0].cron"; "" for the whole file
	line   int    // 1-based position in the file; 0: the key is not in it
	col    int
	reason string
}

func (p problem) String() string {
	s := p.reason
	if p.key != "" {
		s = p.key + ": " + s
	}
	if p.line > 0 {
		s = fmt.Sprintf("line %d, column %d: %s", p.line, p.col, s)
	}
	return s
}

// Error lists every problem of a configuration, one per line.
type Error struct {
	// File is the configuration file's name; "" for a configuration built
	// in code (beachd dev).
	File     string
	Problems []string
}

func (e *Error) Error() string {
	head := "invalid configuration"
	if e.File != "" {
		head = e.File + ": " + head
	}
	n := len(e.Problems)
	if n > 1 {
		head += fmt.Sprintf(" (%d problems)", n)
	}
	return head + ":\n  " + strings.Join(e.Problems, "\n  ")
}

// validator collects configuration problems, each naming its key.
type validator struct {
	// problems are "key: reason" strings, as reported.
	problems []string
	items    []problem
	// warnings are things worth saying that refuse nothing (a duration
	// under a minute).
	warnings []problem
}

// warnf records a warning: `config check` prints it, serve logs it, and
// neither refuses the file for it.
func (v *validator) warnf(key, format string, args ...any) {
	v.warnings = append(v.warnings, problem{key: key, reason: fmt.Sprintf(format, args...)})
}

// placeWarnings places warnings in the file (root may be nil) and returns
// them as lines, in the file's order.
func placeWarnings(root *yaml.Node, ws []problem) []string {
	if len(ws) == 0 {
		return nil
	}
	var idx map[string]*yaml.Node
	if root != nil {
		idx = indexKeys(root)
	}
	out := make([]problem, len(ws))
	copy(out, ws)
	for i := range out {
		if n := locateKey(idx, out[i].key); n != nil && idx != nil {
			out[i].line, out[i].col = n.Line, n.Column
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].line == 0) != (out[j].line == 0) {
			return out[j].line == 0 // the keys not in the file last
		}
		return out[i].line < out[j].line
	})
	lines := make([]string, len(out))
	for i, p := range out {
		lines[i] = p.String()
	}
	return lines
}

func (v *validator) errorf(key, format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	v.problems = append(v.problems, key+": "+reason)
	v.items = append(v.items, problem{key: key, reason: reason})
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &Error{Problems: v.problems}
}

// newConfigError places each problem in the file (by its key path, for
// those that have no position yet), leaves out the problems of keys whose
// values were already refused (refused: keys with a decoding or expansion
// problem), sorts them by position and returns them as one error; nil
// without problems.
func newConfigError(file string, root *yaml.Node, refused map[string]bool, probs []problem) error {
	var idx map[string]*yaml.Node
	if root != nil {
		idx = indexKeys(root)
	}
	out := make([]problem, 0, len(probs))
	for _, p := range probs {
		if refused != nil && p.line == 0 && underRefused(p.key, refused) {
			continue
		}
		if p.line == 0 && idx != nil {
			if n := locateKey(idx, p.key); n != nil {
				p.line, p.col = n.Line, n.Column
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil
	}
	// Problems in the file first, in its order; then those of keys missing
	// from it, in the order they were found.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.line == 0) != (b.line == 0) {
			return b.line == 0
		}
		if a.line != b.line {
			return a.line < b.line
		}
		return a.col < b.col
	})
	lines := make([]string, len(out))
	for i, p := range out {
		lines[i] = p.String()
	}
	return &Error{File: file, Problems: lines}
}

// KeyError is an *Error of one key's problem found after the file was
// checked (Probe's, at store.dsn), placed in the file at path as the other
// problems are.
func KeyError(path, key string, err error) error {
	raw, rerr := os.ReadFile(path)
	var root *yaml.Node
	if rerr == nil {
		root = &yaml.Node{}
		if yaml.Unmarshal(raw, root) != nil {
			root = nil
		}
	}
	return newConfigError(path, root, nil, []problem{{key: key, reason: err.Error()}})
}

// underRefused reports whether key is a refused key or lies under one.
func underRefused(key string, refused map[string]bool) bool {
	for k := key; k != ""; k = parentKey(k) {
		if refused[k] {
			return true
		}
	}
	return false
}

// parentKey is the key path one level up: "a.b[2]" → "a.b", "a.b" → "a".
func parentKey(key string) string {
	i := strings.LastIndexAny(key, ".[")
	if i < 0 {
		return ""
	}
	return key[:i]
}

// maxIndexedNodes bounds indexKeys: aliases can make a small file a large
// tree.
const maxIndexedNodes = 1 << 16

// indexKeys maps the key path of every mapping entry and sequence item of
// the file to its node: the value of an entry whose value is a scalar,
// else its key; the item of a list.
// Paths are written as validators write them: "a.b", "a.list[2].c".
func indexKeys(root *yaml.Node) map[string]*yaml.Node {
	idx := map[string]*yaml.Node{}
	budget := maxIndexedNodes
	// inAlias holds the anchored nodes being walked through an alias: an
	// alias inside its own anchor (which yaml refuses) is not followed again.
	inAlias := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n == nil || budget <= 0 {
			return
		}
		budget--
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.AliasNode:
			if !inAlias[n.Alias] {
				inAlias[n.Alias] = true
				walk(n.Alias, path)
				delete(inAlias, n.Alias)
			}
		case yaml.MappingNode:
			var merges []*yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if isMergeKey(k) {
					merges = append(merges, v)
					continue
				}
				p := joinKey(path, k.Value)
				if _, seen := idx[p]; !seen {
					// A value's problem is shown at the value; a
					// section's at its key.
					idx[p] = k
					if v.Kind == yaml.ScalarNode {
						idx[p] = v
					}
				}
				walk(v, p)
			}
			// Merged keys belong to this mapping; those it sets itself
			// (indexed above) keep their own position.
			for _, m := range merges {
				if m.Kind == yaml.SequenceNode {
					for _, c := range m.Content {
						walk(c, path)
					}
				} else {
					walk(m, path)
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if _, seen := idx[p]; !seen {
					idx[p] = c
				}
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return idx
}

// locateKey finds key's node, or that of its nearest ancestor in the file
// (a required key that is missing is reported where its section is); nil
// when no part of the path is in the file.
func locateKey(idx map[string]*yaml.Node, key string) *yaml.Node {
	for k := key; k != ""; k = parentKey(k) {
		if n, ok := idx[k]; ok {
			return n
		}
	}
	return nil
}
