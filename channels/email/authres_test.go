package email

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testServID = "mx.example.com"

func authOpts() ParseOptions {
	return ParseOptions{ReplyDomain: "reply.beachd.test", ReplyLocal: "approvals", AuthServID: testServID}
}

// authMsg builds a reply whose header starts with top (lines, top first).
func authMsg(from string, top ...string) []byte {
	var b strings.Builder
	for _, l := range top {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("From: " + from + "\r\nTo: approvals+" + tokA + "@reply.beachd.test\r\nSubject: Re: x\r\nMessage-ID: <m@x>\r\n\r\nApprove\r\n")
	return []byte(b.String())
}

const rcvd = "Received: from sender.example (sender.example [198.51.100.1]) by mx.example.com (Postfix) with ESMTPS id 1; Mon, 15 Jan 2024 10:00:00 +0000"

// TestVerifySenderRule is the verification rule as a table: which results,
// in which fields, verify a From.
func TestVerifySenderRule(t *testing.T) {
	ar := func(s string) string { return "Authentication-Results: " + s }
	alice := "Alice <alice@example.org>"
	for _, tc := range []struct {
		name   string
		from   string
		top    []string
		ok     bool
		detail string // substring of AuthDetail when not ok
	}{
		// What verifies.
		{"dmarc pass", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org")}, true, ""},
		{"dmarc pass beats an aligned dkim fail", alice, []string{rcvd, ar("mx.example.com; dkim=fail header.d=example.org; dmarc=pass header.from=example.org")}, true, ""},
		{"dmarc none, aligned dkim pass", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; dmarc=none header.from=example.org")}, true, ""},
		{"no dmarc result, aligned dkim pass", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org")}, true, ""},
		{"aligned dkim pass via header.i", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.i=@example.org")}, true, ""},
		{"relaxed alignment: parent signs for subdomain", "a@eu.example.org", []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org")}, true, ""},
		{"relaxed alignment: subdomain signs for parent", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=mail.example.org")}, true, ""},
		{"relaxed alignment under a multi-label suffix", "a@shop.example.co.uk", []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.co.uk")}, true, ""},
		{"one aligned pass beside a failing signature", alice, []string{rcvd, ar("mx.example.com; dkim=fail header.d=example.org; dkim=pass header.d=example.org")}, true, ""},
		{"dmarc none, spf fail, aligned dkim pass (forwarded mail)", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; spf=fail smtp.mailfrom=example.org; dmarc=none")}, true, ""},
		{"authserv-id compared without case, version accepted", alice, []string{rcvd, ar("MX.Example.COM 1; dmarc=pass header.from=example.org")}, true, ""},
		{"comments and quoted values", alice, []string{rcvd, ar(`mx.example.com (amavis; v=2); dkim=pass (2048-bit key; "unprotected") header.d="example.org"; dmarc=pass (p=REJECT sp=NONE dis=NONE) header.from=example.org`)}, true, ""},
		{"two fields above the first Received (a block)", alice, []string{ar("mx.example.com; spf=pass smtp.mailfrom=example.org"), ar("mx.example.com; dkim=pass header.d=example.org"), rcvd}, true, ""},
		{"topmost field below our own Received fields", alice, []string{"Received: by imap.example.com with LMTP", rcvd, ar("mx.example.com; dmarc=pass header.from=example.org")}, true, ""},
		{"internationalised From domain", "a@bücher.example", []string{rcvd, ar("mx.example.com; dkim=pass header.d=xn--bcher-kva.example")}, true, ""},

		// What does not.
		{"no Authentication-Results", alice, []string{rcvd}, false, "no Authentication-Results from mx.example.com"},
		{"only another server's results", alice, []string{rcvd, ar("mx.attacker.example; dmarc=pass header.from=example.org")}, false, "no Authentication-Results from mx.example.com"},
		{"dmarc fail", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; dmarc=fail header.from=example.org")}, false, "dmarc=fail"},
		{"dmarc permerror", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; dmarc=permerror header.from=example.org")}, false, "dmarc=permerror"},
		{"dmarc temperror", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; dmarc=temperror")}, false, "dmarc=temperror"},
		{"dmarc pass for another domain", alice, []string{rcvd, ar("mx.example.com; dmarc=pass header.from=attacker.example")}, false, "another domain"},
		{"dmarc none, spf fail, no dkim", alice, []string{rcvd, ar("mx.example.com; dkim=none; spf=fail smtp.mailfrom=example.org; dmarc=none header.from=example.org")}, false, "spf=fail"},
		{"dmarc none, spf pass only", alice, []string{rcvd, ar("mx.example.com; spf=pass smtp.mailfrom=example.org; dmarc=none")}, false, "no aligned dkim=pass"},
		{"nothing but none", alice, []string{rcvd, ar("mx.example.com; none")}, false, "no aligned dkim=pass"},
		{"dkim pass not aligned", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=mailer.example")}, false, "not aligned"},
		{"no alignment across a public suffix", "a@victim.co.uk", []string{rcvd, ar("mx.example.com; dkim=pass header.d=attacker.co.uk")}, false, "not aligned"},
		{"signer is the public suffix", "a@victim.co.uk", []string{rcvd, ar("mx.example.com; dkim=pass header.d=co.uk")}, false, "not aligned"},
		{"aligned dkim fail", alice, []string{rcvd, ar("mx.example.com; dkim=fail header.d=example.org")}, false, "dkim=fail (example.org)"},
		{"forged lower field cannot cancel a fail", alice, []string{rcvd, ar("mx.example.com; dkim=fail header.d=example.org"), "Received: by relay.attacker.example", ar("mx.example.com; dkim=pass header.d=example.org; dmarc=pass")}, false, "dkim=fail"},
		{"forged field directly below the real one", alice, []string{rcvd, ar("mx.example.com; dmarc=none; dkim=none"), ar("mx.example.com; dkim=pass header.d=example.org")}, false, "no aligned dkim=pass"},
		{"forged lower field cannot fill a gap", alice, []string{rcvd, ar("mx.example.com; spf=pass smtp.mailfrom=example.org"), ar("mx.example.com; dmarc=pass header.from=example.org")}, false, "no aligned dkim=pass"},
		{"unreadable field of ours is not skipped", alice, []string{rcvd, ar("mx.example.com; dkim=pass (unterminated header.d=example.org"), ar("mx.example.com; dmarc=pass")}, false, "unreadable"},
		{"unsupported version of ours is not skipped", alice, []string{rcvd, ar("mx.example.com 2; dmarc=fail"), ar("mx.example.com; dmarc=pass")}, false, "unreadable"},
		{"malformed result", alice, []string{rcvd, ar("mx.example.com; dmarc")}, false, "unreadable"},
		{"two From addresses", "alice@example.org, mallory@attacker.example", []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org")}, false, "From is not one RFC 5322 mailbox (expected single address)"},
		{"no From address", "undisclosed", []string{rcvd, ar("mx.example.com; dmarc=pass header.from=example.org")}, false, "From is not one RFC 5322 mailbox"},
		{"dmarc pass without header.from", alice, []string{rcvd, ar("mx.example.com; dmarc=pass")}, false, "dmarc=pass names no header.from"},
		{"dmarc pass without header.from beside an aligned dkim pass", alice, []string{rcvd, ar("mx.example.com; dkim=pass header.d=example.org; dmarc=pass")}, false, "dmarc=pass names no header.from"},
		{"too large", alice, []string{rcvd, ar("mx.example.com; dmarc=pass; x=" + strings.Repeat("a", maxAuthResultsBytes))}, false, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseMessage(authMsg(tc.from, tc.top...), authOpts())
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

// TestVerifySenderConfiguration: no authserv-id verifies nobody; the
// explicit opt-out believes From.
func TestVerifySenderConfiguration(t *testing.T) {
	raw := authMsg("alice@example.org", rcvd, "Authentication-Results: mx.example.com; dmarc=pass header.from=example.org")
	p, _ := ParseMessage(raw, ParseOptions{})
	if !p.Inbound.AuthFailed || !strings.Contains(p.Inbound.AuthDetail, "no trusted authserv-id") {
		t.Fatalf("without an authserv-id: %v %q", p.Inbound.AuthFailed, p.Inbound.AuthDetail)
	}
	spoof := authMsg("alice@example.org", rcvd)
	p, _ = ParseMessage(spoof, ParseOptions{TrustUnauthenticated: true})
	if p.Inbound.AuthFailed {
		t.Fatalf("trust_unauthenticated quarantined: %q", p.Inbound.AuthDetail)
	}
}

// authFixtures are real-shaped raw messages (testdata/auth) and whether the
// sender is verified by mx.example.com.
var authFixtures = map[string]string{ // "" = verified, else a substring of the reason
	"genuine_gmail_dmarc_pass":               "",
	"genuine_rspamd_above_received":          "",
	"spoof_no_authres":                       "no Authentication-Results from mx.example.com",
	"spoof_dmarc_none_spf_fail":              "spf=fail",
	"spoof_dmarc_permerror":                  "dmarc=permerror",
	"spoof_forged_lower_authres":             "dmarc=fail",
	"spoof_forged_directly_below":            "no aligned dkim=pass",
	"replies/gmail_top_posted":               "",
	"replies/forged_from_dmarc_fail":         "dmarc=fail",
	"replies/dkim_fail_aligned_fake_results": "dkim=fail (example.org)",
}

func TestVerifyFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/auth/*.eml")
	replies, _ := filepath.Glob("testdata/replies/*.eml")
	if len(files) < 7 || len(replies) < 20 {
		t.Fatalf("fixtures: %d auth, %d replies", len(files), len(replies))
	}
	for _, f := range append(files, replies...) {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(f), "testdata/auth/"), ".eml")
		name = strings.TrimPrefix(name, "testdata/")
		want, ok := authFixtures[name]
		if !ok && strings.HasPrefix(name, "replies/") {
			// The reply corpus has no Authentication-Results unless listed.
			want, ok = "no Authentication-Results from mx.example.com", true
		}
		t.Run(name, func(t *testing.T) {
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParseMessage(raw, ParseOptions{AuthServID: testServID, ReplyDomain: "reply.beachd.test", ReplyLocal: "approvals", ReceivedAt: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			in := p.Inbound
			if in.AuthFailed != (want != "") || !strings.Contains(in.AuthDetail, want) {
				t.Fatalf("AuthFailed = %v %q, want %q", in.AuthFailed, in.AuthDetail, want)
			}
			if in.Token != tokA && !in.TokenConflict {
				t.Fatalf("token %q", in.Token)
			}
		})
	}
}

// FuzzAuthResults: any Authentication-Results value parses without panic,
// and a field below the real one and the receiving server's Received field
// never changes the verdict, whatever it says and whoever it names.
func FuzzAuthResults(f *testing.F) {
	for _, s := range []string{
		"mx.example.com; dmarc=pass header.from=example.org",
		"mx.example.com 1; dkim=pass (2048-bit) header.d=\"example.org\"; spf=fail",
		"mx.example.com; none",
		"mx.example.com (comment (nested) \\) ); dmarc=pass",
		"mx.example.com; dkim=pass reason=\"a; b\" header.d=example.org",
		"(x) mx.example.com ; arc=pass (i=1 spf=pass)",
		"mx.example.com; dmarc",
		"\"mx.example.com\"; dmarc=pass",
	} {
		f.Add(s)
	}
	opts := authOpts()
	f.Fuzz(func(t *testing.T, v string) {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
		_, _ = parseAuthResults(v)
		_ = fieldServID(v)
		for _, real := range []string{"mx.example.com; dkim=fail header.d=example.org", "mx.example.com; dmarc=pass header.from=example.org"} {
			base := []string{rcvd, "Authentication-Results: " + real}
			want, err := ParseMessage(authMsg("alice@example.org", base...), opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseMessage(authMsg("alice@example.org", append(base, "Received: by relay.example", "Authentication-Results: "+v)...), opts)
			if err != nil {
				return // the fuzzed value broke the header itself
			}
			if got.Inbound.AuthFailed != want.Inbound.AuthFailed {
				t.Fatalf("a lower field %q changed the verdict of %q: %v → %v (%s)", v, real,
					want.Inbound.AuthFailed, got.Inbound.AuthFailed, got.Inbound.AuthDetail)
			}
		}
	})
}
