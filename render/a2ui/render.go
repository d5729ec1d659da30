package a2ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Options tune a rendering. The zero value is usable.
type Options struct {
	// MaxOutputBytes bounds each of Result.Text and Result.HTML. Zero means
	// 256 KiB. Past the bound the output is cut and ends with a note.
	MaxOutputBytes int
	// Now is the reference time for relative values (the now() function,
	// time-only inputs). Zero means the Unix epoch, so output stays
	// deterministic; callers pass their injected clock.
	Now time.Time
	// Locale selects number, currency and plural rules ("en" default; "de",
	// "fr", "es", "it", "nl", "pt", "ru", "pl", "cs", "uk", "ar", "ja", "zh",
	// "ko" by language) and month and day names (en, de, fr, es, it, nl, pt;
	// English for the others). Unknown locales read as "en".
	Locale string
	// TimeZone is where dates are shown. Nil means UTC.
	TimeZone *time.Location
	// TextWidth is the column at which Result.Text wraps. Zero means 72.
	TextWidth int
	// MaxEvalBytes bounds the text one Render may evaluate: every string
	// a binding or function produces or scans counts at its full length
	// (each is kept only up to MaxOutputBytes). Zero means
	// DefaultMaxEvalBytes.
	MaxEvalBytes int64
	// MaxEvalSteps bounds the values, interpolated expressions, list
	// items and components one Render may evaluate. Zero means
	// DefaultMaxEvalSteps.
	MaxEvalSteps int64
}

// Result is a rendering of every surface in the input.
type Result struct {
	Text, HTML string
	// Title is the first h1/h2 text, or "", as an email subject fallback.
	Title string
	// Texts lists every visible string the HTML shows, in order.
	Texts []string
	// Warnings says what could not be rendered and why.
	Warnings []string
	// Err is a *LimitError (matching ErrOverBudget) when the surface asks
	// for more than the evaluation budget allows; Text, HTML, Title and
	// Texts are then empty.
	Err error
	// SpentBytes and SpentSteps are what the rendering charged to its
	// budget, so that a caller can share one budget between several
	// surfaces.
	SpentBytes, SpentSteps int64
}

const (
	defaultMaxOutput = 256 << 10
	defaultTextWidth = 72
	minTextWidth     = 20
	maxTextWidth     = 200

	maxInputBytes      = 8 << 20 // larger inputs are refused with a warning
	maxDepth           = 64      // component nesting bound
	maxComponents      = 2000    // components kept per surface
	maxNodes           = 10000   // rendered component instances per Render
	maxTemplateItems   = 1000    // items instantiated per list template
	maxSurfaces        = 50      // surfaces rendered per Render
	maxMessages        = 10000   // messages replayed per Render
	maxWarnings        = 100     // warnings kept
	maxEvalDepth       = 32      // nested function calls / interpolations
	maxPointerTokens   = 64      // JSON Pointer segments
	maxRegexLen        = 1000    // regex() pattern length
	maxRegexProg       = 5000    // regex() program size (instructions)
	maxRegexRunes      = 20000   // regex() character-class range bounds
	maxRegexps         = 16      // compiled patterns kept per Render
	unreadableFallback = "(surface could not be read)"
)

// Render renders every surface in data. Bad input yields warnings and as
// much output as can be recovered; only a surface over the evaluation
// budget fails, with Result.Err.
func Render(data json.RawMessage, opt Options) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			// A bug of ours must not fail a delivery; the fuzz test calls
			// render directly so that such bugs are still found.
			res = Result{
				Text:     unreadableFallback,
				HTML:     "<p>" + unreadableFallback + "</p>",
				Warnings: []string{fmt.Sprintf("internal error while rendering the surface: %v", p)},
			}
		}
	}()
	return render(data, opt)
}

func (o Options) withDefaults() Options {
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = defaultMaxOutput
	}
	if o.TimeZone == nil {
		o.TimeZone = time.UTC
	}
	if o.Now.IsZero() {
		o.Now = time.Unix(0, 0)
	}
	if o.Locale == "" {
		o.Locale = "en"
	}
	if o.TextWidth <= 0 {
		o.TextWidth = defaultTextWidth
	}
	if o.MaxEvalBytes <= 0 {
		o.MaxEvalBytes = DefaultMaxEvalBytes
	}
	if o.MaxEvalSteps <= 0 {
		o.MaxEvalSteps = DefaultMaxEvalSteps
	}
	o.TextWidth = max(minTextWidth, min(o.TextWidth, maxTextWidth))
	return o
}

