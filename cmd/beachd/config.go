package main

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"go.yaml.in/yaml/v3"
)

// Config is beachd's configuration file (docs/configuration.md). Sections owned by a
// channel or feature live in config_<area>.go beside this file.
type Config struct {
	Listen    string    `yaml:"listen"`
	DataDir   string    `yaml:"data_dir"`
	PublicURL string    `yaml:"public_url"`
	APIKeys   []APIKey  `yaml:"api_keys"`
	Log       LogConfig `yaml:"log"`
	// Metrics guards /metrics.
	Metrics MetricsConfig `yaml:"metrics"`

	Agents    map[string]AgentConfig      `yaml:"agents"`
	Webhooks  WebhooksConfig              `yaml:"webhooks"`
	Email     *EmailConfig                `yaml:"email"`  // nil: the email channel is off
	Twilio    *TwilioConfig               `yaml:"twilio"` // nil: SMS and WhatsApp are off
	PartTypes []envelope.ConsumerPartType `yaml:"part_types"`
	Schedules []ScheduleConfig            `yaml:"schedules"`
	Approvals ApprovalsConfig             `yaml:"approvals"`
	Render    RenderConfig                `yaml:"render"`
	Limits    LimitsConfig                `yaml:"limits"`
	Dispatch  DispatchConfig              `yaml:"dispatch"`
	Fetch     FetchConfig                 `yaml:"fetch"` // content-driven fetches (config_fetch.go)
	// Retention: envelopes whose deliveries are all sent or dead are removed
	// this long after acceptance, with their attempts; default 168h (7 days).
	Retention time.Duration `yaml:"retention"`

	// devAgentA2A is the A2A generation `beachd dev`'s agent speaks ("0.3",
	// or 1.0 otherwise); not configurable from a file.
	devAgentA2A string
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

// validator collects configuration problems, each naming its key.
type validator struct{ problems []string }

func (v *validator) errorf(key, format string, args ...any) {
	v.problems = append(v.problems, key+": "+fmt.Sprintf(format, args...))
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &ConfigError{Problems: v.problems}
}

// ConfigError lists every problem of a configuration.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// defaults fills the zero values that have defaults.
func (c *Config) defaults() {
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

// validate checks the whole configuration and returns every problem.
func (c *Config) validate() (*envelope.Registry, error) {
	v := &validator{}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		v.errorf("listen", "must be host:port: %v", err)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		v.errorf("data_dir", "required")
	}
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
		if k.Role != "" && k.Role != roleFull && k.Role != roleRead {
			v.errorf(fmt.Sprintf("api_keys[%d].role", i), "must be full or read, got %q", k.Role)
		}
	}
	if len(c.APIKeys) > 0 && len(keysOf(c.APIKeys, roleFull)) == 0 {
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
	if c.Limits.MaxEnvelopeBytes < 0 || c.Limits.MaxParts < 0 || c.Limits.MaxRecipients < 0 {
		v.errorf("limits", "limits cannot be negative")
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
		v.errorf("dispatch.workers", "must be between 1 and 4096")
	}
	reg := c.registry(v)
	for name, a := range c.Agents {
		a.validate(v, "agents."+name)
		c.validateApprovers(v, name, a)
	}
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
	c.Approvals.validate(v)
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
	return reg, v.err()
}

// loadValidConfig loads a configuration file and validates it, returning
// the part-type registry it defines. Every problem names its key.
func loadValidConfig(path string, getenv func(string) string) (*Config, *envelope.Registry, error) {
	cfg, err := loadConfig(path, getenv)
	if err != nil {
		return nil, nil, err
	}
	reg, err := cfg.validate()
	if err != nil {
		return nil, nil, err
	}
	return cfg, reg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// loadConfig reads, expands and decodes a configuration file. Unknown keys
// are errors; ${ENV} references in values are expanded with getenv, and a
// reference to an unset variable is an error naming the key.
func loadConfig(path string, getenv func(string) string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parseConfig(raw, path, getenv)
}

func parseConfig(raw []byte, name string, getenv func(string) string) (*Config, error) {
	if len(raw) > 1<<20 {
		return nil, fmt.Errorf("%s: larger than 1 MiB", name)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var missing []string
	expandNode(&root, "", getenv, &missing)
	if len(missing) > 0 {
		return nil, &ConfigError{Problems: missing}
	}
	expanded, err := yaml.Marshal(&root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var cfg Config
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(expanded))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", name, describeYAMLError(err, &root))
		}
	}
	cfg.defaults()
	return &cfg, nil
}

func expandNode(n *yaml.Node, path string, getenv func(string) string, missing *[]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			expandNode(c, path, getenv, missing)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := key
			if path != "" {
				p = path + "." + key
			}
			expandNode(n.Content[i+1], p, getenv, missing)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandNode(c, fmt.Sprintf("%s[%d]", path, i), getenv, missing)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return
		}
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			name := m[2 : len(m)-1]
			v := getenv(name)
			if v == "" {
				*missing = append(*missing, fmt.Sprintf("%s: environment variable %s is not set", path, name))
			}
			return v
		})
		// Resolve the expanded value's type again (a quoted reference stays a
		// string; an unquoted one may be a number, as if written in place).
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
			n.Tag = ""
		}
	}
}

// durationOr returns d, or def when d is zero.
func durationOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
