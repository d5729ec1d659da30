package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Defaults of Config and Endpoint.
const (
	DefaultTimeout         = 15 * time.Second
	DefaultMaxResponseBody = 64 << 10
	// MaxRetryAfter caps a peer's Retry-After.
	MaxRetryAfter = 24 * time.Hour
	// EventType is the body's "type".
	EventType = "beach.envelope"
)

// Errors of delivery.
var (
	// ErrUnknownEndpoint: the delivery names an endpoint that is not configured.
	ErrUnknownEndpoint = errors.New("unknown webhook endpoint")
	// ErrEndpointDisabled: the endpoint answered 410 Gone and is disabled.
	ErrEndpointDisabled = errors.New("webhook endpoint disabled after 410 Gone")
	// ErrCircuitOpen: the endpoint's circuit is open; nothing was sent.
	ErrCircuitOpen = errors.New("webhook endpoint circuit open")
	// ErrRedirect: the endpoint answered 3xx; redirects are not followed.
	ErrRedirect = errors.New("webhook endpoint redirected; redirects are not followed, update the URL")
	// ErrStatus: the endpoint answered a non-2xx status.
	ErrStatus = errors.New("webhook endpoint refused")
	// ErrTransport: the request failed before an answer (connect, reset, timeout).
	ErrTransport = errors.New("webhook request failed")
)

// Endpoint is one configured receiver.
type Endpoint struct {
	Name string
	URL  string
	// Signer signs with the endpoint's secrets (several while rotating).
	Signer *Signer
	// Consumes lists the part types this endpoint asks for (llm-context,
	// a2ui-surface, consumer types that require peer consumes).
	Consumes []string
	// Timeout bounds one attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxConcurrency bounds attempts in flight to this endpoint (through
	// Admit/Done); zero means unlimited.
	MaxConcurrency int
	// Headers are added to every request (e.g. an Authorization the
	// receiver wants). They cannot replace the webhook-* headers,
	// Content-Type or User-Agent.
	Headers map[string]string
}

// Validate reports the first problem of e.
func (e Endpoint) Validate() error {
	if e.Name == "" {
		return errors.New("endpoint name is empty")
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint %s: url %q is not an absolute http(s) URL", e.Name, e.URL)
	}
	if e.Signer == nil {
		return fmt.Errorf("endpoint %s: %w", e.Name, ErrNoSecrets)
	}
	if e.Timeout < 0 || e.MaxConcurrency < 0 {
		return fmt.Errorf("endpoint %s: negative timeout or max_concurrency", e.Name)
	}
	return nil
}

// Filter produces the envelope an endpoint receives. The default filters
// with the registry for the webhook channel and the endpoint's consumes;
// the daemon may plug in the renderer's Webhook, which must give the same
// result for the same input.
type Filter func(job *channels.Job, ep *Endpoint) (*envelope.Envelope, error)

// Config configures a Deliverer.
type Config struct {
	// Endpoints by name (the delivery's To). Required, may be empty.
	Endpoints []Endpoint
	// Registry filters envelopes; required unless Filter is set.
	Registry *envelope.Registry
	// Filter overrides the registry filter (see Filter).
	Filter Filter
	// Version goes in the User-Agent: "beachd/<Version>"; default "dev".
	Version string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Transport is shared by every endpoint; nil means a transport tuned
	// for many requests to few hosts (NewTransport).
	Transport http.RoundTripper
	// Breaker tunes the per-endpoint circuit breaker.
	Breaker BreakerConfig
	// MaxResponseBody bounds how much of an answer is read and kept;
	// default 64 KiB.
	MaxResponseBody int64
	// Log receives endpoint disable/enable events; default discards.
	Log *slog.Logger
}

// Deliverer sends deliveries of channel "webhook". It is safe for
// concurrent use.
type Deliverer struct {
	endpoints map[string]*endpointState // read-only after New
	filter    Filter
	ua        string
	now       func() time.Time
	maxBody   int64
	log       *slog.Logger
}

var (
	_ channels.Deliverer      = (*Deliverer)(nil)
	_ channels.IDFreeAdmitter = (*Deliverer)(nil)
)

type endpointState struct {
	Endpoint
	client   *http.Client
	extra    http.Header
	breaker  *breaker
	inflight atomic.Int64

	mu         sync.Mutex
	disabled   bool
	disabledAt time.Time
}

// NewTransport returns the shared transport: keep-alive connections reused
// across deliveries, enough idle connections per host for a busy endpoint,
// and the proxy of HTTPS_PROXY/HTTP_PROXY/NO_PROXY when set (loopback
// endpoints are never proxied).
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 0, // the per-attempt context bounds it
	}
}

