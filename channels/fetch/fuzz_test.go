package fetch

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseAllow: any list parses or fails without panicking; what parses
// is a host name the matcher finds again or a masked, non-empty network.
func FuzzParseAllow(f *testing.F) {
	for _, s := range []string{"files.internal.example\n10.8.0.0/16", "127.0.0.0/8", "::/0", "fe80::1%eth0",
		"https://x", "a..b", "10.8.1.0/16", "2001:db8::/32\n192.168.0.10", "*.x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		entries := strings.Split(list, "\n")
		p, err := ParseAllow(entries)
		if err != nil {
			if !strings.Contains(err.Error(), "allow") {
				t.Fatalf("error names no entry: %v", err)
			}
			return
		}
		for _, e := range entries {
			host, pfx, err := parseEntry(e)
			if err != nil {
				t.Fatalf("%q: accepted in the list, refused alone: %v", e, err)
			}
			if host != "" && !p.HostAllowed(host) {
				t.Fatalf("%q: host %q not matched", e, host)
			}
			if host == "" && (pfx.Bits() == 0 || pfx != pfx.Masked() || !p.netAllowed(pfx.Addr())) {
				t.Fatalf("%q: network %s", e, pfx)
			}
		}
	})
}

// FuzzCheckURL: a URL passes only when it is http(s), has a host, carries
// no user-info, and an IP-literal host is a public address.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://files.example.org/a.pdf", "http://user:pw@x/", "http://[::ffff:127.0.0.1]/",
		"http://127.0.0.1:8025/metrics", "file:///etc/passwd", "http://[fe80::1%25eth0]/", "HTTP://0x7f.1/",
		"http://169.254.169.254/latest/meta-data/", "http://[64:ff9b::7f00:1]/"} {
		f.Add(s)
	}
	var p *Policy
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if p.CheckURL(u) != nil {
			return
		}
		if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
			t.Fatalf("%q: scheme %q passed", raw, u.Scheme)
		}
		if u.User != nil || u.Hostname() == "" {
			t.Fatalf("%q: user-info or no host passed", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && refusal(a) != "" {
			t.Fatalf("%q: %s passed", raw, a)
		}
	})
}

// FuzzCheckAddr: an IPv4 address and its IPv4-mapped, NAT64 and 6to4 forms
// are judged alike.
func FuzzCheckAddr(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{8, 8, 8, 8})
	f.Add([]byte{169, 254, 169, 254})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b))
		want := refusal(v4) == ""
		var mapped, n64, six [16]byte
		mapped[10], mapped[11] = 0xff, 0xff
		copy(mapped[12:], b)
		n64[0], n64[1], n64[2], n64[3] = 0, 0x64, 0xff, 0x9b
		copy(n64[12:], b)
		six[0], six[1] = 0x20, 0x02
		copy(six[2:], b)
		for _, a := range [][16]byte{mapped, n64, six} {
			addr := netip.AddrFrom16(a)
			if got := refusal(addr) == ""; got != want {
				t.Fatalf("%s: public=%v, but %s: public=%v", v4, want, addr, got)
			}
		}
	})
}

// FuzzRedirectTarget: whatever Location an agent answers, what goes into
// the error is a marker or a bare origin — no path, query or user-info —
// bounded and valid UTF-8.
func FuzzRedirectTarget(f *testing.F) {
	for _, s := range []string{"", "/x", "http://evil.example:81/p?token=t", "https://u:p@h/", "//h/p", "%zz",
		"javascript:alert(1)", "http://[::1]:9/", "http://" + strings.Repeat("a", 300) + "/"} {
		f.Add(s)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://agent.example.org/a2a", nil)
	f.Fuzz(func(t *testing.T, loc string) {
		resp := &http.Response{Header: http.Header{}, Request: req}
		resp.Header["Location"] = []string{loc}
		got := RedirectTarget(resp)
		if !utf8.ValidString(got) || len(got) > 120 {
			t.Fatalf("%q: %q", loc, got)
		}
		if strings.HasPrefix(got, "(") {
			return
		}
		u, err := url.Parse(got)
		if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Path != "" || u.Host == "" {
			t.Fatalf("%q: %q is not a bare origin", loc, got)
		}
	})
}
