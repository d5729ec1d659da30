package config

import (
	"net/url"
	"strings"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/webhook"
)

// ApprovalsConfig is the `approvals:` section.
//
//	approvals:
//	  default_expiry: 24h        # for requests without expiresAt
//	  secret: "${BEACHD_APPROVAL_SECRET}"  # HMAC key of every token, ≥32 bytes;
//	                             # empty: generated once into data_dir/approval.key (0600)
//	  sms_code_digits: 6         # 4-10
//	  max_wrong_codes: 5         # wrong SMS/WhatsApp codes from a number per hour lock its open approvals' codes for a day
//	  injection_lifetime: 24h    # a failing injection is dead-lettered after this
//	  email_links: true          # false: no confirmation link in mail, only replies decide (THREATS #3)
//	  words:                     # decision words beside the English ones
//	    granted: [ja, oui, sí]
//	    denied: [nein, non]
type ApprovalsConfig struct {
	DefaultExpiry     time.Duration `yaml:"default_expiry"`
	Secret            string        `yaml:"secret"`
	SMSCodeDigits     int           `yaml:"sms_code_digits"`
	MaxWrongCodes     int           `yaml:"max_wrong_codes"`
	InjectionLifetime time.Duration `yaml:"injection_lifetime"`
	// EmailLinks: nil (unset) means true.
	EmailLinks *bool         `yaml:"email_links"`
	Words      DecisionWords `yaml:"words"`
}

// DecisionWords is `approvals.words:`.
type DecisionWords struct {
	Granted []string `yaml:"granted"`
	Denied  []string `yaml:"denied"`
}

// ParseWords builds the decision words; validate has checked them.
func (c *ApprovalsConfig) ParseWords() (*approvals.Words, error) {
	return approvals.NewWords(c.Words.Granted, c.Words.Denied)
}

func (c *ApprovalsConfig) validate(v *validator) {
	if c.DefaultExpiry < 0 {
		v.errorf("approvals.default_expiry", "cannot be negative")
	} else if c.DefaultExpiry > 0 && c.DefaultExpiry < time.Minute {
		v.errorf("approvals.default_expiry", "at least 1m, got %s", c.DefaultExpiry)
	}
	if c.Secret != "" && len(c.Secret) < 32 {
		v.errorf("approvals.secret", "must be at least 32 bytes (or empty: generated into data_dir/approval.key)")
	}
	if c.SMSCodeDigits != 0 && (c.SMSCodeDigits < 4 || c.SMSCodeDigits > 10) {
		v.errorf("approvals.sms_code_digits", "must be 4-10, got %d", c.SMSCodeDigits)
	}
	if c.MaxWrongCodes < 0 || c.MaxWrongCodes > 100 {
		v.errorf("approvals.max_wrong_codes", "must be 1-100 (0: default 5), got %d", c.MaxWrongCodes)
	}
	if c.InjectionLifetime < 0 {
		v.errorf("approvals.injection_lifetime", "cannot be negative")
	}
	if _, err := c.ParseWords(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			path, msg, _ := strings.Cut(strings.TrimPrefix(line, "approvals: "), ": ")
			v.errorf("approvals."+path, "%s", msg)
		}
	}
}

// AgentConfig is one entry of the `agents:` map: where decisions are
// injected and cron turns are started.
//
//	agents:
//	  travel:
//	    a2a_url: http://127.0.0.1:9000/   # A2A endpoint; its origin serves the agent card
//	    a2a_version: auto                 # auto (default: the card decides), "1.0" or "0.3"
//	    injector: a2a                     # or webhook
//	    webhook_url: https://agent.example.org/approvals   # injector: webhook
//	    webhook_secret: "whsec_…"         # Standard Webhooks secret (injector: webhook)
//	    headers: { Authorization: "Bearer ${AGENT_TOKEN}" }
//	    timeout: 30s
//	    inbound: { email: [travel@example.org], allow: ["*@example.org"] }   # inbound.go
type AgentConfig struct {
	A2AURL        string            `yaml:"a2a_url"`
	A2AVersion    string            `yaml:"a2a_version"`
	Injector      string            `yaml:"injector"`
	WebhookURL    string            `yaml:"webhook_url"`
	WebhookSecret string            `yaml:"webhook_secret"`
	Headers       map[string]string `yaml:"headers"`
	Timeout       time.Duration     `yaml:"timeout"`
	// Approvers, when set, are the only recipients of this agent's
	// approval requests (agents.go).
	Approvers []string `yaml:"approvers"`
	// Inbound, when set, are the addresses people write to in order to
	// talk with the agent, and who may (inbound.go).
	Inbound *InboundConfig `yaml:"inbound"`
}

func (a AgentConfig) validate(v *validator, key string) {
	absURL := func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
	}
	switch a.Injector {
	case "", "a2a":
		if a.A2AURL == "" {
			v.errorf(key+".a2a_url", "required (or injector: webhook with webhook_url)")
		}
	case "webhook":
		if !absURL(a.WebhookURL) {
			v.errorf(key+".webhook_url", "required with injector: webhook; an absolute http(s) URL, got %q", a.WebhookURL)
		}
		if a.WebhookSecret == "" {
			v.errorf(key+".webhook_secret", "required with injector: webhook (a whsec_… Standard Webhooks secret)")
		} else if _, err := webhook.ParseSigner(a.WebhookSecret); err != nil {
			v.errorf(key+".webhook_secret", "%v", err)
		}
	default:
		v.errorf(key+".injector", "must be a2a or webhook, got %q", a.Injector)
	}
	if a.A2AURL != "" && !absURL(a.A2AURL) {
		v.errorf(key+".a2a_url", "must be an absolute http(s) URL, got %q", a.A2AURL)
	}
	switch a.A2AVersion {
	case "", agent.VersionAuto, agent.V10, agent.V03:
	default:
		v.errorf(key+".a2a_version", "must be auto, 1.0 or 0.3, got %q", a.A2AVersion)
	}
	if a.Timeout < 0 || a.Timeout > 10*time.Minute {
		v.errorf(key+".timeout", "must be between 0 (default 30s) and 10m")
	}
	for h := range a.Headers {
		if !headerNamePattern.MatchString(h) {
			v.errorf(key+".headers", "invalid header name %q", h)
		}
	}
}

// DevAgent points `beachd dev`'s agent at the agent beachd serves itself
// under /dev/agent/ on addr; people reach it at email and number
// (DevInbound).
func DevAgent(addr, email, number string) AgentConfig {
	return AgentConfig{A2AURL: "http://" + addr + "/dev/agent/", Timeout: 10 * time.Second,
		Inbound: DevInbound(email, number)}
}
