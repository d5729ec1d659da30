package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// Config is beachd's configuration file (docs/configuration.md). Sections owned by a
// channel or feature live in <area>.go beside this file.
type Config struct {
	Listen  string `yaml:"listen"`
	DataDir string `yaml:"data_dir"`
	// Store is where the records are kept: the embedded file under
	// data_dir, or PostgreSQL shared by several replicas (store.go).
	Store     StoreConfig `yaml:"store"`
	PublicURL string      `yaml:"public_url"`
	APIKeys   []APIKey    `yaml:"api_keys"`
	Log       LogConfig   `yaml:"log"`
	// Organisation is who the people asked to approve know beachd's
	// messages to come from (organisation.go).
	Organisation OrganisationConfig `yaml:"organisation"`
	// Metrics guards /metrics.
	Metrics MetricsConfig `yaml:"metrics"`
	// MCP is the MCP server at /mcp (mcp.go).
	MCP MCPConfig `yaml:"mcp"`

	Agents    map[string]AgentConfig      `yaml:"agents"`
	Webhooks  WebhooksConfig              `yaml:"webhooks"`
	Email     *EmailConfig                `yaml:"email"`  // nil: the email channel is off
	Twilio    *TwilioConfig               `yaml:"twilio"` // nil: SMS and WhatsApp are off
	Slack     *SlackConfig                `yaml:"slack"`  // nil: the Slack channel is off
	PartTypes []envelope.ConsumerPartType `yaml:"part_types"`
	Schedules []ScheduleConfig            `yaml:"schedules"`
	Approvals ApprovalsConfig             `yaml:"approvals"`
	Render    RenderConfig                `yaml:"render"`
	Limits    LimitsConfig                `yaml:"limits"`
	Dispatch  DispatchConfig              `yaml:"dispatch"`
	Fetch     FetchConfig                 `yaml:"fetch"` // content-driven fetches (fetch.go)
	// Retention: envelopes whose deliveries are all sent or dead are removed
	// this long after acceptance, with their attempts; default 168h (7 days).
	Retention time.Duration `yaml:"retention"`

	// DevAgentA2A is the A2A generation `beachd dev`'s agent speaks ("0.3",
	// or 1.0 otherwise); not configurable from a file.
	DevAgentA2A string `yaml:"-"`
	// Warnings are what Check found worth saying that refuses nothing
	// ("line 12, column 25: approvals.policies[0].steps[0].remind_after:
	// 10s is under a minute …"): config check prints them, serve logs them.
	Warnings []string `yaml:"-"`
}

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string `yaml:"format"` // text (default) or json
	Level  string `yaml:"level"`  // debug, info (default), warn, error
}

// LimitsConfig bounds inputs (docs/configuration.md). Zero means the default.
type LimitsConfig struct {
	MaxEnvelopeBytes int64 `yaml:"max_envelope_bytes"` // default 8 MiB
	MaxParts         int   `yaml:"max_parts"`          // default 256
	MaxRecipients    int   `yaml:"max_recipients"`     // default 100
}

// MetricsConfig guards /metrics.
type MetricsConfig struct {
	// RequireKey makes GET /metrics need a bearer API key like the rest of
	// the API: its series name webhook endpoints, channels and approval
	// outcomes. Default false (Prometheus scrapes without a key).
	RequireKey bool `yaml:"require_key"`
}

// DispatchConfig tunes the dispatcher.
type DispatchConfig struct {
	Workers int `yaml:"workers"` // concurrent sends, default 32
}

// FillDefaults fills the zero values that have defaults.
func (c *Config) FillDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8025"
	}
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.PublicURL == "" {
		// From the listen address; an unspecified host (":8025",
		// "0.0.0.0:8025") is no address for a link, so localhost stands
		// in. Set public_url for links that work beyond this machine.
		host, port, err := net.SplitHostPort(c.Listen)
		if err == nil && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) {
			host = "localhost"
		}
		if err == nil {
			c.PublicURL = "http://" + net.JoinHostPort(host, port)
		} else {
			c.PublicURL = "http://" + c.Listen
		}
	}
	c.Store.defaults()
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
}

// registry builds the part-type registry from the canonical set and the
// configured consumer types.
func (c *Config) registry(v *validator) *envelope.Registry {
	reg := envelope.NewRegistry()
	for i, pt := range c.PartTypes {
		if err := reg.RegisterPartType(pt); err != nil {
			v.errorf(fmt.Sprintf("part_types[%d]", i), "%v", err)
		}
	}
	return reg
}

// Validate checks the whole configuration and returns every problem, and
// the part-type registry it defines.
func (c *Config) Validate() (*envelope.Registry, error) {
	v := &validator{}
	reg := c.check(v)
	if len(c.Warnings) == 0 {
		c.Warnings = placeWarnings(nil, v.warnings)
	}
	return reg, v.err()
}

