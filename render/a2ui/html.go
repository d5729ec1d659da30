package a2ui

import (
	"html"
	"regexp"
	"strconv"
	"strings"
)

// The HTML layout is what mail clients render reliably: nested
// presentation tables, inline styles, no CSS classes, no scripts, no forms.
// Every string from the surface passes through html.EscapeString.

const (
	tbl       = `<table role="presentation" cellpadding="0" cellspacing="0" border="0"`
	colorText = "#202124"
	colorMute = "#5f6368"
	colorLine = "#dadce0"
	colorLink = "#1a73e8"
)

var hexColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// htmlWriter writes HTML within a byte budget. Every element opened through
// open is closed by finish even when the budget runs out, so the output is
// always well formed; the closing tags and the truncation note are reserved
// up front.
type htmlWriter struct {
	b       strings.Builder
	limit   int
	closers []string
	reserve int
	full    bool
	texts   []string
}

const htmlTruncNote = `<p style="margin:8px 0 0;color:#5f6368;font-size:12px">[… output truncated]</p>`

func newHTMLWriter(limit int) *htmlWriter {
	return &htmlWriter{limit: limit, reserve: len(htmlTruncNote)}
}

func (w *htmlWriter) fits(n int) bool {
	if w.full {
		return false
	}
	if w.b.Len()+n+w.reserve > w.limit {
		w.full = true
		return false
	}
	return true
}

// open writes an opening tag and remembers its closing tag.
func (w *htmlWriter) open(open, close string) bool {
	if !w.fits(len(open) + len(close)) {
		return false
	}
	w.b.WriteString(open)
	w.closers = append(w.closers, close)
	w.reserve += len(close)
	return true
}

func (w *htmlWriter) close() {
	c := w.closers[len(w.closers)-1]
	w.closers = w.closers[:len(w.closers)-1]
	w.reserve -= len(c)
	w.b.WriteString(c)
}

// leaf writes a complete element and records the texts it shows.
func (w *htmlWriter) leaf(s string, texts ...string) bool {
	if !w.fits(len(s)) {
		return false
	}
	w.b.WriteString(s)
	for _, t := range texts {
		if t = strings.TrimSpace(t); t != "" {
			w.texts = append(w.texts, t)
		}
	}
	return true
}

func (w *htmlWriter) finish() (string, []string) {
	for len(w.closers) > 0 {
		w.close()
	}
	if w.full {
		w.b.WriteString(htmlTruncNote)
	}
	out := w.b.String()
	if len(out) > w.limit { // only when the limit is smaller than the note
		out = cutUTF8(out, w.limit)
	}
	return out, w.texts
}

func esc(s string) string { return html.EscapeString(s) }

// htmlCtx carries per-surface styling.
type htmlCtx struct {
	r       *renderer
	w       *htmlWriter
	primary string
}

func (r *renderer) htmlSurface(w *htmlWriter, s *surface, roots []*node) {
	if len(roots) == 0 {
		return
	}
	c := &htmlCtx{r: r, w: w, primary: colorLink}
	if p := str(s.theme["primaryColor"]); hexColor.MatchString(p) {
		c.primary = p
	}
	if !w.open(tbl+` width="100%" style="border-collapse:collapse;max-width:640px;margin:0 0 16px;font-family:Arial,Helvetica,sans-serif;font-size:14px;line-height:20px;color:`+colorText+`"><tr><td style="padding:0">`, "</td></tr></table>\n") {
		return
	}
	defer w.close()
	if name := str(s.theme["agentDisplayName"]); name != "" {
		w.leaf(`<div style="font-size:12px;color:`+colorMute+`;margin:0 0 4px">From `+esc(name)+`</div>`, "From "+name)
	}
	for _, n := range roots {
		c.node(n, false)
	}
}

