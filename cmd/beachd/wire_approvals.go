package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// lateEnqueuer adapts the Ingester, which is built after approvals, to
// approvals.Enqueuer and approvals.ReplyEnqueuer: it is looked up when a
// confirmation is sent.
type lateEnqueuer struct{ a *app }

var _ approvals.ReplyEnqueuer = lateEnqueuer{}

// agent.Client tells the injector whether an agent already holds a
// decision whose retry it refuses.
var _ approvals.Confirmer = (*agent.Client)(nil)

func (l lateEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error) {
	return l.EnqueueReply(ctx, env, to, nil, agent, source)
}

func (l lateEnqueuer) EnqueueReply(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, extra map[string]string, agent, source string) (string, error) {
	if l.a.enqueuer == nil {
		return "", errors.New("ingester not ready")
	}
	return l.a.enqueuer.EnqueueReply(ctx, env, to, extra, agent, source)
}

// EnqueueKeyed stores a conversation's answer (conversations.Enqueuer).
func (l lateEnqueuer) EnqueueKeyed(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source, key string) (string, error) {
	if l.a.enqueuer == nil {
		return "", errors.New("ingester not ready")
	}
	return l.a.enqueuer.EnqueueKeyed(ctx, env, to, agent, source, key)
}

// approvalKey reads the approval key file, creating it (mode 0600) with a
// fresh key when it does not exist. Every approval token, code and link is
// derived from this key, so a file that other users can read is refused:
// beachd will not start on a key others may have copied.
func approvalKey(path string) (string, error) {
	if fi, err := os.Stat(path); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s is readable by other users (mode %04o); every approval token is derived from it: run `chmod 600 %s` (and consider it leaked if others could read it: delete it to mint a new key, which voids the links and codes already sent)",
			errKeyFileMode, path, fi.Mode().Perm(), path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("approval key: %w", err)
	}
	return persistentSecret(path, func() string { return randomToken(32) })
}

// errKeyFileMode: a secret file is readable by group or others.
var errKeyFileMode = errors.New("key file permissions too open")

// wireApprovals builds the agent client, the approvals Service (token
// minting at ingest, handles at send time, inbound decisions), the
// injection worker and the expiry sweeper, and mounts the operator and
// link-page routes.
func (a *app) wireApprovals() error {
	cfg := a.cfg.Approvals
	secret := cfg.Secret
	switch {
	case secret == "" && a.db.Shared():
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := sharedApprovalKey(ctx, a.db, a.singletons.Holder())
		if err != nil {
			return fmt.Errorf("approvals.secret: %w", err)
		}
		secret = s
	case secret == "":
		s, err := approvalKey(filepath.Join(a.cfg.DataDir, "approval.key"))
		if err != nil {
			return fmt.Errorf("approvals.secret: %w", err)
		}
		secret = s
	}
	a.linkSecret = []byte(secret)
	names := make([]string, 0, len(a.cfg.Agents))
	for n := range a.cfg.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	targets := map[string]agent.Target{}
	senders := map[string]approvals.Sender{}
	for _, n := range names {
		ac := a.cfg.Agents[n]
		if ac.A2AURL != "" {
			targets[n] = agent.Target{URL: ac.A2AURL, Version: ac.A2AVersion, Binding: ac.A2ABinding, Timeout: ac.Timeout, Headers: ac.Headers}
		}
		if ac.Injector == "webhook" {
			signer, err := webhook.ParseSigner(ac.WebhookSecret)
			if err != nil {
				return fmt.Errorf("agents.%s.webhook_secret: %w", n, err)
			}
			// The sender's own client follows no redirect and dials only
			// webhook_url's host:port or public addresses.
			senders[n] = &approvals.WebhookSender{URL: ac.WebhookURL, Signer: signer, Headers: ac.Headers, Now: a.now}
		}
	}
	var err error
	// nil: each agent gets a client that follows no redirect and dials
	// only its a2a_url's host:port or public addresses.
	if a.agents, err = agent.New(targets, nil); err != nil {
		return err
	}
	// A2A push notifications: turns beachd starts ask agents whose card
	// offers them to post updates to public_url/v1/a2a/push/{turn}; the
	// tokens derive from the approvals secret, so every replica checks
	// them and they survive restarts.
	pushes := agent.NewPushes(a.linkSecret, a.cfg.PublicURL, a.log.With("component", "a2a-push"))
	a.wirePushRelay(pushes)
	a.agents.UsePush(pushes)
	a.routes = append(a.routes, api.Route{Pattern: agent.PushPath, Handler: pushes})
	for n := range targets {
		if _, ok := senders[n]; !ok {
			senders[n] = a.agents
		}
	}
	log := a.log.With("component", "approvals")
	metrics, err := approvals.NewMetrics(a.metrics)
	if err != nil {
		return err
	}
	inj := approvals.NewInjector(approvals.InjectorConfig{
		Metrics:   metrics,
		Lifetime:  cfg.InjectionLifetime,
		Permanent: func(err error) bool { return agent.IsPermanent(err) || approvals.PermanentHTTP(err) },
		Now:       a.now,
		Shared:    a.db.Shared(),
	}, a.db, func(name string) approvals.Sender { return senders[name] }, log)
	a.onWake(store.WakeInjections, inj.Wake)
	enq := lateEnqueuer{a}
	words, err := cfg.ParseWords()
	if err != nil {
		return err
	}
	policies, err := cfg.ParsePolicies(log)
	if err != nil {
		return err
	}
	svc, err := approvals.New(approvals.Config{
		Policies:      policies,
		NoEmailLinks:  cfg.EmailLinks != nil && !*cfg.EmailLinks,
		Words:         words,
		Secret:        []byte(secret),
		PublicURL:     a.cfg.PublicURL,
		Organisation:  a.cfg.Organisation.Name,
		DefaultExpiry: cfg.DefaultExpiry,
		CodeDigits:    cfg.SMSCodeDigits,
		MaxWrongCodes: cfg.MaxWrongCodes,
		Now:           a.now,
		Metrics:       metrics,
		Notify:        lateNotifier{a}.Notify,
		Approvers:     a.cfg.ApproverSets(),
		// Channels wired after approvals add theirs (a.onDecided).
		OnDecided: func(ctx context.Context, ap *store.Approval) {
			for _, f := range a.onDecided {
				f(ctx, ap)
			}
		},
		OnMessageShown: func(ctx context.Context, ap *store.Approval, deliveryID string) {
			for _, f := range a.onMessageShown {
				f(ctx, ap, deliveryID)
			}
		},
	}, a.db, enq, inj, log)
	if err != nil {
		return err
	}
	a.handles = svc
	a.inbound = svc
	a.preparer = svc
	a.routes = append(a.routes, api.ApprovalRoutes(svc, log)...)
	a.routes = append(a.routes, api.LinkRoutes(svc.LinkHandler())...)
	a.routes = append(a.routes, api.AgentRoutes(a.agents, log)...)
	a.workers = append(a.workers,
		// Read the agent cards once at start, so operators see each
		// agent's A2A generation before its first turn.
		worker{name: "agent-cards", run: func(ctx context.Context) error {
			a.agents.Resolve(ctx)
			for _, st := range a.agents.Statuses() {
				if st.CardError != "" {
					log.Warn("agent card not used", "agent", st.Name, "chosen_by", st.ChosenBy, "err", st.CardError)
				}
			}
			return nil
		}},
		worker{name: "approval-injector", run: inj.Run},
		worker{name: "approval-expiry", run: a.singleton(singletonExpiry, approvals.NewSweeper(svc).Run),
			started: a.singletonStarted(singletonExpiry, nil)})
	return nil
}
