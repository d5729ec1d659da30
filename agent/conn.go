package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/cool-ai/beachd/channels/fetch"
)

// conn is one agent and the generation beachd speaks to it.
//
// What the configuration fixes is used as it is; the card at the URL's
// origin decides the rest (pick). A fixed 0.3, or a fixed 1.0 with a
// fixed binding, is the target URL without a card. A fixed 1.0 with the
// binding on auto takes the binding (and endpoint) from the card, and is
// JSON-RPC at the target URL when the card cannot help. With the version
// on auto, when the card cannot be read or offers nothing beachd speaks,
// beachd probes: it tries 1.0 at the target URL (in the fixed binding,
// or JSON-RPC), and switches generation when the agent answers that it
// does not know the version or the method. A call that fails that way
// re-reads the card (the agent may have moved since) and is retried once
// with the new choice; the card error stays visible in Status. The card
// may only name endpoints on the target URL's origin: the configured
// headers go wherever it points.
type conn struct {
	name string
	t    Target
	c    *caller
	now  func() time.Time

	mu       sync.Mutex
	cur      *Interface // nil until first resolved
	chosenBy string     // config, card or probe
	cardAt   time.Time
	cardErr  error
}

// readsCard reports whether the card decides anything for this target:
// the generation (version auto), or the binding of a fixed 1.0.
func (c *conn) readsCard() bool {
	return c.t.Version == VersionAuto || (c.t.Version == V10 && c.t.Binding == "")
}

// cardRetry is how soon a card that could not be read is read again.
const cardRetry = time.Minute

// call runs op against the current binding; on a version mismatch it
// re-resolves and runs op once more.
func (c *conn) call(ctx context.Context, op func(context.Context, binding) error) error {
	cur := c.current(ctx)
	err := c.run(ctx, cur, op)
	if err == nil || !c.readsCard() || !mismatch(err) {
		return err
	}
	next := c.reresolve(ctx, cur)
	if next == cur {
		return err
	}
	return c.run(ctx, next, op)
}

func (c *conn) run(ctx context.Context, i Interface, op func(context.Context, binding) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.t.Timeout)
	defer cancel()
	return op(ctx, c.bindingFor(i))
}

// mismatch: the agent does not speak what we sent — 1.0 agents answer a
// 0.3 request with VERSION_NOT_SUPPORTED; 0.3 agents answer SendMessage
// with "method not found" — or nothing is served there any more (HTTP 404
// or 405 without an A2A error: the agent moved its endpoint).
func mismatch(err error) bool {
	if errors.Is(err, ErrVersionNotSupported) || errors.Is(err, ErrMethodNotFound) {
		return true
	}
	var ae *Error
	if errors.As(err, &ae) {
		_, known := ae.kind()
		return !known && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed)
	}
	return false
}

func (c *conn) bindingFor(i Interface) binding {
	switch {
	case i.Version == V03:
		return rpc03{c: c.c, url: i.URL}
	case i.Binding == BindingHTTPJSON:
		return rest10{c: c.c, url: i.URL, tenant: i.Tenant}
	}
	return rpc10{c: c.c, url: i.URL, tenant: i.Tenant}
}

// current returns the interface in use, resolving it first when there is
// none or (auto) the card read has aged past CardTTL.
func (c *conn) current(ctx context.Context) Interface {
	c.mu.Lock()
	defer c.mu.Unlock()
	ttl := c.t.CardTTL
	if c.cardErr != nil {
		// An unreadable card is tried again sooner: the agent may have
		// been down when it was read.
		ttl = min(ttl, cardRetry)
	}
	if c.cur == nil || (c.readsCard() && c.now().Sub(c.cardAt) > ttl) {
		c.resolveLocked(ctx)
	}
	return *c.cur
}

// reresolve reads the card again after the agent refused cur. When another
// call already moved on, its choice is used. When the card is unreadable
// or still names cur, the probe switches generation at the target URL.
func (c *conn) reresolve(ctx context.Context, cur Interface) Interface {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && *c.cur != cur {
		return *c.cur
	}
	c.resolveLocked(ctx)
	if *c.cur != cur {
		return *c.cur
	}
	if c.t.Version == VersionAuto && c.t.Binding != BindingHTTPJSON && (c.chosenBy == "probe" || c.cardErr != nil) {
		other := Interface{URL: c.t.URL, Binding: BindingJSONRPC, Version: V03}
		if cur.Version == V03 {
			other.Version = V10
		}
		c.cur, c.chosenBy = &other, "probe"
	}
	return *c.cur
}

