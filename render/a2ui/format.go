package a2ui

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// locale holds the number and plural conventions of one language.
type locale struct {
	lang          string
	group, dec    string
	currencyAfter bool // "1.234,56 €" rather than "€1,234.56"
}

var locales = map[string]locale{
	"en": {lang: "en", group: ",", dec: "."},
	"ja": {lang: "ja", group: ",", dec: "."},
	"zh": {lang: "zh", group: ",", dec: "."},
	"ko": {lang: "ko", group: ",", dec: "."},
	"de": {lang: "de", group: ".", dec: ",", currencyAfter: true},
	"es": {lang: "es", group: ".", dec: ",", currencyAfter: true},
	"it": {lang: "it", group: ".", dec: ",", currencyAfter: true},
	"nl": {lang: "nl", group: ".", dec: ","},
	"pt": {lang: "pt", group: ".", dec: ",", currencyAfter: true},
	"fr": {lang: "fr", group: "\u202f", dec: ",", currencyAfter: true},
	"ru": {lang: "ru", group: "\u00a0", dec: ",", currencyAfter: true},
	"pl": {lang: "pl", group: "\u00a0", dec: ",", currencyAfter: true},
	"cs": {lang: "cs", group: "\u00a0", dec: ",", currencyAfter: true},
	"uk": {lang: "uk", group: "\u00a0", dec: ",", currencyAfter: true},
	"ar": {lang: "ar", group: ",", dec: "."},
}

func lookupLocale(tag string) locale {
	lang := strings.ToLower(tag)
	if i := strings.IndexAny(lang, "-_"); i >= 0 {
		lang = lang[:i]
	}
	if l, ok := locales[lang]; ok {
		return l
	}
	return locales["en"]
}

// number formats f with the given decimals (-1: up to 3, trailing zeros
// dropped, as Intl.NumberFormat does by default).
func (l locale) number(f float64, decimals int, grouping bool) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	neg := f < 0
	if math.IsInf(f, 0) {
		if neg {
			return "-∞"
		}
		return "∞"
	}
	a := math.Abs(f)
	var s string
	if decimals < 0 {
		s = strconv.FormatFloat(a, 'f', 3, 64)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
	} else {
		s = strconv.FormatFloat(a, 'f', decimals, 64)
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if grouping && len(intPart) > 3 {
		var b strings.Builder
		lead := len(intPart) % 3
		if lead > 0 {
			b.WriteString(intPart[:lead])
		}
		for i := lead; i < len(intPart); i += 3 {
			if b.Len() > 0 {
				b.WriteString(l.group)
			}
			b.WriteString(intPart[i : i+3])
		}
		intPart = b.String()
	}
	out := intPart
	if frac != "" {
		out += l.dec + frac
	}
	if neg && strings.Trim(s, "0.") != "" {
		out = "-" + out
	}
	return out
}

var currencySymbols = map[string]string{
	"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "CNY": "CN¥", "INR": "₹",
	"KRW": "₩", "AUD": "A$", "CAD": "CA$", "NZD": "NZ$", "HKD": "HK$",
	"BRL": "R$", "MXN": "MX$", "ILS": "₪", "VND": "₫", "TWD": "NT$",
	"PHP": "₱", "NGN": "₦", "UAH": "₴", "RUB": "₽", "TRY": "₺", "PLN": "zł",
}

// zeroDecimalCurrencies have no minor unit in ISO 4217.
var zeroDecimalCurrencies = map[string]bool{
	"JPY": true, "KRW": true, "VND": true, "CLP": true, "ISK": true, "UGX": true,
	"PYG": true, "XAF": true, "XOF": true, "HUF": false,
}

