package fetch

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Sentinel errors. Every refusal wraps ErrRefused; the text after it says
// why (for logs, never for a message's recipient).
var (
	// ErrRefused: the URL or the address it leads to is not one content may
	// make beachd fetch from.
	ErrRefused = errors.New("fetch refused")
	// ErrTooManyRedirects: more redirects than Config.MaxRedirects.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrTooLarge: the body is longer than Config.MaxBytes.
	ErrTooLarge = errors.New("response body too large")
)

// MaxAllowEntries bounds Config.Allow.
const MaxAllowEntries = 1024

// refusedRange is a block of addresses refused unless allowed.
type refusedRange struct {
	prefix netip.Prefix
	what   string
}

func ranges(rs ...string) []refusedRange {
	out := make([]refusedRange, 0, len(rs)/2)
	for i := 0; i < len(rs); i += 2 {
		out = append(out, refusedRange{netip.MustParsePrefix(rs[i]), rs[i+1]})
	}
	return out
}

// refusedV4 are the IPv4 blocks that are not the public internet
// (IANA's special-purpose registry, less the globally reachable ones that
// no artifact lives at anyway).
var refusedV4 = ranges(
	"0.0.0.0/8", "unspecified (this network)",
	"10.0.0.0/8", "private (RFC 1918)",
	"100.64.0.0/10", "shared address space (CGNAT)",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local (cloud metadata)",
	"172.16.0.0/12", "private (RFC 1918)",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation (TEST-NET-1)",
	"192.88.99.0/24", "6to4 relay anycast",
	"192.168.0.0/16", "private (RFC 1918)",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation (TEST-NET-2)",
	"203.0.113.0/24", "documentation (TEST-NET-3)",
	"224.0.0.0/4", "multicast",
	"255.255.255.255/32", "broadcast",
	"240.0.0.0/4", "reserved",
)

// refusedV6 are checked after the IPv4-carrying forms; anything outside
// 2000::/3 (global unicast) is refused besides.
var refusedV6 = ranges(
	"::/128", "unspecified",
	"::1/128", "loopback",
	"::/96", "IPv4-compatible (deprecated)",
	"64:ff9b:1::/48", "local-use NAT64",
	"100::/64", "discard-only",
	"2001::/32", "Teredo",
	"2001::/23", "IETF protocol assignments",
	"2001:db8::/32", "documentation",
	"3fff::/20", "documentation",
	"fc00::/7", "unique local (RFC 4193)",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local (deprecated)",
	"ff00::/8", "multicast",
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// embeddedV4 is the IPv4 address an IPv6 address carries by a standard
// translation (IPv4-mapped, NAT64 well-known prefix, 6to4), if any.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if a.Is4In6() {
		return a.Unmap(), true
	}
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// refusal says why a is refused by default, or "" for a public address.
func refusal(a netip.Addr) string {
	a = a.WithZone("")
	if v4, ok := embeddedV4(a); ok {
		if w := refusal(v4); w != "" {
			if a.Is4In6() {
				return "IPv4-mapped " + w
			}
			return w + " inside an IPv6 translation prefix"
		}
		return ""
	}
	if a.Is4() {
		for _, r := range refusedV4 {
			if r.prefix.Contains(a) {
				return r.what
			}
		}
		return ""
	}
	if !a.IsValid() {
		return "not an IP address"
	}
	for _, r := range refusedV6 {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if !global6.Contains(a) {
		return "not global unicast"
	}
	return ""
}

// Policy decides which URLs and addresses content may make beachd fetch
// from: the public internet, plus what the operator allows. The zero
// Policy allows nothing but the public internet. It is safe for
// concurrent use.
type Policy struct {
	hosts map[string]bool
	nets  []netip.Prefix
}

// ParseAllow reads allow-list entries: host names (matched exactly, case
// and a trailing dot aside), IP addresses and CIDR prefixes. The error
// names each bad entry by its index: "allow[2]: …".
func ParseAllow(entries []string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}}
	if len(entries) > MaxAllowEntries {
		return nil, fmt.Errorf("allow: %d entries, at most %d", len(entries), MaxAllowEntries)
	}
	var errs []error
	for i, e := range entries {
		host, pfx, err := parseEntry(e)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("allow[%d]: %w", i, err))
		case host != "":
			p.hosts[host] = true
		default:
			p.nets = append(p.nets, pfx)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// CheckAllowEntry checks one allow-list entry, for a configuration check
