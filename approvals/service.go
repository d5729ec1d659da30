package approvals

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/cool-ai/beachd/approvals/policy"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// Sentinel errors of the approvals package.
var (
	// ErrBadDecision: a decision other than granted/denied (or void for operators).
	ErrBadDecision = errors.New("decision must be granted or denied")
)

// Config configures the Service. Zero values are replaced by the defaults
// documented on each field; Secret is required.
type Config struct {
	// Secret is the HMAC key from which every token is derived; at least 32
	// bytes. Changing it invalidates the tokens of messages not yet sent
	// (they are recomputed at send time) and of every pending approval.
	Secret []byte
	// PublicURL is beachd's public base URL (links are PublicURL/a/<token>).
	PublicURL string
	// Organisation is who the approval page says asks ("Acme Travel");
	// empty, the page says it in neutral words.
	Organisation string
	// NoEmailLinks leaves the confirmation link out of mail and refuses
	// the links already sent by mail. A link page cannot tell who opens
	// it, so a link in a forwarded mail lets the new reader decide; without
	// links every email decision is a reply whose sender (and, where
	// configured, DMARC result) is checked (THREATS.md #3).
	NoEmailLinks bool
	// Words are the decision keywords; nil means the English ones alone.
	Words *Words
	// DefaultExpiry applies to requests without expiresAt; default 24h.
	DefaultExpiry time.Duration
	// CodeDigits is the length of SMS/WhatsApp codes; default 6 (4–10).
	CodeDigits int
	// MaxWrongCodes from one number within WrongCodeWindow (default 1h)
	// lock, for LockFor (default 24h), the codes of the approvals that were
	// pending for that number: even the right code is then refused from it.
	// Approvals sent later are not locked. Default 5.
	MaxWrongCodes   int
	WrongCodeWindow time.Duration
	LockFor         time.Duration
	// ConfirmWait is how long an answer waits for the agent to take the
	// decision before the decider is told, so that the confirmation can say
	// it was passed to the agent; default 3s. After it, the confirmation
	// says the agent has not confirmed it yet.
	ConfirmWait time.Duration
	Now         func() time.Time
	Rand        io.Reader
	// Metrics, when set, count inbound outcomes.
	Metrics *Metrics
	// Policies are the operator's approval policies (approvals/policy);
	// nil: every approval is asked of the delivery's recipients, the first
	// answer wins.
	Policies *policy.Set
	// Notify, when set, is told when the Service stored a message for
	// delivery itself (an answer to a mistyped code, which carries the
	// approvals it is about so that the codes are rendered at send time):
	// the dispatcher's Notify. Without it the dispatcher finds the message
	// at its next look.
	Notify func()
	// Approvers are, per agent, the keys (api.ApproverKey: "slack:U…",
	// "email:…") of who may decide a request that was posted to a Slack
	// channel: nobody else in the channel may. An agent without a set has
	// nobody who can decide such a request.
	Approvers map[string]map[string]bool
	// OnDecided, when set, is called after an approval leaves pending, on
	// whatever channel and by whoever (the Slack channel rewrites its
	// messages). It must not block for long. It is called at least once:
	// the decision's transaction writes a timer that the sweeper fires a
	// few seconds later (calling it again) unless the deciding process
	// removed it after the call, so a crash in between does not lose it.
	OnDecided func(ctx context.Context, a *store.Approval)
	// OnMessageShown, when set, is called for one message of a decided
	// approval whose provider id was recorded after the decision (its
	// send was on its way, or came after): the follow-up its record wrote
	// (store.Outcome.FollowDecision) fires from the sweeper within a
	// second. Unset, OnDecided is called instead.
	OnMessageShown func(ctx context.Context, a *store.Approval, deliveryID string)
}

// Validate checks the configuration after defaults.
func (c *Config) Validate() error {
	if len(c.Secret) < 32 {
		return errors.New("approvals: secret must be at least 32 bytes")
	}
	if c.CodeDigits < 4 || c.CodeDigits > 10 {
		return errors.New("approvals: sms_code_digits must be between 4 and 10")
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" {
			return fmt.Errorf("approvals: public url %q is not an absolute URL", c.PublicURL)
		}
	}
	return nil
}

func (c *Config) defaults() {
	if c.Words == nil {
		c.Words = englishWords
	}
	if c.DefaultExpiry <= 0 {
		c.DefaultExpiry = 24 * time.Hour
	}
	if c.CodeDigits == 0 {
		c.CodeDigits = 6
	}
	if c.MaxWrongCodes <= 0 {
		c.MaxWrongCodes = 5
	}
	if c.WrongCodeWindow <= 0 {
		c.WrongCodeWindow = time.Hour
	}
	if c.LockFor <= 0 {
		c.LockFor = 24 * time.Hour
	}
	if c.ConfirmWait <= 0 {
		c.ConfirmWait = 3 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
}

// Enqueuer stores a small envelope for delivery (confirmations). The API's
// Ingester implements it.
type Enqueuer interface {
	Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error)
}

