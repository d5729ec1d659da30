package a2ui

import (
	"net/url"
	"strings"
)

// node is one rendered component instance with every dynamic value already
// evaluated. The text and HTML writers only lay nodes out.
type node struct {
	kind     string // catalog component name, or "Unknown"
	id       string
	variant  string
	text     string // Text text (Markdown), labels, tab titles
	value    string // displayed value of inputs
	url      string // safe http(s)/mailto URL, or ""
	alt      string
	glyph    string // Icon glyph
	iconName string // Icon name in words
	checked  bool
	multi    bool
	chips    bool
	options  []option
	num      float64
	min, max float64
	align    string
	justify  string
	weight   float64
	axis     string // Divider axis; List direction ("horizontal")
	disabled bool
	errors   []string // failed check messages
	titles   []string // Tabs titles, one per child
	children []*node
	content  *node // Modal content
}

type option struct {
	label    string
	selected bool
}

type frame struct{ id, base string }

// builder turns a surface's components into a node tree.
type builder struct {
	r         *renderer
	s         *surface
	ev        *evaluator
	stack     []frame
	textBytes int
	full      bool
}

// buildSurface builds the node trees of a surface: the "root" component, or
// when there is none (or it shows nothing), every component that no other
// component references.
func (r *renderer) buildSurface(s *surface) []*node {
	b := &builder{r: r, s: s, ev: &evaluator{r: r, sid: s.id, data: s.data}}
	r.at = location{surface: s.id}
	if len(s.comps) == 0 {
		r.warn("surface %q has no components", s.id)
		return nil
	}
	rootID := "root"
	if _, ok := s.comps[s.rootID]; ok && s.rootID != "" {
		rootID = s.rootID
	}
	if _, ok := s.comps[rootID]; ok {
		if n := b.build(rootID, "", 0); visible(n) {
			return []*node{n}
		}
		if len(s.comps) == 1 {
			return nil
		}
		r.warn("surface %q: the root component shows nothing; rendered the unreferenced components instead", s.id)
	}
	refs := map[string]bool{rootID: true}
	for _, id := range s.order {
		for _, c := range childRefs(s.comps[id]) {
			refs[c] = true
		}
	}
	var roots []string
	for _, id := range s.order {
		if !refs[id] {
			roots = append(roots, id)
		}
	}
	if len(roots) == 0 { // everything is referenced: a cycle through all
		roots = s.order[:1]
	}
	if _, ok := s.comps[rootID]; !ok {
		r.warn("surface %q has no component with id \"root\"; rendered %s", s.id, describeRoots(roots))
	}
	var out []*node
	for _, id := range roots {
		if n := b.build(id, "", 0); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// visible reports whether a tree shows anything.
func visible(n *node) bool {
	if n == nil {
		return false
	}
	switch n.kind {
	case "Row", "Column", "List", "Card", "Unknown", "Modal", "Tabs":
		for _, c := range n.children {
			if visible(c) {
				return true
			}
		}
		return visible(n.content)
	case "Text":
		return strings.TrimSpace(n.text) != ""
	case "Divider":
		return false
	}
	return true
}

func describeRoots(ids []string) string {
	if len(ids) == 1 {
		return "the unreferenced component " + quote(ids[0])
	}
	q := make([]string, 0, len(ids))
	for _, id := range ids {
		q = append(q, quote(id))
		if len(q) == 5 {
			q = append(q, "…")
			break
		}
	}
	return "the unreferenced components " + strings.Join(q, ", ")
}

func quote(s string) string { return `"` + clip(s, 40) + `"` }

// childRefs lists the component ids a component refers to.
func childRefs(c map[string]any) []string {
	var out []string
	add := func(v any) {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	switch ch := c["children"].(type) {
	case []any:
		for _, x := range ch {
			add(x)
		}
	case map[string]any:
		add(ch["componentId"])
		if l, ok := ch["explicitList"].([]any); ok {
			for _, x := range l {
				add(x)
			}
		}
		if t, ok := ch["template"].(map[string]any); ok {
			add(t["componentId"])
		}
	}
	for _, k := range []string{"child", "trigger", "content", "entryPointChild", "contentChild"} {
		add(c[k])
	}
	if tabs, ok := c["tabs"].([]any); ok {
		for _, t := range tabs {
			if tm, ok := t.(map[string]any); ok {
				add(tm["child"])
			}
		}
	}
	return out
}

// str evaluates a dynamic string property and bounds its size.
func (b *builder) str(c map[string]any, key, base string) string {
	v, ok := c[key]
	if !ok {
		return ""
	}
	return b.bound(b.ev.text(v, base))
}

// bound keeps s within the output bound and counts it against the
// surface's text; once the surface holds more text than its output can
// show, it keeps nothing.
func (b *builder) bound(s string) string {
	if b.full {
		return ""
	}
	limit := b.r.opt.MaxOutputBytes
	if len(s) > limit {
		s = cutUTF8(s, limit) + "…"
	}
	if !b.r.spend(len(s), 0, "its text") {
		return ""
	}
	b.textBytes += len(s)
	if b.textBytes > 2*limit && !b.full {
		b.full = true
		b.r.warn("surface %q is larger than the output limit; the rest was not rendered", b.s.id)
	}
	return s
}

func (b *builder) build(id, base string, depth int) *node {
	if b.full || !b.r.spend(0, 1, "components") {
		return nil
	}
	if depth > maxDepth {
		b.r.warn("surface %q: components nested deeper than %d were not rendered", b.s.id, maxDepth)
		return nil
	}
	c, ok := b.s.comps[id]
	if !ok {
		b.r.warn("surface %q: component %s refers to a missing component %s", b.s.id, b.parentID(), quote(id))
		return nil
	}
	for _, f := range b.stack {
		if f.id == id && f.base == base {
			b.r.warn("surface %q: component %s contains itself (a cycle); the repeat was not rendered", b.s.id, quote(id))
			return nil
		}
	}
	if b.r.nodes >= maxNodes {
		b.r.warn("more than %d components to render; the rest were not rendered", maxNodes)
		b.full = true
		return nil
	}
	b.r.nodes++
	b.stack = append(b.stack, frame{id, base})
	parent := b.r.at.component
	b.r.at.component = id
	defer func() {
		b.stack = b.stack[:len(b.stack)-1]
		b.r.at.component = parent
	}()

	typ := str(c["component"])
	n := &node{kind: typ, id: id, variant: str(c["variant"])}
	if w, ok := toFloat(c["weight"]); ok && w > 0 {
		n.weight = w
	}
	switch typ {
	case "Text":
		n.text = b.str(c, "text", base)
	case "Image":
		n.url = b.safeURL(b.str(c, "url", base), "image", true)
		n.alt = b.str(c, "description", base)
		if n.alt == "" {
			n.alt = b.a11yLabel(c, base)
		}
	case "Icon":
		b.icon(n, c, base)
	case "Video", "AudioPlayer":
		n.url = b.safeURL(b.str(c, "url", base), strings.ToLower(typ), false)
		n.alt = b.str(c, "description", base)
		if n.alt == "" {
			n.alt = b.a11yLabel(c, base)
		}
	case "Row", "Column", "List":
		n.children = b.children(c, base, depth)
		n.align, n.justify = str(c["align"]), str(c["justify"])
		if typ == "List" && str(c["direction"]) == "horizontal" {
			n.axis = "horizontal"
		}
	case "Card":
		n.children = b.kids(depth, base, c["child"])
	case "Tabs":
		tabs, _ := c["tabs"].([]any)
		for i, t := range tabs {
			tm, _ := t.(map[string]any)
			if tm == nil {
				continue
			}
			if b.full || b.r.over() {
				break
			}
			title := b.str(tm, "title", base)
			if title == "" {
				title = "Tab " + itoa(i+1)
			}
			child := b.build(str(tm["child"]), base, depth+1)
			if child == nil {
				child = &node{kind: "Column"}
			}
			n.titles = append(n.titles, title)
			n.children = append(n.children, child)
		}
	case "Modal":
		n.children = b.kids(depth, base, c["trigger"])
		if cs := b.kids(depth, base, c["content"]); len(cs) > 0 {
			n.content = cs[0]
		}
	case "Divider":
		n.axis = str(c["axis"])
	case "Button":
		b.button(n, c, base, depth)
	case "TextField":
		n.text = b.str(c, "label", base)
		n.value = b.str(c, "value", base)
		n.errors = b.checks(c, base, n.value != "")
	case "CheckBox":
		n.text = b.str(c, "label", base)
		n.checked = b.ev.boolean(c["value"], base)
	case "ChoicePicker":
		b.choice(n, c, base)
	case "Slider":
		n.text = b.str(c, "label", base)
		n.num, _ = toFloat(b.ev.value(c["value"], base))
		n.min, _ = toFloat(b.ev.value(c["min"], base))
		if mx, ok := toFloat(b.ev.value(c["max"], base)); ok {
			n.max = mx
		} else {
			n.max = max(n.num, n.min)
		}
	case "DateTimeInput":
		n.text = b.str(c, "label", base)
		n.value = b.dateTimeValue(c, base)
	default:
		b.unknown(n, c, base, depth)
	}
	return n
}

func (b *builder) parentID() string {
	if len(b.stack) == 0 {
		return "(root)"
	}
	return quote(b.stack[len(b.stack)-1].id)
}

func (b *builder) a11yLabel(c map[string]any, base string) string {
	a, _ := c["accessibility"].(map[string]any)
	if a == nil {
		return ""
	}
	return b.str(a, "label", base)
}

// kids builds the components named by ids (each a string), skipping
// missing ones.
func (b *builder) kids(depth int, base string, ids ...any) []*node {
	var out []*node
	for _, v := range ids {
		id, ok := v.(string)
		if !ok {
			if v != nil {
				b.r.warn("surface %q: component %s has a child reference that is not an id", b.s.id, b.parentID())
			}
			continue
		}
		if n := b.build(id, base, depth+1); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// children builds a ChildList: an array of ids, or a template
// {"componentId", "path"} instantiated once per item of the bound list.
func (b *builder) children(c map[string]any, base string, depth int) []*node {
	switch ch := c["children"].(type) {
	case []any:
		return b.kids(depth, base, ch...)
	case map[string]any:
		if l, ok := ch["explicitList"].([]any); ok { // older shape
			return b.kids(depth, base, l...)
		}
		tid, path := str(ch["componentId"]), str(ch["path"])
		if t, ok := ch["template"].(map[string]any); ok { // older shape
			tid, path = str(t["componentId"]), str(t["dataBinding"])
		}
		if tid == "" || path == "" {
			b.r.warn("surface %q: component %s has a children template without componentId and path", b.s.id, b.parentID())
			return nil
		}
		abs := joinPath(base, path)
		v := b.ev.lookup(path, base)
		n := listLen(v)
		// Ordering an object's members costs them all; an array, the items
		// kept. Each item's pointer is built on abs.
		cost := min(n, maxTemplateItems)
		if _, isObj := v.(map[string]any); isObj {
			cost = n
		}
		if !b.r.spend(min(n, maxTemplateItems)*(len(abs)+8), cost, "a list template") {
			return nil
		}
		paths := sortedPaths(v, strings.TrimSuffix(abs, "/"), maxTemplateItems)
		if v != nil && n == 0 {
			_, isObj := v.(map[string]any)
			if _, isList := v.([]any); !isObj && !isList {
				b.r.warn("surface %q: template list at %s is a %s, not a list", b.s.id, abs, jsonKind(v))
			}
		}
		if n > maxTemplateItems {
			b.r.warn("surface %q: list at %s has %d items; the first %d were rendered", b.s.id, abs, n, maxTemplateItems)
		}
		var out []*node
		for _, p := range paths {
			if n := b.build(tid, p, depth+1); n != nil {
				out = append(out, n)
			}
		}
		return out
	case nil:
		return nil
	default:
		b.r.warn("surface %q: component %s has children of an unknown shape", b.s.id, b.parentID())
		return nil
	}
}

func (b *builder) icon(n *node, c map[string]any, base string) {
	switch v := c["name"].(type) {
	case map[string]any:
		if _, ok := v["svgPath"]; ok {
			n.iconName = b.a11yLabel(c, base)
			return
		}
		name := b.bound(b.ev.text(v, base))
		n.glyph, n.iconName = iconGlyph(name), humanize(name)
	default:
		name := b.bound(toString(v))
		n.glyph, n.iconName = iconGlyph(name), humanize(name)
	}
	if l := b.a11yLabel(c, base); l != "" {
		n.iconName = l
	}
}

func (b *builder) button(n *node, c map[string]any, base string, depth int) {
	n.children = b.kids(depth, base, c["child"])
	if len(n.children) == 0 {
		if l := b.a11yLabel(c, base); l != "" {
			n.children = []*node{{kind: "Text", text: l}}
		} else if t := b.str(c, "text", base); t != "" { // older shape
			n.children = []*node{{kind: "Text", text: t}}
		} else {
			n.children = []*node{{kind: "Text", text: "Button"}}
		}
	}
	if v, ok := c["primary"].(bool); ok && v && n.variant == "" {
		n.variant = "primary"
	}
	action, _ := c["action"].(map[string]any)
	fc, _ := action["functionCall"].(map[string]any)
	if fc == nil && str(action["call"]) != "" {
		fc = action
	}
	if fc != nil && str(fc["call"]) == "openUrl" {
		a := b.ev.makeArgs("openUrl", fc["args"], base)
		u, _ := a.text("url")
		n.url = b.safeURL(u, "link", false)
	}
	n.disabled = len(b.checks(c, base, true)) > 0
}

// checks evaluates a Checkable component's checks and returns the messages
// of those that fail. report is false for empty inputs, which have not been
// filled in yet and so are not shown as errors.
func (b *builder) checks(c map[string]any, base string, report bool) []string {
	list, _ := c["checks"].([]any)
	var failed []string
	for _, x := range list {
		cm, _ := x.(map[string]any)
		if cm == nil {
			continue
		}
		var cond any = cm
		if v, ok := cm["condition"]; ok {
			cond = v
		} else {
			rest := map[string]any{}
			for k, v := range cm {
				if k != "message" {
					rest[k] = v
				}
			}
			cond = rest
		}
		if !b.ev.boolean(cond, base) && report {
			msg := b.bound(str(cm["message"]))
			if msg == "" {
				msg = "invalid value"
			}
			failed = append(failed, msg)
		}
	}
	return failed
}

func (b *builder) choice(n *node, c map[string]any, base string) {
	n.text = b.str(c, "label", base)
	n.multi = str(c["variant"]) == "multipleSelection"
	n.chips = str(c["displayStyle"]) == "chips"
	selected := map[string]bool{}
	switch v := b.ev.value(c["value"], base).(type) {
	case []any:
		for _, x := range v {
			if !b.r.spend(0, 1, "a ChoicePicker value") {
				return
			}
			selected[b.ev.str(x, "a ChoicePicker value")] = true
		}
	case nil:
	default:
		selected[b.ev.str(v, "a ChoicePicker value")] = true
	}
	var opts []any
	switch o := c["options"].(type) {
	case []any:
		opts = o
	case map[string]any: // bound options
		if l, ok := b.ev.value(o, base).([]any); ok {
			opts = l
		}
	}
	for _, o := range opts {
		om, _ := o.(map[string]any)
		if om == nil {
			continue
		}
		if b.full || b.r.over() {
			break
		}
		val := b.ev.str(om["value"], "a ChoicePicker option")
		label := b.str(om, "label", base)
		if label == "" {
			label = val
		}
		n.options = append(n.options, option{label: label, selected: selected[val]})
		if len(n.options) >= maxTemplateItems {
			break
		}
	}
}

func (b *builder) dateTimeValue(c map[string]any, base string) string {
	raw := b.str(c, "value", base)
	if strings.TrimSpace(raw) == "" {
		return ""
	}
	t, ok := parseTime(raw, b.r.opt)
	if !ok {
		return raw
	}
	t = t.In(b.r.opt.TimeZone)
	enableDate, _ := c["enableDate"].(bool)
	enableTime, _ := c["enableTime"].(bool)
	if !enableDate && !enableTime { // infer from the value
		enableDate = strings.Contains(raw, "-")
		enableTime = strings.Contains(raw, ":")
	}
	pattern := "d MMM yyyy"
	switch {
	case enableDate && enableTime:
		pattern = "d MMM yyyy HH:mm"
	case enableTime:
		pattern = "HH:mm"
	}
	out, _ := formatTR35(t, pattern, b.r.loc.names(), b.r.opt.MaxOutputBytes)
	return out
}

// unknown renders a component outside the catalog: its text-like
// properties, then any children it names.
func (b *builder) unknown(n *node, c map[string]any, base string, depth int) {
	typ := str(c["component"])
	if typ == "" {
		b.r.warn("surface %q: component %s has no component type; rendered its text and children", b.s.id, quote(n.id))
	} else {
		b.r.warn("surface %q: unknown component %s (%s); rendered its text and children", b.s.id, quote(typ), quote(n.id))
	}
	n.kind = "Unknown"
	for _, k := range []string{"title", "label", "text", "description", "value"} {
		v, ok := c[k]
		if !ok {
			continue
		}
		if s, ok := b.ev.value(v, base).(string); ok && strings.TrimSpace(s) != "" {
			n.children = append(n.children, &node{kind: "Text", text: b.bound(s), variant: "body"})
		}
	}
	n.children = append(n.children, b.children(c, base, depth)...)
	n.children = append(n.children, b.kids(depth, base, c["child"], c["trigger"], c["content"])...)
}

// safeURL keeps http, https and mailto URLs (not mailto for media) and drops
// anything else with a warning.
func (b *builder) safeURL(raw, what string, image bool) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	ok := err == nil
	if ok {
		switch strings.ToLower(u.Scheme) {
		case "http", "https":
			ok = u.Host != ""
		case "mailto":
			ok = !image && what == "link"
		default:
			ok = false
		}
	}
	if !ok {
		b.r.warn("surface %q: %s URL %s dropped: only http(s) and mailto URLs are allowed", b.s.id, what, quote(raw))
		return ""
	}
	return u.String()
}

// findTitle returns the first h1 or h2 text in the trees.
func findTitle(roots []*node) string {
	var walk func(n *node) string
	walk = func(n *node) string {
		if n == nil {
			return ""
		}
		if n.kind == "Text" && (n.variant == "h1" || n.variant == "h2") {
			if t := strings.TrimSpace(plainMarkdown(n.text)); t != "" {
				return strings.Join(strings.Fields(t), " ")
			}
		}
		for _, c := range n.children {
			if t := walk(c); t != "" {
				return t
			}
		}
		return ""
	}
	for _, r := range roots {
		if t := walk(r); t != "" {
			return t
		}
	}
	return ""
}