var headingStyle = map[string]string{
	"h1": "font-size:26px;line-height:32px;font-weight:bold;margin:0 0 8px",
	"h2": "font-size:21px;line-height:28px;font-weight:bold;margin:0 0 6px",
	"h3": "font-size:17px;line-height:24px;font-weight:bold;margin:0 0 4px",
	"h4": "font-size:15px;line-height:22px;font-weight:bold;margin:0 0 4px",
	"h5": "font-size:14px;line-height:20px;font-weight:bold;margin:0 0 2px",
}

func (c *htmlCtx) node(n *node, inRow bool) {
	if n == nil || c.w.full {
		return
	}
	w := c.w
	switch n.kind {
	case "Text":
		if strings.TrimSpace(n.text) == "" {
			return
		}
		var vis []string
		body := markdownHTML(n.text, func(s string) { vis = append(vis, s) }, w.limit)
		if st, ok := headingStyle[n.variant]; ok {
			w.leaf(`<`+n.variant+` style="`+st+`;color:`+colorText+`">`+body+`</`+n.variant+`>`, vis...)
			return
		}
		style := "margin:0"
		if n.variant == "caption" {
			style = "margin:0;font-size:12px;line-height:16px;color:" + colorMute
		}
		w.leaf(`<div style="`+style+`">`+body+`</div>`, vis...)
	case "Image":
		c.image(n, inRow)
	case "Video", "AudioPlayer":
		what, glyph := "Video", "▶"
		if n.kind == "AudioPlayer" {
			what, glyph = "Audio", "♪"
		}
		label := what
		if n.alt != "" {
			label = what + ": " + n.alt
		}
		if n.url == "" {
			w.leaf(`<div style="color:`+colorMute+`">`+glyph+" "+esc(label)+` (unavailable)</div>`, label)
			return
		}
		w.leaf(`<div><a href="`+esc(n.url)+`" style="color:`+c.primary+`">`+glyph+" "+esc(label)+`</a></div>`, label)
	case "Icon":
		if n.glyph != "" {
			w.leaf(`<span style="font-size:18px;line-height:20px" title="` + esc(n.iconName) + `">` + esc(n.glyph) + `</span>`)
		} else if n.iconName != "" {
			w.leaf(`<span style="font-size:12px;color:`+colorMute+`">[`+esc(n.iconName)+`]</span>`, "["+n.iconName+"]")
		}
	case "Row":
		c.row(n.children, n.justify, n.align)
	case "List":
		if n.axis == "horizontal" {
			c.row(n.children, "", n.align)
			return
		}
		c.column(n.children, n.align, "padding:6px 0;border-bottom:1px solid #f1f3f4")
	case "Column", "Unknown":
		c.column(n.children, n.align, "padding:2px 0")
	case "Card":
		if !w.open(tbl+` width="100%" style="border-collapse:separate;border:1px solid `+colorLine+`;border-radius:8px;background:#ffffff;margin:4px 0"><tr><td style="padding:16px">`, "</td></tr></table>") {
			return
		}
		for _, ch := range n.children {
			c.node(ch, false)
		}
		w.close()
	case "Tabs":
		if !w.open(`<div>`, `</div>`) {
			return
		}
		for i, ch := range n.children {
			t := n.titles[i]
			var vis []string
			body := markdownHTML(t, func(s string) { vis = append(vis, s) }, w.limit)
			w.leaf(`<div style="font-weight:bold;color:`+c.primary+`;border-bottom:2px solid `+c.primary+`;padding:4px 0;margin:8px 0 6px">`+body+`</div>`, vis...)
			c.node(ch, false)
		}
		w.close()
	case "Modal":
		for _, ch := range n.children {
			c.node(ch, inRow)
		}
		if n.content != nil {
			if !w.open(tbl+` width="100%" style="border-collapse:separate;border:1px solid `+colorLine+`;border-radius:8px;margin:8px 0"><tr><td style="padding:12px">`, "</td></tr></table>") {
				return
			}
			c.node(n.content, false)
			w.close()
		}
	case "Divider":
		if n.axis == "vertical" {
			w.leaf(`<div style="border-left:1px solid ` + colorLine + `;height:20px;margin:0 4px"></div>`)
			return
		}
		w.leaf(`<hr style="border:0;border-top:1px solid ` + colorLine + `;margin:8px 0;height:0">`)
	case "Button":
		c.button(n)
	case "TextField":
		c.field(n)
	case "CheckBox":
		box := "☐"
		if n.checked {
			box = "☑"
		}
		label := plainMarkdown(n.text)
		w.leaf(`<div><span style="font-size:16px">`+box+`</span> `+esc(label)+`</div>`, label)
	case "ChoicePicker":
		c.choice(n)
	case "Slider":
		c.slider(n)
	case "DateTimeInput":
		label := plainMarkdown(n.text)
		v := n.value
		if v == "" {
			w.leaf(c.labelHTML(label)+`<div style="color:`+colorMute+`">(not set)</div>`, label)
			return
		}
		w.leaf(c.labelHTML(label)+`<div style="font-weight:bold">`+esc(v)+`</div>`, label, v)
	}
}

