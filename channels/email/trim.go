package email

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reply trimming. The rules began as a port of the public rule sets of
// Discourse's email_reply_trimmer (MIT, via its Go port
// github.com/dimiro1/reply) and Mailgun's talon (Apache-2.0), and are
// extended with current clients and languages; they are measured on the
// corpus in testdata/replies/trim (TestTrimCorpus), whose held-out set they
// were not written against. The one Go reply parser the module proxy
// serves, github.com/dimiro1/reply, trims 64% of that corpus right;
// TrimReply trims 98% (96% of the held-out set), which is why beachd keeps
// its own.
//
// Every expression here is RE2 (linear in its input) and is applied to one
// line, or to at most maxHeaderSpan joined lines, no longer than
// maxHeaderLen; look-aheads are bounded (separatorLookahead, 20 header
// lines). Trimming is linear in the size of the text (TestTrimLinearTime).
//
// Quoted text never counts: "> " lines (and text glued between them) are
// always dropped, whatever else the rules decide.

const (
	// maxHeaderSpan is how many lines an attribution may be wrapped over.
	maxHeaderSpan = 3
	// maxHeaderLen: longer lines are never attribution or header lines.
	maxHeaderLen = 500
)

// attributionVerbs end an attribution ("… wrote:") in the languages we
// know, lower case.
var attributionVerbs = []string{
	"wrote", "writes", "sent", "said", "says", "a écrit", "nous a dit", "escribió", "escreveu", "ha scritto",
	"schrieb", "schrieben sie", "geschrieben", "schreef", "skrev", "napisał", "napisała", "napisał(a)", "pisze",
	"napsal", "napsala", "napsal(a)", "napísal", "napísala", "napísal(a)", "написал", "написала", "написал(а)",
	"пишет", "пише", "написав", "kirjoitti", "yazdı", "írta", "έγραψε", "đã viết", "写道", "寫道", "のメール",
	"のメッセージ", "は書きました", "작성", "a scris", "kirjutas", "rašė", "rakstīja", "va escriure", "menulis",
	"เขียนว่า", "ने लिखा", "نوشت", "كتب", "napisao je", "napisala je", "napisao", "napisala", "написа",
	"је написао/ла", "napisal", "napisal(a)", "skrifaði", "escribiu", "idatzi zuen", "ezt írta",
	"a következőt írta", "şunları yazdı", "şunu yazdı",
}

