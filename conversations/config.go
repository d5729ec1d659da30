package conversations

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Decider is what an inbound message is offered to first: approvals
// (*approvals.Service).
type Decider interface {
	HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error)
}

// Agent starts turns with agents and waits for their answers
// (*agent.Client).
type Agent interface {
	SendMessage(ctx context.Context, agentName string, msg *agent.Message) (*agent.Turn, error)
	WaitTurn(ctx context.Context, agentName string, turn *agent.Turn, poll time.Duration) (*envelope.Envelope, error)
}

// Sender is told when the router stored deliveries (an answer, a refusal,
// released held answers), so that it looks for due work at once: the
// dispatcher (*channels.Dispatcher) implements it.
type Sender interface {
	Notify()
}

// MediaFetcher fetches a provider's media (Twilio MediaUrlN) with the
// account's credentials, refusing any URL not on the provider's API host
// and anything larger than max bytes. channels/twilio implements it. An
// error that is a MediaFailure says whether a later try can succeed; any
// other is taken as one that may.
type MediaFetcher interface {
	FetchMedia(ctx context.Context, url string, max int64) (data []byte, mediaType string, err error)
}

// MediaFailure is a MediaFetcher's error that says whether a later fetch
// can succeed, and why this one failed in a few words fit for the agent
// (no URL, no credential). *twilio.MediaError is one.
type MediaFailure interface {
	error
	MediaPermanent() bool
	MediaReason() string
}

// Enqueuer stores an answer for delivery the way every envelope is
// stored: validated, each recipient that names a conversation resolved
// through the router, approval handles minted for any approval-request
// it carries (the API's ingester implements it). key makes the ingest
// replayable, so an answer stored before a crash is not stored twice.
type Enqueuer interface {
	EnqueueKeyed(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source, key string) (envelopeID string, err error)
}

// Config configures the Router.
type Config struct {
	// Agents by name.
	Agents map[string]AgentConfig
	// TurnLimits are each agent's flood limits across its conversations,
	// by agent name (agents.NAME.inbound.max_turns_per_sender and
	// max_turns_per_agent). An agent not listed, and a zero field, take
	// the defaults (DefaultTurnLimits).
	TurnLimits map[string]TurnLimits
	// OwnAddresses are our sending addresses (email from, reply_to): mail
	// from them never starts turns.
	OwnAddresses []string
	Now          func() time.Time
	// AttachmentInlineMax is the largest attachment sent inline in an A2A
	// file part (default 256 KiB); larger ones go as signed URLs.
	AttachmentInlineMax int64
	// AttachmentURLBase is beachd's public base URL (links.base_url) for
	// signed attachment URLs; AttachmentURLTTL how long one is valid
	// (default 7 days). URLKey is the HMAC key of those URLs.
	AttachmentURLBase string
	AttachmentURLTTL  time.Duration
	URLKey            []byte
	// TurnTimeout bounds how long a turn's task is polled (default 10m).
	TurnTimeout time.Duration
	// Metrics is optional (NewMetrics).
	Metrics *Metrics
	// Enqueue stores answers (optional: without it they are written to the
	// store as they are, and an approval-request in an answer mints no
	// approval).
	Enqueue Enqueuer
	// Media fetches Twilio media when a turn is built (optional: without
	// it, provider media is listed in the message's metadata only).
	Media MediaFetcher
	// MediaAttempts and MediaRetryFor bound the fetches of one media item
	// that fail in a way a later try may fix (a 5xx, a timeout): the turn
	// is retried, with its backoff, until the item failed MediaAttempts
	// times (default 3) or MediaRetryFor passed since the message came
	// (default 10m); then the turn goes on without it, saying so. A
	// refusal (a 4xx, an address refused) gives up on the item at once.
	MediaAttempts int
	MediaRetryFor time.Duration

	// The turn outbox worker. Zero values mean the defaults.
	// Workers: concurrent turns (default 4). Lifetime: how long a turn is
	// retried while the agent is down or failing (default 24h: an agent
	// down for hours loses nothing; after a day the answer would come too
	// late to help). MaxAttempts, when set, also bounds the attempts.
	// MinBackoff and MaxBackoff bound
	// the exponential backoff with ±20% jitter (defaults 2s and 5m). Lease:
	// how long a claimed turn is held (default TurnTimeout + 2m). Poll: how
	// often a task is polled (default 500ms).
	Workers                int
	Lifetime               time.Duration
	MaxAttempts            int
	MinBackoff, MaxBackoff time.Duration
	Lease                  time.Duration
	Poll                   time.Duration
	Rand                   io.Reader
	// Shared says other processes use the store too (store.Store.Shared):
	// their claimed turns are live, and only those whose lease ran out are
	// requeued.
	Shared bool
}

