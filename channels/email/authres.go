package email

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"

	"github.com/emersion/go-message"
	"github.com/emersion/go-msgauth/authres"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Sender verification: may this reply's From be believed?
//
// beachd does not check DKIM or SPF itself; it reads what the receiving
// server recorded in Authentication-Results (RFC 8601), and only the fields
// that server is known to have written. A field anyone can write is worth
// nothing: the sender of a message can put any header into it, including
// an Authentication-Results field naming our server's authserv-id.
//
// Which fields are read. A server that accepts a message prepends its
// fields (RFC 5321 §4.4, RFC 8601 §5); whatever the sender wrote stays
// below them. Of the Authentication-Results fields whose authserv-id is
// the configured one, beachd reads
//
//   - the topmost one, always (the receiving server's own, provided the
//     server adds one to every message it delivers to the mailbox — the
//     operator vouches for that by configuring the authserv-id), and
//   - any others that stand above the message's first Received field
//     (nothing the sender wrote can be above the Received field the
//     receiving server prepended).
//
// Every other Authentication-Results field is ignored, whoever it names:
// a forged field below the real one can neither add a pass nor cancel a
// fail. A server that writes its results into several fields below its own
// Received field (for example separate DKIM and DMARC milters) must be
// made to write the decisive result — DMARC — into the topmost one, or
// mail whose verdict is in a lower field is quarantined.
//
// The From. The sender is the one mailbox of the message's one From field,
// read strictly (net/mail's parser, encoded-words decoded): a message with
// no From field or several, a From holding several addresses, a group
// ("Friends: alice@example.org;"), an address literal as domain, trailing
// text after the address, an unquoted "<" or "@" in the display name
// ("mallory@evil.example <alice@example.org" — the receiving server and
// beachd could each take a different one for the sender), a domain that is
// not a host name or is written in a form IDNA only maps to one (full-width
// letters), is not verified, whatever the results say. A display name that
// looks like an address is harmless: the address is what counts. This is
// checked even with TrustUnauthenticated.
//
// The verdict. With From's domain D (lower case, A-labels), the sender is
// verified when the fields read report
//
//   - dmarc=pass with header.from D, and no other DMARC result; or
//   - no DMARC result other than dmarc=none, for D or naming no domain (D
//     publishes no DMARC record, or the server does not check DMARC), and
//     dkim=pass for a signing domain (header.d, else the domain of
//     header.i) aligned with D: the same organisational domain (relaxed
//     alignment, RFC 7489 §3.1.1, with the public suffix list), or D
//     itself when ParseOptions.DKIMAlignment is AlignStrict.
//
// Domains are compared without case and in their A-label form, so a
// result may name D as U-labels. A DMARC result counts only for the domain
// it names: dmarc=pass that names no header.from, or any DMARC result for
// another domain — a parent or a subdomain of D included —, says the
// server judged some other From than the one beachd reads, and the message
// is not verified. So is a result that gives its method, header.from,
// header.d or header.i twice (go-msgauth's parser keeps only the last).
//
// Anything else is not verified: no field from the authserv-id, an
// unreadable field, dmarc=fail, temperror, permerror or any other DMARC
// result, dmarc=none (or none at all) without an aligned DKIM pass — SPF
// alone never verifies, since an SPF pass says nothing about From and
// spf=fail with dmarc=none is exactly what a spoofed From looks like —, a
// From that is not one clean mailbox. A message that is not verified is
// reported as AuthFailed and quarantined: recorded with the reason, never
// obeyed.

// Limits of the verification.
const (
	// maxTrustedAuthResults bounds the fields read (above the first
	// Received field there are rarely more than two).
	maxTrustedAuthResults = 16
	// maxAuthResultsBytes bounds one field; a longer one is unreadable.
	maxAuthResultsBytes = 16 << 10
	// maxFromBytes bounds the From field (unfolded); a longer one is not
	// a clean mailbox.
	maxFromBytes = 4 << 10
)

