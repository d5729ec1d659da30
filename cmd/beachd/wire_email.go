package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/email"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
)

// wireEmail builds the SMTP sender and, when `email.imap` is configured,
// the reply intake. `beachd dev` without an `email:` section runs the
// embedded mail server and points both at it.
func (a *app) wireEmail() error {
	c := a.cfg.Email
	if c == nil && !a.dev {
		return nil
	}
	log := a.log.With("component", "email")
	if c == nil {
		dev, err := email.NewDevServer(email.DevServerConfig{}, a.log.With("component", "email-dev"))
		if err != nil {
			return err
		}
		c = devEmailConfig(dev)
		a.console.mail = dev
		// The dev mail server starts empty, its mailboxes numbered from 1
		// again under the same UIDVALIDITY: the intake's cursor of a
		// previous run would skip the new mail.
		if err := a.db.DeleteKV(context.Background(), email.CursorKey(c.IMAP.Mailbox)); err != nil {
			return err
		}
		a.workers = append(a.workers, worker{name: "email-dev-server", run: dev.Run})
		a.banner = append(a.banner, dev.Banner()...)
	}
	a.console.emailFrom = c.From
	sc := email.SenderConfig{
		From: c.From, ReplyTo: c.ReplyTo(), MessageIDDomain: c.MessageIDDomain,
		Host: c.SMTP.Host, Port: c.SMTP.Port, Username: c.SMTP.Username, Password: c.SMTP.Password,
		TLS: c.SMTP.TLS, HELO: c.SMTP.HELO, Timeout: c.SMTP.Timeout, PoolSize: c.SMTP.PoolSize, Now: a.now,
	}
	if a.conversations != nil {
		sc.ConversationKey = a.conversationKey("reply addresses")
		sc.ConversationFrom = a.cfg.InboundEmails()
	}
	if d := c.SMTP.DKIM; d != nil {
		sc.DKIM = email.DKIMConfig{Domain: d.Domain, Selector: d.Selector, PrivateKeyFile: d.PrivateKeyFile}
	}
	sender, err := email.NewSender(sc, a.renderer, a.registry, a.fetcher, log) // artifact URLs come from content
	if err != nil {
		return fmt.Errorf("email sender: %w", err)
	}
	a.deliverers[envelope.ChannelEmail] = sender
	policy := channels.EmailPolicy
	policy.Lifetime = durationOr(c.Lifetime, policy.Lifetime)
	a.policies[envelope.ChannelEmail] = policy
	// The pool's connections are closed (QUIT) once the dispatcher has
	// stopped, not while its sends in flight finish their grace period.
	a.closers = append(a.closers, closer{"email sender", sender.Close})

	m := c.IMAP
	if m == nil {
		return nil
	}
	var own []string
	if f := c.FromAddress(); f != "" {
		own = append(own, f)
	}
	ic := email.IntakeConfig{
		Host: m.Host, Port: m.Port, Username: m.Username, Password: m.Password, TLS: m.TLS,
		Mailbox: m.Mailbox, Processed: m.Processed, PollInterval: m.PollInterval, MaxMessageBytes: m.MaxMessageBytes,
		Now: a.now,
		Parse: email.ParseOptions{ReplyDomain: c.ReplyDomain, ReplyLocal: c.ReplyLocalPart(),
			MessageIDDomain: c.MessageIDDomain, OwnAddresses: own, AuthServID: c.AuthServID, DKIMAlignment: c.DKIMAlignment,
			TrustUnauthenticated: c.TrustUnauthenticated},
	}
	if a.conversations != nil {
		ic.ConversationKey = a.conversationKey("reply addresses")
	}
	intake, err := email.NewIntake(ic, a.db, a.emailDecider(), a.log.With("component", "email-intake"))
	if err != nil {
		return fmt.Errorf("email intake: %w", err)
	}
	// One replica reads a mailbox.
	name := imapSingleton(m)
	a.workers = append(a.workers, worker{name: "email-intake", run: a.singleton(name, intake.Run), started: a.singletonStarted(name, nil)})
	return nil
}

// newFetchClient builds the guarded client for fetches whose address
// comes from content (fetch.allow widens what it may reach).
func newFetchClient(c config.FetchConfig) (*fetch.Client, error) {
	f, err := fetch.New(fetch.Config{Allow: c.Allow})
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return f, nil
}

// devEmailConfig points the email channel at the embedded dev server: we
// send as the agent and read the agent's mailbox. That server adds no
// Authentication-Results and listens on loopback only, so senders are
// trusted unverified (email.trust_unauthenticated).
func devEmailConfig(d *email.DevServer) *config.EmailConfig {
	domain := d.Agent.Address[strings.LastIndexByte(d.Agent.Address, '@')+1:]
	return &config.EmailConfig{
		From: "beachd dev agent <" + d.Agent.Address + ">", ReplyDomain: domain, ReplyLocal: "agent",
		MessageIDDomain: domain, TrustUnauthenticated: true,
		SMTP: config.SMTPConfig{Host: "127.0.0.1", Port: d.SMTPPort(), Username: d.Agent.Address, Password: d.Agent.Password,
			TLS: email.TLSNone, HELO: "beachd.localhost", PoolSize: 2},
		IMAP: &config.IMAPConfig{Host: "127.0.0.1", Port: d.IMAPPort(), Username: d.Agent.Address, Password: d.Agent.Password,
			TLS: email.TLSNone, Mailbox: "INBOX", Processed: "Processed"},
	}
}

// emailDecider is approvals when wired, else a decider that ignores.
func (a *app) emailDecider() interface {
	HandleInbound(context.Context, envelope.Inbound) (envelope.InboundResult, error)
} {
	if a.inbound != nil {
		return a.inbound
	}
	return emailNoDecider{}
}

type emailNoDecider struct{}

func (emailNoDecider) HandleInbound(context.Context, envelope.Inbound) (envelope.InboundResult, error) {
	return envelope.InboundResult{Outcome: "ignored"}, nil
}