// The expressions behind matchAttribution, each run only after a cheap
// look at the line says it may match.
var (
	// The verb before the name: "Am … schrieb Name <a@b>:", "Op … schreef
	// …:", "15. jan. 2024 kl. 10:30 skrev Name <a@b>:", "W dniu …
	// użytkownik … napisał:", "… odesílatel … napsal:".
	verbFirstRe = regexp.MustCompile(`(?i)^.*\d.*\b(?:schrieb|schreef|skrev|heeft|użytkownik|пользователь|odesílatel)\b.*[:：]$`)
	// "Name <a@b> schrieb am Mo., 15. Jan. 2024, 10:30:", Lotus Notes'
	// "Name/ACME wrote on 01/15/2024 10:30:00 AM:".
	verbThenDateRe = regexp.MustCompile(`(?i)^.*\b(?:schrieb|wrote|kirjoitti|skrev|schreef|napsal|napisał|escribió|escreveu)\s+(?:(?:am|on|den|op|el|em|dne)\s+)?\S*\d.*[:：]$`)
	// Horde and others: "Quoting Name <a@b>:", "Zitat von Name <a@b>:",
	// "Citando Name <a@b>:", "Citation de Name <a@b> :".
	quotingRe = regexp.MustCompile(`(?i)^(?:quoting|zitat\s+von|citando|citation\s+de)\s.*(?:@|\d).*[:：]$`)
	// "Somebody wrote:" on a line of its own.
	nameWroteRe = regexp.MustCompile(`(?i)^[\s>-]*\pL[\pL .'"-]{0,60}\s(?:wrote|writes|a\s+écrit|schrieb|escribió|ha\s+scritto|escreveu|skrev)\s*:$`)
	// Android: "---- John Smith wrote ----".
	androidWroteRe = regexp.MustCompile(`(?i)^-{2,}.*\bwrote\s*-{2,}$`)
	// A date and an address: "2014-10-17 11:28 GMT+03:00 Bob <bob@x>:",
	// "пн, 15 янв. 2024 г. в 10:30, Name <a@b>:", "2011/4/7 Name <a@b>",
	// "2024年1月15日(月) 10:30 Name <a@b>:".
	dateAddressRe = regexp.MustCompile(`^.*(?:\b(?:19|20)\d\d\b.*\b\d{1,2}[:.]\d\d\b|\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}|\d{4}年).*(?:<\s*[\w.+-]+@[\w.-]+\.\w+\s*>\)?\s*[:：]?|[\w.+-]+@[\w.-]+\.\w+\)?\s*[:：])$`)
	// Discourse: "2016-03-03 17:21 GMT+01:00 Some One".
	isoDateNameRe = regexp.MustCompile(`^>*\s*\d{4}-\d\d-\d\d \d\d?:\d\d GMT[+-]\d\d?:\d\d [\pL\s.'-]+$`)
	// Apple Mail Japanese "2024/01/15 10:30、Name <a@b>のメール:".
	appleJapaneseRe = regexp.MustCompile(`^\d{4}/\d{1,2}/\d{1,2}.*(?:のメール|のメッセージ|は書きました)[:：]$`)
	// "Posted by name on 01/21/2016".
	postedByRe = regexp.MustCompile(`(?i)^>*\s*Posted by .+ on \d{2}/\d{2}/\d{4}$`)

	// leadDateRe: an attribution that begins with a date.
	leadDateRe = regexp.MustCompile(`^\s*\d{1,4}[\s./年-]`)

	// inlineOnRe finds talon's "reply On <date>, <name> wrote:" where the
	// reply and the attribution share a line.
	inlineOnRe = regexp.MustCompile(`(?i)(?:\s|-{2,})(On\s.*\d.*\b(?:wrote|sent)\s*:)\s*$`)

	// originalMessageRe: the line Outlook, Gmail and others put above a
	// quoted or forwarded message, and the Apple Mail forward line.
	originalMessageRe = regexp.MustCompile(`(?i)^[\s>*]*-{2,}\s*(?:original\s+message|reply\s+message|forwarded\s+message|ursprüngliche\s+nachricht|originalnachricht|antwort\s+nachricht|weitergeleitete\s+nachricht|oprindelig\s+meddelelse|videresendt\s+meddelelse|message\s+d'origine|message\s+transféré|mensaje\s+original|mensaje\s+reenviado|mensagem\s+original|mensagem\s+encaminhada|messaggio\s+originale|messaggio\s+inoltrato|oorspronkelijk\s+bericht|doorgestuurd\s+bericht|ursprungligt\s+meddelande|vidarebefordrat\s+meddelande|opprinnelig\s+melding|videresendt\s+melding|wiadomość\s+oryginalna|oryginalna\s+wiadomość|przekazana\s+wiadomość|исходное\s+сообщение|пересылаемое\s+сообщение|původní\s+zpráva|alkuperäinen\s+viesti|原始邮件|原始郵件|转发邮件|転送されたメッセージ|元のメッセージ)\s*-*\s*:?\s*\**\s*$|(?i)^[\s>]*(?:begin\s+forwarded\s+message|forwarded\s+message|début\s+du\s+message\s+(?:réexpédié|transféré)|anfang\s+der\s+weitergeleiteten\s+nachricht|inicio\s+del\s+mensaje\s+reenviado)\s*:\s*$`)

	// Outlook's header block: lines "From:", "Sent:", "To:", "Subject:"
	// and their translations; two or more in a row open a quoted message.
	headerLineRe = regexp.MustCompile(`(?i)^[\s>]*\*{0,2}\s*(?:` + headerFromKeys + `|` + headerDateKeys + `|` + headerOtherKeys + `)\s*\*{0,2}\s*[:：]`)
	headerKeyRe  = regexp.MustCompile(`(?i)^[\s>]*\*{0,2}\s*(?:` + headerFromKeys + `|` + headerDateKeys + `)\s*\*{0,2}\s*[:：]`)
)