// ReplyEnqueuer is an Enqueuer that can place a message in a mail thread:
// extra goes on the deliveries (the Message-ID answered, under "inReplyTo",
// and "references": channels/email ExtraInReplyTo and ExtraReferences).
// The API's Ingester implements it; confirmations use it when present.
type ReplyEnqueuer interface {
	EnqueueReply(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, extra map[string]string, agent, source string) (string, error)
}

// Handoff is the part of the Injector the Service uses: jobs claimed in the
// decision's transaction are handed straight to a worker.
type Handoff interface {
	Lease() time.Duration
	Submit(inj *store.Injection) bool
}

var _ Handoff = (*Injector)(nil)

// Store is the part of the store a Service uses: the approvals, the
// operator's view of their injections, the envelopes that asked, and the
// ingest of the answers it stores itself.
// Every store.Store is one.
type Store interface {
	store.Approvals
	store.ApprovalTimers
	Ingest(ctx context.Context, in store.Ingest) (*store.IngestResult, error)
	Injection(ctx context.Context, id string) (*store.Injection, error)
	ListInjections(ctx context.Context, st string, limit int) ([]*store.Injection, error)
	ReleaseInjection(ctx context.Context, claimed *store.Injection, at time.Time) error
	RetryInjection(ctx context.Context, id string, at time.Time) (*store.Injection, error)
	Envelope(ctx context.Context, id string) (*store.EnvelopeRecord, error)
	NewID(prefix string) string
}

// Service is the approvals lifecycle: it mints tokens at ingest, gives the
// channels their handles at send time, decides on inbound messages, and
// queues injections.
type Service struct {
	cfg Config
	db  Store
	m   minter
	enq Enqueuer
	inj Handoff
	log *slog.Logger
}

// New builds the Service. enq may be nil (no confirmations are sent); inj
// (the Injector) takes each committed decision's injection job at once; when
// nil, jobs wait for an injector polling the store.
func New(cfg Config, db Store, enq Enqueuer, inj Handoff, log *slog.Logger) (*Service, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("approvals: nil store")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, db: db, m: minter{key: cfg.Secret}, enq: enq, inj: inj, log: log}, nil
}

// decide applies d, handing its injection job to the injector.
func (s *Service) decide(ctx context.Context, d store.Decision) (*store.Approval, error) {
	a, _, _, err := s.decideWatched(ctx, d, false)
	return a, err
}

// injectionWatcher is the Injector's optional ability to report a job's
// next outcome (Injector.Watch).
type injectionWatcher interface {
	Watch(id string) (<-chan string, func())
}

// decideWatched is decide; with watch, it also returns a channel that
// receives the first attempt's outcome of the injection (nil when there is
// no injection or nothing reports it), and the function that releases the
// watch, which the caller must call. The watch is registered before the
// job exists, so no outcome can pass it by.
func (s *Service) decideWatched(ctx context.Context, d store.Decision, watch bool) (*store.Approval, <-chan string, func(), error) {
	d.InjectionID = s.db.NewID("inj_")
	if s.inj != nil && d.State != store.ApprovalVoid {
		d.ClaimFor = s.inj.Lease()
	}
	var outcome <-chan string
	stop := func() {}
	if w, ok := s.inj.(injectionWatcher); ok && watch && d.State != store.ApprovalVoid {
		outcome, stop = w.Watch(d.InjectionID)
	}
	if s.cfg.OnDecided != nil {
		d.FollowUpAt = d.At.Add(followUpGrace)
	}
	a, job, err := s.db.Decide(ctx, d)
	if err == nil && s.cfg.OnDecided != nil && a != nil && a.State != store.ApprovalPending {
		s.followUp(ctx, a, d.FollowUpAt)
	}
	if err != nil || job == nil {
		stop()
		return a, nil, func() {}, err
	}
	if d.ClaimFor > 0 && !s.inj.Submit(job) {
		if rerr := s.db.ReleaseInjection(ctx, job, s.cfg.Now()); rerr != nil {
			s.log.Warn("release injection", "approval_id", a.ID, "err", rerr)
		}
	}
	return a, outcome, stop, nil
}

func (s *Service) nonce() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(s.cfg.Rand, b[:]); err != nil {
		return "", fmt.Errorf("read randomness: %w", err)
	}
	return strings.ToLower(b32.EncodeToString(b[:])), nil
}

