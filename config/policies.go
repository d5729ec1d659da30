package config

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/envelope"
	"go.yaml.in/yaml/v3"
)

// PolicyConfig is one entry of `approvals.policies:` (docs/policies.md):
// which approval requests it governs (match) and what it does with them
// (decide at once, or ask the people of its steps until quorum of them
// grant or one denies).
//
//   - name: large-bookings
//     match: { agent: travel, tool: book_flight, when: "double(args.amount) > 200.0" }
//     quorum: 2
//     steps:
//   - { to: envelope, remind_after: 30m, escalate_after: 2h }
//   - to:
//   - { channel: sms, address: "+447700900456" }
//   - { person: carol, channels: [ { channel: email, address: carol@example.org } ] }
//     quiet_hours: { zone: Europe/London, from: "21:00", to: "08:00" }
type PolicyConfig struct {
	Name  string      `yaml:"name"`
	Match PolicyMatch `yaml:"match"`
	// Decide: granted or denied, at ingest; nobody is asked.
	Decide string `yaml:"decide"`
	// Quorum: distinct people who must grant; default 1.
	Quorum     int               `yaml:"quorum"`
	Steps      []PolicyStep      `yaml:"steps"`
	QuietHours *QuietHoursConfig `yaml:"quiet_hours"`
}

// PolicyMatch selects the requests a policy governs; every key set must
// fit. Agent is the delivery's agent (never the part's handler).
type PolicyMatch struct {
	Agent string `yaml:"agent"`
	Tool  string `yaml:"tool"`
	// When: a CEL expression over args, agent, tool and now.
	When string `yaml:"when"`
}

// PolicyStep is one rung of a policy's ladder.
type PolicyStep struct {
	To            StepTo        `yaml:"to"`
	RemindAfter   time.Duration `yaml:"remind_after"`
	EscalateAfter time.Duration `yaml:"escalate_after"`
}

// StepTo is a step's `to:`: the word envelope (the delivery's own
// recipients), or a list whose items are recipients ({channel, address} or
// {channel: webhook, endpoint}) or people ({person, channels: [recipients]}).
type StepTo struct {
	Envelope bool
	Members  []StepMember
}

// StepMember is one item of a step's list.
type StepMember struct {
	envelope.Recipient
	Person   string
	Channels []envelope.Recipient
}

// QuietHoursConfig is a policy's `quiet_hours:`.
type QuietHoursConfig struct {
	Zone string `yaml:"zone"`
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// UnmarshalYAML reads `envelope` or a list of recipients and people,
// refusing unknown keys.
func (t *StepTo) UnmarshalYAML(n *yaml.Node) error {
	*t = StepTo{}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value == "envelope" {
			t.Envelope = true
			return nil
		}
		return typeErrorf("line %d: want envelope or a list of recipients and people, got %q", n.Line, n.Value)
	case yaml.SequenceNode:
		for _, item := range n.Content {
			var m StepMember
			if err := decodeMember(item, &m); err != nil {
				return err
			}
			t.Members = append(t.Members, m)
		}
		return nil
	}
	return typeErrorf("line %d: want envelope or a list of recipients and people", n.Line)
}

// typeErrorf is a *yaml.TypeError: the decoder keeps going and reports it
// with the file's other problems, at its key.
func typeErrorf(format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf(format, args...)}}
}

// decodeMember reads one item of a step's list.
func decodeMember(n *yaml.Node, m *StepMember) error {
	if n.Kind != yaml.MappingNode {
		return typeErrorf("line %d: a step's recipient is {channel, address} or {person, channels}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "channel":
			err = val.Decode(&m.Channel)
		case "address":
			err = val.Decode(&m.Address)
		case "endpoint":
			err = val.Decode(&m.Endpoint)
		case "name":
			err = val.Decode(&m.Name)
		case "person":
			err = val.Decode(&m.Person)
		case "channels":
			if val.Kind != yaml.SequenceNode {
				return typeErrorf("line %d: channels: want a list of {channel, address}", val.Line)
			}
			for _, c := range val.Content {
				var r StepMember
				if err := decodeMember(c, &r); err != nil {
					return err
				}
				if r.Person != "" || r.Channels != nil {
					return typeErrorf("line %d: a person's channels are recipients {channel, address}, not people", c.Line)
				}
				m.Channels = append(m.Channels, r.Recipient)
			}
		default:
			return typeErrorf("line %d: field %s not found in a step's recipient (channel, address, endpoint, name, person, channels)", k.Line, k.Value)
		}
		if err != nil {
			return typeErrorf("line %d: %s: want a single value (text)", val.Line, k.Value)
		}
	}
	return nil
}

