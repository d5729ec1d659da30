package config

import (
	"fmt"
	"maps"
	"net/mail"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
)

// InboundConfig is `agents.NAME.inbound`: the addresses people write to in
// order to talk with the agent, and who may.
//
//	agents:
//	  travel:
//	    a2a_url: http://127.0.0.1:9000/
//	    inbound:
//	      email: ["travel@example.org"]      # mail to these addresses starts turns with this agent
//	      sms: ["+15550001111"]              # our numbers (twilio.sms_from)
//	      whatsapp: ["+15550002222"]         # our numbers (twilio.whatsapp_from)
//	      slack: ["im", "C0123ABCD"]         # Slack: direct messages to the app, mentions in a channel (or "*": any channel)
//	      allow: ["*@example.org", "+44*"]   # who may write (deny by default)
//	      idle_timeout: 24h                  # an SMS/WhatsApp conversation stays open this long after its last message
//	      max_turns: { per_minute: 10, per_hour: 100 }             # one conversation
//	      max_turns_per_sender: { per_minute: 5, per_hour: 30 }    # one sender, across conversations and channels
//	      max_turns_per_agent: { per_minute: 60, per_hour: 1000 }  # everyone writing to this agent
//	      refuse_unknown: true               # one polite refusal a day to a sender not allowed
//
// Each allow entry is one of:
//
//	alice@example.org   one address
//	*@example.org       every address at that domain (not its subdomains)
//	+447700900123       one number, for SMS and WhatsApp alike
//	+44*                every number starting with +44
//	U0123ABCD           one Slack user
//	*                   everyone
//
// The section is checked by Config.checkInbound (the entries, the bounds,
// an address claimed by two agents) and Config.checkInboundChannels (the
// channel that receives each address is configured); Config.InboundAgents
// gives the checked section as an Inbound.
type InboundConfig struct {
	Email    []string `yaml:"email"`
	SMS      []string `yaml:"sms"`
	WhatsApp []string `yaml:"whatsapp"`
	// Slack lists where the Slack app's messages start turns with this
	// agent: "im" (direct messages to the app), a channel id (C…, G…:
	// mentions of the app there) or "*" (mentions in any other channel).
	Slack       []string       `yaml:"slack"`
	Allow       []string       `yaml:"allow"`
	IdleTimeout time.Duration  `yaml:"idle_timeout"`
	MaxTurns    MaxTurnsConfig `yaml:"max_turns"`
	// MaxTurnsPerSender and MaxTurnsPerAgent bound the turns one sender
	// (across all their conversations) and all senders together may start:
	// defaults 5/30 and 60/1000, each raised to at least max_turns (a
	// conversation's own limit) when that is higher.
	MaxTurnsPerSender MaxTurnsConfig `yaml:"max_turns_per_sender"`
	MaxTurnsPerAgent  MaxTurnsConfig `yaml:"max_turns_per_agent"`
	// RefuseUnknown: nil (unset) means true.
	RefuseUnknown *bool `yaml:"refuse_unknown"`
}

// MaxTurnsConfig is `agents.NAME.inbound.max_turns`: how many turns one
// conversation may start. Zero means the default.
type MaxTurnsConfig struct {
	PerMinute int `yaml:"per_minute"` // default 10
	PerHour   int `yaml:"per_hour"`   // default 100
}

// Inbound is an agent's checked inbound section, normalised and with its
// defaults: email addresses in lower case, numbers E.164 without a
// "whatsapp:" prefix, allow entries in the forms listed on InboundConfig
// (addresses and domains in lower case). Its fields are those of
// conversations.AgentConfig, in the same order, so one converts to the
// other.
type Inbound struct {
	Email, SMS, WhatsApp []string
	Slack                []string
	Allow                []string
	IdleTimeout          time.Duration
	PerMinute, PerHour   int
	RefuseUnknown        bool
}

// TurnLimits are an agent's flood limits across conversations, defaults
// applied; its fields are those of conversations.TurnLimits, in the same
// order, so one converts to the other.
type TurnLimits struct {
	SenderPerMinute, SenderPerHour int
	AgentPerMinute, AgentPerHour   int
}

