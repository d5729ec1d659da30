package email

import (
	"regexp"
	"strings"

	"github.com/emersion/go-message"

	"github.com/cool-ai/beachd/envelope"
)

// Where a token was found (envelope.Inbound.TokenSource).
const (
	SourceReplyTo    = "reply-to"
	SourceInReplyTo  = "in-reply-to"
	SourceReferences = "references"
	SourceSubject    = "subject"
)

// tokenRe is an email approval token: 26 characters of lower-case RFC 4648
// base32 (128 random bits).
var tokenRe = regexp.MustCompile(`^[a-z2-7]{26}$`)

var subjectTokenRe = regexp.MustCompile(`(?i)\[approval:\s*([a-z2-7]{26})\s*\]`)

// IsToken reports whether s has the shape of an email approval token.
func IsToken(s string) bool { return tokenRe.MatchString(s) }

type classification struct {
	auto, bounce bool
	reason       string
}

var oooSubjectRe = regexp.MustCompile(`(?i)^\s*(out of (the )?office|auto(matic|matische|mated)?[ -]?(reply|response|antwort|antwoord)|autoreply|abwesenheit|abwesend|réponse automatique|reponse automatique|absence|absent(e)? du bureau|respuesta automática|respuesta automatica|fuera de la oficina|ausente|afwezig|niet aanwezig|risposta automatica|fuori ufficio|不在|自動応答|自動返信|自动回复)`)

var bounceSubjectRe = regexp.MustCompile(`(?i)^\s*(undeliverable|undelivered mail|delivery status notification \((failure|delay)\)|mail delivery (failed|failure|system)|returned mail|delivery failure|failure notice|unzustellbar|non remis|no se puede entregar|onbestelbaar)`)

// classify tells auto-replies and bounces, which never decide an approval
// (docs/security.md), from mail a person wrote.
func classify(h message.Header, contentType, from, subject string, opts ParseOptions) classification {
	local, _, _ := strings.Cut(from, "@")
	switch {
	case contentType == "multipart/report":
		return classification{auto: true, bounce: true, reason: "bounce: multipart/report"}
	case local == "mailer-daemon" || local == "postmaster":
		return classification{auto: true, bounce: true, reason: "bounce: sender " + local}
	case bounceSubjectRe.MatchString(subject) && strings.TrimSpace(h.Get("Return-Path")) == "<>":
		return classification{auto: true, bounce: true, reason: "bounce: null return path and bounce subject"}
	}
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return classification{auto: true, reason: "auto-submitted: " + firstWord(v)}
	}
	for _, k := range []string{"X-Autoreply", "X-Autorespond", "X-Autoresponder"} {
		if h.Has(k) {
			return classification{auto: true, reason: "header " + strings.ToLower(k)}
		}
	}
	switch p := strings.ToLower(strings.TrimSpace(h.Get("Precedence"))); p {
	case "bulk", "junk", "list", "auto_reply":
		return classification{auto: true, reason: "precedence: " + p}
	}
	if strings.TrimSpace(h.Get("Return-Path")) == "<>" {
		return classification{auto: true, reason: "null return path"}
	}
	l := strings.NewReplacer("-", "", "_", "", ".", "").Replace(local)
	switch l {
	case "noreply", "donotreply", "noresponse", "autoreply", "autoresponder":
		return classification{auto: true, reason: "no-reply sender"}
	}
	if oooSubjectRe.MatchString(subject) {
		return classification{auto: true, reason: "out-of-office subject"}
	}
	for _, own := range opts.OwnAddresses {
		if own != "" && strings.EqualFold(own, from) {
			return classification{auto: true, reason: "from our own address"}
		}
	}
	return classification{}
}

func firstWord(s string) string {
	s, _, _ = strings.Cut(s, ";")
	return strings.TrimSpace(s)
}

// findToken looks for the approval token: the plus-address of To, Cc or
// Delivered-To at the reply domain, then our Message-ID in In-Reply-To, then
// the subject's [approval:<token>], then References (newest first). The
// first three are what a reply to one of our messages carries; if they name
// two different tokens the message is a conflict and is not obeyed.
// References alone may legitimately hold older approvals of the same thread,
// so they only count when nothing else names a token.
func findToken(h message.Header, in *envelope.Inbound, opts ParseOptions) {
	type found struct{ token, source string }
	var all []found
	if opts.ReplyDomain != "" {
		for _, k := range []string{"To", "Cc", "Delivered-To", "X-Original-To"} {
			for _, a := range addresses(h, k) {
				if t := plusToken(a, opts); t != "" {
					all = append(all, found{t, SourceReplyTo})
				}
			}
		}
	}
	if t := msgIDToken(in.InReplyTo, opts); t != "" {
		all = append(all, found{t, SourceInReplyTo})
	}
	for _, m := range subjectTokenRe.FindAllStringSubmatch(in.Subject, -1) {
		all = append(all, found{strings.ToLower(m[1]), SourceSubject})
	}
	if len(all) == 0 {
		for i := len(in.References) - 1; i >= 0; i-- {
			if t := msgIDToken(in.References[i], opts); t != "" {
				all = append(all, found{t, SourceReferences})
				break
			}
		}
	}
	if len(all) == 0 {
		return
	}
	in.Token, in.TokenSource = all[0].token, all[0].source
	for _, f := range all[1:] {
		if f.token != in.Token {
			in.TokenConflict = true
			in.Token, in.TokenSource = "", ""
			if in.IgnoredBecause == "" {
				in.IgnoredBecause = "two different approval tokens"
			}
			return
		}
	}
}

// plusToken: LOCAL+TOKEN@REPLYDOMAIN.
func plusToken(addr string, opts ParseOptions) string {
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || !strings.EqualFold(domain, opts.ReplyDomain) {
		return ""
	}
	base, tag, ok := strings.Cut(local, "+")
	if !ok || (opts.ReplyLocal != "" && !strings.EqualFold(base, opts.ReplyLocal)) {
		return ""
	}
	tag = strings.ToLower(tag)
	if !IsToken(tag) {
		return ""
	}
	return tag
}

// msgIDToken: DELIVERYID.TOKEN@DOMAIN.
func msgIDToken(id string, opts ParseOptions) string {
	local, domain, ok := strings.Cut(id, "@")
	if !ok || (opts.MessageIDDomain != "" && !strings.EqualFold(domain, opts.MessageIDDomain)) {
		return ""
	}
	i := strings.LastIndexByte(local, '.')
	if i < 0 {
		return ""
	}
	t := strings.ToLower(local[i+1:])
	if !IsToken(t) {
		return ""
	}
	return t
}
