package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
)

// An agent's approvers (agents.NAME.approvers) are the only recipients an
// envelope of that agent carrying an approval-request may go to. Without
// the list, the agent's own `to` decides who approves, and an agent that
// has been taken over could send its approvals to an address it reads.
// Each entry is one of:
//
//	alice@example.org   an email address
//	+447700900123       a number, for SMS and WhatsApp alike
//	webhook:ops         a webhook endpoint configured under webhooks.endpoints

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
	return envelope.Recipient{}, fmt.Errorf("%q is neither an email address, an E.164 number (+…) nor webhook:<endpoint>", s)
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