// Defaults and bounds of an inbound section.
const (
	defaultIdleTimeout   = 24 * time.Hour
	minIdleTimeout       = time.Minute
	maxIdleTimeout       = 30 * 24 * time.Hour
	defaultTurnsPerMin   = 10
	defaultTurnsPerHour  = 100
	defaultSenderPerMin  = 5
	defaultSenderPerHour = 30
	defaultAgentPerMin   = 60
	defaultAgentPerHour  = 1000
	maxTurnsPerMinute    = 1000
	maxTurnsPerHour      = 60 * maxTurnsPerMinute
	maxInboundAddresses  = 100  // per list (email, sms, whatsapp, slack)
	maxInboundAllow      = 1024 // allow entries
	allowPatternExamples = "an address (alice@example.org), a domain (*@example.org), a number (+447700900123), a number prefix (+44*), a Slack user (U0123ABCD) or * for everyone"
)

var (
	numberPrefixPattern = regexp.MustCompile(`^\+[1-9][0-9]{0,13}\*$`)
	domainPattern       = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
)

// inboundEmail checks and normalises one address of inbound.email: a bare
// address (no display name), no '+' in its local part (replies come back
// to local+c-….@domain), lower case.
func inboundEmail(s string) (string, error) {
	t := strings.TrimSpace(s)
	a, err := mail.ParseAddress(t)
	if err != nil || strings.Contains(t, "*") {
		return "", fmt.Errorf("%q is not an email address; write one such as travel@example.org", s)
	}
	if a.Name != "" || a.Address != t {
		return "", fmt.Errorf("%q: write the bare address, such as %s (the name shown on answers comes from email.from)", s, a.Address)
	}
	n, err := api.NormalizeEmail(a.Address)
	if err != nil {
		return "", fmt.Errorf("%q: %v; write one such as travel@example.org", s, err)
	}
	local, _, _ := strings.Cut(n, "@")
	if strings.Contains(local, "+") {
		return "", fmt.Errorf("%q: no '+' in the local part (answers carry local+c-….@domain as their reply address); write one such as travel@example.org", s)
	}
	return strings.ToLower(n), nil
}

// inboundNumber checks and normalises one number of inbound.sms or
// inbound.whatsapp: E.164, a "whatsapp:" prefix dropped.
func inboundNumber(s string) (string, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "whatsapp:")
	if !e164Number.MatchString(t) {
		return "", fmt.Errorf("%q is not an E.164 number; write one such as +15550001111", s)
	}
	return t, nil
}

// Entries of inbound.slack besides a channel id.
const (
	// InboundSlackIM takes direct messages to the Slack app.
	InboundSlackIM = "im"
	// InboundSlackAnyChannel takes mentions of the app in any channel no
	// agent lists by its id.
	InboundSlackAnyChannel = "*"
)

// inboundSlack checks one entry of inbound.slack: "im", "*" or a channel
// id (C…, G…).
func inboundSlack(s string) (string, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == InboundSlackIM || t == InboundSlackAnyChannel:
		return t, nil
	case envelope.SlackConversation(t) && (t[0] == 'C' || t[0] == 'G'):
		return t, nil
	}
	return "", fmt.Errorf("%q is not a Slack inbound entry; write im (direct messages to the app), a channel id such as C0123ABCD (mentions of the app there) or * (mentions in any channel)", s)
}

// allowPattern checks and normalises one allow entry.
func allowPattern(s string) (string, error) {
	t := strings.TrimSpace(s)
	bad := func(why string) (string, error) {
		if why != "" {
			why = " (" + why + ")"
		}
		return "", fmt.Errorf("%q is not an allow entry%s; write %s", s, why, allowPatternExamples)
	}
	switch {
	case t == "*":
		return t, nil
	case envelope.SlackUser(t):
		return t, nil
	case strings.HasPrefix(t, "*@"):
		d := strings.ToLower(strings.TrimSuffix(t[2:], "."))
		if !domainPattern.MatchString(d) {
			return bad("not a domain after *@")
		}
		return "*@" + d, nil
	case strings.HasPrefix(t, "whatsapp:"):
		return bad("a number is allowed on SMS and WhatsApp alike: write it without whatsapp:")
	case strings.HasPrefix(t, "+") && strings.HasSuffix(t, "*"):
		if !numberPrefixPattern.MatchString(t) {
			return bad("a number prefix is + and 1 to 14 digits, the first not 0, then *")
		}
		return t, nil
	case strings.HasPrefix(t, "+"):
		if !e164Number.MatchString(t) {
			return bad("not an E.164 number")
		}
		return t, nil
	case strings.Contains(t, "*"):
		return bad("* stands alone, for a whole domain (*@example.org) or after a number prefix (+44*)")
	case strings.Contains(t, "@"):
		a, err := mail.ParseAddress(t)
		if err != nil || a.Name != "" || a.Address != t {
			return bad("not a bare email address")
		}
		n, err := api.NormalizeEmail(a.Address)
		if err != nil {
			return bad(err.Error())
		}
		return strings.ToLower(n), nil
	}
	return bad("")
}

