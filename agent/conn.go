package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// conn is one agent and the generation beachd speaks to it.
//
// With a fixed version it is JSON-RPC at the target URL. With auto, the
// card at the URL's origin decides (Pick). When the card cannot be read,
// or offers nothing beachd speaks, beachd probes: it tries 1.0 JSON-RPC at
// the target URL, and switches generation when the agent answers that it
// does not know the version or the method. A call that fails that way
// re-reads the card (the agent may have moved to another generation since)
// and is retried once with the new choice; the card error stays visible
// in Status.
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

// cardRetry is how soon a card that could not be read is read again.
const cardRetry = time.Minute

// call runs op against the current binding; on a version mismatch it
// re-resolves and runs op once more.
func (c *conn) call(ctx context.Context, op func(context.Context, binding) error) error {
	cur := c.current(ctx)
	err := c.run(ctx, cur, op)
	if err == nil || c.t.Version != VersionAuto || !mismatch(err) {
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
	if c.cur == nil || (c.t.Version == VersionAuto && c.now().Sub(c.cardAt) > ttl) {
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
	if c.chosenBy == "probe" || c.cardErr != nil {
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
	if c.t.Version != VersionAuto {
		c.cur = &Interface{URL: c.t.URL, Binding: BindingJSONRPC, Version: c.t.Version}
		c.chosenBy = "config"
		return
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
			if sameOrigin(i.URL, c.t.URL) {
				same = append(same, i)
			}
		}
		if i, ok := Pick(same); ok {
			c.cur, c.chosenBy, c.cardErr = &i, "card", nil
			return
		}
		if _, ok := Pick(ifaces); ok {
			err = fmt.Errorf("agent card names endpoints only on other origins than a2a_url %s; beachd does not follow them (set a2a_url to the endpoint)", c.t.URL)
		} else {
			err = errNoCommonVersion(ifaces)
		}
	}
	c.cardErr = err
	if c.cur == nil {
		// Beach agents speak 1.0; the probe moves to 0.3 if the agent
		// says otherwise.
		c.cur = &Interface{URL: c.t.URL, Binding: BindingJSONRPC, Version: V10}
		c.chosenBy = "probe"
	}
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

func errNoCommonVersion(ifaces []Interface) error {
	var offered []string
	for _, i := range ifaces {
		offered = append(offered, i.Version+" "+i.Binding)
	}
	return &noCommonVersion{offered: offered}
}

type noCommonVersion struct{ offered []string }

func (e *noCommonVersion) Error() string {
	return "agent card offers no interface beachd speaks (1.0 JSONRPC or HTTP+JSON, 0.3 JSONRPC); it offers " +
		joinClip(e.offered)
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
	s := Status{Name: c.name, URL: c.t.URL, Configured: c.t.Version, ChosenBy: c.chosenBy, CardReadAt: c.cardAt}
	if c.cur != nil {
		s.Generation, s.Binding, s.Endpoint = c.cur.Version, c.cur.Binding, c.cur.URL
	}
	if c.cardErr != nil {
		s.CardError = c.cardErr.Error()
	}
	return s
}
