package render

import (
	"strings"
	"unicode/utf8"
)

// SMS encodings.
const (
	GSM7 = "GSM-7"
	UCS2 = "UCS-2"
)

// gsmBasic is the GSM 03.38 default alphabet (one septet each; ESC excluded).
const gsmBasic = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
	"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"

// gsmExtension characters cost two septets (ESC + code).
const gsmExtension = "\f^{}\\[~]|€"

// Measure reports how an SMS body is encoded and what it costs: GSM-7 when
// every character is in the GSM 03.38 alphabet (extension characters count
// two septets), else UCS-2 (UTF-16 code units; characters outside the BMP
// count two). units is the length in septets or code units; segments is
// 1 up to 160 septets / 70 units, then the concatenated segments of 153 /
// 67 (a two-unit character is never split across segments). An empty body
// costs 0 segments.
func Measure(body string) (encoding string, units, segments int) {
	gsm := true
	for _, r := range body {
		if !isGSM(r) {
			gsm = false
			break
		}
	}
	single, multi := 70, 67
	width := ucs2Width
	encoding = UCS2
	if gsm {
		single, multi, width, encoding = 160, 153, gsmWidth, GSM7
	}
	for _, r := range body {
		units += width(r)
	}
	switch {
	case units == 0:
		return encoding, 0, 0
	case units <= single:
		return encoding, units, 1
	}
	fill := 0
	segments = 1
	for _, r := range body {
		w := width(r)
		if fill+w > multi {
			segments++
			fill = 0
		}
		fill += w
	}
	return encoding, units, segments
}

func isGSM(r rune) bool {
	return strings.ContainsRune(gsmBasic, r) || strings.ContainsRune(gsmExtension, r)
}

func gsmWidth(r rune) int {
	if strings.ContainsRune(gsmExtension, r) {
		return 2
	}
	return 1
}

func ucs2Width(r rune) int {
	if r >= 0x10000 && r <= utf8.MaxRune {
		return 2
	}
	return 1
}

// smsUnits is the length of s in the units of encoding.
func smsUnits(s, encoding string) int {
	n := 0
	w := ucs2Width
	if encoding == GSM7 {
		w = gsmWidth
	}
	for _, r := range s {
		n += w(r)
	}
	return n
}

// smsNormalize replaces typographic characters that would switch a message
// to UCS-2 (and cost more than twice as much) by their GSM-7 look-alikes,
// as carriers' "smart encoding" does: curly quotes, dashes, ellipsis,
// non-breaking and other spaces, bullets, arrows.
func smsNormalize(s string) string {
	return smsReplacer.Replace(s)
}

var smsReplacer = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'", "\u2032", "'",
	"\u201C", "\"", "\u201D", "\"", "\u201E", "\"", "\u2033", "\"",
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u2026", "...", "\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2009", " ", "\u202F", " ", "\u200B", "",
	"\u2022", "-", "\u00B7", "-", "\t", " ", "\u2192", "->", "\u2190", "<-", "\u00D7", "x",
)