// New builds a Deliverer. It starts nothing.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Filter == nil {
		if cfg.Registry == nil {
			return nil, errors.New("webhook: a registry or a filter is required")
		}
		cfg.Filter = RegistryFilter(cfg.Registry)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Transport == nil {
		cfg.Transport = NewTransport()
	}
	if cfg.MaxResponseBody <= 0 {
		cfg.MaxResponseBody = DefaultMaxResponseBody
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &Deliverer{
		endpoints: make(map[string]*endpointState, len(cfg.Endpoints)),
		filter:    cfg.Filter,
		ua:        "beachd/" + cfg.Version,
		now:       cfg.Now,
		maxBody:   cfg.MaxResponseBody,
		log:       cfg.Log,
	}
	for _, ep := range cfg.Endpoints {
		if err := ep.Validate(); err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		if _, dup := d.endpoints[ep.Name]; dup {
			return nil, fmt.Errorf("webhook: endpoint %s configured twice", ep.Name)
		}
		if ep.Timeout == 0 {
			ep.Timeout = DefaultTimeout
		}
		ep.Consumes = append([]string(nil), ep.Consumes...)
		extra := http.Header{}
		for k, v := range ep.Headers {
			if reservedHeader(k) {
				return nil, fmt.Errorf("webhook: endpoint %s: header %s is set by beachd", ep.Name, k)
			}
			extra.Set(k, v)
		}
		d.endpoints[ep.Name] = &endpointState{
			Endpoint: ep,
			extra:    extra,
			breaker:  newBreaker(cfg.Breaker),
			client: &http.Client{
				Transport: cfg.Transport,
				// The attempt's context carries the timeout; redirects are
				// answers, not instructions.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			},
		}
	}
	return d, nil
}

func reservedHeader(k string) bool {
	switch strings.ToLower(k) {
	case HeaderID, HeaderTimestamp, HeaderSignature, "content-type", "user-agent", "content-length", "host":
		return true
	}
	return false
}

// Admit reports whether a delivery may be claimed now, and if so reserves
// one of its endpoint's concurrency slots; the caller must call Done exactly
// once for every true answer, when the attempt is over or the claim is
// abandoned. It is fast and takes no lock but the endpoint's breaker mutex,
// so it can run inside the claim transaction. Deliveries of other channels
// and unknown or disabled endpoints are admitted (the latter fail
// permanently in Deliver, so that they are dead-lettered, not stuck).
func (d *Deliverer) Admit(del *store.Delivery) bool {
	if del.Channel != envelope.ChannelWebhook {
		return true
	}
	ep := d.endpoints[del.To]
	if ep == nil {
		return true
	}
	if !ep.breaker.mayAttempt(d.now()) {
		return false
	}
	if !ep.breaker.closed() {
		// After the cooldown one job probes the endpoint; the others wait
		// for its verdict rather than fail fast and spend an attempt.
		return ep.inflight.CompareAndSwap(0, 1)
	}
	if ep.MaxConcurrency <= 0 {
		ep.inflight.Add(1)
		return true
	}
	for {
		n := ep.inflight.Load()
		if n >= int64(ep.MaxConcurrency) {
			return false
		}
		if ep.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// AdmitsWithoutID: Admit and Done look at the endpoint only
// (channels.IDFreeAdmitter), so fresh deliveries can be handed off.
func (d *Deliverer) AdmitsWithoutID() {}

// Done releases the slot Admit reserved for del.
func (d *Deliverer) Done(del *store.Delivery) {
	if del.Channel != envelope.ChannelWebhook {
		return
	}
	if ep := d.endpoints[del.To]; ep != nil {
		if ep.inflight.Add(-1) < 0 {
			ep.inflight.Add(1) // unmatched Done; keep the count sane
		}
	}
}

// InFlight is the number of admitted, not yet done, deliveries to endpoint.
func (d *Deliverer) InFlight(endpoint string) int {
	if ep := d.endpoints[endpoint]; ep != nil {
		return int(ep.inflight.Load())
	}
	return 0
}

// EndpointStatus is an endpoint's health, for operators.
type EndpointStatus struct {
	Name       string       `json:"name"`
	Breaker    BreakerState `json:"breaker"`
	ProbeAt    time.Time    `json:"probeAt,omitzero"` // when an open circuit lets a probe through
	Disabled   bool         `json:"disabled"`
	DisabledAt time.Time    `json:"disabledAt,omitzero"`
	InFlight   int          `json:"inFlight"`
}

// Status reports an endpoint's breaker and disabled state.
func (d *Deliverer) Status(endpoint string) (EndpointStatus, bool) {
	ep := d.endpoints[endpoint]
	if ep == nil {
		return EndpointStatus{}, false
	}
	st, probe := ep.breaker.snapshot()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return EndpointStatus{Name: endpoint, Breaker: st, ProbeAt: probe, Disabled: ep.disabled,
		DisabledAt: ep.disabledAt, InFlight: int(ep.inflight.Load())}, true
}

// Enable re-enables an endpoint disabled by a 410 answer.
func (d *Deliverer) Enable(endpoint string) bool {
	ep := d.endpoints[endpoint]
	if ep == nil {
		return false
	}
	ep.mu.Lock()
	was := ep.disabled
	ep.disabled, ep.disabledAt = false, time.Time{}
	ep.mu.Unlock()
	if was {
		d.log.Info("webhook endpoint re-enabled", "endpoint", endpoint)
	}
	return true
}

func (ep *endpointState) isDisabled() (bool, time.Time) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.disabled, ep.disabledAt
}

// Endpoint returns the configured endpoint of that name.
func (d *Deliverer) Endpoint(name string) (Endpoint, bool) {
	ep := d.endpoints[name]
	if ep == nil {
		return Endpoint{}, false
	}
	return ep.Endpoint, true
}

// body is the webhook's JSON body (docs/webhooks.md).
type body struct {
	Type      string   `json:"type"`
	Timestamp string   `json:"timestamp"`
	Data      bodyData `json:"data"`
}

type bodyData struct {
	DeliveryID string             `json:"deliveryId"`
	Envelope   *envelope.Envelope `json:"envelope"`
}

// Payload builds the body of an attempt at time at. It is exported for
// `beachd render --channel webhook` and tests.
func (d *Deliverer) Payload(job *channels.Job, endpoint string, at time.Time) ([]byte, error) {
	ep := d.endpoints[endpoint]
	if ep == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownEndpoint, endpoint)
	}
	return d.payload(job, ep, at)
}

