package twilio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"

	twclient "github.com/twilio/twilio-go/client"
	openapi "github.com/twilio/twilio-go/rest/api/v2010"
	contentapi "github.com/twilio/twilio-go/rest/content/v1"

	"github.com/cool-ai/beachd/channels/fetch"
)

// DefaultAPIBaseURL is Twilio's REST API.
const DefaultAPIBaseURL = "https://api.twilio.com"

// DefaultContentBaseURL is Twilio's Content API.
const DefaultContentBaseURL = "https://content.twilio.com"

// maxErrorBody bounds how much of an error response is kept.
const maxErrorBody = 64 << 10

// ClientConfig configures the shared Twilio REST client.
type ClientConfig struct {
	AccountSID string
	AuthToken  string
	// APIBaseURL replaces https://api.twilio.com (and every *.twilio.com
	// host) in every call: a regional edge or a test double. Default
	// DefaultAPIBaseURL.
	APIBaseURL string
	// ContentBaseURL replaces https://content.twilio.com (the Content
	// API). Default: APIBaseURL when that is set (a test double or proxy
	// that serves all of Twilio), else DefaultContentBaseURL.
	ContentBaseURL string
	// Timeout bounds one HTTP call; default 15s.
	Timeout time.Duration
	// Transport is the connection pool; default a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// MediaFetch is the guarded client that follows Twilio's redirect from
	// a media URL to its media store, without credentials (FetchMedia).
	// Default: fetch.New with the zero fetch.Config (public internet only).
	MediaFetch *fetch.Client
}

// Validate reports the first problem with c.
func (c ClientConfig) Validate() error {
	if c.AccountSID == "" || c.AuthToken == "" {
		return errors.New("twilio: account_sid and auth_token are required")
	}
	if _, err := parseBaseURL(c.APIBaseURL); err != nil {
		return err
	}
	if c.ContentBaseURL != "" {
		if _, err := parseBaseURL(c.ContentBaseURL); err != nil {
			return fmt.Errorf("twilio: content_base_url: %w", err)
		}
	}
	return nil
}