// resolve checks the section and returns it normalised, defaults applied.
// report is called for each problem with the key under the section
// ("email[0]", "idle_timeout"); entries with a problem are left out of the
// result.
func (c *InboundConfig) resolve(report func(key, format string, args ...any)) Inbound {
	out := Inbound{
		IdleTimeout: durationOr(c.IdleTimeout, defaultIdleTimeout),
		PerMinute:   c.MaxTurns.PerMinute,
		PerHour:     c.MaxTurns.PerHour,
		// The default: a stranger learns once a day that nobody reads
		// what they write here.
		RefuseUnknown: c.RefuseUnknown == nil || *c.RefuseUnknown,
	}
	if out.PerMinute == 0 {
		out.PerMinute = defaultTurnsPerMin
	}
	if out.PerHour == 0 {
		out.PerHour = defaultTurnsPerHour
	}
	list := func(name string, in []string, max int, parse func(string) (string, error)) []string {
		if len(in) > max {
			report(name, "at most %d entries, got %d", max, len(in))
			return nil
		}
		var res []string
		seen := map[string]int{}
		for i, s := range in {
			key := fmt.Sprintf("%s[%d]", name, i)
			n, err := parse(s)
			if err != nil {
				report(key, "%v", err)
				continue
			}
			if j, dup := seen[n]; dup {
				report(key, "%s is listed twice (also %s[%d])", n, name, j)
				continue
			}
			seen[n] = i
			res = append(res, n)
		}
		return res
	}
	out.Email = list("email", c.Email, maxInboundAddresses, inboundEmail)
	out.SMS = list("sms", c.SMS, maxInboundAddresses, inboundNumber)
	out.WhatsApp = list("whatsapp", c.WhatsApp, maxInboundAddresses, inboundNumber)
	out.Slack = list("slack", c.Slack, maxInboundAddresses, inboundSlack)
	out.Allow = list("allow", c.Allow, maxInboundAllow, allowPattern)
	if len(c.Email)+len(c.SMS)+len(c.WhatsApp)+len(c.Slack) == 0 {
		// Reported at email, so that a list already refused as written
		// (not a list) is not also called missing.
		report("email", "none of email, sms, whatsapp and slack is set: list the addresses people write to, or leave inbound out")
	}
	if c.IdleTimeout != 0 && (c.IdleTimeout < minIdleTimeout || c.IdleTimeout > maxIdleTimeout) {
		report("idle_timeout", "must be between 1m and 720h (30 days; 0: the default, 24h), got %s", c.IdleTimeout)
	}
	checkTurns(report, "max_turns", c.MaxTurns, defaultTurnsPerMin, defaultTurnsPerHour)
	checkTurns(report, "max_turns_per_sender", c.MaxTurnsPerSender, defaultSenderPerMin, defaultSenderPerHour)
	checkTurns(report, "max_turns_per_agent", c.MaxTurnsPerAgent, defaultAgentPerMin, defaultAgentPerHour)
	return out
}