// that names the entry itself.
func CheckAllowEntry(s string) error {
	_, _, err := parseEntry(s)
	return err
}

// parseEntry reads one allow-list entry: a host name, or a network.
func parseEntry(s string) (host string, pfx netip.Prefix, err error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", pfx, errors.New("empty entry")
	case len(s) > 253:
		return "", pfx, errors.New("longer than 253 characters")
	case strings.Contains(s, "://"):
		return "", pfx, fmt.Errorf("%q is a URL; give a host name or a network (CIDR)", s)
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return "", pfx, fmt.Errorf("%q is not a network in CIDR notation (such as 10.8.0.0/16)", s)
		}
		if p != p.Masked() {
			return "", pfx, fmt.Errorf("%q has bits set past its prefix length; the network is %s", s, p.Masked())
		}
		if p.Bits() == 0 {
			return "", pfx, fmt.Errorf("%q allows every address; list the networks content may reach", s)
		}
		return "", p, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return "", pfx, fmt.Errorf("%q: an address with a zone cannot be allowed", s)
		}
		return "", netip.PrefixFrom(a, a.BitLen()), nil
	}
	h := strings.TrimSuffix(strings.ToLower(s), ".")
	if !validHostname(h) {
		return "", pfx, fmt.Errorf("%q is neither a host name (letters, digits, '-' and '.' labels; no port, no wildcard) nor an IP address or CIDR network", s)
	}
	return h, pfx, nil
}

// validHostname: dot-separated labels of 1-63 letters, digits, '-' and
// '_', not starting or ending with '-'.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normHost lower-cases a host name and drops a trailing dot.
func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// HostAllowed reports whether the operator allowed host by name; such a
// host is dialled whatever it resolves to.
func (p *Policy) HostAllowed(host string) bool {
	return p != nil && p.hosts[normHost(host)]
}

// netAllowed: a, or the IPv4 address it carries, is in an allowed network.
func (p *Policy) netAllowed(a netip.Addr) bool {
	if p == nil {
		return false
	}
	a = a.WithZone("")
	cands := []netip.Addr{a}
	if v4, ok := embeddedV4(a); ok {
		cands = append(cands, v4)
	}
	for _, n := range p.nets {
		for _, c := range cands {
			if n.Contains(c) {
				return true
			}
		}
	}
	return false
}

// CheckAddr returns nil when a may be dialled: a public address, or one in
// an allowed network. Otherwise an error wrapping ErrRefused says why.
func (p *Policy) CheckAddr(a netip.Addr) error {
	if !a.IsValid() {
		return fmt.Errorf("%w: not an IP address", ErrRefused)
	}
	if p.netAllowed(a) {
		return nil
	}
	if w := refusal(a); w != "" {
		return fmt.Errorf("%w: %s is %s (allow it with fetch.allow)", ErrRefused, a, w)
	}
	return nil
}

// CheckURL checks what can be checked before dialling: http or https, a
// host, no user-info, a valid port, and, for an IP-literal host, the
// address. A host name is checked again when dialled, on each address it
// resolves to.
func (p *Policy) CheckURL(u *url.URL) error {
	if u == nil {
		return fmt.Errorf("%w: no URL", ErrRefused)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Errorf("%w: scheme %q is not http or https", ErrRefused, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: user-info in the URL", ErrRefused)
	}
	host := u.Hostname()
	if host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: no host", ErrRefused)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: port %q", ErrRefused, port)
		}
	}
	if p.HostAllowed(host) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("%w: an address with a zone", ErrRefused)
		}
		return p.CheckAddr(a)
	}
	if strings.ContainsAny(host, "%[]") {
		return fmt.Errorf("%w: host %q", ErrRefused, host)
	}
	return nil
}