var policyName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// validatePolicies checks approvals.policies.
func (c *Config) validatePolicies(v *validator) {
	seen := map[string]bool{}
	for i := range c.Approvals.Policies {
		p := &c.Approvals.Policies[i]
		key := fmt.Sprintf("approvals.policies[%d]", i)
		switch {
		case !policyName.MatchString(p.Name):
			v.errorf(key+".name", "want a name of lower-case letters, digits, '.', '_' and '-' (at most 63), got %q", p.Name)
		case policy.Reserved[p.Name]:
			v.errorf(key+".name", "%q is reserved (decidedBy uses policy:expired, and operator names an operator's decision)", p.Name)
		case seen[p.Name]:
			v.errorf(key+".name", "duplicate policy name %q", p.Name)
		}
		seen[p.Name] = true
		if p.Match.Agent != "" {
			if _, ok := c.Agents[p.Match.Agent]; !ok {
				v.errorf(key+".match.agent", "unknown agent %q (configure it under agents)", p.Match.Agent)
			}
		}
		if strings.TrimSpace(p.Match.When) != "" {
			if _, err := policy.Compile(p.Match.When); err != nil {
				v.errorf(key+".match.when", "%v", err)
			}
		}
		switch p.Decide {
		case "":
		case policy.DecideGranted, policy.DecideDenied:
			if p.Quorum != 0 || len(p.Steps) > 0 || p.QuietHours != nil {
				v.errorf(key+".decide", "a policy that decides at ingest asks nobody: leave out quorum, steps and quiet_hours")
			}
		default:
			v.errorf(key+".decide", "must be granted or denied, got %q", p.Decide)
		}
		if p.Quorum < 0 || p.Quorum > 100 {
			v.errorf(key+".quorum", "must be 1-100 (0: the default, 1), got %d", p.Quorum)
		}
		c.validateSteps(v, key, p)
		if q := p.QuietHours; q != nil {
			if _, errs := policy.ParseQuietHours(q.Zone, q.From, q.To); errs != nil {
				for _, err := range errs {
					k, msg, _ := strings.Cut(err.Error(), ": ")
					if k == "from and to are the same time" {
						v.errorf(key+".quiet_hours", "%v", err)
						continue
					}
					v.errorf(key+".quiet_hours."+k, "%s", msg)
				}
			}
		}
	}
}

// validateSteps checks a policy's steps: valid recipients, each person
// once, durations in order, and a quorum the named people can reach.
func (c *Config) validateSteps(v *validator, key string, p *PolicyConfig) {
	envelopeStep := len(p.Steps) == 0
	incomplete := false          // a step whose list was refused: no count is right
	named := map[string]string{} // recipient or person → where first named
	persons := map[string]bool{} // the people who count toward the quorum
	for si, s := range p.Steps {
		sk := fmt.Sprintf("%s.steps[%d]", key, si)
		if s.To.Envelope && si > 0 {
			v.errorf(sk+".to", "envelope (the request's own recipients) can only be the first step: they are asked when the request arrives")
		}
		if si+1 < len(p.Steps) && s.EscalateAfter == 0 {
			v.errorf(sk+".escalate_after", "required: steps[%d] is asked only when this step escalates", si+1)
		}
		if s.To.Envelope {
			envelopeStep = true
		} else if len(s.To.Members) == 0 {
			v.errorf(sk+".to", "required: envelope, or a list of recipients and people")
			incomplete = true
		}
		for mi, m := range s.To.Members {
			mk := fmt.Sprintf("%s.to[%d]", sk, mi)
			var rs []envelope.Recipient
			id := ""
			if m.Person != "" || m.Channels != nil {
				if m.Channel != "" || m.Address != "" || m.Endpoint != "" {
					v.errorf(mk, "a person is {person, channels}; the channel and address go in channels")
					continue
				}
				if strings.TrimSpace(m.Person) == "" {
					v.errorf(mk+".person", "required: the person's name")
				}
				if len(m.Channels) == 0 {
					v.errorf(mk+".channels", "at least one {channel, address}")
				}
				rs, id = m.Channels, "person:"+m.Person
			} else {
				rs = []envelope.Recipient{m.Recipient}
			}
			for ri, r := range rs {
				rk := mk
				if m.Person != "" || m.Channels != nil {
					rk = fmt.Sprintf("%s.channels[%d]", mk, ri)
				}
				norm, err := c.checkStepRecipient(r)
				if err != nil {
					v.errorf(rk, "%v", err)
					continue
				}
				spec, _ := envelope.Channel(norm.Channel)
				rid := norm.Channel + ":" + spec.Fold(norm.Target())
				if where, dup := named[rid]; dup {
					v.errorf(rk, "%s is already named at %s: a recipient is asked once per policy", norm.Target(), where)
					continue
				}
				named[rid] = rk
				if id == "" {
					id = rid
				}
			}
			if strings.HasPrefix(id, "person:") {
				if where, dup := named[id]; dup {
					v.errorf(mk+".person", "person %q is already named at %s", m.Person, where)
				}
				named[id] = mk
			}
			if id != "" {
				persons[id] = true
			}
		}
		for _, d := range []struct {
			name string
			val  time.Duration
		}{{"remind_after", s.RemindAfter}, {"escalate_after", s.EscalateAfter}} {
			switch {
			case d.val < 0 || d.val > 0 && d.val < time.Second:
				v.errorf(sk+"."+d.name, "at least 1s (0: never), got %s", d.val)
			case d.val > 0 && d.val < time.Minute:
				v.warnf(sk+"."+d.name, "%s is under a minute (fine for tests; people rarely answer that fast)", d.val)
			}
		}
		if s.RemindAfter > 0 && s.EscalateAfter > 0 && s.RemindAfter >= s.EscalateAfter {
			v.errorf(sk+".remind_after", "must be shorter than escalate_after (%s): a reminder after the next step is asked comes too late", s.EscalateAfter)
		}
		if s.EscalateAfter > 0 && si == len(p.Steps)-1 {
			v.warnf(sk+".escalate_after", "the last step has no next step to escalate to: escalate_after does nothing")
		}
	}
	if p.Decide != "" || envelopeStep || incomplete {
		return // `to: envelope` is counted at ingest
	}
	if q, n := max(p.Quorum, 1), len(persons); q > n {
		v.errorf(key+".quorum", "%d, but the steps name %d people: the quorum could never be reached", q, n)
	}
}

