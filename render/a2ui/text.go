package a2ui

import (
	"math"
	"strings"

	"github.com/mattn/go-runewidth"
)

// The text layout: Columns stack, Rows sit side by side when they fit the
// width and stack otherwise, Lists get bullets, h1/h2 headings are
// underlined, inputs read "Label: value", buttons "[ Label ]".

func (r *renderer) textSurface(s *surface, roots []*node) string {
	var lines []string
	if name := str(s.theme["agentDisplayName"]); name != "" {
		lines = append(lines, "From "+name, "")
	}
	for _, n := range roots {
		lines = append(lines, r.textBlock(n, r.opt.TextWidth, false)...)
	}
	return strings.Join(squeeze(lines), "\n")
}

// width is the terminal width of s. An emoji presentation selector
// (U+FE0F) widens the character before it to two columns, as terminals
// show it.
func width(s string) int {
	w, prev := 0, 0
	for _, r := range s {
		if r == 0xFE0F && prev == 1 {
			w++
			prev = 2
			continue
		}
		prev = runewidth.RuneWidth(r)
		w += prev
	}
	return w
}

// squeeze trims trailing spaces, drops leading and trailing blank lines
// and collapses runs of blank lines.
func squeeze(lines []string) []string {
	out := lines[:0:0]
	blank := true
	for _, l := range lines {
		l = strings.TrimRight(l, " ")
		if l == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func (r *renderer) textBlock(n *node, w int, inRow bool) []string {
	if n == nil {
		return nil
	}
	w = max(w, 8)
	switch n.kind {
	case "Text":
		t := plainMarkdown(n.text)
		if strings.TrimSpace(t) == "" {
			return nil
		}
		lines := wrap(t, w)
		if !inRow && (n.variant == "h1" || n.variant == "h2") {
			mark := "="
			if n.variant == "h2" {
				mark = "-"
			}
			lw := 0
			for _, l := range lines {
				lw = max(lw, width(l))
			}
			lines = append([]string{""}, lines...)
			lines = append(lines, strings.Repeat(mark, lw))
		}
		return lines
	case "Image":
		if (n.variant == "avatar" || n.variant == "icon") && strings.TrimSpace(n.alt) == "" {
			return nil // decorative: a bare avatar URL tells a reader nothing
		}
		return mediaLines("image", n.alt, n.url, w)
	case "Video":
		return mediaLines("video", n.alt, n.url, w)
	case "AudioPlayer":
		return mediaLines("audio", n.alt, n.url, w)
	case "Icon":
		if n.glyph != "" {
			return []string{n.glyph}
		}
		if n.iconName != "" {
			return []string{"[" + n.iconName + "]"}
		}
		return nil
	case "Row":
		return r.textRow(n.children, w, n.justify)
	case "List":
		if n.axis == "horizontal" {
			return r.textRow(n.children, w, "")
		}
		var lines []string
		for _, c := range n.children {
			b := r.textBlock(c, w-2, false)
			b = trimBlank(b)
			for i, l := range b {
				if i == 0 {
					lines = append(lines, "• "+l)
				} else {
					lines = append(lines, "  "+l)
				}
			}
		}
		return lines
	case "Column", "Unknown":
		return r.textColumn(n.children, w, inRow)
	case "Card":
		lines := []string{""}
		lines = append(lines, r.textColumn(n.children, w, inRow)...)
		return append(lines, "")
	case "Tabs":
		var lines []string
		for i, c := range n.children {
			title := plainMarkdown(n.titles[i])
			lines = append(lines, "", "▸ "+title)
			lines = append(lines, r.textBlock(c, w, false)...)
		}
		return append(lines, "")
	case "Modal":
		lines := []string{}
		for _, c := range n.children {
			lines = append(lines, r.textBlock(c, w, inRow)...)
		}
		if n.content != nil {
			for _, l := range r.textBlock(n.content, w-2, false) {
				lines = append(lines, "  "+l)
			}
		}
		return lines
	case "Divider":
		if n.axis == "vertical" {
			return []string{"│"}
		}
		if inRow {
			return nil
		}
		return []string{strings.Repeat("─", w)}
	case "Button":
		label := r.inlineLabel(n.children)
		s := "[ " + label + " ]"
		if n.url != "" {
			s = label + ": " + n.url
		}
		return wrapKeep(s, w)
	case "TextField":
		v := n.value
		switch {
		case v == "":
			v = "(empty)"
		case n.variant == "obscured":
			v = "••••••••"
		}
		var lines []string
		if n.variant == "longText" && n.value != "" {
			if n.text != "" {
				lines = append(lines, plainMarkdown(n.text)+":")
			}
			for _, l := range wrap(v, w-2) {
				lines = append(lines, "  "+l)
			}
		} else {
			lines = wrapKeep(labelled(n.text, v), w)
		}
		for _, e := range n.errors {
			lines = append(lines, wrap("⚠ "+e, w)...)
		}
		return lines
	case "CheckBox":
		box := "☐"
		if n.checked {
			box = "☑"
		}
		return wrap(strings.TrimSpace(box+" "+plainMarkdown(n.text)), w)
	case "ChoicePicker":
		var opts []string
		for _, o := range n.options {
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
			opts = append(opts, mark+" "+plainMarkdown(o.label))
		}
		line := labelled(n.text, strings.Join(opts, "   "))
		if width(line) <= w {
			return []string{line}
		}
		var lines []string
		if n.text != "" {
			lines = append(lines, plainMarkdown(n.text)+":")
		}
		for _, o := range opts {
			lines = append(lines, wrap("  "+o, w)...)
		}
		return lines
	case "Slider":
		return wrap(labelled(n.text, sliderBar(n, 10)+" "+r.sliderValue(n)), w)
	case "DateTimeInput":
		v := n.value
		if v == "" {
			v = "(not set)"
		}
		return wrap(labelled(n.text, v), w)
	}
	return nil
}

// textColumn stacks children; runs of sibling Rows are aligned as a table.
func (r *renderer) textColumn(children []*node, w int, inRow bool) []string {
	var lines []string
	for i := 0; i < len(children); {
		if j := rowRun(children, i); j-i >= 2 {
			lines = append(lines, r.textRowGroup(children[i:j], w)...)
			i = j
			continue
		}
		lines = append(lines, r.textBlock(children[i], w, inRow)...)
		i++
	}
	return lines
}

func labelled(label, value string) string {
	label = strings.TrimSpace(plainMarkdown(label))
	if label == "" {
		return value
	}
	return label + ": " + value
}

func sliderBar(n *node, cells int) string {
	frac := 0.0
	if n.max > n.min {
		frac = (n.num - n.min) / (n.max - n.min)
	}
	if math.IsNaN(frac) {
		frac = 0
	}
	frac = max(0, min(frac, 1))
	full := int(math.Round(frac * float64(cells)))
	return strings.Repeat("█", full) + strings.Repeat("░", cells-full)
}

func (r *renderer) sliderValue(n *node) string {
	return r.loc.number(n.num, -1, true) + " (" + r.loc.number(n.min, -1, true) + "–" + r.loc.number(n.max, -1, true) + ")"
}

// inlineLabel is the one-line text of a button's content.
func (r *renderer) inlineLabel(children []*node) string {
	var parts []string
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		switch n.kind {
		case "Text":
			if t := strings.TrimSpace(plainMarkdown(n.text)); t != "" {
				parts = append(parts, strings.Join(strings.Fields(t), " "))
			}
		case "Icon":
			s := strings.TrimSpace(n.glyph + " " + n.iconName)
			if s != "" {
				parts = append(parts, s)
			}
		case "Image":
			if n.alt != "" {
				parts = append(parts, n.alt)
			}
		default:
			for _, c := range n.children {
				walk(c)
			}
		}
	}
	for _, c := range children {
		walk(c)
	}
	if len(parts) == 0 {
		return "Button"
	}
	return strings.Join(parts, " ")
}

func mediaLines(kind, alt, u string, w int) []string {
	label := "[" + kind + "]"
	if alt = strings.TrimSpace(alt); alt != "" {
		label = "[" + kind + ": " + strings.Join(strings.Fields(alt), " ") + "]"
	}
	if u == "" {
		return wrap(label, w)
	}
	if width(label)+1+width(u) <= w {
		return []string{label + " " + u}
	}
	return append(wrap(label, w), u)
}

func trimBlank(b []string) []string {
	for len(b) > 0 && strings.TrimSpace(b[0]) == "" {
		b = b[1:]
	}
	for len(b) > 0 && strings.TrimSpace(b[len(b)-1]) == "" {
		b = b[:len(b)-1]
	}
	return b
}

// rowBlocks renders a row's children for side-by-side layout, dropping
// empty ones. kinds holds each block's component kind.
func (r *renderer) rowBlocks(children []*node, w int) (blocks [][]string, kinds []string) {
	for _, c := range children {
		b := trimBlank(r.textBlock(c, w, true))
		if len(b) > 0 {
			blocks = append(blocks, b)
			kinds = append(kinds, c.kind)
		}
	}
	return blocks, kinds
}

func rowGap(justify string) int {
	if strings.HasPrefix(justify, "space") {
		return 4
	}
	return 2
}

func blockWidths(blocks [][]string) []int {
	widths := make([]int, len(blocks))
	for i, b := range blocks {
		for _, l := range b {
			widths[i] = max(widths[i], width(l))
		}
	}
	return widths
}

func sumWidths(widths []int, gap int) int {
	total := gap * (len(widths) - 1)
	for _, x := range widths {
		total += x
	}
	return total
}

// textRow puts the children's blocks side by side when they fit in w.
// When they do not, wide media (an image with its URL) goes on its own
// lines above and the rest is tried again; failing that, the blocks stack.
func (r *renderer) textRow(children []*node, w int, justify string) []string {
	blocks, kinds := r.rowBlocks(children, w)
	return layoutRow(blocks, kinds, w, rowGap(justify), false)
}

func layoutRow(blocks [][]string, kinds []string, w, gap int, rightLast bool) []string {
	switch len(blocks) {
	case 0:
		return nil
	case 1:
		return blocks[0]
	}
	widths := blockWidths(blocks)
	if sumWidths(widths, gap) <= w {
		return sideBySide(blocks, widths, gap, rightLast)
	}
	var media []string
	var rest [][]string
	var restKinds []string
	for i, b := range blocks {
		if isMedia(kinds[i]) && widths[i] > w/3 {
			media = append(media, b...)
		} else {
			rest = append(rest, b)
			restKinds = append(restKinds, kinds[i])
		}
	}
	if media != nil && len(rest) > 0 {
		return append(media, layoutRow(rest, restKinds, w, gap, rightLast)...)
	}
	var lines []string
	for _, b := range blocks {
		lines = append(lines, b...)
	}
	return lines
}

func isMedia(kind string) bool {
	return kind == "Image" || kind == "Video" || kind == "AudioPlayer"
}

// sideBySide lays blocks out in columns of the given widths, top aligned.
func sideBySide(blocks [][]string, widths []int, gap int, rightLast bool) []string {
	height := 0
	for _, b := range blocks {
		height = max(height, len(b))
	}
	lines := make([]string, height)
	for row := range height {
		var sb strings.Builder
		for i, b := range blocks {
			cell := ""
			if row < len(b) {
				cell = b[row]
			}
			last := i == len(blocks)-1
			if last && rightLast {
				sb.WriteString(strings.Repeat(" ", widths[i]-width(cell)))
			}
			sb.WriteString(cell)
			if !last {
				sb.WriteString(strings.Repeat(" ", widths[i]-width(cell)+gap))
			}
		}
		lines[row] = strings.TrimRight(sb.String(), " ")
	}
	return lines
}

// textRowGroup lays out consecutive sibling Rows as one table when they
// have the same number of cells, so that label/value rows (a receipt's
// Subtotal, Tax, Total) line up. Otherwise each row is laid out alone.
func (r *renderer) textRowGroup(rows []*node, w int) []string {
	var all [][][]string
	var allKinds [][]string
	n := -1
	spread := true
	for _, row := range rows {
		b, k := r.rowBlocks(row.children, w)
		if n == -1 {
			n = len(b)
		}
		if len(b) != n {
			n = -2
		}
		if !strings.HasPrefix(row.justify, "space") {
			spread = false
		}
		all = append(all, b)
		allKinds = append(allKinds, k)
	}
	gap := 2
	if spread {
		gap = 4
	}
	if n >= 2 {
		widths := make([]int, n)
		for _, b := range all {
			for i, x := range blockWidths(b) {
				widths[i] = max(widths[i], x)
			}
		}
		if sumWidths(widths, gap) <= w {
			var lines []string
			for _, b := range all {
				lines = append(lines, sideBySide(b, widths, gap, spread)...)
			}
			return lines
		}
	}
	var lines []string
	for i, row := range rows {
		lines = append(lines, layoutRow(all[i], allKinds[i], w, rowGap(row.justify), false)...)
	}
	return lines
}

// wrap word-wraps s (which may hold newlines) to w columns. Words longer
// than w are broken, except URLs, which stay whole so they still work.
func wrap(s string, w int) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		words := strings.FieldsFunc(para, breakable) // not Fields: no-break spaces must hold
		if len(words) == 0 {
			out = append(out, "")
			continue
		}
		lead := para[:len(para)-len(strings.TrimLeft(para, " "))]
		if len(lead) > w/2 {
			lead = ""
		}
		line, lw, empty := lead, width(lead), true
		for _, word := range words {
			ww := width(word)
			if !empty && lw+1+ww > w {
				out = append(out, line)
				line, lw, empty = "", 0, true
			}
			if ww > w && !strings.Contains(word, "://") {
				if !empty {
					out = append(out, line)
				}
				chunks := chunkWidth(word, w)
				out = append(out, chunks[:len(chunks)-1]...)
				line = chunks[len(chunks)-1]
				lw, empty = width(line), false
				continue
			}
			if !empty {
				line += " "
				lw++
			}
			line += word
			lw += ww
			empty = false
		}
		out = append(out, line)
	}
	return out
}

// chunkWidth cuts s into pieces at most w columns wide, in one pass.
func chunkWidth(s string, w int) []string {
	var out []string
	start, cur := 0, 0
	for i, r := range s {
		rw := runewidth.RuneWidth(r)
		if cur+rw > w && i > start {
			out = append(out, s[start:i])
			start, cur = i, 0
		}
		cur += rw
	}
	return append(out, s[start:])
}

func breakable(r rune) bool { return r == ' ' || r == '\t' || r == '\u200b' }

// wrapKeep keeps s on one line when it fits, else wraps it.
func wrapKeep(s string, w int) []string {
	if width(s) <= w {
		return []string{s}
	}
	return wrap(s, w)
}
