package templates

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"
)

//go:embed all:defaults
var defaultFS embed.FS

// Sentinel errors.
var (
	// ErrNotFound: no template of that name in the set.
	ErrNotFound = errors.New("no such template")
	// ErrTooLarge: a template's output passed Limits.MaxBytes.
	ErrTooLarge = errors.New("template output too large")
	// ErrTimeout: a template ran longer than Limits.Timeout.
	ErrTimeout = errors.New("template took too long")
)

// Error is a template that does not parse or escape, located by file and
// line (Line is 0 when unknown).
type Error struct {
	File string
	Line int
	Err  error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Limits bound one execution. Zero values mean the defaults.
type Limits struct {
	MaxBytes int           // default 1 MiB
	Timeout  time.Duration // default 2 s
}

// DefaultLimits are used for zero fields of Limits.
var DefaultLimits = Limits{MaxBytes: 1 << 20, Timeout: 2 * time.Second}

// Set is a loaded, immutable set of templates.
type Set struct {
	// groups maps "<channel>/<flavor>" (flavor "html" or "text") to the
	// template set holding every template and partial of that group.
	html map[string]*htmltemplate.Template
	text map[string]*texttemplate.Template
	// names maps a template name ("email/result.html") to its group.
	names map[string]string
	// files maps a template name to where it came from, for messages.
	files map[string]string
}

var fileName = regexp.MustCompile(`^(email|sms|whatsapp|slack)/(_?[a-z0-9][a-z0-9-]*)\.(subject|txt|html)\.tmpl$`)

type source struct {
	rel  string // "email/result.html.tmpl"
	file string // where it came from, for errors
	body string
}

// Default returns the embedded default templates.
func Default() (*Set, error) { return Load("") }

// Load returns the embedded defaults with the files of dir (if dir is not
// empty) replacing them. It reports every problem of the first broken file as
// an *Error naming the file and line.
func Load(dir string) (*Set, error) {
	srcs := map[string]source{}
	err := fs.WalkDir(defaultFS, "defaults", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := defaultFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "defaults/")
		srcs[rel] = source{rel: rel, file: "(embedded) " + rel, body: string(b)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded templates: %w", err)
	}
	if dir != "" {
		if err := overlay(srcs, dir); err != nil {
			return nil, err
		}
	}
	return build(srcs)
}

func overlay(srcs map[string]source, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("templates directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("templates directory %s: not a directory", dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(path.Base(rel), ".") {
			return nil // editor droppings, .gitkeep
		}
		m := fileName.FindStringSubmatch(rel)
		if m == nil {
			return &Error{File: p, Err: errors.New("not a template name: expected <email|sms|whatsapp|slack>/<kind>.<subject|txt|html>.tmpl")}
		}
		if _, exists := srcs[rel]; !exists && !strings.HasPrefix(m[2], "_") {
			return &Error{File: p, Err: fmt.Errorf("no default template %s to replace (known: %s)", rel, strings.Join(known(srcs, m[1]), ", "))}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read template: %w", err)
		}
		if len(b) > 1<<20 {
			return &Error{File: p, Err: errors.New("larger than 1 MiB")}
		}
		srcs[rel] = source{rel: rel, file: p, body: string(b)}
		return nil
	})
}