// checkStepRecipient checks one recipient of a step: a known channel that
// is configured, a valid address, a configured endpoint. It returns the
// recipient with its address normalised.
func (c *Config) checkStepRecipient(r envelope.Recipient) (envelope.Recipient, error) {
	if r.Channel == "" {
		return r, fmt.Errorf("channel: required: one of %s", strings.Join(envelope.ChannelNames(), ", "))
	}
	spec, err := envelope.LookupChannel(r.Channel)
	if err != nil {
		return r, err
	}
	a, err := spec.Normalize(spec.Target(r))
	if err != nil {
		return r, err
	}
	if spec.Class == envelope.ClassWebhook {
		if _, ok := c.Webhooks.Endpoints[a]; !ok {
			return r, fmt.Errorf("unknown webhook endpoint %q (configure it under webhooks.endpoints)", a)
		}
	}
	if spec.Address == envelope.AddressEndpoint {
		r.Endpoint = a
	} else {
		r.Address = a
	}
	return r, nil
}

// checkPolicyChannels refuses, for a daemon that is not `beachd dev`
// (which stands in for a missing email or twilio section), a step's
// recipient on a channel this configuration does not send on.
func (c *Config) checkPolicyChannels(v *validator, dev bool) {
	if dev {
		return
	}
	for i, p := range c.Approvals.Policies {
		for si, s := range p.Steps {
			for mi, m := range s.To.Members {
				rs := []envelope.Recipient{m.Recipient}
				if m.Person != "" || m.Channels != nil {
					rs = m.Channels
				}
				for ri, r := range rs {
					key := fmt.Sprintf("approvals.policies[%d].steps[%d].to[%d]", i, si, mi)
					if m.Person != "" || m.Channels != nil {
						key += fmt.Sprintf(".channels[%d]", ri)
					}
					spec, ok := envelope.Channel(r.Channel)
					switch {
					case !ok:
					case spec.Class == envelope.ClassEmail && c.Email == nil:
						v.errorf(key, "channel %s: the email section is not configured", r.Channel)
					case spec.Address == envelope.AddressNumber && c.Twilio == nil:
						v.errorf(key, "channel %s: the twilio section is not configured", r.Channel)
					}
				}
			}
		}
	}
}

// ParsePolicies compiles approvals.policies (checked by validate) for the
// approvals service; nil when there are none.
func (c *ApprovalsConfig) ParsePolicies(log *slog.Logger) (*policy.Set, error) {
	if len(c.Policies) == 0 {
		return nil, nil
	}
	defs := make([]policy.Definition, 0, len(c.Policies))
	for _, p := range c.Policies {
		d := policy.Definition{Name: p.Name, Agent: p.Match.Agent, Tool: p.Match.Tool, When: p.Match.When,
			Decide: p.Decide, Quorum: p.Quorum}
		for _, s := range p.Steps {
			st := policy.Step{Envelope: s.To.Envelope, RemindAfter: s.RemindAfter, EscalateAfter: s.EscalateAfter}
			for _, m := range s.To.Members {
				var pr policy.Person
				if m.Person != "" {
					pr.Name = m.Person
					for _, r := range m.Channels {
						pr.Channels = append(pr.Channels, normalRecipient(r))
					}
				} else {
					pr.Channels = []envelope.Recipient{normalRecipient(m.Recipient)}
				}
				st.People = append(st.People, pr)
			}
			d.Steps = append(d.Steps, st)
		}
		if q := p.QuietHours; q != nil {
			qh, errs := policy.ParseQuietHours(q.Zone, q.From, q.To)
			if errs != nil {
				return nil, fmt.Errorf("approvals.policies %s: quiet_hours: %w", p.Name, errors.Join(errs...))
			}
			d.QuietHours = qh
		}
		defs = append(defs, d)
	}
	return policy.New(defs, log)
}

// normalRecipient is r with its address normalised and folded as
// approvals bind it (validated before).
func normalRecipient(r envelope.Recipient) envelope.Recipient {
	spec, ok := envelope.Channel(r.Channel)
	if !ok {
		return r
	}
	a, err := spec.Normalize(spec.Target(r))
	if err != nil {
		return r
	}
	if spec.Address == envelope.AddressEndpoint {
		r.Endpoint = a
	} else {
		r.Address = spec.Fold(a)
	}
	return r
}
