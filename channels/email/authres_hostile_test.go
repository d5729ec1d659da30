package email

import (
	"bytes"
	"net/mail"
	"strings"
	"testing"

	"github.com/emersion/go-message"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// passFor is the receiving server's field saying DMARC and an aligned
// DKIM signature passed for example.org.
const passFor = "Authentication-Results: mx.example.com; dkim=pass header.d=example.org; spf=pass smtp.mailfrom=example.org; dmarc=pass (p=REJECT) header.from=example.org"

// TestVerifySenderFrom: with results that pass for example.org, only a
// From that is one clean mailbox at example.org is verified. A From
// that another reader could take for someone else — several addresses, a
// group, trailing text, an unquoted '<' or '@' in the display name, a
// second From field, an address literal, a domain IDNA merely maps to
// example.org — is not, and the reason says what is wrong with it.
func TestVerifySenderFrom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		from   string // the From field's value; "\r\nFrom: …" adds a second field
		ok     bool
		detail string // substring of AuthDetail when not ok
	}{
		// Clean mailboxes.
		{"name-addr", "Alice <alice@example.org>", true, ""},
		{"addr-spec", "alice@example.org", true, ""},
		{"angle-addr alone", "<alice@example.org>", true, ""},
		{"quoted display name", `"Alice Example" <alice@example.org>`, true, ""},
		{"quoted display name with a comma and a colon", `"Example, Alice: Ops;" <alice@example.org>`, true, ""},
		{"display name that looks like another address", `"mallory@evil.example" <alice@example.org>`, true, ""},
		{"encoded-word decoding to another address", "=?utf-8?q?mallory=40evil.example?= <alice@example.org>", true, ""},
		{"encoded-word decoding to an angle-addr", "=?utf-8?b?PG1hbGxvcnlAZXZpbC5leGFtcGxlPg==?= <alice@example.org>", true, ""},
		{"upper case", "Alice <ALICE@EXAMPLE.ORG>", true, ""},
		{"comment", "alice@example.org (Alice)", true, ""},
		{"folded", "Alice\r\n <alice@example.org>", true, ""},
		{"UTF-8 display name", "Alíce Ëxample <alice@example.org>", true, ""},

		// What the address is, not what the name says.
		{"display name of the victim, address of the attacker", `"alice@example.org" <mallory@evil.example>`, false, "dmarc=pass for another domain (example.org)"},
		{"encoded display name of the victim, address of the attacker", "=?utf-8?q?alice=40example.org?= <mallory@evil.example>", false, "another domain"},

		// Not one clean mailbox.
		{"unquoted address as display name, unclosed angle", "mallory@evil.example <alice@example.org", false, "not one RFC 5322 mailbox"},
		{"unquoted address as display name", "mallory@evil.example <alice@example.org>", false, "not one RFC 5322 mailbox (expected single address)"},
		{"addr-spec then angle-addr", "alice@example.org <mallory@evil.example>", false, "not one RFC 5322 mailbox"},
		{"unquoted '<' in the display name", "Alice <x <alice@example.org>", false, "not one RFC 5322 mailbox"},
		{"unquoted '@' in the display name", "alice@example.org Alice <alice@example.org>", false, "not one RFC 5322 mailbox"},
		{"two addresses", "Alice <alice@example.org>, Mallory <mallory@evil.example>", false, "expected single address"},
		{"two addresses, victim last", "Mallory <mallory@evil.example>, Alice <alice@example.org>", false, "expected single address"},
		{"trailing comma", "Alice <alice@example.org>,", false, "expected single address"},
		{"trailing text", "Alice <alice@example.org> approved", false, "expected single address"},
		{"second angle-addr", "Alice <alice@example.org> <mallory@evil.example>", false, "expected single address"},
		{"group of one", "Friends: alice@example.org;", false, "From is a group"},
		{"group of two", "Friends: alice@example.org, mallory@evil.example;", false, "From is a group"},
		{"empty group", "undisclosed-recipients:;", false, "From is a group"},
		{"group without its semicolon", "Friends: alice@example.org", false, "From is a group"},
		{"two From fields", "Alice <alice@example.org>\r\nFrom: Mallory <mallory@evil.example>", false, "2 From fields"},
		{"two From fields, victim last", "Mallory <mallory@evil.example>\r\nFrom: Alice <alice@example.org>", false, "2 From fields"},
		{"empty", "", false, "not one RFC 5322 mailbox (no address)"},
		{"no domain", "alice", false, "not one RFC 5322 mailbox"},
		{"address literal", "alice@[192.0.2.1]", false, "address literal"},
		{"source route", "<@relay.example:alice@example.org>", false, "From is a group"},
		{"trailing dot", "alice@example.org.", false, "not one RFC 5322 mailbox"},
		{"double dot", "alice@example..org", false, "not one RFC 5322 mailbox"},
		{"space in the domain", "alice@exa mple.org", false, "expected single address"},
		{"underscore in the domain", "alice@exa_mple.org", false, "not a host name"},
		{"full-width domain that maps to the victim's", "Alice <alice@ｅxample.org>", false, "not a host name in canonical form"},
		{"encoded-word as the address", "=?utf-8?q?alice=40example.org?=", false, "not one RFC 5322 mailbox"},
		{"unterminated comment", "alice@example.org (Alice", false, "not one RFC 5322 mailbox"},
		{"unterminated quoted string", `"Alice <alice@example.org>`, false, "not one RFC 5322 mailbox"},
		{"control character in the name", "Alice\x01 <alice@example.org>", false, "not one RFC 5322 mailbox"},
		{"too long", strings.Repeat("A", maxFromBytes) + " <alice@example.org>", false, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseMessage(authMsg(tc.from, rcvd, passFor), authOpts())
			if err != nil {
				t.Fatal(err)
			}
			in := p.Inbound
			if in.AuthFailed == tc.ok {
				t.Fatalf("AuthFailed = %v (%q), want %v", in.AuthFailed, in.AuthDetail, !tc.ok)
			}
			if !tc.ok && !strings.Contains(in.AuthDetail, tc.detail) {
				t.Fatalf("AuthDetail = %q, want it to contain %q", in.AuthDetail, tc.detail)
			}
			if tc.ok && in.From != "alice@example.org" {
				t.Fatalf("From = %q", in.From)
			}
			// The verdict, good or bad, goes to the approval's trail.
			if want := in.AuthDetail; tc.ok && in.Evidence["senderAuth"] != "dmarc=pass" || !tc.ok && in.Evidence["senderAuth"] != want {
				t.Fatalf("evidence %v (AuthDetail %q)", in.Evidence, in.AuthDetail)
			}
			if len(in.AuthDetail) > 300 {
				t.Fatalf("AuthDetail of %d bytes quotes the field", len(in.AuthDetail))
			}
		})
	}
	// A From that is not clean is not believed even where results are not
	// checked at all.
	p, err := ParseMessage(authMsg("mallory@evil.example <alice@example.org>", rcvd), ParseOptions{TrustUnauthenticated: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Inbound.AuthFailed || !strings.Contains(p.Inbound.AuthDetail, "not one RFC 5322 mailbox") {
		t.Fatalf("trust_unauthenticated believed an unclean From: %v %q", p.Inbound.AuthFailed, p.Inbound.AuthDetail)
	}
	// And a message without any From field.
	raw := strings.Replace(string(authMsg("x@example.org", rcvd, passFor)), "From: x@example.org\r\n", "", 1)
	p, err = ParseMessage([]byte(raw), authOpts())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Inbound.AuthFailed || !strings.Contains(p.Inbound.AuthDetail, "no From field") {
		t.Fatalf("no From: %v %q", p.Inbound.AuthFailed, p.Inbound.AuthDetail)
	}
}

// TestVerifySenderResults: a verdict counts only for the domain it names.
// dmarc=pass must name From's domain in header.from (without case, U- or
// A-labels); a DMARC result for a parent, a subdomain or another domain,
// or one that names none, says the server judged another From, and the
// message is not verified. Aligned DKIM follows the configured alignment.
func TestVerifySenderResults(t *testing.T) {
	ar := func(s string) string { return "Authentication-Results: " + s }
	alice, sub, idn := "Alice <alice@example.org>", "Alice <alice@eu.example.org>", "a@bücher.example"
	for _, tc := range []struct {
		name   string
		from   string
		top    []string
		strict bool
		ok     bool
		detail string
	}{
		{"dmarc pass for From's domain", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org")}, false, true, ""},
		{"upper case everywhere", alice, []string{rcvd, ar("MX.EXAMPLE.COM; DMARC=PASS HEADER.FROM=EXAMPLE.ORG")}, false, true, ""},
		{"quoted header.from", alice, []string{rcvd, ar(`mx.example.com; dmarc=pass header.from="example.org"`)}, false, true, ""},
		{"header.from with a trailing dot", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org.")}, false, true, ""},
		{"comments everywhere", alice, []string{rcvd, ar("mx.example.com (rspamd) ; (x) dmarc=pass (policy=reject) header.from=example.org (aligned)")}, false, true, ""},
		{"IDN From, A-label header.from", idn, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=xn--bcher-kva.example")}, false, true, ""},
		{"IDN From, U-label header.from", idn, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=bücher.example")}, false, true, ""},
		{"IDN From, upper-case U-label header.from", idn, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=BÜCHER.example")}, false, true, ""},
		{"A-label From, U-label header.from", "a@xn--bcher-kva.example", []string{rcvd, ar("mx.example.com; dmarc=pass header.from=bücher.example")}, false, true, ""},

		{"dmarc pass naming no domain", alice, []string{rcvd, ar("mx.example.com; dmarc=pass")}, false, false, "dmarc=pass names no header.from"},
		{"header.from only in a comment", alice, []string{rcvd, ar("mx.example.com; dmarc=pass (header.from=example.org)")}, false, false, "names no header.from"},
		{"header.from with spaces around '='", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from = example.org")}, false, false, "names no header.from"},
		{"dmarc pass for the parent of From's domain", sub, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org")}, false, false, "dmarc=pass for another domain (example.org)"},
		{"dmarc pass for a subdomain of From's domain", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=eu.example.org")}, false, false, "dmarc=pass for another domain (eu.example.org)"},
		{"dmarc pass for a look-alike", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org.evil.example")}, false, false, "another domain"},
		{"dmarc pass for a full-width look-alike", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=ｅxample.org")}, false, false, "another domain"},
		{"dmarc pass for a domain hidden in an address", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=mallory@example.org")}, false, false, "another domain"},
		{"dmarc pass twice-named header.from, ours last", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=evil.example header.from=example.org")}, false, false, "gives header.from twice"},
		{"dmarc pass twice-named header.from, ours first", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org header.from=evil.example")}, false, false, "gives header.from twice"},
		{"dmarc given twice in one result", alice, []string{rcvd, ar("mx.example.com; dmarc=fail dmarc=pass header.from=example.org")}, false, false, "gives dmarc twice"},
		{"dmarc pass beside a dmarc fail for the same domain", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org; dmarc=fail header.from=example.org")}, false, false, "dmarc=fail"},
		{"dmarc pass beside a result for another domain", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org; dmarc=none header.from=evil.example")}, false, false, "dmarc=none for another domain (evil.example)"},
		{"dmarc none for another domain, aligned dkim", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; dmarc=none header.from=evil.example")}, false, false, "another domain"},
		{"another server's pass above ours", alice, []string{ar("mx.attacker.example; dmarc=pass header.from=example.org"), rcvd, ar("mx.example.com; dmarc=none header.from=example.org")}, false, false, "no aligned dkim=pass"},
		{"another server's pass, ours absent", alice, []string{rcvd, ar("mx.example.com.attacker.example; dmarc=pass header.from=example.org")}, false, false, "no Authentication-Results from mx.example.com"},
		{"several dkim results, none aligned and passing", alice, []string{rcvd, ar("mx.example.com; dkim=fail header.d=example.org; dkim=pass header.d=evil.example; dmarc=none header.from=example.org")}, false, false, "dkim=pass not aligned (evil.example)"},
		{"dkim pass for a look-alike", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org.evil.example")}, false, false, "not aligned"},
		{"dkim pass for a suffix-sharing domain", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=evilexample.org")}, false, false, "not aligned"},
		{"dkim pass with header.d twice", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=evil.example header.d=example.org")}, false, false, "gives header.d twice"},

		{"relaxed: a subdomain signs", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=mail.example.org")}, false, true, ""},
		{"relaxed: header.i of a subdomain", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.i=alice@mail.example.org")}, false, true, ""},
		{"strict: the same domain signs", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=EXAMPLE.org")}, true, true, ""},
		{"strict: a subdomain does not align", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=mail.example.org")}, true, false, "dkim=pass not aligned (mail.example.org)"},
		{"strict: the parent does not align", sub, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org")}, true, false, "not aligned"},
		{"strict: header.i of a subdomain does not align", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.i=@mail.example.org")}, true, false, "not aligned"},
		{"strict does not touch DMARC", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=mail.example.org; dmarc=pass header.from=example.org")}, true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := authOpts()
			if tc.strict {
				opts.DKIMAlignment = AlignStrict
			}
			p, err := ParseMessage(authMsg(tc.from, tc.top...), opts)
			if err != nil {
				t.Fatal(err)
			}
			in := p.Inbound
			if in.AuthFailed == tc.ok {
				t.Fatalf("AuthFailed = %v (%q), want %v", in.AuthFailed, in.AuthDetail, !tc.ok)
			}
			if !tc.ok && !strings.Contains(in.AuthDetail, tc.detail) {
				t.Fatalf("AuthDetail = %q, want it to contain %q", in.AuthDetail, tc.detail)
			}
		})
	}
}

func TestIntakeConfigDKIMAlignment(t *testing.T) {
	base := IntakeConfig{Host: "imap.example.org", Username: "u", Parse: ParseOptions{AuthServID: testServID}}
	for _, a := range []string{"", AlignRelaxed, AlignStrict} {
		c := base
		c.Parse.DKIMAlignment = a
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", a, err)
		}
	}
	c := base
	c.Parse.DKIMAlignment = "s"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "dkim alignment") {
		t.Errorf("alignment \"s\" accepted: %v", err)
	}
}

// FuzzSenderVerification: whatever the From field and the receiving
// server's results say, a verified sender is one clean mailbox (net/mail
// reads exactly that address, and the field is no group), and its domain
// is one the results vouch for: a header.from, header.d or header.i
// domain in them is From's domain or shares its organisational domain.
func FuzzSenderVerification(f *testing.F) {
	for _, s := range [][2]string{
		{"Alice <alice@example.org>", "dmarc=pass header.from=example.org"},
		{"mallory@evil.example <alice@example.org", "dmarc=pass"},
		{"mallory@evil.example <alice@example.org>", "dmarc=pass header.from=evil.example"},
		{`"alice@example.org" <mallory@evil.example>`, "dmarc=pass header.from=example.org"},
		{"Friends: alice@example.org;", "dmarc=pass header.from=example.org"},
		{"alice@example.org, mallory@evil.example", "dkim=pass header.d=example.org"},
		{"a@eu.example.org", "dmarc=pass header.from=example.org; dkim=pass header.d=example.org"},
		{"a@bücher.example", "dmarc=pass header.from=xn--bcher-kva.example"},
		{"alice@ｅxample.org", "dmarc=pass header.from=example.org"},
		{"=?utf-8?q?alice=40example.org?= <mallory@evil.example>", "dkim=pass header.i=@example.org; dmarc=none"},
		{"Alice <alice@example.org>\r\nFrom: mallory@evil.example", "dmarc=pass header.from=example.org"},
		{"alice@example.org", "dmarc=pass header.from=evil.example header.from=example.org"},
		{"alice@example.org", "DMARC=PASS (x) HEADER.FROM=\"EXAMPLE.ORG\""},
	} {
		f.Add(s[0], s[1])
	}
	opts := authOpts()
	f.Fuzz(func(t *testing.T, from, results string) {
		results = strings.NewReplacer("\r", " ", "\n", " ").Replace(results)
		raw := authMsg(from, rcvd, "Authentication-Results: mx.example.com; "+results)
		p, err := ParseMessage(raw, opts)
		if err != nil || p.Inbound.AuthFailed {
			return
		}
		// Verified: the From must be one clean mailbox…
		vs := headerValues(t, raw, "From")
		if len(vs) != 1 {
			t.Fatalf("verified with %d From fields: %q", len(vs), from)
		}
		a, err := (&mail.AddressParser{WordDecoder: newWordDecoder()}).Parse(vs[0])
		if err != nil {
			t.Fatalf("verified a From net/mail refuses: %q: %v", vs[0], err)
		}
		if groupSyntax(vs[0]) {
			t.Fatalf("verified a group: %q", vs[0])
		}
		if !strings.EqualFold(a.Address, p.Inbound.From) {
			t.Fatalf("verified %q, but From reads %q", p.Inbound.From, a.Address)
		}
		// …whose domain the results name.
		_, d, _ := strings.Cut(strings.ToLower(a.Address[strings.LastIndexByte(a.Address, '@'):]), "@")
		d, err = idna.Lookup.ToASCII(d)
		if err != nil {
			t.Fatalf("verified a domain IDNA refuses: %q", a.Address)
		}
		od, _ := publicsuffix.EffectiveTLDPlusOne(d)
		vouched := false
		stripped, _ := stripCFWS(results)
		for _, w := range strings.FieldsFunc(stripped, func(r rune) bool { return r == ' ' || r == '\t' || r == ';' }) {
			k, v, ok := strings.Cut(w, "=")
			k = strings.ToLower(k)
			if !ok || (k != "header.from" && k != "header.d" && k != "header.i") {
				continue
			}
			v = strings.TrimSuffix(strings.ToLower(strings.Trim(v, `"`)), ".")
			v = v[strings.LastIndexByte(v, '@')+1:]
			if av, err := idna.Lookup.ToASCII(v); err == nil {
				v = av
			}
			ov, _ := publicsuffix.EffectiveTLDPlusOne(v)
			if v == d || (od != "" && ov == od) {
				vouched = true
			}
		}
		if !vouched {
			t.Fatalf("verified %q (%s) from results %q that name no aligned domain", a.Address, p.Inbound.AuthDetail, results)
		}
	})
}

// headerValues reads the values of a field of raw as ParseMessage does.
func headerValues(t *testing.T, raw []byte, key string) []string {
	t.Helper()
	e, err := message.Read(bytes.NewReader(raw))
	if e == nil {
		t.Fatal(err)
	}
	return e.Header.Values(key)
}