func (d *Deliverer) payload(job *channels.Job, ep *endpointState, at time.Time) ([]byte, error) {
	env, err := d.filter(job, &ep.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("filter envelope: %w", err)
	}
	// segmentio's encoder writes the bytes encoding/json writes (checked
	// by TestBodyEncodedAsEncodingJSONDoes and its fuzz test) at less than
	// half the CPU: every attempt encodes the whole envelope.
	b, err := segjson.Marshal(body{
		Type:      EventType,
		Timestamp: at.UTC().Format(time.RFC3339),
		Data:      bodyData{DeliveryID: job.Delivery.ID, Envelope: env},
	})
	if err != nil {
		return nil, fmt.Errorf("encode webhook body: %w", err)
	}
	return b, nil
}

// Deliver POSTs the job to its endpoint once and classifies the answer (see
// the package comment).
func (d *Deliverer) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	del := job.Delivery
	ep := d.endpoints[del.To]
	if ep == nil {
		return nil, channels.Permanent(fmt.Errorf("%w: %q", ErrUnknownEndpoint, del.To))
	}
	if off, at := ep.isDisabled(); off {
		return nil, channels.Permanent(fmt.Errorf("%w at %s; enable it again once the receiver is fixed", ErrEndpointDisabled, at.UTC().Format(time.RFC3339)))
	}
	now := d.now()
	tk, ok, wait := ep.breaker.allow(now)
	if !ok {
		return nil, &channels.Error{RetryAfter: wait,
			Err: fmt.Errorf("%w: next probe in %s", ErrCircuitOpen, wait.Round(time.Second))}
	}
	res, failed, err := d.attempt(ctx, job, ep, now)
	if failed && errors.Is(ctx.Err(), context.Canceled) {
		// Our caller gave up (shutdown): no verdict on the endpoint.
		ep.breaker.abandon(tk)
	} else {
		ep.breaker.report(tk, d.now(), failed)
	}
	return res, err
}