func known(srcs map[string]source, channel string) []string {
	var out []string
	for rel := range srcs {
		if strings.HasPrefix(rel, channel+"/") {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// nameOf turns "email/result.html.tmpl" into "email/result.html".
func nameOf(rel string) string { return strings.TrimSuffix(rel, ".tmpl") }

func groupOf(rel string) (group string, isHTML bool) {
	m := fileName.FindStringSubmatch(rel)
	if m == nil {
		return "", false
	}
	if m[3] == "html" {
		return m[1] + "/html", true
	}
	return m[1] + "/text", false
}

func build(srcs map[string]source) (*Set, error) {
	s := &Set{
		html:  map[string]*htmltemplate.Template{},
		text:  map[string]*texttemplate.Template{},
		names: map[string]string{},
		files: map[string]string{},
	}
	rels := make([]string, 0, len(srcs))
	for rel := range srcs {
		rels = append(rels, rel)
	}
	// Partials first, so that a template may call one defined in a partial;
	// sorted for stable error reports.
	sort.Slice(rels, func(i, j int) bool {
		pi, pj := strings.Contains(rels[i], "/_"), strings.Contains(rels[j], "/_")
		if pi != pj {
			return pi
		}
		return rels[i] < rels[j]
	})
	for _, rel := range rels {
		src := srcs[rel]
		group, isHTML := groupOf(rel)
		if group == "" {
			return nil, &Error{File: src.file, Err: errors.New("not a template name")}
		}
		name := nameOf(rel)
		var err error
		if isHTML {
			root := s.html[group]
			if root == nil {
				root = htmltemplate.New(group).Funcs(htmlFuncs())
				s.html[group] = root
			}
			_, err = root.New(name).Parse(src.body)
		} else {
			root := s.text[group]
			if root == nil {
				root = texttemplate.New(group).Funcs(textFuncs())
				s.text[group] = root
			}
			_, err = root.New(name).Parse(src.body)
		}
		if err != nil {
			return nil, locate(src.file, err)
		}
		s.files[name] = src.file
		if !strings.Contains(rel, "/_") {
			s.names[name] = group
		}
	}
	// html/template checks contextual escaping on first execution; do it now
	// so that a broken override fails config check, not the first send.
	for name, group := range s.names {
		if t := s.html[group]; t != nil && strings.HasSuffix(name, ".html") {
			err := t.ExecuteTemplate(discard{}, name, nil)
			var he *htmltemplate.Error
			if errors.As(err, &he) {
				return nil, locate(s.files[name], err)
			}
		}
	}
	return s, nil
}

var (
	lineInErr = regexp.MustCompile(`template: ?[^:\s]+:(\d+):`)
	startedAt = regexp.MustCompile(`started at [^:\s]+:(\d+)`)
)

// locate turns a template error into an *Error with the line it names.
func locate(file string, err error) error {
	e := &Error{File: file, Err: err}
	var he *htmltemplate.Error
	if errors.As(err, &he) && he.Line > 0 {
		e.Line = he.Line
	} else if m := startedAt.FindStringSubmatch(err.Error()); m != nil {
		// an unclosed action: where it starts is where to look
		e.Line, _ = strconv.Atoi(m[1])
	} else if m := lineInErr.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
	}
	return e
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Has reports whether the set holds the template name ("email/result.html").
func (s *Set) Has(name string) bool { _, ok := s.names[name]; return ok }

// Names lists the templates of the set (partials excluded), sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.names))
	for n := range s.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// File says where the template name came from: a path in the override
// directory, or "(embedded) …".
func (s *Set) File(name string) string { return s.files[name] }

// Execute runs the template name with data and returns its output, bounded
// by lim. A template that writes more than lim.MaxBytes fails with
// ErrTooLarge; one that runs past lim.Timeout fails with ErrTimeout (its
// goroutine stops at its next write).
func (s *Set) Execute(name string, data any, lim Limits) (string, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultLimits.MaxBytes
	}
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultLimits.Timeout
	}
	group, ok := s.names[name]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	w := &limitedWriter{max: lim.MaxBytes, deadline: time.Now().Add(lim.Timeout)}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("template %s panicked: %v", name, p)
			}
		}()
		if t := s.html[group]; t != nil && strings.HasSuffix(group, "/html") {
			done <- t.ExecuteTemplate(w, name, data)
			return
		}
		done <- s.text[group].ExecuteTemplate(w, name, data)
	}()
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			switch {
			case errors.Is(err, ErrTooLarge):
				return "", fmt.Errorf("execute %s: %w (limit %d bytes)", name, ErrTooLarge, lim.MaxBytes)
			case errors.Is(err, ErrTimeout):
				return "", fmt.Errorf("execute %s: %w (limit %s)", name, ErrTimeout, lim.Timeout)
			}
			return "", fmt.Errorf("execute %s (%s): %w", name, s.files[name], err)
		}
		return w.buf.String(), nil
	case <-timer.C:
		return "", fmt.Errorf("execute %s: %w (limit %s)", name, ErrTimeout, lim.Timeout)
	}
}

// limitedWriter fails writes past max bytes or past the deadline, which stops
// the template that writes.
type limitedWriter struct {
	buf      bytes.Buffer
	max      int
	deadline time.Time
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, ErrTooLarge
	}
	if time.Now().After(w.deadline) {
		return 0, ErrTimeout
	}
	return w.buf.Write(p)
}