const (
	headerFromKeys  = `from|von|de|de\s+la|van|da|fra|från|frá|od|от|од|від|差出人|发件人|寄件者|lähettäjä|kimden|feladó|expéditeur|보낸\s*사람|αποστολέας|από|מאת|من|nuo|saatja|šalje|pošiljatelj|dari|từ|จาก|remitente`
	headerDateKeys  = `date|sent|gesendet|datum|datums|envoyé(?:\s+le)?|enviado|enviada\s+em|enviat|fecha|verzonden|inviato|data|skickat|sendt|wysłano|wysłane|отправлено|дата|送信日時|发送时间|日期|lähetetty|gönderildi|tarih|odesláno|odoslané|elküldve|küldve|날짜|보낸\s*날짜|trimis|στάλθηκε|ημερομηνία|נשלח|תאריך|تاريخ\s+الإرسال|التاريخ|poslano|послато|изпратено|надіслано|išsiųsta|saadetud|dikirim|tanggal|đã\s+gửi|ngày|ส่ง|วันที่`
	headerOtherKeys = `to|an|à|a|para|aan|till|til|do|кому|宛先|收件人|vastaanottaja|kime|komu|címzett|받는\s*사람|subject|betreff|objet|asunto|assunto|oggetto|onderwerp|ämne|emne|temat|тема|件名|主题|主旨|aihe|konu|předmět|tárgy|제목|cc|kopie|copie|reply-to|antwort\s+an|répondre\s+à|responder\s+a|beantwoorden\s+-\s+aan|risposta|destinataire|către|subiect|προς|θέμα|אל|נושא|إلى|الموضوع|prima|primatelj|predmet|до|kam|tēma|adressaat|teema|kepada|perihal|subjek|đến|chủ\s+đề|ถึง|เรื่อง|per\s+a|assumpte|pour|sujet|kinek`
)

// attributionTailRe: the end of a wrapped attribution that a client put on
// a line of its own behind a quote marker (">:", "> wrote:").
var attributionTailRe = regexp.MustCompile(`^[ \t]*>[ \t]*(?:wrote[ \t]*)?:[ \t]*$`)

// TrimReply returns the new text of a reply: quoted text (a "> " block, an
// attribution line and what follows it, an Outlook header block and what
// follows it, a forwarded message) and signatures removed. For a
// bottom-posted reply (quote first, answer below) it returns the answer
// below the quote. Text that is only quoted trims to "": nothing someone
// else wrote may count as the person's answer.
func TrimReply(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	lines := dropBanner(splitInlineAttributions(strings.Split(text, "\n")))
	var own []string
	for len(lines) > 0 {
		h, n, rest := findQuoteStart(lines)
		if h < 0 {
			own = append(own, lines...)
			break
		}
		own = append(own, lines[:h]...)
		if !rest {
			break
		}
		// What follows the attribution: a "> " block, and after it the
		// person's own text again (a bottom-posted or wrapping reply); or
		// unmarked quoted text, which is all quote.
		lines = afterQuoteBlock(lines[h+n:])
	}
	return tidy(cutSignature(unquoted(own)))
}