// renderer holds the state of one Render call.
type renderer struct {
	opt      Options
	loc      locale
	warnings []string
	seenWarn map[string]bool
	surfaces map[string]*surface
	order    []string
	nodes    int // component instances built so far, across surfaces
	regexps  map[string]*regexp.Regexp
	budget   budget
	at       location
}

func (r *renderer) warn(format string, args ...any) {
	if len(r.warnings) > maxWarnings {
		return
	}
	for i, a := range args { // strings from the surface may be long
		if s, ok := a.(string); ok && len(s) > maxIDInMessage {
			args[i] = clip(s, maxIDInMessage)
		}
	}
	msg := fmt.Sprintf(format, args...)
	if r.seenWarn[msg] {
		return
	}
	r.seenWarn[msg] = true
	if len(r.warnings) < maxWarnings {
		r.warnings = append(r.warnings, msg)
	} else if len(r.warnings) == maxWarnings {
		r.warnings = append(r.warnings, "more warnings were dropped")
	}
}

func render(data []byte, opt Options) Result {
	r := newRenderer(opt)
	return r.spent(r.render(data, true))
}

func newRenderer(opt Options) *renderer {
	opt = opt.withDefaults()
	return &renderer{
		opt:      opt,
		loc:      lookupLocale(opt.Locale),
		seenWarn: map[string]bool{},
		surfaces: map[string]*surface{},
		budget:   newBudget(opt.MaxEvalBytes, opt.MaxEvalSteps),
	}
}

// spent completes res with what the budget was charged.
func (r *renderer) spent(res Result) Result {
	res.SpentBytes = r.budget.maxBytes - max(r.budget.bytes, 0)
	res.SpentSteps = r.budget.maxSteps - max(r.budget.steps, 0)
	return res
}

// Check replays data and evaluates every binding and function of its
// surfaces, as Render does, without laying them out: its Result has Err,
// Warnings, SpentBytes and SpentSteps as Render's would, and no output.
// Evaluation is most of the cost of a surface over the budget and layout
// most of an ordinary one's, so Check is the cheap way to refuse a
// surface when it is received.
func Check(data json.RawMessage, opt Options) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{} // a bug of ours is Render's to report, as it renders
		}
	}()
	r := newRenderer(opt)
	r.render(data, false)
	return r.spent(Result{Warnings: r.warnings, Err: r.errOrNil()})
}

// errOrNil is the budget's error as an error (nil, not a nil pointer).
func (r *renderer) errOrNil() error {
	if r.budget.err != nil {
		return r.budget.err
	}
	return nil
}

// render replays data and, with layout, lays the surfaces out.
func (r *renderer) render(data []byte, layout bool) Result {
	if len(data) > maxInputBytes {
		r.warn("surface data is %d bytes, over the %d byte limit", len(data), maxInputBytes)
		return r.unreadable()
	}
	msgs, ok := r.readMessages(data)
	if !ok {
		return r.unreadable()
	}
	for _, m := range msgs {
		r.apply(m)
	}
	if !layout {
		for _, id := range r.order {
			if s := r.surfaces[id]; s != nil && !s.deleted && !r.over() {
				r.buildSurface(s)
			}
		}
		return Result{}
	}
	return r.output()
}

func (r *renderer) unreadable() Result {
	return Result{
		Text:     unreadableFallback,
		HTML:     `<p style="margin:0;color:#5f6368;font-family:Arial,Helvetica,sans-serif;font-size:14px">` + unreadableFallback + `</p>`,
		Warnings: r.warnings,
	}
}

var messageKeys = []string{"createSurface", "updateComponents", "updateDataModel", "deleteSurface", "watchDataModel"}

