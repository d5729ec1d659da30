package fetch

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Config tunes a Client. The zero Config is the default: nothing but the
// public internet, 3 redirects, 30 s, 32 MiB.
type Config struct {
	// Allow lists what content may reach besides the public internet:
	// host names (exact; dialled whatever they resolve to), IP addresses
	// and CIDR networks. See ParseAllow.
	Allow []string
	// MaxRedirects bounds the redirects followed; 0 means 3, at most 10.
	MaxRedirects int
	// Timeout bounds one exchange, from dialling to the end of the body;
	// 0 means 30 s.
	Timeout time.Duration
	// MaxBytes bounds a response body: reading past it fails with
	// ErrTooLarge. 0 means 32 MiB.
	MaxBytes int64
}

// Defaults of Config.
const (
	DefaultMaxRedirects = 3
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBytes     = 32 << 20
	maxHeaderBytes      = 64 << 10
)

// Validate checks the allow list and the bounds.
func (c Config) Validate() error {
	if c.MaxRedirects < 0 || c.MaxRedirects > 10 {
		return fmt.Errorf("max redirects: %d is not between 0 and 10", c.MaxRedirects)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("timeout: must not be negative")
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("max bytes: must not be negative")
	}
	_, err := ParseAllow(c.Allow)
	return err
}

// Client fetches URLs that come from content, keeping the package's
// contract for the first request and every redirect. It is safe for
// concurrent use.
type Client struct {
	policy   *Policy
	hc       *http.Client
	maxBytes int64
}

// New builds a Client.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy, _ := ParseAllow(cfg.Allow)
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	checked := &net.Dialer{
		Timeout: 10 * time.Second,
		// Control runs for every address the dialer tries, after
		// resolution: a DNS answer cannot reach a refused address.
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot read the address %q", ErrRefused, address)
			}
			return policy.CheckAddr(ap.Addr())
		},
	}
	open := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		// Never a proxy from the environment: the proxy would dial for us,
		// past the checks.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("%w: address %q", ErrRefused, addr)
			}
			if policy.HostAllowed(host) {
				return open.DialContext(ctx, network, addr)
			}
			return checked.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  cfg.Timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	c := &Client{policy: policy, maxBytes: cfg.MaxBytes}
	maxRedirects := cfg.MaxRedirects
	c.hc = &http.Client{
		Transport: &guardedTransport{policy: policy, base: tr, maxBytes: cfg.MaxBytes},
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, maxRedirects)
			}
			return policy.CheckURL(req.URL)
		},
	}
	return c, nil
}

// HTTPClient is the guarded client as an *http.Client, for code that
// builds its own requests. Every request it sends, redirects included, is
// checked; its Transport may be wrapped (the wrapped one keeps checking).
// Each call returns a new *http.Client sharing one connection pool.
func (c *Client) HTTPClient() *http.Client {
	hc := *c.hc
	return &hc
}

// Policy is the client's address policy.
func (c *Client) Policy() *Policy { return c.policy }

// Get fetches rawURL. The caller closes the body, which fails with
// ErrTooLarge past Config.MaxBytes. A refusal wraps ErrRefused.
func (c *Client) Get(ctx context.Context, rawURL string) (*http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: not a URL", ErrRefused)
	}
	if err := c.policy.CheckURL(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	return c.hc.Do(req)
}

// guardedTransport checks each request's URL before it is sent (the first
// one too, which CheckRedirect never sees: http.Client would turn its
// user-info into an Authorization header) and bounds each body.
type guardedTransport struct {
	policy   *Policy
	base     http.RoundTripper
	maxBytes int64
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.policy.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.maxBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: Content-Length %d, at most %d", ErrTooLarge, resp.ContentLength, t.maxBytes)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.maxBytes}
	return resp, nil
}

// limitedBody fails with ErrTooLarge once more than left bytes come.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), ErrTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