func (c *htmlCtx) labelHTML(label string) string {
	if strings.TrimSpace(label) == "" {
		return ""
	}
	return `<div style="font-size:12px;line-height:16px;color:` + colorMute + `">` + esc(label) + `</div>`
}

var imageWidth = map[string]int{
	"icon": 24, "avatar": 48, "smallFeature": 120, "mediumFeature": 300,
	"largeFeature": 560, "header": 600,
}

func (c *htmlCtx) image(n *node, inRow bool) {
	alt := strings.Join(strings.Fields(n.alt), " ")
	if n.url == "" {
		if alt != "" {
			c.w.leaf(`<div style="color:`+colorMute+`">[image: `+esc(alt)+`]</div>`, "[image: "+alt+"]")
		}
		return
	}
	wd, ok := imageWidth[n.variant]
	if !ok {
		wd = 300 // mediumFeature, the catalog's default
		if inRow {
			wd = 80 // beside other content, a thumbnail
		}
	}
	radius := "4px"
	if n.variant == "avatar" {
		radius = "50%"
	}
	height := ""
	if n.variant == "avatar" || n.variant == "icon" {
		height = ` height="` + strconv.Itoa(wd) + `"`
	}
	c.w.leaf(`<img src="` + esc(n.url) + `" alt="` + esc(alt) + `" width="` + strconv.Itoa(wd) + `"` + height +
		` style="display:block;max-width:100%;border:0;border-radius:` + radius + `;object-fit:cover">`)
}

func cellAlign(a string) string {
	switch a {
	case "center":
		return "center"
	case "end":
		return "right"
	}
	return "left"
}

func (c *htmlCtx) column(children []*node, align, cellStyle string) {
	if len(children) == 0 {
		return
	}
	if !c.w.open(tbl+` width="100%" style="border-collapse:collapse">`, "</table>") {
		return
	}
	for i := 0; i < len(children); {
		ch := children[i]
		j := rowRun(children, i)
		if !c.w.open(`<tr><td align="`+cellAlign(align)+`" style="`+cellStyle+`">`, "</td></tr>") {
			break
		}
		if j-i >= 2 {
			c.rowGroup(children[i:j])
			i = j
		} else {
			c.node(ch, false)
			i++
		}
		c.w.close()
	}
	c.w.close()
}

// rowRun returns the end of the run of sibling Rows starting at i that have
// the same cell kinds (label/value rows), so they can share columns.
func rowRun(children []*node, i int) int {
	sig := rowSignature(children[i])
	if sig == "" {
		return i + 1
	}
	j := i + 1
	for j < len(children) && rowSignature(children[j]) == sig {
		j++
	}
	return j
}

func rowSignature(n *node) string {
	if n == nil || n.kind != "Row" || len(n.children) < 2 {
		return ""
	}
	var b strings.Builder
	for _, ch := range n.children {
		if ch.weight > 0 {
			return ""
		}
		b.WriteString(cellClass(ch.kind))
		b.WriteByte('/')
	}
	return b.String()
}