// DKIM alignment modes (ParseOptions.DKIMAlignment; DMARC's adkim).
const (
	// AlignRelaxed: the signing domain and From's domain have the same
	// organisational domain. The default.
	AlignRelaxed = "relaxed"
	// AlignStrict: the signing domain is From's domain.
	AlignStrict = "strict"
)

// senderCheck is the verdict of verifySender.
type senderCheck struct {
	verified bool
	// detail says why not (or what verified, for logs).
	detail string
}

// verifySender applies the rule above to a message's header.
func verifySender(h message.Header, opts ParseOptions) senderCheck {
	domain, err := strictFromDomain(h)
	if err != nil {
		return senderCheck{detail: "sender not verified: " + err.Error()}
	}
	if opts.TrustUnauthenticated {
		return senderCheck{verified: true, detail: "not checked (trust_unauthenticated)"}
	}
	id := strings.TrimSpace(opts.AuthServID)
	if id == "" {
		return senderCheck{detail: "sender not verified: no trusted authserv-id is configured"}
	}
	fields, err := trustedAuthResults(h, id)
	if err != nil {
		return senderCheck{detail: fmt.Sprintf("sender not verified: Authentication-Results from %s unreadable: %v", id, err)}
	}
	if len(fields) == 0 {
		return senderCheck{detail: "sender not verified: no Authentication-Results from " + id}
	}
	v := judge(fields, domain, opts.DKIMAlignment == AlignStrict)
	if !v.verified {
		v.detail = "sender not verified by " + id + ": " + v.detail
	}
	return v
}

// strictFromDomain reads the one mailbox of the one From field and returns
// its domain (lower case, A-labels), or says why the From is not clean (in
// words of its own: the field's text is not quoted).
func strictFromDomain(h message.Header) (string, error) {
	vs := h.Values("From")
	switch {
	case len(vs) == 0:
		return "", errors.New("no From field")
	case len(vs) > 1:
		return "", fmt.Errorf("%d From fields", len(vs))
	}
	v := vs[0]
	if len(v) > maxFromBytes {
		return "", fmt.Errorf("From field of %d bytes, limit %d", len(v), maxFromBytes)
	}
	if groupSyntax(v) {
		return "", errors.New("From is a group, not one mailbox")
	}
	p := mail.AddressParser{WordDecoder: newWordDecoder()}
	a, err := p.Parse(v)
	if err != nil {
		// net/mail's texts may quote the field after a comma or a colon.
		why := strings.TrimPrefix(err.Error(), "mail: ")
		if i := strings.IndexAny(why, ",:"); i >= 0 {
			why = why[:i]
		}
		return "", fmt.Errorf("From is not one RFC 5322 mailbox (%s)", why)
	}
	i := strings.LastIndexByte(a.Address, '@')
	if i < 0 {
		return "", errors.New("From address has no domain")
	}
	d := a.Address[i+1:]
	if strings.HasPrefix(d, "[") {
		return "", errors.New("From address has an address literal for a domain")
	}
	domain := normDomain(d)
	if domain == "" {
		return "", errors.New("From address's domain is not a host name in canonical form")
	}
	return domain, nil
}

// groupSyntax: v has a ':' or ';' outside quoted strings, comments and
// domain literals — an RFC 5322 group (which net/mail reads as its member
// when it has one), never a mailbox.
func groupSyntax(v string) bool {
	s, err := stripCFWS(v)
	if err != nil {
		return false // unbalanced: the parser refuses it
	}
	quoted, escaped, literal := false, false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case quoted:
			switch r {
			case '\\':
				escaped = true
			case '"':
				quoted = false
			}
		case literal:
			literal = r != ']'
		case r == '"':
			quoted = true
		case r == '[':
			literal = true
		case r == ':' || r == ';':
			return true
		}
	}
	return false
}

