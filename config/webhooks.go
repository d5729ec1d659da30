package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels/webhook"
)

// WebhooksConfig is the `webhooks:` section: the endpoints webhook
// deliveries name.
//
//	webhooks:
//	  endpoints:
//	    ops:
//	      url: https://ops.example.org/hook
//	      secret: "whsec_…"            # or secrets: [new, old] while rotating
//	      consumes: [domain-data, llm-context]
//	      timeout: 15s                 # per attempt, default 15s
//	      max_concurrency: 8           # attempts in flight, default unlimited
//	      headers: { X-Tenant: acme }  # added to every request
type WebhooksConfig struct {
	Endpoints map[string]EndpointConfig `yaml:"endpoints"`
}

// EndpointConfig is one webhook endpoint.
type EndpointConfig struct {
	URL string `yaml:"url"`
	// Secret is one "whsec_<base64>" secret; Secrets is a list, all of which
	// sign every webhook (zero-downtime rotation: add the new one first,
	// remove the old one once the receiver has switched). Use one or the
	// other.
	Secret         string            `yaml:"secret"`
	Secrets        []string          `yaml:"secrets"`
	Consumes       []string          `yaml:"consumes"`
	Timeout        time.Duration     `yaml:"timeout"`
	MaxConcurrency int               `yaml:"max_concurrency"`
	Headers        map[string]string `yaml:"headers"`
}

// SecretList is the endpoint's secrets in signing order.
func (e EndpointConfig) SecretList() []string {
	if e.Secret != "" {
		return append([]string{e.Secret}, e.Secrets...)
	}
	return e.Secrets
}

// maxWebhookTimeout bounds an endpoint's timeout; the Standard Webhooks
// spec recommends 15 to 30 s.
const maxWebhookTimeout = 2 * time.Minute

var (
	endpointNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	headerNamePattern   = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// validate checks every endpoint. That consumes names registered part types
// is checked by Config.validate, which holds the registry.
func (c *WebhooksConfig) validate(v *validator) {
	for name, ep := range c.Endpoints {
		key := "webhooks.endpoints." + name
		if !endpointNamePattern.MatchString(name) {
			v.errorf(key, "endpoint names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		}
		ep.validate(v, key)
	}
}

func (e EndpointConfig) validate(v *validator, key string) {
	u, err := url.Parse(e.URL)
	switch {
	case e.URL == "":
		v.errorf(key+".url", "required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.errorf(key+".url", "must be an absolute http(s) URL, got %q", e.URL)
	case u.User != nil:
		v.errorf(key+".url", "must not carry credentials; use headers")
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		v.errorf(key+".url", "must be https (plain http is allowed only for loopback hosts)")
	}
	switch {
	case e.Secret != "" && len(e.Secrets) > 0:
		v.errorf(key, "set secret or secrets, not both")
	case e.Secret == "" && len(e.Secrets) == 0:
		v.errorf(key+".secret", "required: a Standard Webhooks secret \"whsec_<base64 of 24-64 random bytes>\"")
	case e.Secret != "":
		if _, err := webhook.ParseSecret(e.Secret); err != nil {
			v.errorf(key+".secret", "%v", err)
		}
	default:
		for i, s := range e.Secrets {
			if _, err := webhook.ParseSecret(s); err != nil {
				v.errorf(fmt.Sprintf("%s.secrets[%d]", key, i), "%v", err)
			}
		}
	}
	if e.Timeout < 0 || e.Timeout > maxWebhookTimeout {
		v.errorf(key+".timeout", "must be between 0 (default 15s) and %s", maxWebhookTimeout)
	}
	if e.MaxConcurrency < 0 {
		v.errorf(key+".max_concurrency", "cannot be negative (0 means unlimited)")
	}
	for h, val := range e.Headers {
		hk := key + ".headers." + h
		switch {
		case !headerNamePattern.MatchString(h):
			v.errorf(hk, "not a valid header name")
		case isReservedWebhookHeader(h):
			v.errorf(hk, "is set by beachd and cannot be configured")
		case strings.ContainsAny(val, "\r\n\x00"):
			v.errorf(hk, "value must not contain line breaks")
		}
	}
}

func isReservedWebhookHeader(h string) bool {
	switch strings.ToLower(h) {
	case webhook.HeaderID, webhook.HeaderTimestamp, webhook.HeaderSignature,
		"content-type", "content-length", "user-agent", "host", "transfer-encoding", "connection":
		return true
	}
	return false
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DevSink is the endpoint `beachd dev` delivers to: its own sink,
// consuming every part type a webhook may receive.
func DevSink(addr, secret string) EndpointConfig {
	return EndpointConfig{
		URL:      "http://" + addr + "/dev/sink",
		Secret:   secret,
		Consumes: []string{"llm-context", "a2ui-surface", "reasoning-trace"},
		Timeout:  5 * time.Second,
	}
}