// Prepare implements api.ApprovalPreparer: for each approval-request part it
// builds a pending approval with one token set per (recipient, channel), and
// returns, per recipient index, the approval ids its delivery asks about.
// Nothing is stored here; store.Ingest writes it all in one transaction.
func (s *Service) Prepare(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent string) ([]store.NewApproval, [][]string, error) {
	reqs, err := env.ApprovalRequests()
	if err != nil {
		return nil, nil, err
	}
	if s.cfg.NoEmailLinks && len(reqs) > 1 {
		// A mail is answered by replying to it, and a reply answers one
		// approval (the token in its subject); the others would have had
		// only their links.
		var probs []envelope.Problem
		for i, r := range to {
			if spec, _ := envelope.Channel(r.Channel); spec.Class == envelope.ClassEmail {
				probs = append(probs, envelope.Problem{Path: fmt.Sprintf("to[%d]", i),
					Reason: fmt.Sprintf("the envelope asks %d approvals, and with approvals.email_links off a mail can ask one (it is answered by reply): send one envelope per approval", len(reqs))})
			}
		}
		if len(probs) > 0 {
			return nil, nil, &envelope.ValidationError{Problems: probs}
		}
	}
	now := s.cfg.Now()
	per := make([][]string, len(to))
	var out []store.NewApproval
	for _, req := range reqs {
		raw, err := json.Marshal(req)
		if err != nil {
			return nil, nil, fmt.Errorf("encode approval request: %w", err)
		}
		exp := now.Add(s.cfg.DefaultExpiry)
		if req.ExpiresAt != nil {
			exp = *req.ExpiresAt
		}
		na := store.NewApproval{
			Approval: store.Approval{ID: req.ApprovalID, Agent: agent, Request: raw, Session: req.Session, Turn: req.Turn,
				State: store.ApprovalPending, CreatedAt: now, ExpiresAt: exp.UTC()},
			Tokens: map[string]store.TokenBinding{},
		}
		// The delivery's agent, never the part's handler, chooses the
		// policy: the envelope cannot name, skip or weaken one.
		if pol := s.cfg.Policies.Match(agent, req.ToolName, req.Args, now); pol != nil {
			if err := s.preparePolicy(ctx, pol, &na, to, per, now); err != nil {
				return nil, nil, err
			}
			out = append(out, na)
			continue
		}
		for i, r := range to {
			addr := foldAddress(r.Channel, r.Target())
			rc, err := s.mintRecipient(ctx, req.ApprovalID, r.Channel, addr, na.Tokens)
			if err != nil {
				return nil, nil, err
			}
			na.Approval.Recipients = append(na.Approval.Recipients, rc)
			na.Events = append(na.Events, store.ApprovalEvent{At: now, Kind: store.EventAsked, Actor: addr, Channel: r.Channel})
			per[i] = append(per[i], req.ApprovalID)
		}
		out = append(out, na)
	}
	return out, per, nil
}

// mintRecipient picks a nonce for (approval, channel, address) and adds the
// hashes of every token it yields to tokens.
func (s *Service) mintRecipient(ctx context.Context, id, channel, addr string, tokens map[string]store.TokenBinding) (store.ApprovalRecipient, error) {
	for range 8 {
		nonce, err := s.nonce()
		if err != nil {
			return store.ApprovalRecipient{}, err
		}
		keys := s.tokenKeys(id, channel, addr, nonce)
		clash := false
		for k := range keys {
			if _, dup := tokens[k]; dup {
				clash = true
			} else if ok, err := s.db.TokenExists(ctx, k); err != nil {
				return store.ApprovalRecipient{}, err
			} else if ok {
				clash = true // a short code already bound to this number: draw again
			}
		}
		if clash {
			continue
		}
		for k, b := range keys {
			tokens[k] = b
		}
		return store.ApprovalRecipient{Channel: channel, Address: addr, Nonce: nonce}, nil
	}
	return store.ApprovalRecipient{}, errors.New("could not mint a unique code")
}

// tokenKeys are the storage keys and bindings of every token of a recipient.
func (s *Service) tokenKeys(id, channel, addr, nonce string) map[string]store.TokenBinding {
	bind := func(kind, decision string) store.TokenBinding {
		return store.TokenBinding{ApprovalID: id, Channel: channel, Recipient: addr, Kind: kind, Decision: decision}
	}
	out := map[string]store.TokenBinding{}
	spec, _ := envelope.Channel(channel)
	if spec.Supports(envelope.HandleToken) {
		out[tokenKey(s.m.token(KindToken, id, channel, addr, nonce))] = bind(KindToken, "")
		out[linkKey(s.m.token(KindLink, id, channel, addr, nonce))] = bind(KindLink, "")
	}
	if spec.Supports(envelope.HandleCode) {
		out[codeKey(channel, addr, s.m.code(id, channel, addr, nonce, s.cfg.CodeDigits))] = bind(KindCode, "")
	}
	if spec.Supports(envelope.HandleButton) {
		for _, d := range []string{envelope.DecisionGranted, envelope.DecisionDenied} {
			out[buttonKey(id+":"+s.m.buttonNonce(id, channel, addr, nonce, d))] = bind(KindButton, d)
		}
	}
	return out
}

