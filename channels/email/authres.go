package email

import (
	"fmt"
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
// The verdict. With From's domain D, the sender is verified when the
// fields read report
//
//   - dmarc=pass (for header.from D, when the result names one), and no
//     other DMARC result; or
//   - no DMARC result other than dmarc=none (D publishes no DMARC record,
//     or the server does not check DMARC), and dkim=pass for a signing
//     domain aligned with D: the same organisational domain (relaxed
//     alignment, RFC 7489 §3.1.1, with the public suffix list).
//
// Anything else is not verified: no field from the authserv-id, an
// unreadable field, dmarc=fail, temperror, permerror or any other DMARC
// result, dmarc=none (or none at all) without an aligned DKIM pass — SPF
// alone never verifies, since an SPF pass says nothing about From and
// spf=fail with dmarc=none is exactly what a spoofed From looks like —, a
// From with no address, or with more than one. A message that is not
// verified is reported as AuthFailed and quarantined: recorded with the
// reason, never obeyed.

// Limits of the verification.
const (
	// maxTrustedAuthResults bounds the fields read (above the first
	// Received field there are rarely more than two).
	maxTrustedAuthResults = 16
	// maxAuthResultsBytes bounds one field; a longer one is unreadable.
	maxAuthResultsBytes = 16 << 10
)

// senderCheck is the verdict of verifySender.
type senderCheck struct {
	verified bool
	// detail says why not (or what verified, for logs).
	detail string
}

// verifySender applies the rule above to a message's header.
func verifySender(h message.Header, fromCount int, from string, opts ParseOptions) senderCheck {
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
	switch {
	case fromCount == 0 || from == "":
		return senderCheck{detail: "sender not verified: no From address"}
	case fromCount > 1:
		return senderCheck{detail: "sender not verified: more than one From address"}
	}
	_, domain, _ := strings.Cut(from, "@")
	v := judge(fields, normDomain(domain))
	if !v.verified {
		v.detail = "sender not verified by " + id + ": " + v.detail
	}
	return v
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
	return results, nil
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
func judge(fields [][]authres.Result, fromDomain string) senderCheck {
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
				hf := normDomain(unquote(r.From))
				switch {
				case r.Value == authres.ResultPass && (hf == "" || hf == fromDomain):
					dmarcPass = true
				case r.Value == authres.ResultPass:
					dmarcOther = true
					note("dmarc=pass for another domain (" + hf + ")")
				case r.Value == authres.ResultNone:
					note("dmarc=none")
				default:
					dmarcOther = true
					note("dmarc=" + string(r.Value))
				}
			case *authres.DKIMResult:
				d := normDomain(unquote(r.Domain))
				if d == "" {
					_, d, _ = strings.Cut(unquote(r.Identifier), "@")
					d = normDomain(d)
				}
				switch {
				case r.Value == authres.ResultPass && aligned(d, fromDomain):
					dkimPass = true
				case r.Value == authres.ResultPass:
					note("dkim=pass not aligned (" + d + ")")
				default:
					note("dkim=" + string(r.Value) + dOrNothing(d))
				}
			case *authres.SPFResult:
				if r.Value != authres.ResultPass {
					note("spf=" + string(r.Value))
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

// normDomain lower-cases a domain, in its ASCII (A-label) form, without a
// trailing dot; "" when it is not a usable domain.
func normDomain(d string) string {
	d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	if d == "" || strings.ContainsAny(d, " \t@;,<>\"") {
		return ""
	}
	a, err := idna.Lookup.ToASCII(d)
	if err != nil {
		return d
	}
	return a
}

// aligned is DMARC's relaxed alignment: the signing domain and From's
// domain have the same organisational domain (one label below the public
// suffix). A domain that is itself a public suffix aligns only with itself.
func aligned(d, from string) bool {
	if d == "" || from == "" {
		return false
	}
	if d == from {
		return true
	}
	od, err1 := publicsuffix.EffectiveTLDPlusOne(d)
	of, err2 := publicsuffix.EffectiveTLDPlusOne(from)
	return err1 == nil && err2 == nil && od == of
}