// attempt makes one request; failed tells the breaker whether the endpoint
// looked unwell.
func (d *Deliverer) attempt(ctx context.Context, job *channels.Job, ep *endpointState, now time.Time) (res *channels.Result, failed bool, err error) {
	payload, err := d.payload(job, ep, now)
	if err != nil {
		return nil, false, channels.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, ep.Timeout)
	defer cancel()
	// wrote: the whole request went out, so the receiver may have acted on
	// it even if no answer comes back.
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(tctx, http.MethodPost, ep.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, false, channels.Permanent(fmt.Errorf("build request: %w", err))
	}
	h := req.Header
	for k, v := range ep.extra {
		h[k] = v
	}
	h["Content-Type"] = []string{"application/json"}
	h["User-Agent"] = []string{d.ua}
	ep.Signer.SetHeaders(h, job.Delivery.ID, now, payload)
	// A present but empty Idempotency-Key is not sent; it tells net/http the
	// POST may be replayed on a fresh connection when a kept-alive one turns
	// out to be closed. That is safe: webhook-id makes a repeat recognisable.
	h["Idempotency-Key"] = nil

	resp, err := ep.client.Do(req)
	if err != nil {
		return nil, true, d.transportError(ctx, err, wrote.Load())
	}
	respBody, truncated, readErr := readBounded(resp.Body, d.maxBody)
	resp.Body.Close()
	rc := receipt(resp, respBody, truncated, readErr)

	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return &channels.Result{Receipt: rc}, false, nil
	case code == http.StatusGone:
		d.disable(ep, now)
		return nil, false, &channels.Error{Permanent: true, Receipt: &rc,
			Err: fmt.Errorf("%w: 410 Gone: the receiver asked not to be sent webhooks any more; endpoint %s disabled", ErrStatus, ep.Name)}
	case code >= 300 && code < 400:
		loc := resp.Header.Get("Location")
		return nil, false, &channels.Error{Permanent: true, Receipt: &rc,
			Err: fmt.Errorf("%w: %d to %q", ErrRedirect, code, redactURL(loc))}
	case code == http.StatusTooManyRequests || code >= 500:
		return nil, true, &channels.Error{Receipt: &rc,
			RetryAfter: retryAfter(resp.Header.Get("Retry-After"), d.now()),
			Err:        fmt.Errorf("%w: %d %s", ErrStatus, code, http.StatusText(code))}
	default:
		return nil, false, &channels.Error{Permanent: true, Receipt: &rc,
			Err: fmt.Errorf("%w: %d %s", ErrStatus, code, http.StatusText(code))}
	}
}

func (d *Deliverer) disable(ep *endpointState, now time.Time) {
	ep.mu.Lock()
	was := ep.disabled
	if !was {
		ep.disabled, ep.disabledAt = true, now
	}
	ep.mu.Unlock()
	if !was {
		d.log.Warn("webhook endpoint answered 410 Gone; disabled until re-enabled or restart", "endpoint", ep.Name)
	}
}

// transportError classifies a failure without an HTTP answer: always
// temporary; MaybeSent when the request had been written completely (the
// receiver may have acted on it).
func (d *Deliverer) transportError(ctx context.Context, err error, wrote bool) error {
	kind := "connection failed"
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = "timed out"
	case errors.Is(err, context.Canceled):
		kind = "cancelled"
	}
	rc := channels.Receipt{
		Data: map[string]any{"error": kind},
		Meta: map[string]any{"source": "http", "error": kind},
	}
	return &channels.Error{MaybeSent: wrote, Receipt: &rc, Err: fmt.Errorf("%w: %s: %w", ErrTransport, kind, err)}
}

// readBounded reads up to max bytes of r; past that it drains up to 256 KiB
// more so that the connection can be reused, and reports truncation.
func readBounded(r io.Reader, max int64) (b []byte, truncated bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(b)) > max {
		b, truncated = b[:max], true
		_, _ = io.CopyN(io.Discard, r, 256<<10)
	}
	return b, truncated, err
}

// receiptHeaders are kept in receipts; others (cookies, for one) are not.
func keepHeader(k string) bool {
	switch k {
	case "Set-Cookie", "Authorization", "Www-Authenticate", "Proxy-Authenticate":
		return false
	}
	return true
}

func receipt(resp *http.Response, b []byte, truncated bool, readErr error) channels.Receipt {
	headers := make(map[string]string, len(resp.Header))
	n := 0
	for k, v := range resp.Header {
		if !keepHeader(k) {
			continue
		}
		if n++; n > 32 {
			break
		}
		hv := strings.Join(v, ", ")
		if len(hv) > 512 {
			hv = hv[:512]
		}
		headers[k] = hv
	}
	data := map[string]any{"status": resp.StatusCode, "body": string(b)}
	if truncated {
		data["bodyTruncated"] = true
	}
	if readErr != nil {
		data["bodyError"] = readErr.Error()
	}
	return channels.Receipt{Data: data, Meta: map[string]any{"source": "http", "status": resp.StatusCode, "headers": headers}}
}

// retryAfter parses Retry-After as delay-seconds or an HTTP date, relative
// to now; invalid or past values give 0; values are capped at MaxRetryAfter.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d < 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}

// redactURL drops the query and userinfo of a URL for error text.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