// checkTurns checks one {per_minute, per_hour} pair of the section; zero
// means the default given.
func checkTurns(report func(key, format string, args ...any), key string, t MaxTurnsConfig, defMin, defHour int) {
	perMin, perHour := t.PerMinute, t.PerHour
	if perMin < 0 || perMin > maxTurnsPerMinute {
		report(key+".per_minute", "must be between 1 and %d (0: the default, %d), got %d", maxTurnsPerMinute, defMin, perMin)
	}
	if perHour < 0 || perHour > maxTurnsPerHour {
		report(key+".per_hour", "must be between 1 and %d (0: the default, %d), got %d", maxTurnsPerHour, defHour, perHour)
	}
	gotMin, gotHour := orDefault(perMin, defMin), orDefault(perHour, defHour)
	if perMin >= 0 && perHour >= 0 && gotHour < gotMin {
		what := func(set, n int) string {
			if set == 0 {
				return fmt.Sprintf("%d, the default", n)
			}
			return fmt.Sprint(n)
		}
		report(key+".per_hour", "must be at least per_minute: per_hour is %s, per_minute %s", what(perHour, gotHour), what(perMin, gotMin))
	}
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// turnLimits is the section's limits across conversations, defaults
// applied. A limit left unset is never below a max_turns that is set: a
// ceiling under what one conversation was allowed would leave that setting
// without effect.
func (c *InboundConfig) turnLimits() TurnLimits {
	pick := func(set, def, floor int) int {
		if set > 0 {
			return set
		}
		return max(def, floor)
	}
	l := TurnLimits{
		SenderPerMinute: pick(c.MaxTurnsPerSender.PerMinute, defaultSenderPerMin, c.MaxTurns.PerMinute),
		SenderPerHour:   pick(c.MaxTurnsPerSender.PerHour, defaultSenderPerHour, c.MaxTurns.PerHour),
	}
	l.AgentPerMinute = pick(c.MaxTurnsPerAgent.PerMinute, defaultAgentPerMin, l.SenderPerMinute)
	l.AgentPerHour = pick(c.MaxTurnsPerAgent.PerHour, defaultAgentPerHour, l.SenderPerHour)
	return l
}

// checkInbound checks every agent's inbound section: its entries, its
// bounds, that the agent speaks A2A, and that no address belongs to two
// agents.
func (c *Config) checkInbound(v *validator) {
	type claim struct{ agent, key string }
	claims := map[string]claim{} // "email:travel@example.org" → the first agent that lists it
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		a := c.Agents[name]
		if a.Inbound == nil {
			continue
		}
		key := "agents." + name + ".inbound"
		in := a.Inbound.resolve(func(k, format string, args ...any) {
			v.errorf(key+"."+k, format, args...)
		})
		if a.A2AURL == "" {
			v.errorf(key, "needs agents.%s.a2a_url: a conversation is a series of A2A turns with the agent", name)
		}
		for _, ch := range []struct {
			name  string
			addrs []string
			raw   []string
		}{{"email", in.Email, a.Inbound.Email}, {"sms", in.SMS, a.Inbound.SMS}, {"whatsapp", in.WhatsApp, a.Inbound.WhatsApp},
			{"slack", in.Slack, a.Inbound.Slack}} {
			for _, addr := range ch.addrs {
				i := indexOfNormalised(ch.raw, addr, ch.name)
				at := fmt.Sprintf("%s.%s[%d]", key, ch.name, i)
				if first, taken := claims[ch.name+":"+addr]; taken && first.agent != name {
					v.errorf(at, "%s is already an inbound address of agent %q (%s): an address belongs to one agent only, or nobody knows whom a message to it is for",
						addr, first.agent, first.key)
					continue
				}
				claims[ch.name+":"+addr] = claim{name, at}
			}
		}
	}
}

// indexOfNormalised finds the index in raw of the entry that normalises
// to addr.
func indexOfNormalised(raw []string, addr, channel string) int {
	parse := inboundNumber
	switch channel {
	case "email":
		parse = inboundEmail
	case "slack":
		parse = inboundSlack
	}
	for i, s := range raw {
		if n, err := parse(s); err == nil && n == addr {
			return i
		}
	}
	return 0
}

// checkInboundChannels checks that the channel receiving each inbound
// address is configured: an email address needs the email channel with
// its IMAP intake; a number must be one Twilio sends that channel from. In
// `beachd dev` (dev) a missing email or twilio section is not missing:
// dev's own mail server and its recorded SMS and WhatsApp stand in.
func (c *Config) checkInboundChannels(v *validator, dev bool) {
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		a := c.Agents[name]
		if a.Inbound == nil {
			continue
		}
		key := "agents." + name + ".inbound"
		for i, s := range a.Inbound.Email {
			addr, err := inboundEmail(s)
			if err != nil {
				continue // checkInbound reports it
			}
			at := fmt.Sprintf("%s.email[%d]", key, i)
			switch {
			case c.Email == nil && !dev:
				v.errorf(at, "mail to %s is read by the email channel, which is off: add an email section with email.imap, the mailbox that receives %[1]s", addr)
			case c.Email != nil && c.Email.IMAP == nil:
				v.errorf(at, "mail to %s is read by the email channel's IMAP intake, and email.imap is not set: add email.imap, the mailbox that receives %[1]s", addr)
			}
		}
		for i, s := range a.Inbound.Slack {
			if _, err := inboundSlack(s); err != nil {
				continue // checkInbound reports it
			}
			if c.Slack == nil && !dev {
				v.errorf(fmt.Sprintf("%s.slack[%d]", key, i), "Slack messages reach beachd through the Slack app, which is not configured: add a slack section (bot_token, signing_secret) and subscribe the app to events (docs/slack.md)")
			}
		}
		for _, ch := range []struct {
			name, setting string
			entries       []string
		}{{"sms", "twilio.sms_from", a.Inbound.SMS}, {"whatsapp", "twilio.whatsapp_from", a.Inbound.WhatsApp}} {
			for i, s := range ch.entries {
				n, err := inboundNumber(s)
				if err != nil {
					continue // checkInbound reports it
				}
				at := fmt.Sprintf("%s.%s[%d]", key, ch.name, i)
				if c.Twilio == nil {
					if !dev {
						v.errorf(at, "messages to %s come through Twilio, which is not configured: add a twilio section with %s: %q", n, ch.setting, inboundTwilioSetting(ch.name, n))
					}
					continue
				}
				ours := c.Twilio.numbers(ch.name)
				if !slices.Contains(ours, n) {
					have := "none is set"
					if len(ours) > 0 {
						have = "it is " + strings.Join(ours, ", ")
					}
					v.errorf(at, "%s is not a number Twilio sends %s from (%s; %s): answers go out from the number written to, so set %s: %q",
						n, inboundChannelTitle(ch.name), ch.setting, have, ch.setting, inboundTwilioSetting(ch.name, n))
				}
			}
		}
	}
}