// resolveLocked sets c.cur from the configuration or the card.
func (c *conn) resolveLocked(ctx context.Context) {
	binding := cmp.Or(c.t.Binding, BindingJSONRPC)
	if !c.readsCard() {
		c.cur = &Interface{URL: c.t.URL, Binding: binding, Version: c.t.Version}
		c.chosenBy = "config"
		return
	}
	version := c.t.Version
	if version == VersionAuto {
		version = ""
	}
	c.cardAt = c.now()
	cardURL, err := CardURL(c.t.URL)
	var ifaces []Interface
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, c.t.CardTimeout)
		ifaces, err = c.c.fetchCard(cctx, cardURL, c.t.MaxCardBytes)
		cancel()
	}
	if err == nil {
		// The configured headers (credentials, often) go wherever the
		// card points, so the card may only point within the configured
		// origin.
		var same []Interface
		for _, i := range ifaces {
			if fetch.SameOrigin(i.URL, c.t.URL) {
				same = append(same, i)
			}
		}
		if i, ok := pick(same, version, c.t.Binding); ok {
			c.cur, c.chosenBy, c.cardErr = &i, "card", nil
			return
		}
		if i, ok := pick(ifaces, version, c.t.Binding); ok {
			err = fmt.Errorf("agent card names %s %s only at %s, another origin than a2a_url %s; beachd does not use it (the configured headers would go there): set a2a_url to that endpoint",
				i.Version, i.Binding, clip(origin(i.URL)), origin(c.t.URL))
		} else {
			err = errNoCommonVersion(ifaces, version, c.t.Binding)
		}
	}
	c.cardErr = err
	if c.cur == nil {
		// Beach agents speak 1.0; the probe (version auto) moves to 0.3
		// if the agent says otherwise.
		c.cur = &Interface{URL: c.t.URL, Binding: binding, Version: V10}
		c.chosenBy = "probe"
		if c.t.Version == V10 {
			c.chosenBy = "config"
		}
	}
}

// origin is u's scheme://host[:port], or u itself when it is no URL.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	return (&url.URL{Scheme: p.Scheme, Host: p.Host}).String()
}

func errNoCommonVersion(ifaces []Interface, version, binding string) error {
	var offered []string
	for _, i := range ifaces {
		offered = append(offered, i.Version+" "+i.Binding)
	}
	return &noCommonVersion{offered: offered, version: version, binding: binding}
}

type noCommonVersion struct {
	offered          []string
	version, binding string // what the configuration fixes; "" for auto
}

func (e *noCommonVersion) Error() string {
	want := "1.0 JSONRPC or HTTP+JSON, 0.3 JSONRPC"
	if e.version != "" || e.binding != "" {
		want = "a2a_version " + cmp.Or(e.version, "auto") + ", a2a_binding " + cmp.Or(e.binding, "auto")
	}
	return "agent card offers no interface beachd speaks (" + want + "); it offers " + joinClip(e.offered)
}

func joinClip(s []string) string {
	out := ""
	for i, v := range s {
		if i == 8 {
			return out + ", …"
		}
		if i > 0 {
			out += ", "
		}
		out += clip(v)
	}
	return out
}

func (c *conn) status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Name: c.name, URL: c.t.URL, Configured: c.t.Version, ConfiguredBinding: bindingSetting(c.t.Binding),
		ChosenBy: c.chosenBy, CardReadAt: c.cardAt}
	if c.cur != nil {
		s.Generation, s.Binding, s.Endpoint = c.cur.Version, c.cur.Binding, c.cur.URL
	}
	if c.cardErr != nil {
		s.CardError = c.cardErr.Error()
	}
	return s
}

// bindingSetting names a parsed binding as the configuration does.
func bindingSetting(b string) string {
	switch b {
	case BindingJSONRPC:
		return "jsonrpc"
	case BindingHTTPJSON:
		return "http+json"
	}
	return VersionAuto
}