// check checks the whole configuration into v and returns the part-type
// registry it defines.
func (c *Config) check(v *validator) *envelope.Registry {
	if err := checkListenAddr(c.Listen); err != nil {
		v.errorf("listen", "%v", err)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		v.errorf("data_dir", "required")
	}
	c.Store.validate(v)
	c.Organisation.validate(v)
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf("public_url", "must be an absolute http(s) URL, got %q", c.PublicURL)
	}
	if len(c.APIKeys) == 0 {
		v.errorf("api_keys", "at least one key is required")
	}
	for i, k := range c.APIKeys {
		if len(k.Key) < 16 {
			v.errorf(fmt.Sprintf("api_keys[%d]", i), "must be at least 16 characters")
		}
		if k.Role != "" && k.Role != RoleFull && k.Role != RoleRead {
			v.errorf(fmt.Sprintf("api_keys[%d].role", i), "must be full or read, got %q", k.Role)
		}
	}
	if len(c.APIKeys) > 0 && len(KeysOf(c.APIKeys, RoleFull)) == 0 {
		v.errorf("api_keys", "at least one full-access key is required (a plain string, or role: full)")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.errorf("log.format", "must be text or json, got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.errorf("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	for key, n := range map[string]int64{"limits.max_envelope_bytes": c.Limits.MaxEnvelopeBytes,
		"limits.max_parts": int64(c.Limits.MaxParts), "limits.max_recipients": int64(c.Limits.MaxRecipients)} {
		if n < 0 {
			v.errorf(key, "cannot be negative (0: the default)")
		}
	}
	if c.Limits.MaxParts > envelope.MaxDecodedParts {
		v.errorf("limits.max_parts", "at most %d, got %d", envelope.MaxDecodedParts, c.Limits.MaxParts)
	}
	if c.Limits.MaxRecipients > envelope.MaxDecodedRecipients {
		v.errorf("limits.max_recipients", "at most %d, got %d", envelope.MaxDecodedRecipients, c.Limits.MaxRecipients)
	}
	if c.Retention < 0 || (c.Retention > 0 && c.Retention < time.Hour) {
		v.errorf("retention", "must be at least 1h (0: the default, 168h), got %s", c.Retention)
	}
	if c.Dispatch.Workers < 0 || c.Dispatch.Workers > 4096 {
		v.errorf("dispatch.workers", "must be between 1 and 4096 (0: the default, 32), got %d", c.Dispatch.Workers)
	}
	reg := c.registry(v)
	for name, a := range c.Agents {
		a.validate(v, "agents."+name)
		c.validateApprovers(v, name, a)
	}
	c.checkInbound(v)
	c.Webhooks.validate(v)
	for name, ep := range c.Webhooks.Endpoints {
		for i, pt := range ep.Consumes {
			if _, ok := reg.PartType(pt); !ok {
				v.errorf(fmt.Sprintf("webhooks.endpoints.%s.consumes[%d]", name, i), "unknown part type %q", pt)
			}
		}
	}
	if c.Email != nil {
		c.Email.validate(v)
	}
	if c.Twilio != nil {
		c.Twilio.validate(v)
	}
	if c.Slack != nil {
		c.Slack.validate(v)
	}
	c.Approvals.validate(v)
	c.validatePolicies(v)
	if c.Approvals.EmailLinks != nil && !*c.Approvals.EmailLinks && c.Email != nil && c.Email.IMAP == nil {
		v.errorf("approvals.email_links", "false leaves replies the only way to answer by mail, and email.imap is not set: nobody could decide an approval sent by email")
	}
	c.Render.validate(v)
	c.Fetch.validate(v)
	seen := map[string]bool{}
	for i := range c.Schedules {
		s := &c.Schedules[i]
		if s.Name != "" && seen[s.Name] {
			v.errorf(fmt.Sprintf("schedules[%d].name", i), "duplicate schedule name %q", s.Name)
		}
		seen[s.Name] = true
		s.validate(v, i, c)
	}
	return reg
}

// checkServe adds to check what a running daemon needs, so that `beachd
// config check` and `beachd serve` refuse the same files, and serve refuses
// them before it creates or opens anything: templates that load, Twilio
// credentials unless dev (`beachd dev` and `beachd render` record or
// preview messages without them), and the channels that receive the
// agents' inbound addresses (dev stands in for a missing email or twilio
// section).
func (c *Config) checkServe(v *validator, dev bool) {
	if c.Twilio != nil && !c.Twilio.HasCredentials() && !dev {
		v.errorf("twilio.account_sid", "required, with twilio.auth_token, to send SMS and WhatsApp (only `beachd dev` records messages without them)")
	}
	c.checkInboundChannels(v, dev)
	c.checkPolicyChannels(v, dev)
	if dir := c.Render.TemplatesDir; dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return // Render.validate reports it
		}
	}
	if err := c.Render.check(); err != nil {
		v.errorf("render.templates_dir", "%v", errors.Unwrap(err))
	}
}

// ValidateServe is Validate with what a running daemon needs besides
// (checkServe); dev as for Check. A daemon built in code (`beachd dev`)
// is checked with it, as a file is by Check.
func (c *Config) ValidateServe(dev bool) (*envelope.Registry, error) {
	v := &validator{}
	reg := c.check(v)
	c.checkServe(v, dev)
	return reg, v.err()
}

// checkListenAddr checks a listen address: host:port, the host empty (every
// interface), an IP address or a name, the port a number 0-65535 (0: any
// free port).
func checkListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, such as 127.0.0.1:8025 or :8025, got %q", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port must be a number from 0 to 65535, got %q", port)
	}
	if net.ParseIP(host) == nil && strings.ContainsAny(host, " /\\%@[]") {
		return fmt.Errorf("host %q is not an IP address or a host name", host)
	}
	return nil
}

// durationOr returns d, or def when d is zero.
func durationOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