// cellClass groups component kinds by how they sit in a table cell.
func cellClass(kind string) string {
	switch kind {
	case "Image", "Video", "AudioPlayer":
		return "media"
	case "Icon", "Divider", "Button":
		return kind
	case "Row", "Column", "List", "Card", "Tabs", "Modal", "Unknown":
		return "box"
	}
	return "leaf"
}

// rowGroup lays out sibling Rows as the rows of one table.
func (c *htmlCtx) rowGroup(rows []*node) {
	tw := ""
	for _, r := range rows {
		if strings.HasPrefix(r.justify, "space") || r.justify == "stretch" {
			tw = ` width="100%"`
		}
	}
	if !c.w.open(tbl+tw+` style="border-collapse:collapse">`, "</table>") {
		return
	}
	for i, r := range rows {
		pad := "4px"
		if i == len(rows)-1 {
			pad = "0"
		}
		if !c.w.open(`<tr>`, `</tr>`) {
			break
		}
		c.rowCells(r.children, r.justify, r.align, pad)
		c.w.close()
	}
	c.w.close()
}

func (c *htmlCtx) row(children []*node, justify, align string) {
	if len(children) == 0 {
		return
	}
	spread := strings.HasPrefix(justify, "space") || justify == "stretch"
	totalWeight := 0.0
	for _, ch := range children {
		totalWeight += ch.weight
	}
	tw := ""
	if spread || totalWeight > 0 {
		tw = ` width="100%"`
	}
	if !c.w.open(tbl+tw+` style="border-collapse:collapse"><tr>`, "</tr></table>") {
		return
	}
	c.rowCells(children, justify, align, "0")
	c.w.close()
}

// rowCells writes one <td> per child of a Row. bottom is the cell's bottom
// padding.
func (c *htmlCtx) rowCells(children []*node, justify, align, bottom string) {
	valign := "top"
	switch align {
	case "center":
		valign = "middle"
	case "end":
		valign = "bottom"
	}
	spread := strings.HasPrefix(justify, "space") || justify == "stretch"
	totalWeight := 0.0
	for _, ch := range children {
		totalWeight += ch.weight
	}
	for i, ch := range children {
		al := "left"
		switch {
		case spread && len(children) > 1 && i == len(children)-1:
			al = "right"
		case spread && i > 0:
			al = "center"
		case justify == "center":
			al = "center"
		case justify == "end":
			al = "right"
		}
		wattr := ""
		if totalWeight > 0 && ch.weight > 0 {
			wattr = ` width="` + strconv.Itoa(int(100*ch.weight/totalWeight)) + `%"`
		}
		right := "12px"
		if i == len(children)-1 {
			right = "0"
		}
		if !c.w.open(`<td valign="`+valign+`" align="`+al+`"`+wattr+` style="padding:0 `+right+` `+bottom+` 0">`, "</td>") {
			break
		}
		c.node(ch, true)
		c.w.close()
	}
}

func (c *htmlCtx) button(n *node) {
	label := c.r.inlineLabel(n.children)
	style := "display:inline-block;padding:8px 16px;border-radius:4px;font-weight:bold;text-decoration:none;"
	switch {
	case n.variant == "borderless":
		style += "padding:8px 0;color:" + c.primary
	case n.variant == "primary" && n.url != "":
		style += "background:" + c.primary + ";color:#ffffff;border:1px solid " + c.primary
	case n.variant == "primary":
		style += "background:#e8f0fe;color:" + colorText + ";border:1px solid " + c.primary
	default:
		style += "background:#ffffff;color:" + colorText + ";border:1px solid " + colorLine
	}
	if n.url != "" {
		if n.variant == "" || n.variant == "default" {
			style = "display:inline-block;padding:8px 16px;border-radius:4px;font-weight:bold;text-decoration:none;background:" + c.primary + ";color:#ffffff;border:1px solid " + c.primary
		}
		c.w.leaf(`<a href="`+esc(n.url)+`" style="`+style+`">`+esc(label)+`</a>`, label)
		return
	}
	if n.disabled {
		style += ";opacity:0.6"
	}
	// Not a link and not a form control: the action needs the app.
	c.w.leaf(`<span title="This action is available in the app" style="`+style+`">`+esc(label)+`</span>`, label)
}

