package email

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Signatures, rules and banners. Every look-ahead here is bounded
// (trailerLookahead lines), every expression runs on one line of at most
// maxHeaderLen bytes, so trimming stays linear (TestTrimLinearTime).

// ruleKind sorts the lines made only of rule characters.
type ruleKind int

const (
	notRule ruleKind = iota
	// strongRule is "--" alone on its line, with or without the trailing
	// space (or no-break space) of RFC 3676's "-- ": a signature follows.
	strongRule
	// weakRule is a longer rule ("-----", "_____", "* * *", "......",
	// "~~~~", a lone em dash): a signature, a quoted message or just the
	// writer's own divider may follow; findQuoteStart decides by what does.
	weakRule
)

// ruleChars are what rules are drawn with; a rule line holds nothing else
// but spaces.
const ruleChars = "-_=+~#*.·•…—–ᐧ,"

// isSpaceLike: white space, the no-break space and the invisible
// direction marks that right-to-left clients put around lines.
func isSpaceLike(r rune) bool {
	switch r {
	case '\u00a0', '\u200b', '\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e',
		'\u2066', '\u2067', '\u2068', '\u2069', '\ufeff':
		return true
	}
	return unicode.IsSpace(r)
}

func trimSpaceLike(s string) string { return strings.TrimFunc(s, isSpaceLike) }

// classifyRule sorts l. A line with two or more runs of rule characters
// separated by spaces ("--------  ----") is a plain-text table's rule, not
// a divider; "- - - -" and "* * *" (runs of one) are dividers.
func classifyRule(l string) ruleKind {
	if len(l) > 300 {
		return notRule
	}
	t := trimSpaceLike(l)
	if t == "" {
		return notRule
	}
	if t == "--" {
		return strongRule
	}
	weight, runs, longRuns, run := 0, 0, 0, 0
	for _, r := range t {
		if isSpaceLike(r) {
			if run > 0 {
				runs++
				if run >= 2 {
					longRuns++
				}
			}
			run = 0
			continue
		}
		if !strings.ContainsRune(ruleChars, r) {
			return notRule
		}
		run++
		weight++
		if r == '…' {
			weight += 2
		}
	}
	runs++
	if run >= 2 {
		longRuns++
	}
	if runs > 1 && longRuns > 1 {
		return notRule
	}
	if weight >= 3 || t == "__" || t == "—" || t == "–" || t == "ᐧ" {
		return weakRule
	}
	return notRule
}

// ruleInText reports whether the weak rule at i belongs to the writer's
// text rather than opening a signature or a quoted message: a Markdown
// setext heading's underline ("Summary\n-------\n\n…"), a plain-text
// table's rule under its header row with rows right below, or a thematic
// break (blank lines around it) with prose after it. A rule right under
// the reply and right above other text ("Reply\n------\nquoted") is a
// separator.
func ruleInText(lines []string, i int) bool {
	t := trimSpaceLike(lines[i])
	underline := strings.Trim(t, "-") == "" || strings.Trim(t, "=") == ""
	above := ""
	if i > 0 && !isQuoteLine(lines[i-1]) {
		above = trimSpaceLike(lines[i-1])
	}
	below := 0 // non-blank lines right below, without a blank line between
	for k := i + 1; k < len(lines) && k <= i+3 && trimSpaceLike(lines[k]) != "" && !isQuoteLine(lines[k]); k++ {
		below++
	}
	if underline && above != "" && headingLike(above) {
		if strings.HasPrefix(above, "#") || below == 0 || below >= 2 && len(strings.Fields(above)) >= 2 {
			return true
		}
	}
	return above == "" && !signatureFollows(lines, i)
}

// headingLike: a short line without closing punctuation.
func headingLike(l string) bool {
	if strings.HasPrefix(l, "#") {
		return true
	}
	last, _ := utf8.DecodeLastRuneInString(l)
	return utf8.RuneCountInString(l) <= 80 && !strings.ContainsRune(".,;:!?", last)
}

// isProse: a line of running text, not of a signature block (names,
// titles, phone numbers, addresses, links, short labels): four words or
// more, long or ending a sentence; or a list item.
func isProse(l string) bool {
	t := trimSpaceLike(l)
	if listItemRe.MatchString(t) {
		return true
	}
	if len(strings.Fields(t)) < 4 {
		return false // a name, a title, an address, a link
	}
	last, _ := utf8.DecodeLastRuneInString(t)
	return utf8.RuneCountInString(t) > 60 || strings.ContainsRune(".!?", last)
}

