package envelope

import (
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"
)

// AddressKind is what a channel's recipients are addressed by.
type AddressKind string

const (
	// AddressEmail is an RFC 5322 mailbox.
	AddressEmail AddressKind = "email"
	// AddressNumber is an E.164 telephone number (+447700900123); a
	// "whatsapp:" prefix is stripped. One number stands for all the
	// channels addressed by numbers.
	AddressNumber AddressKind = "number"
	// AddressEndpoint is the name of a configured webhook endpoint.
	AddressEndpoint AddressKind = "webhook"
	// AddressSlack is a Slack user id (U…, W…), a conversation id (C…,
	// G…, D…), or the email address of a user of the workspace, which the
	// channel resolves to a user id once and keeps.
	AddressSlack AddressKind = "slack"
)

// Class is the transport class of a channel: what the part-type delivery
// rules, the renderers and the retry defaults distinguish.
type Class string

const (
	// ClassEmail: rich human mail (HTML, attachments, threads).
	ClassEmail Class = "email"
	// ClassMessaging: short human text messages (SMS, WhatsApp).
	ClassMessaging Class = "messaging"
	// ClassWebhook: a machine peer that receives the filtered envelope.
	ClassWebhook Class = "webhook"
	// ClassChat: a workplace chat (Slack): messaging's rules, plus what a
	// rich message can show (domain data as fields, A2UI surfaces as
	// blocks, citations as links).
	ClassChat Class = "chat"
)

// Handle kinds: how a recipient answers an approval on a channel.
const (
	// HandleToken: a token in a reply address, a reply's text, or a
	// confirmation link (/a/<token>).
	HandleToken = "token"
	// HandleCode: a short numeric code in a text message.
	HandleCode = "code"
	// HandleButton: a quick-reply button carrying a signed payload.
	HandleButton = "button"
	// HandleSigned: a decision posted by the peer and signed with the
	// endpoint's secret.
	HandleSigned = "signed"
)

// DeliveryProfile is a channel's default retry schedule, as plain values
// (package channels turns it into its Policy).
type DeliveryProfile struct {
	// Delays[i] is the wait after attempt i+1 fails; past the end, the last
	// delay repeats.
	Delays []time.Duration
	// Lifetime bounds retries, from the job's creation.
	Lifetime time.Duration
	// Jitter is the ± fraction applied to each delay.
	Jitter float64
	// Timeout bounds one attempt.
	Timeout time.Duration
}

// InboundSpec is what a channel does with messages people send in.
type InboundSpec struct {
	// Accepts: people can write in on the channel (replies, new
	// conversations); a webhook takes only signed decisions.
	Accepts bool
	// Window is how long after a person's last message a free-form answer
	// may be sent (WhatsApp's 24 hours); 0 means no window.
	Window time.Duration
	// CarrierKeywords: STOP/START keywords are carrier opt-outs and opt-ins.
	CarrierKeywords bool
}

// ChannelSpec describes one buffered channel. Every property of a channel
// the packages read is here; ChannelSpecs is the one table of them.
type ChannelSpec struct {
	Name    string
	Address AddressKind
	Class   Class
	// Handles are the approval handle kinds the channel carries, in the
	// order they are offered.
	Handles []string
	Profile DeliveryProfile
	Inbound InboundSpec
}