// splitInlineAttributions moves "On <date>, <name> wrote:" that follows the
// reply on the same line onto a line of its own.
func splitInlineAttributions(lines []string) []string {
	var out []string
	for _, l := range lines {
		if len(l) <= maxHeaderLen && !isQuoteLine(l) {
			// inlineOnRe needs "On" and the colon; most lines have neither.
			if !strings.HasSuffix(strings.TrimSpace(l), ":") || !strings.Contains(strings.ToLower(l), "on ") {
				out = append(out, l)
				continue
			}
			if m := inlineOnRe.FindStringSubmatchIndex(l); m != nil {
				before := strings.TrimRight(l[:m[0]], " \t-")
				if strings.TrimSpace(before) != "" && matchAttribution(l[m[2]:m[3]]) {
					out = append(out, before, l[m[2]:m[3]])
					continue
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// findQuoteStart returns the index of the first line that opens quoted
// text outside a "> " block, how many lines the opening spans, and whether
// the person's own text may follow the quote (after an attribution it may;
// after a separator, a forwarded-message line or a header block everything
// is quoted). It returns -1 when there is none.
func findQuoteStart(lines []string) (int, int, bool) {
	own := false
	for i, l := range lines {
		if isQuoteLine(l) || len(l) > maxHeaderLen || strings.TrimSpace(l) == "" {
			continue
		}
		if k := classifyRule(l); k != notRule {
			// A "-- " marker ends the writer's text, unless the
			// writer's text goes on to a quote below it; a longer rule
			// does too when it is not part of the text (ruleInText) and
			// a quoted message or a signature follows it, or nothing.
			if !separatesOwnText(lines, i) && (k == strongRule || !own || opensQuote(lines, i+1) || !ruleInText(lines, i)) {
				return i, len(lines) - i, false
			}
			own = true
			continue
		}
		if n := originalMessageAt(lines, i); n > 0 {
			// What follows a forwarded or original message marked with
			// "> " may be the writer's again (text below a forward).
			return i, n, true
		}
		if isSignatureLine(l) || own && deviceSignatureAt(lines, i) {
			return i, len(lines) - i, false
		}
		if n := headerBlock(lines[i:]); n > 0 {
			return i, len(lines) - i, false
		}
		if span := attributionAt(lines, i); span > 0 {
			// "Approve\nOn … wrote:": a wrapped match that begins one line
			// early belongs to the later line, unless the later line is
			// only the tail ("<a@b> wrote:") of one that begins here.
			if span > 1 && attributionAt(lines, i+1) > 0 &&
				(attributionLead(lines[i+1]) || !attributionLead(lines[i])) {
				own = true
				continue
			}
			// The writer's first line is never taken for an attribution
			// on the generic rule alone: a quote must follow it.
			if !own && !specificAttributionAt(lines, i, span) && !quoteFollows(lines, i+span) {
				own = true
				continue
			}
			return i, span, true
		}
		own = true
	}
	return -1, 0, false
}

// specificAttributionAt reports whether the span lines at i match one of
// the known attribution forms, not only the generic one.
func specificAttributionAt(lines []string, i, span int) bool {
	if span > 1 && polymailAt(lines, i) == span {
		return true
	}
	joined := ""
	for k := i; k < i+span && k < len(lines); k++ {
		l := strings.TrimSpace(lines[k])
		if k > i {
			if isQuoteLine(lines[k]) {
				l = strings.TrimSpace(strings.TrimLeft(l, " \t>"))
			}
			joined += " "
		}
		joined += l
	}
	return matchSpecificAttribution(joined)
}

// quoteFollows reports whether the first non-blank line from j on is a
// "> " line.
func quoteFollows(lines []string, j int) bool {
	for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
		j++
	}
	return j < len(lines) && isQuoteLine(lines[j])
}

// opensQuote reports whether the first non-blank line from j on opens a
// quoted message: a "> " line, a header block, an original-message line or
// an attribution.
func opensQuote(lines []string, j int) bool {
	for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
		j++
	}
	return j < len(lines) && (isQuoteLine(lines[j]) || headerBlock(lines[j:]) > 0 || originalMessageAt(lines, j) > 0 ||
		attributionAt(lines, j) > 0)
}

func isOriginalMessage(l string) bool {
	if len(l) > 200 || !strings.Contains(l, "--") && !strings.HasSuffix(strings.TrimSpace(l), ":") {
		return false
	}
	return containsAny(strings.ToLower(l), originalMessageWords...) && originalMessageRe.MatchString(l)
}

var originalMessageWords = []string{"message", "nachricht", "meddelelse", "origine", "transf", "mensaje", "mensagem",
	"messaggio", "bericht", "meddelande", "melding", "wiadomo", "сообщение", "zpráva", "viesti", "原始", "转发", "転送",
	"元のメッセージ", "forwarded", "anfang", "inicio", "début"}

// originalMessageAt returns 1 when the line at i opens an original or
// forwarded message, and 0 otherwise: a known line ("-----Original
// Message-----", "Begin forwarded message:"), or a line framed by dashes
// ("-----Mesaj original-----", "-------- Původní zpráva --------") whose
// words say so in a language we know, or that a header line follows, on
// the same line ("-----Original Message-----From: …") or the next.
func originalMessageAt(lines []string, i int) int {
	l := lines[i]
	if len(l) > 300 {
		return 0
	}
	if isOriginalMessage(l) {
		return 1
	}
	t := strings.TrimLeft(l, " \t>*\u00a0")
	if !strings.HasPrefix(t, "--") || classifyRule(t) != notRule {
		return 0
	}
	m := framedRe.FindStringSubmatch(t)
	if m == nil || len(strings.Fields(m[1])) > 5 {
		return 0
	}
	if rest := strings.TrimSpace(m[2]); rest != "" {
		if isHeaderLine(rest) || genericHeaderRe.MatchString(rest) {
			return 1
		}
		return 0
	}
	if containsAny(strings.ToLower(m[1]), framedMessageWords...) {
		return 1
	}
	for k := i + 1; k < len(lines) && k <= i+2; k++ {
		if strings.TrimSpace(lines[k]) == "" {
			continue
		}
		if isHeaderLine(lines[k]) || len(lines[k]) <= maxHeaderLen && genericHeaderRe.MatchString(lines[k]) {
			return 1
		}
		break
	}
	return 0
}

var (
	// framedRe: words framed by dashes, and what may be glued after them.
	framedRe = regexp.MustCompile(`^-{2,}\s*([^-\d\s][^-\d]{0,48}?)\s*-{2,}\s*(.*)$`)
	// genericHeaderRe: "Key: value" with a short key of letters, in any
	// language ("Kimden: …", "No: …", "**Datums:** …").
	genericHeaderRe = regexp.MustCompile(`^\s*\**\s*\pL[\pL\pM .'-]{0,24}?\s*\**\s*[:：]\s*\**\s*\S`)
)

// framedMessageWords: "message", "original", "forwarded" in many
// languages, as a line framed by dashes names them.
var framedMessageWords = []string{"original", "oryginal", "origin", "eredeti", "αρχικό", "orijinal", "الأصلية",
	"מקורית", "izvorn", "izvirn", "оригинал", "оригінал", "исходн", "původní", "pôvodn", "alkuperäinen", "oprindelig",
	"opprinnelig", "ursprünglich", "ursprungligt", "originale", "oorspronkelijk", "forward", "weitergeleitet", "transf",
	"reenv", "encaminh", "inoltr", "doorgestuurd", "vidarebefordr", "videresend", "przekazan", "пересыл", "přeposl",
	"továbbított", "προωθ", "iletilen", "توجيه", "הועבר", "转发", "轉寄", "転送", "전달", "원본", "元の", "message",
	"nachricht", "bericht", "meddel", "melding", "viesti", "wiadomo", "zpráv", "správ", "üzenet", "μήνυμα", "ileti",
	"رسالة", "הודעה", "poruka", "sporočil", "сообщени", "повідомлен", "писмо", "mesaj", "ziņa", "žinut", "laišk",
	"sõnum", "pesan", "tin nhắn", "ข้อความ", "메시지", "メッセージ", "邮件", "郵件", "消息", "mensaje", "mensagem",
	"messaggio", "missatge", "mezua"}

// separatesOwnText reports whether the separator line at i sits inside the
// person's own text: plain text follows it, and an attribution or a "> "
// line follows that within a few lines (so the separator does not start a
// signature or the quoted message). The look-ahead is bounded, which keeps
// trimming linear.
func separatesOwnText(lines []string, i int) bool {
	j := i + 1
	for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
		j++
	}
	if j == len(lines) || classifyRule(lines[j]) != notRule || opensQuote(lines, j) {
		return false
	}
	for k := j + 1; k < len(lines) && k <= j+separatorLookahead; k++ {
		if classifyRule(lines[k]) != notRule || isSignatureLine(lines[k]) || originalMessageAt(lines, k) > 0 {
			return false
		}
		if isQuoteLine(lines[k]) || attributionAt(lines, k) > 0 {
			return true
		}
	}
	return false
}

// separatorLookahead bounds how far separatesOwnText looks.
const separatorLookahead = 30

// attributionAt returns how many lines (1..maxHeaderSpan) starting at i form
// an attribution, or 0.
func attributionAt(lines []string, i int) int {
	if i >= len(lines) || isQuoteLine(lines[i]) {
		return 0
	}
	if n := polymailAt(lines, i); n > 0 {
		return n
	}
	joined := ""
	for span := 1; span <= maxHeaderSpan && i+span <= len(lines); span++ {
		l := strings.TrimSpace(lines[i+span-1])
		if l == "" || len(l) > maxHeaderLen {
			return 0
		}
		if span > 1 && !attributionStart(lines[i]) {
			return 0
		}
		if span > 1 {
			// A "> " line inside a wrapped attribution is only its tail
			// (">:", "> wrote:"); any other quote line ends it.
			if isQuoteLine(lines[i+span-1]) {
				if !attributionTailRe.MatchString(l) {
					return 0
				}
				l = strings.TrimSpace(strings.TrimLeft(l, " \t>"))
			}
			joined += " "
		}
		joined += l
		if matchAttribution(joined) {
			return span
		}
	}
	return 0
}

// leadWords begin an attribution: "On <date>, <name> wrote:" in English,
// "Am", "Le", "El", "Op", "Il", "Em", "Den", "På", "W dniu", "Dnia", "Vào".
var leadWords = map[string]bool{"on": true, "at": true, "am": true, "le": true, "el": true, "op": true, "il": true,
	"em": true, "den": true, "på": true, "dnia": true, "dňa": true, "dne": true, "vào": true, "在": true, "în": true,
	"pe": true, "στις": true, "v": true, "þann": true, "pada": true, "เมื่อ": true, "في": true, "در": true,
	"ב": true, "בתאריך": true, "in": true}

// hasLeadWord reports whether l begins (after dashes, spaces, ">" and "*")
// with one of leadWords and a space.
func hasLeadWord(l string) bool {
	l = strings.TrimLeftFunc(l, func(r rune) bool { return isSpaceLike(r) || r == '-' || r == '>' || r == '*' })
	i := strings.IndexAny(l, " \t")
	if i <= 0 || i > 24 || utf8.RuneCountInString(l[:i]) > 6 {
		return false
	}
	w := strings.ToLower(l[:i])
	if w == "w" {
		return strings.HasPrefix(strings.ToLower(strings.TrimLeft(l[i:], " \t")), "dniu ")
	}
	return leadWords[w]
}

// attributionLead: how an attribution begins (a leading word or a date);
// attributionStart: how the first line of a wrapped one may look. A line
// of the reply just above an attribution looks like neither.
func attributionLead(l string) bool {
	return hasLeadWord(l) || leadDateRe.MatchString(l) || weekdayDateLead(l)
}

func attributionStart(l string) bool {
	t := strings.TrimLeft(l, " \t")
	return hasLeadWord(l) || t != "" && t[0] >= '0' && t[0] <= '9' || strings.ContainsAny(l, "@<") || weekdayDateLead(l)
}

// weekdayDateLead: a line that opens with an abbreviated weekday and a day
// of the month and holds a time or a year, as Gmail writes attributions in
// many languages ("pe 20. lokakuuta 2017 klo 17.50 …", "ons 4 dec. 2024
// kl. 20:42 …", "pon., 15 sty 2024 o 10:30 …", "Mo., 15. Jan. 2024 …").
func weekdayDateLead(l string) bool {
	return len(l) <= maxHeaderLen && weekdayDateRe.MatchString(l) && hasDateOrTime(l)
}

var weekdayDateRe = regexp.MustCompile(`^\s*\pL{1,4}\.?,?\s+\d{1,2}(?:\.|\s|,)`)

// polymailAt matches Polymail's attribution, five lines with a blank one:
// "On <date> <name>", "", "<", "mailto:<name> <a@b>", "> wrote:".
func polymailAt(lines []string, i int) int {
	if i+4 >= len(lines) || strings.TrimSpace(lines[i+2]) != "<" || strings.TrimSpace(lines[i+1]) != "" ||
		!strings.HasPrefix(strings.TrimSpace(lines[i+3]), "mailto:") || !attributionTailRe.MatchString(lines[i+4]) ||
		!polymailLeadRe.MatchString(lines[i]) {
		return 0
	}
	return 5
}

var polymailLeadRe = regexp.MustCompile(`(?i)^\s*on\s.*\d`)

// matchAttribution reports whether s (one line, or wrapped lines joined)
// is an attribution. It looks at how s ends first (a colon, a verb, a dash,
// a bracket): most lines of text are rejected there, before any expression
// runs, which keeps trimming fast on long mail.
func matchAttribution(s string) bool {
	return matchSpecificAttribution(s) || genericAttribution(s)
}

// genericAttribution: in any language, a date or a time, an address and
// the closing colon ("În lun., 15 ian. 2024 la 10:30, Name <a@b> a
// scris:", "في ١٥‏/٠١‏/٢٠٢٤، الساعة ١٠:٣٠ ص، كتب Name <a@b>:", "Name <a@b>
// ezt írta (időpont: 2024. jan. 15., H, 10:30):"). The address ends the
// line, or a few words do after it (a verb, a date in brackets).
func genericAttribution(s string) bool {
	s = trimSpaceLike(s)
	if len(s) < 6 || len(s) > maxAttributionLen || !strings.HasSuffix(s, ":") && !strings.HasSuffix(s, "：") {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 || utf8.RuneCountInString(s[at:]) > 80 || !hasAddress(s) {
		return false
	}
	return hasDateOrTime(s)
}

// matchSpecificAttribution: the attribution forms of the languages and
// clients we know.
func matchSpecificAttribution(s string) bool {
	s = trimSpaceLike(s)
	if len(s) < 6 || len(s) > maxAttributionLen {
		return false
	}
	lower := strings.ToLower(s)
	core := strings.TrimRight(lower, " \t.:：-*")
	colon := strings.HasSuffix(s, ":") || strings.HasSuffix(s, "：")
	digit := strings.IndexFunc(s, unicode.IsDigit) >= 0
	at := strings.Contains(s, "@")
	verb := endsWithVerb(core)
	switch {
	// Verb first, no colon: "Am 15.01.2024 um 10:30 schrieb Name <a@b>",
	// "Am Mo., 15. Jan. 2024 um 10:30 Uhr schrieb Name".
	case digit && !colon && hasLeadWord(s) && hasDateOrTime(s) && verbFirstNoColon(lower):
		return true
	// "On <date>, <name> wrote:" and its translations: a leading word, a
	// date or an address, a verb at the end; the colon may be missing and
	// dashes may surround it ("------On … wrote-----").
	case verb && (digit || at) && hasLeadWord(s):
		return true
	// A date or an address, a verb and a colon: "15. marts 2017 kl. 11.00
	// skrev …:", "Name <a@b> 于2024年…写道：", "pon., 15 sty 2024 o 10:30 …
	// napisał(a):", "Name <a@b> wrote:".
	case verb && colon && (digit || at):
		return true
	// "Name <a@b> wrote" without the colon, "Name via List wrote:".
	case verb && at && strings.Contains(s[:len(s)-1], "@") && hasAnySuffix(core, "wrote", "writes", "schrieb", "a écrit"):
		return true
	case verb && strings.Contains(lower, " via ") && hasAnySuffix(core, "wrote", "schrieb"):
		return true
	case verb && colon && nameWroteRe.MatchString(s):
		return true
	}
	last := s[len(s)-1]
	switch {
	case colon && digit && containsAny(lower, "schrieb", "schreef", "skrev", "heeft", "użytkownik", "пользователь", "odesílatel") && verbFirstRe.MatchString(s):
		return true
	case colon && digit && containsAny(lower, "schrieb", "wrote", "kirjoitti", "skrev", "schreef", "napsal", "napisał", "escribió", "escreveu") && verbThenDateRe.MatchString(s):
		return true
	case colon && containsAny(lower, "quoting", "zitat von", "citando", "citation de") && quotingRe.MatchString(s):
		return true
	case last == '-' && strings.Contains(lower, "wrote") && androidWroteRe.MatchString(s):
		return true
	case (colon || last == '>' || last == ')') && hasAddress(s) && dateAddressRe.MatchString(s):
		return true
	case strings.Contains(s, " GMT") && isoDateNameRe.MatchString(s):
		return true
	case colon && strings.Contains(s, "の") && appleJapaneseRe.MatchString(s):
		return true
	case strings.HasPrefix(lower, "posted by") && postedByRe.MatchString(s):
		return true
	}
	return false
}

// verbFirstNoColon: the verbs that come before the name in their
// languages ("Am … schrieb Name <a@b>"), with only a name or an address
// after them (a sentence goes on: "… schrieb uns gestern, dass …").
func verbFirstNoColon(lower string) bool {
	for _, v := range []string{" schrieb ", " schreef ", " skrev ", " skrifaði "} {
		if i := strings.LastIndex(lower, v); i >= 0 {
			after := lower[i+len(v):]
			if j := strings.IndexAny(after, "<(["); j >= 0 {
				after = after[:j]
			}
			return len(strings.Fields(after)) <= 5 && !strings.ContainsAny(after, ".,;!?")
		}
	}
	return false
}

// hasDateOrTime: a time ("10:30", "17.50", "١٠:٣٠") or a year ("2024",
// "٢٠٢٤") in any script's digits.
func hasDateOrTime(s string) bool {
	run, prevRun, sep := 0, 0, false
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			run++
			if run == 4 {
				return true
			}
			if run == 2 && sep && prevRun >= 1 && prevRun <= 2 {
				return true
			}
		case (r == ':' || r == '.') && run > 0:
			prevRun, run, sep = run, 0, true
			continue
		default:
			prevRun, run = 0, 0
		}
		if !unicode.IsDigit(r) {
			sep = false
		}
	}
	return false
}

// maxAttributionLen: a longer line (or wrapped lines joined) is not an
// attribution.
const maxAttributionLen = 400

func endsWithVerb(core string) bool {
	if len(core) > 40 {
		core = core[len(core)-40:]
	}
	for _, v := range attributionVerbs {
		if strings.HasSuffix(core, v) {
			// A whole word: "wrote", not "overwrote".
			rest := core[:len(core)-len(v)]
			if rest == "" || !isLetterEnd(rest) || !isLetterStart(v) {
				return true
			}
		}
	}
	return false
}

func isLetterEnd(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsLetter(r)
}

func isLetterStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) && r < 0x3000 // CJK verbs follow the name directly
}