// AgentConfig is one agent's inbound configuration.
type AgentConfig struct {
	// Email, SMS and WhatsApp are the agent's inbound addresses and
	// numbers (normalised here: lower-case email, E.164).
	Email, SMS, WhatsApp []string
	// Slack is where the Slack app's messages start turns with the agent:
	// SlackIM (direct messages), a channel id (mentions there) or
	// SlackAnyChannel (mentions in any channel no agent lists).
	Slack []string
	// Allow lists who may start or continue a conversation: "a@b",
	// "*@domain", "+4477…", "+44*", a Slack user "U…", "*". Nobody else may (deny by default).
	Allow []string
	// IdleTimeout: how long an SMS/WhatsApp conversation stays open after
	// its last message (default 24h).
	IdleTimeout time.Duration
	// PerMinute and PerHour bound the turns of one conversation (defaults
	// 10 and 100); messages beyond are recorded as held, not sent.
	PerMinute, PerHour int
	// RefuseUnknown: send one polite refusal a day to a sender not
	// allowed (never to automatic mail).
	RefuseUnknown bool
}

// TurnLimits bound the turns an agent's inbound messages start across its
// conversations, beside each conversation's own limits
// (AgentConfig.PerMinute, PerHour): a message beyond one is recorded held,
// with the limit in its reason, and starts nothing. A zero field takes
// its default.
type TurnLimits struct {
	// SenderPerMinute and SenderPerHour bound the turns one sender starts
	// with the agent, across all their conversations and channels (a sender
	// is a normalised address or number: the same number on SMS and
	// WhatsApp is one sender). Defaults 5 and 30.
	SenderPerMinute, SenderPerHour int
	// AgentPerMinute and AgentPerHour bound all the turns the agent's
	// inbound messages start, whoever sends them. Defaults 60 and 1000.
	AgentPerMinute, AgentPerHour int
}

// DefaultTurnLimits are the limits of an agent whose TurnLimits leave a
// field zero.
var DefaultTurnLimits = TurnLimits{SenderPerMinute: 5, SenderPerHour: 30, AgentPerMinute: 60, AgentPerHour: 1000}

// withDefaults is l with every field that is not positive set to its
// default.
func (l TurnLimits) withDefaults() TurnLimits {
	d := DefaultTurnLimits
	pick := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return TurnLimits{SenderPerMinute: pick(l.SenderPerMinute, d.SenderPerMinute), SenderPerHour: pick(l.SenderPerHour, d.SenderPerHour),
		AgentPerMinute: pick(l.AgentPerMinute, d.AgentPerMinute), AgentPerHour: pick(l.AgentPerHour, d.AgentPerHour)}
}

// Names of the flood limits across conversations, as a held record's
// reason gives them ("sender limit: 5 turns a minute").
const (
	limitSender = "sender limit"
	limitAgent  = "agent limit"
)

// Transport is one way to reach an agent: {"smtp","mailto:…"},
// {"sms","sms:+…"}, {"whatsapp","whatsapp:+…"}.
type Transport struct {
	Protocol string `json:"protocol"`
	URL      string `json:"url"`
}

// ErrNotFound: no such inbound message, conversation, turn or attachment.
// It also matches store.ErrNotFound.
var ErrNotFound = fmt.Errorf("conversations: %w", store.ErrNotFound)

// ErrNotHeld: ReleaseInbound of a message that is not held. It also
// matches store.ErrBadState.
var ErrNotHeld = fmt.Errorf("conversations: the message is not held: %w", store.ErrBadState)

// ErrBadSignature: an attachment link whose signature is wrong or has
// expired (which of the two is not said).
var ErrBadSignature = errors.New("attachment link is not valid or has expired")

// Store is the part of the store a Router uses: the inbound messages,
// conversations and turns, the deliveries and envelopes of the answers,
// and the ingest that stores them. Every store.Store is one.
type Store interface {
	store.Conversations
	store.Turns
	Ingest(ctx context.Context, in store.Ingest) (*store.IngestResult, error)
	Delivery(ctx context.Context, id string) (*store.Delivery, error)
	Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error)
	Once(ctx context.Context, key string, now time.Time) (bool, error)
	PruneInbound(ctx context.Context, before time.Time, max int) (int, error)
	NewID(prefix string) string
}