func isMessage(m map[string]any) bool {
	for _, k := range messageKeys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// readMessages decodes data as one or more JSON values (a JSONL stream is
// several) and flattens them to A2UI messages. ok is false when nothing at
// all could be decoded.
func (r *renderer) readMessages(data []byte) (msgs []map[string]any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	decoded := 0
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.warn("surface data is not valid JSON: %v", err)
			break
		}
		decoded++
		r.flatten(v, 0, &msgs)
		if len(msgs) >= maxMessages {
			r.warn("more than %d messages; the rest were ignored", maxMessages)
			msgs = msgs[:maxMessages]
			break
		}
	}
	if decoded == 0 {
		if len(bytes.TrimSpace(data)) == 0 {
			r.warn("surface data is empty")
		}
		return nil, false
	}
	if len(msgs) == 0 {
		r.warn("surface data holds no A2UI messages (createSurface, updateComponents, updateDataModel)")
		return nil, false
	}
	return msgs, true
}

func (r *renderer) flatten(v any, depth int, out *[]map[string]any) {
	if depth > 4 {
		return
	}
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			r.flatten(e, depth+1, out)
		}
	case map[string]any:
		switch {
		case isMessage(t):
			*out = append(*out, t)
		case t["messages"] != nil:
			r.flatten(t["messages"], depth+1, out)
		case t["data"] != nil:
			r.flatten(t["data"], depth+1, out)
		default:
			r.warn("ignored an object that is not an A2UI message")
		}
	default:
		r.warn("ignored a %s where an A2UI message was expected", jsonKind(v))
	}
}

// apply replays one message (or one combined object) into the surfaces.
func (r *renderer) apply(m map[string]any) {
	if v, ok := m["version"]; ok {
		if s, _ := v.(string); s != "v0.9" {
			r.warn("message version %s; rendered as v0.9", compactJSON(v, 40))
		}
	}
	if v, ok := m["createSurface"]; ok {
		r.createSurface(v)
	}
	if v, ok := m["updateDataModel"]; ok {
		r.updateDataModel(v)
	}
	if v, ok := m["updateComponents"]; ok {
		r.updateComponents(v)
	}
	if v, ok := m["deleteSurface"]; ok {
		body, _ := v.(map[string]any)
		id := str(body["surfaceId"])
		if s := r.surfaces[id]; s != nil && !s.deleted {
			s.deleted = true
			r.warn("surface %q was deleted; it is not shown", id)
		}
	}
}

func (r *renderer) surface(body any, create bool) *surface {
	b, _ := body.(map[string]any)
	id := str(b["surfaceId"])
	s := r.surfaces[id]
	if s != nil && s.deleted {
		if !create {
			r.warn("update for deleted surface %q ignored", id)
			return nil
		}
		s = nil
	}
	if s == nil {
		if len(r.order) >= maxSurfaces {
			r.warn("more than %d surfaces; the rest were ignored", maxSurfaces)
			return nil
		}
		s = &surface{id: id, comps: map[string]map[string]any{}}
		if _, seen := r.surfaces[id]; !seen {
			r.order = append(r.order, id)
		}
		r.surfaces[id] = s
	}
	return s
}

func (r *renderer) createSurface(body any) {
	s := r.surface(body, true)
	if s == nil {
		return
	}
	b, _ := body.(map[string]any)
	s.catalogID = str(b["catalogId"])
	if s.catalogID != "" && !strings.Contains(s.catalogID, "basic") && !strings.Contains(s.catalogID, "standard") {
		r.warn("surface %q uses catalog %q; components outside the basic catalog are rendered as best we can", s.id, s.catalogID)
	}
	if th, ok := b["theme"].(map[string]any); ok {
		s.theme = th
	}
	for _, k := range []string{"root", "rootId", "rootComponentId"} { // older shapes
		if id := str(b[k]); id != "" {
			s.rootID = id
		}
	}
}

