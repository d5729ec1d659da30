package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// EndpointClient returns the HTTP client for one configured endpoint whose
// requests carry credentials or data meant for it alone: an agent's A2A
// URL, an agent's approval webhook. It differs from Client, which serves
// addresses taken from content:
//
//   - It never follows a redirect. A 3xx answer comes back to the caller
//     as it is (http.ErrUseLastResponse), and the caller must treat it as
//     a failure: net/http would carry a 307's body, and every custom
//     header, to wherever Location points.
//   - The endpoint's own host:port is dialled whatever it resolves to —
//     agents run on loopback and on private networks, and the operator
//     configured that address. Any other host:port (an endpoint an agent
//     card names, were a caller to use one) is dialled only at a public
//     address, checked after resolution on every address tried, by the
//     rules of Client: loopback, private, link-local (cloud metadata),
//     CGNAT and the rest are refused, so a DNS answer cannot lead there.
//   - No proxy from the environment: a proxy would dial for us, unchecked.
//
// timeout bounds one exchange (0: none beyond the caller's context).
func EndpointClient(endpoint string, timeout time.Duration) (*http.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an absolute http(s) URL", endpoint)
	}
	own := endpointHostPort(u)
	checked := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot read the address %q", ErrRefused, address)
			}
			if w := refusal(ap.Addr()); w != "" {
				return fmt.Errorf("%w: %s is %s, and only the configured endpoint %s may be dialled at such an address",
					ErrRefused, ap.Addr(), w, own)
			}
			return nil
		},
	}
	open := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("%w: address %q", ErrRefused, addr)
			}
			if net.JoinHostPort(normHost(host), port) == own {
				return open.DialContext(ctx, network, addr)
			}
			return checked.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: NoRedirects}, nil
}

// NoRedirects is an http.Client CheckRedirect that follows none: the
// client returns the 3xx answer itself.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// RedirectTarget is the origin (scheme://host[:port]) a 3xx answer
// points at, for an error message: what the Location names, resolved
// against the request's URL, without path, query or user-info. It is
// "(no Location)" when there is none and "(unreadable Location)" when it
// cannot be parsed, or is not valid UTF-8, or its origin is longer than
// 120 bytes.
func RedirectTarget(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return "(no Location)"
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "(unreadable Location)"
	}
	if resp.Request != nil && resp.Request.URL != nil {
		u = resp.Request.URL.ResolveReference(u)
	}
	if u.Host == "" {
		return "(unreadable Location)"
	}
	o := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	if len(o) > 120 || !utf8.ValidString(o) {
		return "(unreadable Location)"
	}
	if p, err := url.Parse(o); err != nil || p.Host != u.Host {
		return "(unreadable Location)"
	}
	return o
}

// IsRedirect reports whether status is one a client following redirects
// would follow, or any other 3xx: none of them is an answer to the request.
func IsRedirect(status int) bool { return status >= 300 && status <= 399 }

// endpointHostPort is u's host (lower-cased, no trailing dot) and port
// (the scheme's default when none is given), as net.JoinHostPort writes
// them.
func endpointHostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(normHost(u.Hostname()), port)
}

// SameOrigin reports whether a and b are absolute URLs of one origin:
// scheme, host (case and a trailing dot aside) and port, the scheme's
// default port standing for an omitted one.
func SameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" || ub.Host == "" {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && endpointHostPort(ua) == endpointHostPort(ub)
}
