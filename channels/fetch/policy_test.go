package fetch

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// TestDefaultRefusesWhatIsNotThePublicInternet is the address table of the
// contract: every form of loopback, private, link-local (cloud metadata),
// CGNAT, multicast, unspecified and reserved address is refused, IPv4
// inside IPv6 included; public addresses pass.
func TestDefaultRefusesWhatIsNotThePublicInternet(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.1.2.3", "127.255.255.254",
		"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.0.1", "192.168.255.255",
		"169.254.169.254", "169.254.0.1",
		"100.64.0.1", "100.127.255.255",
		"0.0.0.0", "0.1.2.3",
		"255.255.255.255", "240.0.0.1", "224.0.0.1", "239.255.255.250",
		"192.0.0.1", "192.0.2.1", "198.51.100.1", "203.0.113.1", "198.18.0.1", "198.19.255.255", "192.88.99.1",
		"::", "::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0", "::ffff:192.168.1.1",
		"::7f00:1", "::a9fe:a9fe",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1", "64:ff9b:1::1",
		"2002:7f00:1::1", "2002:a9fe:a9fe::", "2002:c0a8:101::1",
		"fc00::1", "fd12:3456:789a::1", "fe80::1", "fe80::1%eth0", "febf::1", "fec0::1",
		"ff02::1", "ff05::1:3",
		"100::1", "2001:db8::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:2::1", "3fff::1",
		"4000::1", "::2", "1::1",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "11.0.0.1", "172.32.0.1", "172.15.255.255", "100.128.0.1",
		"100.63.255.255", "169.253.0.1", "192.169.0.1", "223.255.255.254",
		"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "2001:4860:4860::8888",
	}
	var p *Policy // the zero policy: nothing allowed
	for _, s := range refused {
		a := netip.MustParseAddr(s)
		if err := p.CheckAddr(a); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want refused", s, err)
		}
	}
	for _, s := range allowed {
		if err := p.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
}

func TestAllowedNetworksAndHosts(t *testing.T) {
	p, err := ParseAllow([]string{"10.8.0.0/16", "127.0.0.0/8", "fd00:1::/32", "192.168.1.7", "Files.Internal.Example."})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"10.8.1.1": true, "10.9.0.1": false, "127.0.0.1": true, "::ffff:127.0.0.1": true,
		"64:ff9b::7f00:1": true, "fd00:1::5": true, "fd00:2::5": false, "192.168.1.7": true,
		"192.168.1.8": false, "169.254.169.254": false, "::1": false,
	} {
		err := p.CheckAddr(netip.MustParseAddr(s))
		if (err == nil) != want {
			t.Errorf("%s: %v, want allowed=%v", s, err, want)
		}
	}
	for _, h := range []string{"files.internal.example", "FILES.internal.example.", "files.internal.example"} {
		if !p.HostAllowed(h) {
			t.Errorf("%s not allowed", h)
		}
	}
	for _, h := range []string{"internal.example", "x.files.internal.example", "files.internal.example.evil", "localhost"} {
		if p.HostAllowed(h) {
			t.Errorf("%s allowed", h)
		}
	}
}

func TestParseAllowNamesTheBadEntry(t *testing.T) {
	for _, c := range []struct{ entry, want string }{
		{"", "empty"},
		{"https://files.example", "is a URL"},
		{"10.8.0.0/33", "not a network in CIDR notation"},
		{"10.8.1.0/16", "the network is 10.8.0.0/16"},
		{"0.0.0.0/0", "allows every address"},
		{"::/0", "allows every address"},
		{"files.example:443", "neither a host name"},
		{"*.example.org", "neither a host name"},
		{"fe80::1%eth0", "zone"},
		{"-bad.example", "neither a host name"},
		{"a..b", "neither a host name"},
		{strings.Repeat("a", 254), "longer than 253"},
	} {
		_, err := ParseAllow([]string{"ok.example", c.entry})
		if err == nil || !strings.Contains(err.Error(), "allow[1]: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want allow[1] and %q", c.entry, err, c.want)
		}
	}
	if _, err := ParseAllow(make([]string, MaxAllowEntries+1)); err == nil {
		t.Error("too many entries accepted")
	}
	if _, err := ParseAllow([]string{"files.internal.example", "10.8.0.0/16", "2001:db8::/32", "192.168.0.10", "under_score.example"}); err != nil {
		t.Errorf("good entries refused: %v", err)
	}
}

func TestCheckURL(t *testing.T) {
	p, err := ParseAllow([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	for raw, ok := range map[string]bool{
		"https://files.example.org/a.pdf":   true,
		"http://files.example.org:8080/a":   true,
		"HTTP://files.example.org/a":        true,
		"http://127.0.0.1:9/a":              true, // allowed network
		"http://[::ffff:127.0.0.1]/a":       true, // the same address
		"ftp://files.example.org/a":         false,
		"file:///etc/passwd":                false,
		"gopher://files.example.org/":       false,
		"http://user:pw@files.example.org/": false,
		"http://user@files.example.org/":    false,
		"http:///a":                         false,
		"http:files.example.org":            false,
		"http://files.example.org:0/":       false,
		"http://files.example.org:99999/":   false,
		"http://169.254.169.254/latest/":    false,
		"http://[::1]/":                     false,
		"http://[fe80::1%25eth0]/":          false,
		"http://10.0.0.1/":                  false,
		"http://0.0.0.0:8025/metrics":       false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		err = p.CheckURL(u)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", raw, err, ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v does not wrap ErrRefused", raw, err)
		}
	}
}