func (l locale) currency(f float64, code string, decimals int, grouping bool) string {
	code = strings.ToUpper(strings.TrimSpace(code))
	if decimals < 0 {
		decimals = 2
		if zeroDecimalCurrencies[code] {
			decimals = 0
		}
	}
	num := l.number(math.Abs(f), decimals, grouping)
	sign := ""
	if f < 0 && strings.Trim(num, "0.,\u202f\u00a0") != "" {
		sign = "-"
	}
	sym, ok := currencySymbols[code]
	if !ok {
		sym = code
	}
	if l.currencyAfter {
		return sign + num + "\u00a0" + sym
	}
	if !ok || len(sym) > 1 && isLetters(sym) {
		if sym == "" {
			return sign + num
		}
		return sign + sym + "\u00a0" + num
	}
	return sign + sym + num
}

func isLetters(s string) bool {
	for _, c := range s {
		if c < 'A' || c > 'Z' && c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// plural returns the CLDR plural category of n in the locale's language
// (simplified rules for the languages we name; others use English's).
func (l locale) plural(n float64) string {
	integer := n == math.Trunc(n)
	i := int64(math.Abs(n))
	switch l.lang {
	case "ja", "zh", "ko":
		return "other"
	case "fr", "pt":
		if i == 0 || i == 1 {
			return "one"
		}
		return "other"
	case "ru", "uk", "pl":
		if !integer {
			return "other"
		}
		m10, m100 := i%10, i%100
		switch {
		case l.lang != "pl" && m10 == 1 && m100 != 11:
			return "one"
		case l.lang == "pl" && i == 1:
			return "one"
		case m10 >= 2 && m10 <= 4 && (m100 < 12 || m100 > 14):
			return "few"
		default:
			return "many"
		}
	case "cs":
		switch {
		case !integer:
			return "many"
		case i == 1:
			return "one"
		case i >= 2 && i <= 4:
			return "few"
		}
		return "other"
	case "ar":
		if !integer {
			return "other"
		}
		m100 := i % 100
		switch {
		case i == 0:
			return "zero"
		case i == 1:
			return "one"
		case i == 2:
			return "two"
		case m100 >= 3 && m100 <= 10:
			return "few"
		case m100 >= 11:
			return "many"
		}
		return "other"
	}
	if integer && i == 1 && n > 0 {
		return "one"
	}
	return "other"
}

// parseTime reads an ISO 8601 date, time or date-time string, or a number of
// milliseconds since the Unix epoch. Values without a zone are in opt.TimeZone.
func parseTime(v any, opt Options) (time.Time, bool) {
	switch t := v.(type) {
	case json.Number, float64:
		ms, ok := toFloat(t)
		if !ok || math.IsNaN(ms) || math.Abs(ms) > 1e15 {
			return time.Time{}, false
		}
		return time.UnixMilli(int64(ms)), true
	case string:
		s := strings.TrimSpace(t)
		if len(s) > 64 {
			return time.Time{}, false
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
			if tm, err := time.Parse(layout, s); err == nil {
				return tm, true
			}
		}
		for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02", "2006-01"} {
			if tm, err := time.ParseInLocation(layout, s, opt.TimeZone); err == nil {
				return tm, true
			}
		}
		for _, layout := range []string{"15:04:05", "15:04"} {
			if tm, err := time.ParseInLocation(layout, s, opt.TimeZone); err == nil {
				y, m, d := opt.Now.In(opt.TimeZone).Date()
				return time.Date(y, m, d, tm.Hour(), tm.Minute(), tm.Second(), 0, opt.TimeZone), true
			}
		}
	}
	return time.Time{}, false
}

// formatTR35 formats t with a Unicode TR35 date pattern (the subset the
// catalog documents, plus era, zone and quarter fields) and the given month
// and day names. Letters it does not know are printed as they are. At most
// limit bytes of output are kept (whole UTF-8 sequences); full is the
// length of the whole output.
func formatTR35(t time.Time, pattern string, names *dateNames, limit int) (out string, full int) {
	var b strings.Builder
	write := func(s string) {
		full += len(s)
		if b.Len() < limit {
			b.WriteString(cutUTF8(s, limit-b.Len()))
		}
	}
	for i := 0; i < len(pattern); {
		c := pattern[i]
		if c == '\'' {
			if i+1 < len(pattern) && pattern[i+1] == '\'' {
				write("'")
				i += 2
				continue
			}
			j := i + 1
			start := j
			for j < len(pattern) {
				if pattern[j] == '\'' {
					if j+1 < len(pattern) && pattern[j+1] == '\'' {
						write(pattern[start : j+1])
						j += 2
						start = j
						continue
					}
					break
				}
				j++
			}
			write(pattern[start:min(j, len(pattern))])
			i = j + 1
			continue
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			write(pattern[i : i+1])
			i++
			continue
		}
		n := 1
		for i+n < len(pattern) && pattern[i+n] == c {
			n++
		}
		i += n
		write(dateField(t, c, n, names))
	}
	return b.String(), full
}

func pad(v, n int) string {
	s := strconv.Itoa(v)
	if len(s) < n {
		s = strings.Repeat("0", min(n, 64)-min(len(s), min(n, 64))) + s
	}
	return s
}

func dateField(t time.Time, c byte, n int, names *dateNames) string {
	switch c {
	case 'G':
		if t.Year() <= 0 {
			return "BC"
		}
		return "AD"
	case 'y', 'u', 'Y':
		if n == 2 {
			return pad(t.Year()%100, 2)
		}
		return pad(t.Year(), n)
	case 'Q', 'q':
		q := (int(t.Month())-1)/3 + 1
		if n >= 3 {
			return "Q" + strconv.Itoa(q)
		}
		return pad(q, n)
	case 'M', 'L':
		switch {
		case n >= 5:
			return firstRune(names.months[t.Month()-1])
		case n == 4:
			return names.months[t.Month()-1]
		case n == 3:
			return names.monthsShort[t.Month()-1]
		}
		return pad(int(t.Month()), n)
	case 'd':
		return pad(t.Day(), n)
	case 'D':
		return pad(t.YearDay(), n)
	case 'E', 'e', 'c':
		if (c == 'e' || c == 'c') && n <= 2 {
			return strconv.Itoa(int(t.Weekday()) + 1)
		}
		switch {
		case n == 4:
			return names.days[t.Weekday()]
		case n >= 5:
			return firstRune(names.days[t.Weekday()])
		}
		return names.daysShort[t.Weekday()]
	case 'a', 'b', 'B':
		if t.Hour() < 12 {
			return "AM"
		}
		return "PM"
	case 'h':
		h := t.Hour() % 12
		if h == 0 {
			h = 12
		}
		return pad(h, n)
	case 'K':
		return pad(t.Hour()%12, n)
	case 'H':
		return pad(t.Hour(), n)
	case 'k':
		h := t.Hour()
		if h == 0 {
			h = 24
		}
		return pad(h, n)
	case 'm':
		return pad(t.Minute(), n)
	case 's':
		return pad(t.Second(), n)
	case 'S':
		frac := pad(t.Nanosecond(), 9)
		if n > 9 {
			n = 9
		}
		return frac[:n]
	case 'z', 'v', 'V':
		name, _ := t.Zone()
		return name
	case 'Z', 'x', 'X', 'O':
		_, off := t.Zone()
		if off == 0 && (c == 'X' || c == 'Z' && n == 5) {
			return "Z"
		}
		sign := "+"
		if off < 0 {
			sign, off = "-", -off
		}
		h, m := off/3600, off/60%60
		if c == 'O' {
			return "GMT" + sign + strconv.Itoa(h)
		}
		if n == 1 || n == 2 && c != 'Z' {
			return sign + pad(h, 2) + pad(m, 2)
		}
		return sign + pad(h, 2) + ":" + pad(m, 2)
	}
	return strings.Repeat(string(c), n)
}