func (r *renderer) updateComponents(body any) {
	s := r.surface(body, false)
	if s == nil {
		return
	}
	b, _ := body.(map[string]any)
	list, ok := b["components"].([]any)
	if m, isMap := b["components"].(map[string]any); isMap { // {id: component}
		ids := make([]string, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if c, ok := m[id].(map[string]any); ok {
				if _, has := c["id"]; !has {
					c["id"] = id
				}
				list = append(list, c)
			}
		}
		ok = true
	}
	if !ok {
		r.warn("updateComponents for surface %q has no components list", s.id)
		return
	}
	for _, c := range list {
		comp, ok := normalizeComponent(c)
		if !ok {
			r.warn("surface %q: ignored a component without an id", s.id)
			continue
		}
		id := str(comp["id"])
		if _, exists := s.comps[id]; !exists {
			if len(s.order) >= maxComponents {
				r.warn("surface %q has more than %d components; the rest were ignored", s.id, maxComponents)
				return
			}
			s.order = append(s.order, id)
		}
		s.comps[id] = comp
	}
}

// normalizeComponent accepts the v0.9 shape {"id", "component": "Text", ...}
// and the older {"id", "component": {"Text": {...}}} shape.
func normalizeComponent(c any) (map[string]any, bool) {
	m, ok := c.(map[string]any)
	if !ok {
		return nil, false
	}
	id, ok := m["id"].(string)
	if !ok || id == "" {
		return nil, false
	}
	if inner, ok := m["component"].(map[string]any); ok && len(inner) == 1 {
		for typ, props := range inner {
			out := map[string]any{"id": id, "component": typ}
			if p, ok := props.(map[string]any); ok {
				for k, v := range p {
					if k != "id" && k != "component" {
						out[k] = v
					}
				}
			}
			if w, ok := m["weight"]; ok {
				out["weight"] = w
			}
			return out, true
		}
	}
	return m, true
}

func (r *renderer) updateDataModel(body any) {
	s := r.surface(body, false)
	if s == nil {
		return
	}
	b, _ := body.(map[string]any)
	if ups, ok := b["updates"].([]any); ok {
		for _, u := range ups {
			um, _ := u.(map[string]any)
			if um == nil {
				continue
			}
			r.setData(s, um)
		}
		return
	}
	r.setData(s, b)
}

func (r *renderer) setData(s *surface, u map[string]any) {
	path := "/"
	if p, ok := u["path"].(string); ok {
		path = p
	}
	val, has := u["value"]
	if !has {
		if c, ok := u["contents"]; ok { // older name
			val, has = c, true
		}
	}
	nd, err := setPointer(s.data, path, val, !has)
	if err != nil {
		r.warn("surface %q: data update at %q: %v", s.id, path, err)
		return
	}
	s.data = nd
}

// output lays out every live surface and assembles the Result.
func (r *renderer) output() Result {
	var texts []string
	var textParts []string
	hw := newHTMLWriter(r.opt.MaxOutputBytes)
	title := ""
	live := 0
	for _, id := range r.order {
		s := r.surfaces[id]
		if s == nil || s.deleted {
			continue
		}
		live++
		roots := r.buildSurface(s)
		if r.over() {
			return Result{Warnings: r.warnings, Err: r.budget.err}
		}
		if title == "" {
			title = findTitle(roots)
		}
		textParts = append(textParts, r.textSurface(s, roots))
		r.htmlSurface(hw, s, roots)
	}
	res := Result{Title: title, Warnings: r.warnings}
	if live == 0 {
		return res
	}
	res.HTML, texts = hw.finish()
	if hw.full {
		r.warn("HTML output truncated at %d bytes", r.opt.MaxOutputBytes)
	}
	res.Texts = texts
	full := joinBlocks(textParts)
	res.Text = truncateText(full, r.opt.MaxOutputBytes)
	if len(res.Text) < len(full) {
		r.warn("text output truncated at %d bytes", r.opt.MaxOutputBytes)
	}
	if strings.TrimSpace(res.Text) == "" {
		r.warn("the surface has nothing to show")
		res.Text = cutUTF8("(the surface has nothing to show)", r.opt.MaxOutputBytes)
	}
	res.Warnings = r.warnings
	return res
}

func joinBlocks(parts []string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, strings.TrimRight(p, "\n"))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n\n") + "\n"
}

const textTruncNote = "\n[… output truncated]\n"

// truncateText cuts s at a line boundary so that, with the note, it fits in
// limit bytes.
func truncateText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len(textTruncNote)
	if cut <= 0 {
		return cutUTF8(s, limit)
	}
	head := cutUTF8(s, cut)
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i]
	}
	return head + textTruncNote
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