// Router routes inbound messages to approvals or conversations and runs
// the turn outbox.
type Router struct {
	cfg   Config
	db    Store
	dec   Decider
	ag    Agent
	send  Sender
	log   *slog.Logger
	wake  chan struct{}
	start time.Time

	// byAddress: channel → our address → agent name.
	byAddress map[string]map[string]string
	own       map[string]bool

	mu       sync.Mutex
	watchers map[string][]chan string // turn id → who waits for its next outcome
}

// New builds the router. dec (approvals), ag and send may be nil in tests
// of parts that do not use them; st may not.
func New(cfg Config, st Store, dec Decider, ag Agent, send Sender, log *slog.Logger) (*Router, error) {
	if st == nil {
		return nil, errors.New("conversations: no store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AttachmentInlineMax <= 0 {
		cfg.AttachmentInlineMax = 256 << 10
	}
	if cfg.AttachmentURLTTL <= 0 {
		cfg.AttachmentURLTTL = 7 * 24 * time.Hour
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = 10 * time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 24 * time.Hour
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 2 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	if cfg.Lease <= 0 {
		cfg.Lease = cfg.TurnTimeout + 2*time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.MediaAttempts <= 0 {
		cfg.MediaAttempts = 3
	}
	if cfg.MediaRetryFor <= 0 {
		cfg.MediaRetryFor = 10 * time.Minute
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.AttachmentURLBase = strings.TrimRight(cfg.AttachmentURLBase, "/")
	r := &Router{cfg: cfg, db: st, dec: dec, ag: ag, send: send, log: log, wake: make(chan struct{}, 1),
		start: cfg.Now(), byAddress: map[string]map[string]string{}, own: map[string]bool{}}
	agents := map[string]AgentConfig{}
	for name, ac := range cfg.Agents {
		if ac.IdleTimeout <= 0 {
			ac.IdleTimeout = 24 * time.Hour
		}
		if ac.PerMinute <= 0 {
			ac.PerMinute = 10
		}
		if ac.PerHour <= 0 {
			ac.PerHour = 100
		}
		for _, p := range ac.Allow {
			if err := checkPattern(p); err != nil {
				return nil, fmt.Errorf("agent %q: inbound allow %q: %w", name, p, err)
			}
		}
		ac.Email, ac.SMS, ac.WhatsApp, ac.Slack = slices.Clone(ac.Email), slices.Clone(ac.SMS), slices.Clone(ac.WhatsApp), slices.Clone(ac.Slack)
		for ch, list := range map[string]*[]string{envelope.ChannelEmail: &ac.Email, envelope.ChannelSMS: &ac.SMS, envelope.ChannelWhatsApp: &ac.WhatsApp,
			envelope.ChannelSlack: &ac.Slack} {
			for i, a := range *list {
				n := normalise(ch, a)
				if n == "" {
					return nil, fmt.Errorf("agent %q: inbound %s address %q is empty after normalising", name, ch, a)
				}
				(*list)[i] = n
				if r.byAddress[ch] == nil {
					r.byAddress[ch] = map[string]string{}
				}
				if other, ok := r.byAddress[ch][n]; ok && other != name {
					return nil, fmt.Errorf("inbound %s address %s is configured for agents %q and %q", ch, n, other, name)
				}
				r.byAddress[ch][n] = name
			}
		}
		agents[name] = ac
	}
	r.cfg.Agents = agents
	limits := make(map[string]TurnLimits, len(agents))
	for name := range agents {
		limits[name] = cfg.TurnLimits[name].withDefaults()
	}
	r.cfg.TurnLimits = limits
	for _, a := range cfg.OwnAddresses {
		r.own[normalise(envelope.ChannelEmail, a)] = true
	}
	if len(r.byAddress[envelope.ChannelEmail]) > 0 || len(r.byAddress[envelope.ChannelWhatsApp]) > 0 || len(r.byAddress[envelope.ChannelSMS]) > 0 {
		if len(cfg.URLKey) == 0 {
			return nil, errors.New("conversations: URLKey is required to sign attachment URLs")
		}
	}
	return r, nil
}

// Transports lists the ways to reach an agent (none for an unknown agent).
func (r *Router) Transports(agentName string) []Transport {
	ac, ok := r.cfg.Agents[agentName]
	if !ok {
		return nil
	}
	var out []Transport
	for _, a := range ac.Email {
		out = append(out, Transport{Protocol: "smtp", URL: "mailto:" + a})
	}
	for _, n := range ac.SMS {
		out = append(out, Transport{Protocol: "sms", URL: "sms:" + n})
	}
	for _, n := range ac.WhatsApp {
		out = append(out, Transport{Protocol: "whatsapp", URL: "whatsapp:" + n})
	}
	return out
}
