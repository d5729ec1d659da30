package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
)

// AgentConfig is one entry of the `agents:` map: where decisions are
// injected and cron turns are started.
//
//	agents:
//	  travel:
//	    a2a_url: http://127.0.0.1:9000/   # A2A endpoint; its origin serves the agent card
//	    a2a_version: auto                 # auto (default: the card decides), "1.0" or "0.3"
//	    a2a_binding: auto                 # auto (default: the card decides), jsonrpc or http+json (1.0)
//	    injector: a2a                     # or webhook
//	    webhook_url: https://agent.example.org/approvals   # injector: webhook
//	    webhook_secret: "whsec_…"         # Standard Webhooks secret (injector: webhook)
//	    headers: { Authorization: "Bearer ${AGENT_TOKEN}" }
//	    timeout: 30s
//	    inbound: { email: [travel@example.org], allow: ["*@example.org"] }   # inbound.go
type AgentConfig struct {
	A2AURL        string            `yaml:"a2a_url"`
	A2AVersion    string            `yaml:"a2a_version"`
	A2ABinding    string            `yaml:"a2a_binding"`
	Injector      string            `yaml:"injector"`
	WebhookURL    string            `yaml:"webhook_url"`
	WebhookSecret string            `yaml:"webhook_secret"`
	Headers       map[string]string `yaml:"headers"`
	Timeout       time.Duration     `yaml:"timeout"`
	// Approvers, when set, are the only recipients of this agent's
	// approval requests (approverRecipient reads each entry).
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
	if b, err := agent.ParseBinding(a.A2ABinding); err != nil {
		v.errorf(key+".a2a_binding", "must be auto, jsonrpc or http+json, got %q", a.A2ABinding)
	} else if b == agent.BindingHTTPJSON && a.A2AVersion == agent.V03 {
		v.errorf(key+".a2a_binding", "http+json is an A2A 1.0 binding; a2a_version 0.3 speaks JSON-RPC only")
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

// An agent's approvers (agents.NAME.approvers) are the only recipients an
// envelope of that agent carrying an approval-request may go to. Without
// the list, the agent's own `to` decides who approves, and an agent that
// has been taken over could send its approvals to an address it reads.
// Each entry is one of:
//
//	alice@example.org   an email address
//	+447700900123       a number, for SMS and WhatsApp alike
//	webhook:ops         a webhook endpoint configured under webhooks.endpoints
//	slack:U012AB3CD     a Slack user (who may also decide what was posted to a
//	                    channel); slack:C0123ABCD, a Slack channel approvals
//	                    may be posted to (its members decide only when they
//	                    are approvers themselves)
//
// An email address among the approvers also stands for the Slack user it
// resolves to.

var approverNumber = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// approverRecipient parses one approvers entry.
func approverRecipient(s string) (envelope.Recipient, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "webhook:"):
		name := strings.TrimPrefix(s, "webhook:")
		if name == "" {
			return envelope.Recipient{}, fmt.Errorf("webhook: needs an endpoint name, as in webhook:ops")
		}
		return envelope.Recipient{Channel: envelope.ChannelWebhook, Endpoint: name}, nil
	case strings.HasPrefix(s, "slack:"):
		id := strings.TrimPrefix(s, "slack:")
		if !envelope.SlackUser(id) && !envelope.SlackConversation(id) {
			return envelope.Recipient{}, fmt.Errorf("%q: slack: needs a user id (U…) or a channel id (C…), as in slack:U012AB3CD", s)
		}
		return envelope.Recipient{Channel: envelope.ChannelSlack, Address: id}, nil
	case strings.HasPrefix(s, "+"):
		if !approverNumber.MatchString(s) {
			return envelope.Recipient{}, fmt.Errorf("%q is not an E.164 number like +447700900123", s)
		}
		return envelope.Recipient{Channel: envelope.ChannelSMS, Address: s}, nil
	case strings.Contains(s, "@"):
		a, err := api.NormalizeEmail(s)
		if err != nil {
			return envelope.Recipient{}, fmt.Errorf("%q: %v", s, err)
		}
		return envelope.Recipient{Channel: envelope.ChannelEmail, Address: a}, nil
	}
	return envelope.Recipient{}, fmt.Errorf("%q is neither an email address, an E.164 number (+…), webhook:<endpoint> nor slack:<id>", s)
}

// validateApprovers checks agents.NAME.approvers.
func (c *Config) validateApprovers(v *validator, name string, a AgentConfig) {
	if a.Approvers == nil {
		return
	}
	key := "agents." + name + ".approvers"
	if len(a.Approvers) == 0 {
		v.errorf(key, "empty: no approval of this agent could be sent; list the approvers, or leave the key out")
	}
	for i, s := range a.Approvers {
		r, err := approverRecipient(s)
		if err != nil {
			v.errorf(fmt.Sprintf("%s[%d]", key, i), "%v", err)
			continue
		}
		if spec, _ := envelope.Channel(r.Channel); spec.Address == envelope.AddressEndpoint {
			if _, ok := c.Webhooks.Endpoints[r.Endpoint]; !ok {
				v.errorf(fmt.Sprintf("%s[%d]", key, i), "unknown webhook endpoint %q (configure it under webhooks.endpoints)", r.Endpoint)
			}
		}
	}
}

// ApproverSets are the ingest's approver sets, for the agents that have
// approvers. The configuration is valid.
func (c *Config) ApproverSets() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for name, a := range c.Agents {
		if a.Approvers == nil {
			continue
		}
		set := map[string]bool{}
		for _, s := range a.Approvers {
			if r, err := approverRecipient(s); err == nil {
				set[api.ApproverKey(r)] = true
			}
		}
		out[name] = set
	}
	return out
}