// expected is the plaintext a binding must have been presented with.
func (s *Service) expected(b *store.TokenBinding, a *store.Approval) (string, bool) {
	for _, r := range a.Recipients {
		if r.Channel != b.Channel || r.Address != b.Recipient {
			continue
		}
		switch b.Kind {
		case KindToken, KindLink:
			return s.m.token(b.Kind, a.ID, r.Channel, r.Address, r.Nonce), true
		case KindCode:
			return s.m.code(a.ID, r.Channel, r.Address, r.Nonce, s.cfg.CodeDigits), true
		case KindButton:
			return a.ID + ":" + s.m.buttonNonce(a.ID, r.Channel, r.Address, r.Nonce, b.Decision), true
		}
	}
	return "", false
}

// Handles implements channels.HandleSource: the tokens, code, link and
// buttons with which the delivery's recipient answers each approval it asks
// about.
func (s *Service) Handles(ctx context.Context, d *store.Delivery, env *envelope.Envelope) ([]render.ApprovalHandle, error) {
	var out []render.ApprovalHandle
	for _, id := range d.ApprovalIDs {
		a, err := s.db.Approval(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("handles for %s: %w", d.ID, err)
		}
		var req envelope.ApprovalRequest
		if err := json.Unmarshal(a.Request, &req); err != nil {
			return nil, fmt.Errorf("approval %s: decode request: %w", id, err)
		}
		addr := foldAddress(d.Channel, d.To)
		var rc *store.ApprovalRecipient
		for i := range a.Recipients {
			if a.Recipients[i].Channel == d.Channel && a.Recipients[i].Address == addr {
				rc = &a.Recipients[i]
			}
		}
		if a.Agent != "" {
			// Who asks is the agent the operator configured and the
			// delivery named, not the handler the envelope claims: an
			// agent must not present its request as someone else's.
			req.Handler = a.Agent
		}
		h := render.ApprovalHandle{ApprovalID: id, Request: req, ExpiresAt: a.ExpiresAt}
		if rc == nil && a.Policy != "" {
			// Told, not asked: no token, code, link or button.
			h.Decided, h.Note = policyNote(a)
			out = append(out, h)
			continue
		}
		if rc == nil {
			return nil, fmt.Errorf("approval %s was not issued to this delivery's recipient", id)
		}
		if a.State != store.ApprovalPending && d.Extra[envelope.ExtraApprovalNotice] != "" {
			// A reminder or escalation held by quiet hours, sent after
			// the decision: it says so instead of asking.
			h.Decided, h.Note = true, decidedNote(a)
			out = append(out, h)
			continue
		}
		spec, err := envelope.LookupChannel(d.Channel)
		if err != nil {
			return nil, fmt.Errorf("handles for %s: %w", d.ID, err)
		}
		if spec.Supports(envelope.HandleToken) {
			h.Token = s.m.token(KindToken, id, rc.Channel, rc.Address, rc.Nonce)
			if s.cfg.PublicURL != "" && s.linksFor(d.Channel) {
				h.LinkURL = s.cfg.PublicURL + "/a/" + s.m.token(KindLink, id, rc.Channel, rc.Address, rc.Nonce)
			}
		}
		if spec.Supports(envelope.HandleCode) {
			h.Code = s.m.code(id, rc.Channel, rc.Address, rc.Nonce, s.cfg.CodeDigits)
		}
		if spec.Supports(envelope.HandleButton) {
			h.Buttons = []render.Button{
				{Title: "Approve", Payload: id + ":" + s.m.buttonNonce(id, rc.Channel, rc.Address, rc.Nonce, envelope.DecisionGranted)},
				{Title: "Deny", Payload: id + ":" + s.m.buttonNonce(id, rc.Channel, rc.Address, rc.Nonce, envelope.DecisionDenied)},
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// linksFor reports whether recipients on channel may decide through the
// confirmation page.
func (s *Service) linksFor(channel string) bool {
	spec, _ := envelope.Channel(channel)
	return !(s.cfg.NoEmailLinks && spec.Class == envelope.ClassEmail)
}

// Summary is the one-line description of what an approval asks for.
func Summary(a *store.Approval) string {
	var req envelope.ApprovalRequest
	_ = json.Unmarshal(a.Request, &req)
	if req.Summary != "" {
		return req.Summary
	}
	args, _ := json.Marshal(req.Args)
	s := req.ToolName + " " + string(args)
	if len(s) > 140 {
		s = strings.ToValidUTF8(s[:137], "") + "..."
	}
	return s
}