// ChannelSpecs is the table of channels, in a stable order. It returns a
// new slice on every call.
func ChannelSpecs() []ChannelSpec {
	messaging := DeliveryProfile{
		Delays:   []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute},
		Lifetime: 6 * time.Hour, Jitter: 0.2, Timeout: 30 * time.Second,
	}
	return []ChannelSpec{
		{
			Name: ChannelEmail, Address: AddressEmail, Class: ClassEmail,
			Handles: []string{HandleToken},
			// Postfix-like: 5 min doubling to a little over an hour, for
			// up to 5 days.
			Profile: DeliveryProfile{
				Delays:   []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 67 * time.Minute},
				Lifetime: 5 * 24 * time.Hour, Jitter: 0.2, Timeout: 2 * time.Minute,
			},
			Inbound: InboundSpec{Accepts: true},
		},
		{
			Name: ChannelSMS, Address: AddressNumber, Class: ClassMessaging,
			Handles: []string{HandleCode},
			Profile: messaging,
			Inbound: InboundSpec{Accepts: true, CarrierKeywords: true},
		},
		{
			Name: ChannelWhatsApp, Address: AddressNumber, Class: ClassMessaging,
			Handles: []string{HandleCode, HandleButton},
			Profile: DeliveryProfile{Delays: append([]time.Duration(nil), messaging.Delays...),
				Lifetime: messaging.Lifetime, Jitter: messaging.Jitter, Timeout: messaging.Timeout},
			Inbound: InboundSpec{Accepts: true, Window: 24 * time.Hour, CarrierKeywords: true},
		},
		{
			Name: ChannelSlack, Address: AddressSlack, Class: ClassChat,
			Handles: []string{HandleButton},
			// Slack's own rate limits are short (Retry-After in seconds):
			// the messaging schedule, from a shorter first wait.
			Profile: DeliveryProfile{
				Delays:   []time.Duration{10 * time.Second, 1 * time.Minute, 5 * time.Minute, 30 * time.Minute},
				Lifetime: messaging.Lifetime, Jitter: messaging.Jitter, Timeout: messaging.Timeout,
			},
			Inbound: InboundSpec{Accepts: true},
		},
		{
			Name: ChannelWebhook, Address: AddressEndpoint, Class: ClassWebhook,
			Handles: []string{HandleToken, HandleSigned},
			// The Standard Webhooks schedule (immediately, 5 s, 5 min,
			// 30 min, 2 h, 5 h, 10 h, 10 h …) for about three days.
			Profile: DeliveryProfile{
				Delays:   []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour},
				Lifetime: 3 * 24 * time.Hour, Jitter: 0.2, Timeout: 15 * time.Second,
			},
		},
	}
}

// Channel is the spec of the named channel; ok is false for a name that is
// not a channel.
func Channel(name string) (ChannelSpec, bool) {
	p := tableSpec(name)
	if p == nil {
		return ChannelSpec{}, false
	}
	// The table is shared: the caller gets its own slices.
	s := *p
	s.Handles = slices.Clone(s.Handles)
	s.Profile.Delays = slices.Clone(s.Profile.Delays)
	return s, true
}

// tableSpec is the table's own spec of the named channel, nil for a name
// that is not a channel: for this package's lookups that only read it
// (Recipient.Target, KnownChannel, asked for every recipient of every
// envelope), without Channel's copies of its slices.
func tableSpec(name string) *ChannelSpec {
	for i := range channelTable {
		if channelTable[i].Name == name {
			return &channelTable[i]
		}
	}
	return nil
}

// channelTable is ChannelSpecs built once: Channel is asked for every
// recipient of every envelope, and building the table each time was a
// tenth of what the ingest path allocated.
var channelTable = ChannelSpecs()