func parseBaseURL(s string) (*url.URL, error) {
	if s == "" {
		s = DefaultAPIBaseURL
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("twilio: api_base_url %q must be an absolute http(s) URL", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// callInfo is what the transport saw of one HTTP exchange: twilio-go drops
// the status line and headers of a failed call, and needs them for
// Retry-After and for telling "maybe sent" from "never sent".
type callInfo struct {
	mu sync.Mutex
	// wrote: the request was written to the connection (a failure after
	// this may have reached Twilio).
	wrote  bool
	status int
	header http.Header
	// body of an error response (status ≥ 400), at most maxErrorBody.
	body []byte
}

func (ci *callInfo) snapshot() (wrote bool, status int, header http.Header, body []byte) {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	return ci.wrote, ci.status, ci.header, ci.body
}

// messageAPI is the part of Twilio's REST API this package uses. The real
// one is *Client; tests substitute nothing here and talk to fakes over HTTP.
type messageAPI interface {
	CreateMessage(ctx context.Context, p *openapi.CreateMessageParams) (*openapi.ApiV2010Message, *callInfo, error)
	FetchMessage(ctx context.Context, sid string) (*openapi.ApiV2010Message, *callInfo, error)
	RecentMessages(ctx context.Context, to, from string, pageSize int) ([]openapi.ApiV2010Message, *callInfo, error)
}

var _ messageAPI = (*Client)(nil)

// Client is the one twilio-go client SMS and WhatsApp share: credentials,
// base URL, timeout and the connection pool. twilio-go takes no context and
// has no base-URL option, so each call gets a light per-call view of the
// client whose transport carries the call's context, rewrites Twilio's host
// to APIBaseURL and records what the HTTP exchange looked like. The pool
// (Transport) is shared by all calls.
type Client struct {
	creds     *twclient.Credentials
	sid       string
	base      *url.URL
	content   *url.URL
	timeout   time.Duration
	transport http.RoundTripper
	media     *fetch.Client
}

// NewClient builds the shared client. It makes no network call.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, _ := parseBaseURL(cfg.APIBaseURL)
	contentURL := cfg.ContentBaseURL
	if contentURL == "" {
		contentURL = cfg.APIBaseURL
	}
	if contentURL == "" {
		contentURL = DefaultContentBaseURL
	}
	content, err := parseBaseURL(contentURL)
	if err != nil {
		return nil, err
	}
	if cfg.MediaFetch == nil {
		if cfg.MediaFetch, err = fetch.New(fetch.Config{}); err != nil {
			return nil, fmt.Errorf("twilio: media fetch client: %w", err)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &Client{creds: twclient.NewCredentials(cfg.AccountSID, cfg.AuthToken), sid: cfg.AccountSID,
		base: base, content: content, timeout: cfg.Timeout, transport: cfg.Transport, media: cfg.MediaFetch}, nil
}

// api returns a twilio-go API service bound to ctx for one call.
func (c *Client) api(ctx context.Context) (*openapi.ApiService, *callInfo) {
	rh, info := c.requestHandler(ctx)
	return openapi.NewApiService(rh), info
}

// contentService returns a twilio-go Content API service bound to ctx for
// one call.
func (c *Client) contentService(ctx context.Context) (*contentapi.ApiService, *callInfo) {
	rh, info := c.requestHandler(ctx)
	return contentapi.NewApiService(rh), info
}

// httpClient is the per-call HTTP client: ctx's, rewriting Twilio's hosts
// to the configured base URLs, recording the exchange in info, and never
// following a redirect.
func (c *Client) httpClient(ctx context.Context, info *callInfo) *http.Client {
	return &http.Client{
		Transport: &callTransport{ctx: ctx, next: c.transport, base: c.base, content: c.content, info: info},
		Timeout:   c.timeout,
		// Like twilio-go's default client: never follow redirects.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (c *Client) requestHandler(ctx context.Context) (*twclient.RequestHandler, *callInfo) {
	info := &callInfo{}
	tc := &twclient.Client{Credentials: c.creds, HTTPClient: c.httpClient(ctx, info)}
	tc.SetAccountSid(c.sid)
	rh := twclient.NewRequestHandler(tc)
	// The base URLs are the only thing that chooses the host: ignore
	// TWILIO_EDGE / TWILIO_REGION from the environment.
	rh.Edge, rh.Region = "", ""
	return rh, info
}

// CreateMessage sends one message.
func (c *Client) CreateMessage(ctx context.Context, p *openapi.CreateMessageParams) (*openapi.ApiV2010Message, *callInfo, error) {
	api, info := c.api(ctx)
	m, err := api.CreateMessage(p)
	return m, info, err
}

// FetchMessage reads one message by SID.
func (c *Client) FetchMessage(ctx context.Context, sid string) (*openapi.ApiV2010Message, *callInfo, error) {
	api, info := c.api(ctx)
	m, err := api.FetchMessage(sid, nil)
	return m, info, err
}

// RecentMessages lists the first page (newest first) of messages to `to`
// from `from` (any sender when from is empty).
func (c *Client) RecentMessages(ctx context.Context, to, from string, pageSize int) ([]openapi.ApiV2010Message, *callInfo, error) {
	api, info := c.api(ctx)
	p := (&openapi.ListMessageParams{}).SetTo(to).SetPageSize(pageSize)
	if from != "" {
		p.SetFrom(from)
	}
	page, err := api.PageMessage(p, "", "")
	if err != nil {
		return nil, info, err
	}
	return page.Messages, info, nil
}

// callTransport binds one call's context, points Twilio's hosts at the
// configured base URLs (content.twilio.com at content, every other
// *.twilio.com at base), and records the exchange in info.
type callTransport struct {
	ctx     context.Context
	next    http.RoundTripper
	base    *url.URL
	content *url.URL
	info    *callInfo
}

func (t *callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(t.ctx)
	if h := r.URL.Hostname(); h == "twilio.com" || strings.HasSuffix(h, ".twilio.com") {
		base := t.base
		if h == "content.twilio.com" && t.content != nil {
			base = t.content
		}
		u := *r.URL
		u.Scheme = base.Scheme
		u.Host = base.Host
		u.Path = base.Path + u.Path
		if u.RawPath != "" {
			u.RawPath = base.Path + u.RawPath
		}
		r.URL = &u
		r.Host = ""
	}
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err != nil {
			return // the request did not go out whole: Twilio cannot have acted on it
		}
		t.info.mu.Lock()
		t.info.wrote = true
		t.info.mu.Unlock()
	}}
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), trace))
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.info.mu.Lock()
	t.info.status = resp.StatusCode
	t.info.header = resp.Header
	t.info.mu.Unlock()
	if resp.StatusCode >= 400 {
		// twilio-go does not close an error response's body: read it here
		// (bounded), close the connection's body, and hand over a copy.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		t.info.mu.Lock()
		t.info.body = b
		t.info.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return resp, nil
}