// numbers are the numbers Twilio sends a channel ("sms" or "whatsapp")
// from, E.164 without a prefix.
func (c *TwilioConfig) numbers(channel string) []string {
	var s string
	switch channel {
	case "sms":
		s = c.SMSFrom
	case "whatsapp":
		s = strings.TrimPrefix(c.WhatsAppFrom, "whatsapp:")
	}
	if s == "" {
		return nil
	}
	return []string{s}
}

func inboundTwilioSetting(channel, n string) string {
	if channel == "whatsapp" {
		return "whatsapp:" + n
	}
	return n
}

func inboundChannelTitle(channel string) string {
	if channel == "sms" {
		return "SMS"
	}
	return "WhatsApp"
}

// InboundAgents are the checked inbound sections of the agents that have
// one, by agent name. The configuration is valid.
func (c *Config) InboundAgents() map[string]Inbound {
	out := map[string]Inbound{}
	for name, a := range c.Agents {
		if a.Inbound != nil {
			out[name] = a.Inbound.resolve(func(string, string, ...any) {})
		}
	}
	return out
}

// InboundTurnLimits are the flood limits across conversations of each agent
// that has an inbound section.
func (c *Config) InboundTurnLimits() map[string]TurnLimits {
	out := map[string]TurnLimits{}
	for name, a := range c.Agents {
		if a.Inbound != nil {
			out[name] = a.Inbound.turnLimits()
		}
	}
	return out
}

// InboundOwnAddresses are the addresses beachd sends mail from (email.from
// and the base reply address): mail from them never starts a turn. Nil
// without an email section.
func (c *Config) InboundOwnAddresses() []string {
	if c.Email == nil {
		return nil
	}
	var own []string
	if f := c.Email.FromAddress(); f != "" {
		own = append(own, f)
	}
	if r := strings.ToLower(c.Email.ReplyTo()); r != "" && r != c.Email.FromAddress() {
		own = append(own, r)
	}
	return own
}

// DevInbound is the inbound section of `beachd dev`'s agent: mail to
// email (the dev mail server's agent mailbox, agent@beachd.localhost),
// SMS and WhatsApp to number (the number the dev recorder answers from,
// +15550001111 without a twilio section), and Slack direct messages and
// mentions start turns, and anybody may write.
func DevInbound(email, number string) *InboundConfig {
	return &InboundConfig{
		Email:    []string{email},
		SMS:      []string{number},
		WhatsApp: []string{number},
		Slack:    []string{InboundSlackIM, InboundSlackAnyChannel},
		Allow:    []string{"*"},
	}
}

// InboundEmails are every agent's inbound email addresses: a conversation
// answer goes out from the one the person wrote to.
func (c *Config) InboundEmails() []string {
	var out []string
	for _, in := range c.InboundAgents() {
		out = append(out, in.Email...)
	}
	sort.Strings(out)
	return out
}

// InboundNumbers are every agent's inbound numbers on channel (sms or
// whatsapp): a conversation answer goes out from the one the person wrote
// to, so the channel may send from each.
func (c *Config) InboundNumbers(channel string) []string {
	var out []string
	for _, in := range c.InboundAgents() {
		switch channel {
		case envelope.ChannelSMS:
			out = append(out, in.SMS...)
		case envelope.ChannelWhatsApp:
			out = append(out, in.WhatsApp...)
		}
	}
	sort.Strings(out)
	return out
}