// hasAddress reports whether s holds something shaped like an address
// (word@word.word), before the expression that needs one runs.
func hasAddress(s string) bool {
	for {
		i := strings.IndexByte(s, '@')
		if i < 0 {
			return false
		}
		if i > 0 && !strings.ContainsRune(" \t<>()[]\"'", rune(s[i-1])) {
			rest := s[i+1:]
			end := strings.IndexAny(rest, " \t<>()[]\"',;:")
			if end < 0 {
				end = len(rest)
			}
			if dot := strings.IndexByte(rest[:end], '.'); dot > 0 && dot < end-1 {
				return true
			}
		}
		s = s[i+1:]
	}
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// headerBlock returns the number of lines of an Outlook header block
// ("From: …", "Sent: …", "To: …", "Subject: …", in any order and language,
// lines wrapped) starting at lines[0], or 0 when there is none. A block has
// at least two header lines, one of them naming the sender or the date.
func headerBlock(lines []string) int {
	if !isHeaderLine(lines[0]) {
		return 0
	}
	headers, key, cont := 0, false, 0
	n := 0
	for n < len(lines) && n < 20 {
		l := lines[n]
		switch {
		case isHeaderLine(l):
			headers++
			key = key || headerKeyRe.MatchString(l)
			cont = 0
		case strings.TrimSpace(l) == "" || isQuoteLine(l) || cont >= 2:
			if headers >= 2 && key {
				return n
			}
			return 0
		default:
			cont++ // a wrapped header line
		}
		n++
	}
	if headers >= 2 && key {
		return n
	}
	return 0
}

// isHeaderLine: "From: …" and the like; the colon comes early.
func isHeaderLine(l string) bool {
	if len(l) > maxHeaderLen {
		return false
	}
	head := l
	if len(head) > 60 {
		head = head[:60]
	}
	i := strings.IndexAny(head, ":：")
	if i < 0 || i > 40 {
		return false
	}
	for _, r := range head[:i] {
		if unicode.IsDigit(r) || strings.ContainsRune("@<>()[]/.,;", r) && r != '>' {
			return false
		}
	}
	return headerLineRe.MatchString(l)
}

// afterQuoteBlock returns what follows a "> " block at the start of lines
// (blank lines before it skipped), or nil when the quoted text is not
// marked with "> " (then all of it is quote).
func afterQuoteBlock(lines []string) []string {
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || !isQuoteLine(lines[i]) {
		return nil
	}
	for i < len(lines) {
		if isQuoteLine(lines[i]) || strings.TrimSpace(lines[i]) == "" {
			i++
		} else if n := gluedQuoteText(lines, i); n > 0 {
			i += n
		} else {
			break
		}
	}
	return lines[i:]
}

// gluedQuoteText returns how many text lines at lines[i] sit between two
// "> " lines with no blank line between: quoted lines whose wrapping lost
// the marker ("> See (http://x.example/a" "b)" ">"). An answer between
// quotes (an inline reply) has blank lines around it.
func gluedQuoteText(lines []string, i int) int {
	if i == 0 || !isQuoteLine(lines[i-1]) {
		return 0
	}
	for k := i; k < len(lines) && k < i+2+1; k++ {
		if strings.TrimSpace(lines[k]) == "" {
			return 0
		}
		if isQuoteLine(lines[k]) {
			return k - i
		}
	}
	return 0
}

// isQuoteLine: "> quoted", "| quoted", and the "Name> quoted" of some
// newsreaders (written out by hand: it runs on every line, often twice).
func isQuoteLine(l string) bool {
	l = strings.TrimLeft(l, " \t")
	if l == "" {
		return false
	}
	switch l[0] {
	case '>':
		return true
	case '|':
		// "| quoted", but not a table row "| a | b |".
		t := strings.TrimRight(l, " \t")
		return len(t) == 1 || (l[1] == ' ' || l[1] == '\t') && !strings.HasSuffix(t, "|")
	}
	n := 0
	for n < len(l) && n <= 20 && (l[n] >= 'a' && l[n] <= 'z' || l[n] >= 'A' && l[n] <= 'Z') {
		n++
	}
	if n == 0 || n > 20 || n == len(l) || l[n] != '>' {
		return false
	}
	return n+1 == len(l) || l[n+1] == ' ' || l[n+1] == '\t'
}

// unquoted drops "> " lines and the text glued between them.
func unquoted(lines []string) []string {
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		if isQuoteLine(lines[i]) {
			continue
		}
		if n := gluedQuoteText(lines, i); n > 0 {
			i += n - 1
			continue
		}
		out = append(out, lines[i])
	}
	return out
}

// tidy trims trailing space, leading and trailing blank lines, and runs of
// more than one blank line.
func tidy(lines []string) string {
	var out []string
	blank := 0
	for _, l := range lines {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		l = strings.ReplaceAll(l, "\u00a0", " ")
		if strings.TrimSpace(l) == "" {
			blank++
			continue
		}
		if len(out) > 0 && blank > 0 {
			out = append(out, "")
		}
		blank = 0
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