// trustedAuthResults returns the parsed results of the fields of authserv-id
// id that the rule trusts, topmost first.
func trustedAuthResults(h message.Header, id string) ([][]authres.Result, error) {
	var out [][]authres.Result
	seenReceived, tookTop := false, false
	fs := h.Fields()
	for fs.Next() {
		switch strings.ToLower(fs.Key()) {
		case "received":
			seenReceived = true
		case "authentication-results":
			if tookTop && seenReceived {
				// Below the first Received field and not the topmost:
				// the sender may have written it.
				continue
			}
			v := fs.Value()
			if fieldServID(v) != strings.ToLower(id) {
				continue
			}
			if len(v) > maxAuthResultsBytes {
				return nil, fmt.Errorf("field of %d bytes, limit %d", len(v), maxAuthResultsBytes)
			}
			results, err := parseAuthResults(v)
			if err != nil {
				return nil, err
			}
			tookTop = true
			if len(out) == maxTrustedAuthResults {
				return nil, fmt.Errorf("more than %d fields", maxTrustedAuthResults)
			}
			out = append(out, results)
		}
	}
	return out, nil
}

// fieldServID is the authserv-id of an Authentication-Results value,
// lower-cased: its first word once comments are removed. It is read apart
// from the parser so that a field of ours the parser rejects is still
// recognised as ours (and makes the message unverified) rather than
// skipped, which would let a lower one count as the topmost.
func fieldServID(v string) string {
	if len(v) > maxAuthResultsBytes {
		v = v[:maxAuthResultsBytes]
	}
	if s, err := stripCFWS(v); err == nil {
		v = s
	}
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, "; \t\r\n("); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(v)
}

// parseAuthResults reads one Authentication-Results value with go-msgauth's
// parser, after removing RFC 5322 comments (which that parser does not
// understand: "(p=NONE sp=NONE)" would become parameters).
func parseAuthResults(v string) ([]authres.Result, error) {
	s, err := stripCFWS(v)
	if err != nil {
		return nil, err
	}
	_, results, err := authres.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := twiceNamed(s); err != nil {
		return nil, err
	}
	return results, nil
}

// twiceNamed reports a result that gives its method, or a property that
// names whom it is about (header.from, header.d, header.i), twice:
// go-msgauth keeps the last and would hide the first. Results are split
// as go-msgauth splits them (at every ';', then at white space).
func twiceNamed(s string) error {
	parts := strings.Split(s, ";")
	for _, part := range parts[1:] {
		words := strings.Fields(part)
		if len(words) == 0 {
			continue
		}
		method, _, _ := strings.Cut(words[0], "=")
		method = strings.ToLower(method)
		seen := map[string]bool{method: true}
		for _, w := range words[1:] {
			k, _, ok := strings.Cut(w, "=")
			k = strings.ToLower(k)
			if !ok || (k != method && k != "header.from" && k != "header.d" && k != "header.i") {
				continue
			}
			if seen[k] {
				return fmt.Errorf("a %s result gives %s twice", clip(headerText(method), 32), clip(headerText(k), 32))
			}
			seen[k] = true
		}
	}
	return nil
}

// stripCFWS removes comments, honouring quoted strings and quoted pairs,
// and reports unbalanced parentheses or quotes.
func stripCFWS(s string) (string, error) {
	var b strings.Builder
	depth, quoted, escaped := 0, false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
			if depth == 0 {
				b.WriteRune(r)
			}
			continue
		case r == '\\' && (quoted || depth > 0):
			escaped = true
			if depth == 0 {
				b.WriteRune(r)
			}
			continue
		case quoted:
			if r == '"' {
				quoted = false
			}
			b.WriteRune(r)
		case r == '(':
			if depth == 0 {
				b.WriteByte(' ')
			}
			depth++
		case r == ')':
			if depth == 0 {
				return "", fmt.Errorf("unbalanced ')'")
			}
			depth--
		case depth > 0:
		case r == '"':
			quoted = true
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	if depth > 0 || quoted {
		return "", fmt.Errorf("unterminated comment or quoted string")
	}
	return b.String(), nil
}

