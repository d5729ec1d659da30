package a2ui

import (
	"encoding/json"
	"strings"
)

// interpolate expands the ${...} expressions of a formatString value:
// ${/absolute/path}, ${relative/path}, and function calls with named or
// positional arguments, which may nest (${formatDate(value: ${/d},
// format: 'MMM d')}). "\${" is a literal "${". A malformed expression is
// kept as written, with a warning.
//
// The output is kept within Options.MaxOutputBytes (cut, with "…" and a
// warning); every piece is charged to the budget at its full length, so
// that a template naming a long value many times is refused whatever the
// output bound.
func (e *evaluator) interpolate(s, base string) string {
	if !e.r.spend(len(s), 1, "formatString") { // the scan
		return ""
	}
	if !strings.Contains(s, "${") {
		return s
	}
	if e.depth >= maxEvalDepth {
		e.r.warn("surface %q: expressions nested deeper than %d were not evaluated", e.sid, maxEvalDepth)
		return s
	}
	e.depth++
	defer func() { e.depth-- }()
	limit := e.r.opt.MaxOutputBytes
	var b strings.Builder
	cut := false
	write := func(piece string) {
		if cut {
			return
		}
		if b.Len()+len(piece) <= limit {
			b.WriteString(piece)
			return
		}
		b.WriteString(cutUTF8(piece, limit-b.Len()))
		cut = true
	}
	for i := 0; i < len(s) && !e.r.over(); {
		j := strings.IndexAny(s[i:], "\\$")
		if j < 0 {
			write(s[i:])
			break
		}
		write(s[i : i+j])
		i += j
		if s[i] == '\\' && strings.HasPrefix(s[i+1:], "${") {
			write("${")
			i += 3
			continue
		}
		if strings.HasPrefix(s[i:], "${") {
			p := &exprParser{e: e, base: base, s: s, i: i + 2}
			v, ok := p.expr()
			p.space()
			if ok && p.i < len(s) && s[p.i] == '}' {
				piece := e.str(v, "formatString")
				// Charged in full even when past the bound: the verdict
				// must not depend on how much output is kept.
				if !e.r.spend(len(piece), 1, "formatString") {
					return ""
				}
				write(piece)
				i = p.i + 1
				continue
			}
			e.r.warn("surface %q: formatString: cannot read the expression in %q", e.sid, clip(s, 80))
			write(s[i:])
			break
		}
		write(s[i : i+1])
		i++
	}
	if e.r.over() {
		return ""
	}
	if cut {
		e.r.warn("surface %q: formatString output cut at %d bytes", e.sid, limit)
		return b.String() + "…"
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n) + "…"
}

// exprParser reads one expression starting at s[i] (just after "${").
type exprParser struct {
	e     *evaluator
	base  string
	s     string
	i     int
	depth int
}

func (p *exprParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// ident reads an identifier at p.i without consuming it when absent.
func (p *exprParser) ident() string {
	j := p.i
	for j < len(p.s) && isIdentByte(p.s[j], j == p.i) {
		j++
	}
	return p.s[p.i:j]
}

// expr reads a function call or a path, up to (not including) the closing
// brace.
func (p *exprParser) expr() (any, bool) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxEvalDepth {
		return nil, false
	}
	p.space()
	if id := p.ident(); id != "" {
		j := p.i + len(id)
		for j < len(p.s) && p.s[j] == ' ' {
			j++
		}
		if j < len(p.s) && p.s[j] == '(' {
			p.i = j + 1
			return p.call(id)
		}
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != '}' {
		p.i++
	}
	path := strings.TrimSpace(p.s[start:p.i])
	if path == "" {
		return nil, false
	}
	return p.e.lookup(path, p.base), true
}

// call reads the arguments after "name(" and evaluates the call.
func (p *exprParser) call(name string) (any, bool) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxEvalDepth || !p.e.r.spend(0, 1, name) {
		return nil, false
	}
	named := map[string]any{}
	var list []any
	for {
		p.space()
		if p.i >= len(p.s) {
			return nil, false
		}
		if p.s[p.i] == ')' {
			p.i++
			break
		}
		key := ""
		if id := p.ident(); id != "" {
			j := p.i + len(id)
			for j < len(p.s) && p.s[j] == ' ' {
				j++
			}
			if j < len(p.s) && p.s[j] == ':' {
				key = id
				p.i = j + 1
				p.space()
			}
		}
		v, ok := p.arg()
		if !ok {
			return nil, false
		}
		if key != "" {
			named[key] = v
		} else {
			list = append(list, v)
		}
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
		}
	}
	a := args{e: p.e, base: p.base, named: named, list: list}
	names := positional[name]
	for i, v := range list {
		if i < len(names) {
			if _, set := named[names[i]]; !set {
				named[names[i]] = v
			}
		}
	}
	if name == "and" || name == "or" {
		if _, ok := named["values"]; !ok {
			named["values"] = list
		}
	}
	// Arguments are already evaluated; quote them so that a string that
	// looks like a binding object is not evaluated twice.
	for k, v := range named {
		if _, isMap := v.(map[string]any); isMap {
			named[k] = literal{v}
		}
	}
	return p.e.callArgs(name, a), true
}

// literal wraps an evaluated object so that evaluator.value returns it as is.
type literal struct{ v any }

// arg reads one argument value.
func (p *exprParser) arg() (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	c := p.s[p.i]
	switch {
	case strings.HasPrefix(p.s[p.i:], "${"):
		p.i += 2
		v, ok := p.expr()
		p.space()
		if !ok || p.i >= len(p.s) || p.s[p.i] != '}' {
			return nil, false
		}
		p.i++
		return v, true
	case c == '\'' || c == '"':
		return p.quoted(c)
	case c == '-' || c >= '0' && c <= '9':
		j := p.i + 1
		for j < len(p.s) && (p.s[j] >= '0' && p.s[j] <= '9' || p.s[j] == '.' || p.s[j] == 'e' || p.s[j] == 'E') {
			j++
		}
		n := json.Number(p.s[p.i:j])
		p.i = j
		if _, err := n.Float64(); err != nil {
			return nil, false
		}
		return n, true
	}
	if id := p.ident(); id != "" {
		switch id {
		case "true", "false":
			p.i += len(id)
			return id == "true", true
		case "null":
			p.i += len(id)
			return nil, true
		}
		j := p.i + len(id)
		if j < len(p.s) && p.s[j] == '(' {
			p.i = j + 1
			return p.call(id)
		}
	}
	// A bare path, up to the next separator.
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune(",)}", rune(p.s[p.i])) {
		p.i++
	}
	path := strings.TrimSpace(p.s[start:p.i])
	if path == "" {
		return nil, false
	}
	return p.e.lookup(path, p.base), true
}

func (p *exprParser) quoted(q byte) (any, bool) {
	var b strings.Builder
	for j := p.i + 1; j < len(p.s); j++ {
		c := p.s[j]
		if c == '\\' && j+1 < len(p.s) {
			j++
			b.WriteByte(p.s[j])
			continue
		}
		if c == q {
			p.i = j + 1
			return b.String(), true
		}
		b.WriteByte(c)
	}
	return nil, false
}