// ChannelNames lists the channel names in a stable order.
func ChannelNames() []string {
	specs := ChannelSpecs()
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// MustChannel is Channel for a name the caller has already checked; an
// unknown name is a programming error and panics naming it.
func MustChannel(name string) ChannelSpec {
	s, ok := Channel(name)
	if !ok {
		panic(fmt.Sprintf("envelope: unknown channel %q", name))
	}
	return s
}

// UnknownChannelError is returned for a name that is not a channel.
type UnknownChannelError struct{ Name string }

func (e *UnknownChannelError) Error() string {
	return fmt.Sprintf("unknown channel %q: one of %s", e.Name, strings.Join(ChannelNames(), ", "))
}

// LookupChannel is Channel with an error naming an unknown channel.
func LookupChannel(name string) (ChannelSpec, error) {
	s, ok := Channel(name)
	if !ok {
		return ChannelSpec{}, &UnknownChannelError{Name: name}
	}
	return s, nil
}

// Supports reports whether the channel carries approval handles of kind.
func (s ChannelSpec) Supports(kind string) bool {
	for _, h := range s.Handles {
		if h == kind {
			return true
		}
	}
	return false
}

// Human reports whether people read the channel (email and messaging).
func (s ChannelSpec) Human() bool { return s.Class != ClassWebhook }

// Target is the address or endpoint of r, whichever the channel uses.
func (s ChannelSpec) Target(r Recipient) string {
	if s.Address == AddressEndpoint {
		return r.Endpoint
	}
	return r.Address
}

// maxAddressLen bounds an address before it is parsed.
const maxAddressLen = 320

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// slackID is a Slack user (U, W), channel (C, G) or direct message (D) id.
var slackID = regexp.MustCompile(`^[UWCGD][A-Z0-9]{2,20}$`)

// SlackUser reports whether addr is a Slack user id (U…, W…).
func SlackUser(addr string) bool {
	return slackID.MatchString(addr) && (addr[0] == 'U' || addr[0] == 'W')
}

// SlackConversation reports whether addr is a Slack channel or direct
// message id (C…, G…, D…).
func SlackConversation(addr string) bool {
	return slackID.MatchString(addr) && !SlackUser(addr)
}

// Normalize checks an address of the channel's kind and returns its stored
// form: an email addr-spec with the domain lower-cased; an E.164 number
// without a "whatsapp:" prefix; an endpoint name as given (the configured
// endpoints are checked by the caller).
func (s ChannelSpec) Normalize(addr string) (string, error) {
	if len(addr) > maxAddressLen {
		return "", fmt.Errorf("address of %d bytes; at most %d", len(addr), maxAddressLen)
	}
	switch s.Address {
	case AddressEmail:
		a, err := mail.ParseAddress(addr)
		if err != nil {
			return "", fmt.Errorf("not an RFC 5322 address: %v", err)
		}
		at := strings.LastIndexByte(a.Address, '@')
		if at <= 0 || at == len(a.Address)-1 {
			return "", fmt.Errorf("not an address with a domain")
		}
		return a.Address[:at] + "@" + strings.ToLower(a.Address[at+1:]), nil
	case AddressNumber:
		n := strings.TrimPrefix(addr, "whatsapp:")
		if !e164.MatchString(n) {
			return "", fmt.Errorf("must be an E.164 number like +447700900123, got %q", n)
		}
		return n, nil
	case AddressEndpoint:
		if addr == "" {
			return "", fmt.Errorf("required for the %s channel", s.Name)
		}
		return addr, nil
	case AddressSlack:
		if slackID.MatchString(addr) {
			return addr, nil
		}
		if strings.Contains(addr, "@") {
			return ChannelSpec{Address: AddressEmail}.Normalize(addr)
		}
		return "", fmt.Errorf("must be a Slack user id (U…), a channel id (C…) or a user's email address, got %q", addr)
	}
	return "", fmt.Errorf("channel %q has no address kind", s.Name)
}

// Fold is the comparison form of an address of the channel's kind, for
// matching a sender against a recipient: an email address lower-cased, a
// number without its "whatsapp:" prefix, both trimmed; an endpoint name
// as is. It never fails: an address that does not parse matches nothing
// it should not.
func (s ChannelSpec) Fold(addr string) string {
	switch s.Address {
	case AddressEmail:
		return strings.ToLower(strings.TrimSpace(addr))
	case AddressNumber:
		return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(addr), "whatsapp:"))
	case AddressSlack:
		a := strings.TrimSpace(addr)
		if strings.Contains(a, "@") {
			return strings.ToLower(a)
		}
		return a
	}
	return addr
}

// RecipientKey identifies the person or peer behind r across channels of
// one address kind: "email:<address>", "number:<E.164>" (a number stands
// for its SMS and WhatsApp recipients alike), "webhook:<endpoint>",
// "slack:<id>"; a Slack recipient named by its email address is the
// person of that address ("email:<address>").
func (s ChannelSpec) RecipientKey(r Recipient) string {
	t := s.Fold(s.Target(r))
	if s.Address == AddressSlack && strings.Contains(t, "@") {
		return string(AddressEmail) + ":" + t
	}
	return string(s.Address) + ":" + t
}