// judge applies the verdict rule to the results of the trusted fields.
func judge(fields [][]authres.Result, fromDomain string, strict bool) senderCheck {
	var dmarcPass, dmarcOther, dkimPass bool
	var seen []string
	note := func(s string) {
		if len(seen) < 8 {
			seen = append(seen, s)
		}
	}
	for _, results := range fields {
		for _, r := range results {
			switch r := r.(type) {
			case *authres.DMARCResult:
				named := unquote(r.From)
				switch {
				case named != "" && normDomain(named) != fromDomain:
					dmarcOther = true
					note("dmarc=" + shown(string(r.Value)) + " for another domain (" + shown(named) + ")")
				case r.Value == authres.ResultPass && named == "":
					dmarcOther = true
					note("dmarc=pass names no header.from")
				case r.Value == authres.ResultPass:
					dmarcPass = true
				case r.Value == authres.ResultNone:
					note("dmarc=none")
				default:
					dmarcOther = true
					note("dmarc=" + shown(string(r.Value)))
				}
			case *authres.DKIMResult:
				d := normDomain(unquote(r.Domain))
				if unquote(r.Domain) == "" {
					i := unquote(r.Identifier)
					d = normDomain(i[strings.LastIndexByte(i, '@')+1:])
				}
				switch {
				case r.Value == authres.ResultPass && aligned(d, fromDomain, strict):
					dkimPass = true
				case r.Value == authres.ResultPass:
					note("dkim=pass not aligned" + dOrNothing(d))
				default:
					note("dkim=" + shown(string(r.Value)) + dOrNothing(d))
				}
			case *authres.SPFResult:
				if r.Value != authres.ResultPass {
					note("spf=" + shown(string(r.Value)))
				}
			}
		}
	}
	switch {
	case dmarcOther:
		return senderCheck{detail: strings.Join(seen, "; ")}
	case dmarcPass:
		return senderCheck{verified: true, detail: "dmarc=pass"}
	case dkimPass:
		return senderCheck{verified: true, detail: "aligned dkim=pass, no DMARC policy"}
	}
	if !containsPrefix(seen, "dmarc=") {
		note("no dmarc result")
	}
	note("no aligned dkim=pass")
	return senderCheck{detail: strings.Join(seen, "; ")}
}

// shown is a value from a result as a reason may quote it: one line, at
// most 64 bytes.
func shown(s string) string { return clip(headerText(s), 64) }

func dOrNothing(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

func containsPrefix(list []string, p string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func unquote(s string) string { return strings.Trim(strings.TrimSpace(s), `"`) }

// normDomain is a domain in canonical form — lower case, A-labels, without
// a trailing dot — or "" when it is not a host name, or is written in a
// form IDNA only maps to one (full-width or decomposed letters, a
// compatibility character): only a domain written as itself compares
// equal to another.
func normDomain(d string) string {
	d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	if d == "" {
		return ""
	}
	a, err := idna.Lookup.ToASCII(d)
	if err != nil || a == "" {
		return ""
	}
	if a != d {
		u, err := idna.Lookup.ToUnicode(a)
		if err != nil || u != d {
			return ""
		}
	}
	return a
}

// aligned: the signing domain d may speak for From's domain — the same
// domain, or (relaxed, unless strict) the same organisational domain (one
// label below the public suffix). A domain that is itself a public suffix
// aligns only with itself.
func aligned(d, from string, strict bool) bool {
	if d == "" || from == "" {
		return false
	}
	if d == from {
		return true
	}
	if strict {
		return false
	}
	od, err1 := publicsuffix.EffectiveTLDPlusOne(d)
	of, err2 := publicsuffix.EffectiveTLDPlusOne(from)
	return err1 == nil && err2 == nil && od == of
}