var listItemRe = regexp.MustCompile(`^(?:\d{1,3}[.)]|[-*•+]|--?>)\s`)

// trailerLookahead bounds how many lines signatureFollows and
// trailerAt read.
const trailerLookahead = 8

// signatureFollows reports whether what follows the weak rule at i reads
// like a signature: the next non-blank lines (up to three) are short and
// not prose, or nothing follows at all.
func signatureFollows(lines []string, i int) bool {
	seen := 0
	for k := i + 1; k < len(lines) && k <= i+trailerLookahead && seen < 3; k++ {
		t := trimSpaceLike(lines[k])
		if t == "" {
			continue
		}
		if isQuoteLine(lines[k]) {
			break
		}
		if isProse(t) {
			return false
		}
		seen++
	}
	return true
}

// Signature lines matched on their own: "Sent from my iPhone" and the
// like in the languages where the device-line rule (isDeviceLine) does not
// see them, and the legal footers' headings.
var signatureRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^[\s(<*]*(?:sent|envoyé|enviado|inviato|gesendet|verzonden|verstuurd|skickat|sendt|wysłane|отправлено|odesláno|lähetetty|gönderildi)\s+(?:from|with|via|by|using|depuis|de|desde|do|da|dal|von|vanaf|met|från|fra|z|с|ze|iphone'?dan)\s[^,;:!?]{1,60}[)>.*]*\s*$`),
	regexp.MustCompile(`(?i)^[\s(<*]*(?:get\s+outlook\s+for\s[^,;:!?]{1,40}|von\s+meinem\s[^,;:!?]{1,40}\s+gesendet|diese\s+nachricht\s+wurde\s+von\s[^,;:!?]+\s+gesendet|\S+\s+from\s+mobile)[\s.!)>*]*$`),
	regexp.MustCompile(`^\s*(?:iPhone|iPad|Android|スマートフォン)から送信\s*$|^\s*(?:发自我的|來自我的|从我的|從我的)\s*\S+`),
	// Legal footers: a heading of its own ("Disclaimer", "CONFIDENTIALITY
	// NOTICE:") and the notice under it.
	regexp.MustCompile(`(?i)^[\s*_]*(?:disclaimer|legal\s+disclaimer|confidentiality\s+notice|haftungsausschluss|rechtlicher\s+hinweis|avertissement|clause\s+de\s+confidentialité|aviso\s+legal|aviso\s+de\s+confidencialidad|avviso\s+di\s+riservatezza|disclaimer\s+legale)[\s*_:]*$`),
}

// urlInAnglesRe strips "<https://…>" before signature matching ("Get
// Outlook for iOS<https://aka.ms/o0ukef>").
var urlInAnglesRe = regexp.MustCompile(`<https?://[^>\s]*>`)

func isSignatureLine(l string) bool {
	if len(l) > maxHeaderLen {
		return false
	}
	if classifyRule(l) == strongRule {
		return true
	}
	if !maySign(l) {
		return false
	}
	if strings.Contains(l, "<http") {
		l = urlInAnglesRe.ReplaceAllString(l, "")
	}
	for _, re := range signatureRes {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// maySign is a cheap look for the words every signatureRes rule needs.
func maySign(l string) bool {
	t := strings.TrimSpace(l)
	if len(t) > 200 {
		return false
	}
	return containsAny(strings.ToLower(t), signatureWords...)
}

var signatureWords = []string{"sent ", "envoy", "enviad", "inviato", "gesendet", "verzonden", "verstuurd", "skickat", "sendt ",
	"wysłane", "отправлено", "odesláno", "lähetetty", "gönderildi", "outlook", "from my", "from mobile", "から送信",
	"发自", "來自", "从我的", "從我的", "iphone'dan", "disclaimer", "confidential", "haftungsausschluss", "hinweis",
	"avertissement", "aviso", "avviso"}

// Mobile and desktop clients' lines in any language: "Sent from my
// iPhone", "Von meinem iPhone gesendet", "Trimis de pe iPhone-ul meu",
// "iPhone'umdan gönderildi", "Outlook voor Android downloaden". A device
// line is short and names a client or a device (clientNames,
// deviceNames) beside a word of sending or getting (deviceVerbs, among its
// first three words unless it has at most six), or names two of them
// ("Outlook for iOS"). A clause after a comma makes it a sentence ("Sent
// from my desk, where typing is easier."); so do a question and an
// address.
var (
	// clientNames are names that are seldom anything else; languages glue
	// endings to them ("iPhonesta", "iPhonu", "iPhone에서").
	clientNames = []string{"iphon", "ipad", "android", "blackberry", "outlook", "samsung", "huawei", "xiaomi",
		"gmail", "protonmail", "tutanota", "typeapp", "bluemail", "yahoo"}
	// deviceNames count only beside a word of sending: alone they are
	// everyday words ("Windows", "Spark", "Galaxy").
	deviceNames = []string{"galaxy", "pixel", "spark", "windows", "courrier", "correo", "mailbox", "proton", "aol",
		"ios", "sony", "xperia", "nokia", "motorola", "oneplus", "oppo", "honor", "htc", "lg", "thunderbird",
		"airmail", "fairemail", "edison", "kindle", "surface", "lenovo", "asus", "vivo", "realme", "zte", "alcatel",
		"nexus", "mobile", "smartphone", "phone", "handy", "telefon", "telefono", "teléfono", "telefone", "móvil",
		"movil", "cellulare", "mobil", "mobilní", "mobiltelefon", "mobiltelefonen", "mobilgerät", "matkapuhelin",
		"tablet", "device", "appareil", "gerät", "dispositivo", "terminal", "телефона", "телефон", "手机", "携帯"}
	deviceVerbs = []string{"sent", "envoyé", "enviado", "enviada", "enviat", "inviato", "inviata", "gesendet",
		"verzonden", "verstuurd", "skickat", "sendt", "lähetetty", "wysłane", "wysłano", "odesláno", "odoslané",
		"elküldve", "trimis", "отправлено", "надіслано", "изпратено", "послато", "poslano", "poslato", "στάλθηκε",
		"gönderildi", "נשלח", "أرسلت", "أُرسلت", "gửi", "dikirim", "dihantar", "saadetud", "išsiųsta", "nosūtīts",
		"get", "download", "obtenir", "télécharger", "obtener", "descargar", "scarica", "downloaden", "hämta",
		"hent", "pobierz", "получить", "obter", "baixar", "hanki", "beziehen", "herunterladen"}
)

// isDeviceLine reports whether l is a client's or device's line.
func isDeviceLine(l string) bool {
	if len(l) > 300 {
		return false
	}
	if strings.Contains(l, "<http") {
		l = urlInAnglesRe.ReplaceAllString(l, "")
	}
	t := strings.ToLower(trimSpaceLike(l))
	if t == "" || utf8.RuneCountInString(t) > 100 || strings.ContainsAny(t, "?？@") || strings.Contains(t, ", ") ||
		strings.Contains(t, "; ") {
		return false
	}
	words := strings.FieldsFunc(t, func(r rune) bool { return isSpaceLike(r) || r == '-' || r == '\'' || r == '’' })
	if len(words) == 0 || len(words) > 14 {
		return false
	}
	verb, names := false, 0
	for i, w := range words {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		verb = verb || (i < 3 || len(words) <= 6) && isOneOf(w, deviceVerbs)
		if isClientName(w) || isOneOf(w, deviceNames) {
			names++
		}
	}
	verb = verb || containsAny(t, cjkDeviceVerbs...)
	last, _ := utf8.DecodeLastRuneInString(t)
	switch {
	case verb && names > 0:
		return true
	case names >= 2 && len(words) <= 6 && !strings.ContainsRune(".!", last):
		// Two names without a word of sending: "Outlook for iOS",
		// "Yahoo Mail for Android".
		return true
	}
	return false
}

// cjkDeviceVerbs are found inside words ("iPhone에서 보냄", "iOS 版 Outlook
// を入手").
var cjkDeviceVerbs = []string{"보냄", "送信", "入手", "发自", "發自", "获取", "取得", "다운로드", "받기"}

func isOneOf(w string, words []string) bool {
	for _, x := range words {
		if w == x {
			return true
		}
	}
	return false
}

// isClientName: one of clientNames, or one of them with an ending glued on.
func isClientName(w string) bool {
	for _, x := range clientNames {
		if strings.HasPrefix(w, x) {
			return true
		}
	}
	return false
}

// trailerAt reports whether the line at i is followed only by what ends a
// reply: blank lines, short signature-like lines, other device lines, a
// quoted block or the opening of one; no more of the writer's prose.
func trailerAt(lines []string, i int) bool {
	seen := 0
	for k := i + 1; k < len(lines); k++ {
		if k > i+4*trailerLookahead {
			return false
		}
		t := trimSpaceLike(lines[k])
		if t == "" {
			continue
		}
		if isQuoteLine(lines[k]) || classifyRule(lines[k]) != notRule || isSignatureLine(lines[k]) ||
			isOriginalMessage(lines[k]) || headerBlock(lines[k:]) > 0 || attributionAt(lines, k) > 0 {
			return true
		}
		if isDeviceLine(lines[k]) {
			continue
		}
		if isProse(t) {
			return false
		}
		seen++
		if seen > trailerLookahead {
			return false
		}
	}
	return true
}

// deviceSignatureAt: a device line that ends the writer's text.
func deviceSignatureAt(lines []string, i int) bool {
	return isDeviceLine(lines[i]) && trailerAt(lines, i)
}

// nameSignatureRe: a last line that is only the writer's name behind a
// dash, a tilde or a slash ("-Abhishek Kona", "- roman", "/John", "~ Sam",
// "—Ryan"); signOffWords are not names ("/ Greetings" is a sign-off, and
// sign-offs are the writer's text).
var (
	nameSignatureRe = regexp.MustCompile(`^[-–—~/]\s?(?:\p{Lu}[\p{L}.'’-]*(?:\s+\p{Lu}[\p{L}.'’-]*){0,3}|\p{L}[\p{L}.'’-]{0,20})$`)
	signOffWords    = []string{"greetings", "regards", "thanks", "thank", "cheers", "best", "love", "grüße", "gruß", "grüsse",
		"salut", "salutations", "saludos", "saluti", "groeten", "groet", "hilsen", "mvh", "hälsningar", "pozdrawiam",
		"pozdrav", "pozdravy", "terveisin", "üdv", "ciao", "cordialement", "merci", "danke", "gracias", "grazie"}
)

// cutSignature drops what the writer's own lines end with that is not
// theirs: a signature from its first line on (a "-- " marker, a client's
// line, a legal footer's heading), then a last line that is only a dashed
// name.
func cutSignature(lines []string) []string {
	own := false
	for i, l := range lines {
		if isSignatureLine(l) || own && deviceSignatureAt(lines, i) {
			lines = lines[:i]
			break
		}
		own = own || trimSpaceLike(l) != ""
	}
	return cutNameSignature(lines)
}

// cutNameSignature drops a last line that is only a dashed name, unless it
// ends a list ("- Monday\n- Tuesday", "Options:\n- Alice") or is all there
// is.
func cutNameSignature(lines []string) []string {
	last := len(lines) - 1
	for last >= 0 && trimSpaceLike(lines[last]) == "" {
		last--
	}
	if last <= 0 {
		return lines
	}
	t := trimSpaceLike(lines[last])
	if len(t) > 60 || !nameSignatureRe.MatchString(t) {
		return lines
	}
	name := strings.ToLower(strings.TrimLeft(t, "-–—~/ "))
	for _, w := range signOffWords {
		if strings.HasPrefix(name, w) {
			return lines
		}
	}
	prev := last - 1
	for prev >= 0 && trimSpaceLike(lines[prev]) == "" {
		prev--
	}
	if prev < 0 {
		return lines
	}
	p := trimSpaceLike(lines[prev])
	if strings.HasSuffix(p, ":") || listItemRe.MatchString(p) || p[0] == t[0] {
		return lines
	}
	return lines[:last]
}

// bannerRe: the warning a mail gateway puts above the reply ("CAUTION:
// This email originated from outside of the organization.", "[EXTERNAL]
// ..."): not the writer's words.
var bannerRe = regexp.MustCompile(`(?i)^\W{0,4}(?:caution|warning|attention|notice|external(?:\s+(?:email|e-mail|sender|message))?|\[external\])\b.{0,80}\b(?:originated\s+(?:from\s+)?outside|from\s+outside|outside\s+(?:of\s+)?(?:the|this|your|our)\s+(?:organi[sz]ation|company)|external\s+sender)`)

// dropBanner removes a gateway's banner paragraph (at most five lines) at
// the top of the text.
func dropBanner(lines []string) []string {
	i := 0
	for i < len(lines) && trimSpaceLike(lines[i]) == "" {
		i++
	}
	if i == len(lines) || len(lines[i]) > maxHeaderLen || !bannerRe.MatchString(trimSpaceLike(lines[i])) {
		return lines
	}
	for k := i; k < len(lines) && k < i+5; k++ {
		if trimSpaceLike(lines[k]) == "" {
			return lines[k:]
		}
	}
	return lines
}
