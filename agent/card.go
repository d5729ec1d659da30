package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/cool-ai/beachd/envelope"
)

// CardPath is where an agent publishes its card, at its URL's origin.
const CardPath = "/.well-known/agent-card.json"

// Interface is one way an agent card says it can be reached.
type Interface struct {
	URL     string // absolute http(s)
	Binding string // JSONRPC, HTTP+JSON, GRPC, …
	Version string // "1.0", "0.3", or what the card said when it is neither
	Tenant  string
	// Push is the card's capabilities.pushNotifications.
	Push bool
}

// maxInterfaces bounds the interfaces read from one card.
const maxInterfaces = 64

type cardInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
	Tenant          string `json:"tenant"`
	// 0.3 additionalInterfaces name the binding "transport".
	Transport string `json:"transport"`
}

type cardInterfaces []cardInterface

func (l *cardInterfaces) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]cardInterface)(l), dec, maxInterfaces, "interfaces")
}

// beachTransport is an entry of a Beach card's transports[].
type beachTransport struct {
	Protocol string `json:"protocol"`
	Version  string `json:"version"`
	Endpoint string `json:"endpoint"`
}

type beachTransports []beachTransport

func (l *beachTransports) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return envelope.DecodeList((*[]beachTransport)(l), dec, maxInterfaces, "transports")
}

type cardWire struct {
	// A2A 1.0.
	SupportedInterfaces cardInterfaces `json:"supportedInterfaces"`
	// A2A 0.3.
	ProtocolVersion      string         `json:"protocolVersion"`
	URL                  string         `json:"url"`
	PreferredTransport   string         `json:"preferredTransport"`
	AdditionalInterfaces cardInterfaces `json:"additionalInterfaces"`
	// Beach's card extension: transports[] with protocol "a2a".
	Transports beachTransports `json:"transports"`
	// Both generations.
	Capabilities struct {
		PushNotifications bool `json:"pushNotifications"`
	} `json:"capabilities"`
}

// DecodeCard reads the interfaces an agent card offers, in the card's
// order: a 1.0 card's supportedInterfaces[] (url, protocolBinding,
// protocolVersion, tenant); a 0.3 card's url with preferredTransport
// (JSONRPC when absent) and additionalInterfaces[], all at its
// protocolVersion; a Beach card's transports[] entries of protocol "a2a"
// (JSON-RPC at endpoint). Relative URLs resolve against base. Entries
// that are incomplete are left out; a card with none left is an error.
func DecodeCard(b []byte, base *url.URL) ([]Interface, error) {
	var c cardWire
	if err := unmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("decode agent card: %w", err)
	}
	var out []Interface
	add := func(u, bind, ver, tenant string) {
		abs, ok := absolute(base, u)
		bind, ver = strings.TrimSpace(bind), strings.TrimSpace(ver)
		if !ok || bind == "" || ver == "" {
			return
		}
		out = append(out, Interface{URL: abs, Binding: strings.ToUpper(bind), Version: generation(ver), Tenant: tenant,
			Push: c.Capabilities.PushNotifications})
	}
	for _, i := range c.SupportedInterfaces {
		add(i.URL, i.ProtocolBinding, i.ProtocolVersion, i.Tenant)
	}
	if c.ProtocolVersion != "" && c.URL != "" {
		pt := c.PreferredTransport
		if pt == "" {
			pt = BindingJSONRPC
		}
		add(c.URL, pt, c.ProtocolVersion, "")
		for _, i := range c.AdditionalInterfaces {
			add(i.URL, i.Transport, c.ProtocolVersion, "")
		}
	}
	for _, t := range c.Transports {
		if strings.EqualFold(t.Protocol, "a2a") {
			add(t.Endpoint, BindingJSONRPC, t.Version, "")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("decode agent card: no usable interface (supportedInterfaces, or url with protocolVersion)")
	}
	return out, nil
}

func absolute(base *url.URL, s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return "", false
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	return u.String(), true
}

// generation maps a protocol version to the generation beachd names it by:
// 1.x → "1.0", 0.3.x → "0.3"; anything else is returned as given.
func generation(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	switch {
	case v == "1" || strings.HasPrefix(v, "1."):
		return V10
	case v == "0.3" || strings.HasPrefix(v, "0.3."):
		return V03
	}
	return clip(v)
}

// Pick returns the interface beachd uses: the newest generation both
// speak (1.0, then 0.3), preferring JSON-RPC to HTTP+JSON within 1.0.
func Pick(ifaces []Interface) (Interface, bool) { return pick(ifaces, "", "") }

// pick is Pick among the interfaces of version and binding ("" for any).
func pick(ifaces []Interface, version, binding string) (Interface, bool) {
	for _, want := range []struct{ version, binding string }{
		{V10, BindingJSONRPC}, {V10, BindingHTTPJSON}, {V03, BindingJSONRPC},
	} {
		if (version != "" && want.version != version) || (binding != "" && want.binding != binding) {
			continue
		}
		for _, i := range ifaces {
			if i.Version == want.version && i.Binding == want.binding {
				return i, true
			}
		}
	}
	return Interface{}, false
}

// CardURL is the agent card's address for an agent at a2aURL: the URL's
// origin plus CardPath.
func CardURL(a2aURL string) (string, error) {
	u, err := url.Parse(a2aURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("agent URL %q has no origin", a2aURL)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: CardPath}).String(), nil
}

// fetchCard reads the card at cardURL (bounded by c.maxCard bytes and
// ctx) and returns what it offers.
func (c *caller) fetchCard(ctx context.Context, cardURL string, maxBytes int64) ([]Interface, error) {
	cc := *c
	cc.maxBytes = maxBytes
	status, b, err := cc.do(ctx, http.MethodGet, cardURL, nil, map[string]string{"Accept": "application/json"})
	if err != nil {
		return nil, fmt.Errorf("read agent card %s: %w", cardURL, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("read agent card %s: HTTP %d", cardURL, status)
	}
	base, _ := url.Parse(cardURL)
	ifaces, err := DecodeCard(b, base)
	if err != nil {
		return nil, fmt.Errorf("read agent card %s: %w", cardURL, err)
	}
	return ifaces, nil
}