func (c *htmlCtx) field(n *node) {
	label := plainMarkdown(n.text)
	var vis []string
	if strings.TrimSpace(label) != "" {
		vis = append(vis, label)
	}
	var box string
	switch {
	case n.value == "":
		box = `<span style="color:#9aa0a6">(empty)</span>`
	case n.variant == "obscured":
		box = "••••••••"
	default:
		lines := strings.Split(n.value, "\n")
		for i := range lines {
			vis = append(vis, lines[i])
			lines[i] = esc(lines[i])
		}
		box = strings.Join(lines, "<br>")
	}
	var errs strings.Builder
	for _, e := range n.errors {
		errs.WriteString(`<div style="font-size:12px;color:#c5221f">⚠ ` + esc(e) + `</div>`)
		vis = append(vis, e)
	}
	c.w.leaf(c.labelHTML(label)+`<div style="border:1px solid `+colorLine+`;border-radius:4px;padding:6px 8px;margin:2px 0">`+box+`</div>`+errs.String(), vis...)
}

func (c *htmlCtx) choice(n *node) {
	label := plainMarkdown(n.text)
	vis := []string{label}
	var b strings.Builder
	b.WriteString(c.labelHTML(label))
	b.WriteString(`<div>`)
	for i, o := range n.options {
		ol := plainMarkdown(o.label)
		vis = append(vis, ol)
		if n.chips {
			st := "display:inline-block;padding:4px 12px;margin:2px 4px 2px 0;border-radius:16px;border:1px solid " + colorLine
			if o.selected {
				st += ";background:#e8f0fe;border-color:" + c.primary + ";font-weight:bold"
			}
			mark := ""
			if o.selected {
				mark = "✓ "
			}
			b.WriteString(`<span style="` + st + `">` + mark + esc(ol) + `</span>`)
			continue
		}
		mark := "○"
		if n.multi {
			mark = "☐"
		}
		if o.selected {
			mark = "◉"
			if n.multi {
				mark = "☑"
			}
		}
		if i > 0 {
			b.WriteString(`<br>`)
		}
		weight := ""
		if o.selected {
			weight = ` style="font-weight:bold"`
		}
		b.WriteString(`<span` + weight + `>` + mark + " " + esc(ol) + `</span>`)
	}
	b.WriteString(`</div>`)
	c.w.leaf(b.String(), vis...)
}

func (c *htmlCtx) slider(n *node) {
	label := plainMarkdown(n.text)
	frac := 0.0
	if n.max > n.min {
		frac = (n.num - n.min) / (n.max - n.min)
	}
	frac = max(0, min(frac, 1))
	if frac != frac { // NaN
		frac = 0
	}
	pct := int(frac*100 + 0.5)
	value := c.r.sliderValue(n)
	var bar string
	switch pct {
	case 0:
		bar = `<td style="background:#e8eaed;height:6px;font-size:0;line-height:0">&nbsp;</td>`
	case 100:
		bar = `<td style="background:` + c.primary + `;height:6px;font-size:0;line-height:0">&nbsp;</td>`
	default:
		bar = `<td width="` + strconv.Itoa(pct) + `%" style="background:` + c.primary + `;height:6px;font-size:0;line-height:0">&nbsp;</td>` +
			`<td width="` + strconv.Itoa(100-pct) + `%" style="background:#e8eaed;height:6px;font-size:0;line-height:0">&nbsp;</td>`
	}
	c.w.leaf(c.labelHTML(label)+tbl+` width="100%" style="border-collapse:collapse;margin:4px 0"><tr>`+bar+`</tr></table>`+
		`<div style="font-size:12px;color:`+colorMute+`">`+esc(value)+`</div>`, label, value)
}
