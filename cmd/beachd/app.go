package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sort"
	"sync/atomic"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/conversations"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/singleton"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
)

// worker is a long-running part of the daemon.
// closer is something to close after every worker has returned.
type closer struct {
	name  string
	close func() error
}

type worker struct {
	name string
	run  func(ctx context.Context) error
	// started, when set, says whether run has come far enough to serve:
	// /readyz waits for it.
	started func() bool
}

// app is the daemon, built in reading order by buildApp. Each area's
// wire<Area> method (wire_<area>.go) fills its part.
type app struct {
	cfg    *config.Config
	log    *slog.Logger
	now    func() time.Time
	dev    bool
	stdout io.Writer

	db         store.Store
	registry   *envelope.Registry
	renderer   *render.Renderer
	metrics    *prometheus.Registry
	apiMetrics *api.Metrics

	deliverers map[string]channels.Deliverer
	policies   map[string]channels.Policy
	routes     []api.Route
	closers    []closer
	workers    []worker
	banner     []string

	handles channels.HandleSource
	inbound interface {
		HandleInbound(context.Context, envelope.Inbound) (envelope.InboundResult, error)
	}
	enqueuer *api.Ingester
	// slackClient is the Slack Web API client, when `slack:` is configured.
	slackClient *slack.Client
	// slackHealth is what beachd learnt of the Slack app (its client's,
	// or in `beachd dev` the recorded Slack's events); slackDev the
	// recorded Slack's dev handler.
	slackHealth *slack.Health
	slackDev    *slack.DevHandler
	// messageURL links a delivery's full-message page (/m/…), once mounted.
	messageURL func(deliveryID string) string
	// onDecided are told of every decision (the Slack message updates).
	onDecided []func(ctx context.Context, a *store.Approval)
	// onMessageShown are told of a message recorded sent after the
	// decision of an approval it asks (its Slack rewrite).
	onMessageShown []func(ctx context.Context, a *store.Approval, deliveryID string)
	// linkSecret is the approvals secret; full-message links derive their
	// key from it.
	linkSecret []byte
	preparer   api.ApprovalPreparer
	agents     *agent.Client
	// conversations is the conversations router (nil when no agent has
	// inbound addresses); media fetches Twilio media for it.
	conversations *conversations.Router
	media         conversations.MediaFetcher
	// fetcher is the guarded client for every fetch whose address comes
	// from content (artifact URLs, inbound media): fetch.allow, §13.
	fetcher *fetch.Client

	dispatcher *channels.Dispatcher
	server     *api.Server
	listener   net.Listener
	ready      atomic.Bool
	stopping   atomic.Bool
	// onListen runs once the listener is bound (dev mode prints its banner).
	onListen []func(addr string)
	// devAgent is `beachd dev`'s agent (nil otherwise).
	devAgent *devAgent
	// console holds what the operator console shows (wire_console.go).
	console consoleParts
	// singletons holds this replica's singleton leases (wire_replicas.go);
	// wakes are the functions each store wake-up topic calls.
	singletons *singleton.Runner
	wakes      map[string][]func()
	// wakeArgs are the functions of the wake-up topics that carry an
	// argument ("name arg").
	wakeArgs map[string]func(string)
}

// buildApp opens the store and builds every part. Nothing runs yet.
// A listener may be passed in (tests bind :0 themselves).
func buildApp(ctx context.Context, cfg *config.Config, reg *envelope.Registry, log *slog.Logger, stdout io.Writer, dev bool, ln net.Listener) (_ *app, err error) {
	a := &app{cfg: cfg, log: log, now: time.Now, dev: dev, stdout: stdout, registry: reg,
		deliverers: map[string]channels.Deliverer{}, policies: map[string]channels.Policy{},
		metrics: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The address is bound before the data dir is touched: a port in use
	// leaves nothing behind.
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
	}
	a.listener = ln
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	// One id names this process in the singletons' leases and on the jobs
	// it leases from a shared store.
	holder := singleton.NewHolderID()
	if a.db, err = openStore(ctx, cfg, holder, log); err != nil {
		return nil, err
	}
	if a.fetcher, err = newFetchClient(cfg.Fetch); err != nil {
		return nil, err
	}
	if err := a.wireSingletons(holder); err != nil {
		return nil, err
	}
	if a.apiMetrics, err = api.NewMetrics(a.metrics, a.db); err != nil {
		return nil, err
	}
	// The order matters: the renderer and approvals come before the
	// channels that use them; schedules come last, they use everything.
	steps := []struct {
		name string
		fn   func() error
	}{
		{"dev", a.wireDev},
		{"render", a.wireRender},
		{"approvals", a.wireApprovals},
		{"conversations", a.wireConversations},
		{"webhook", a.wireWebhook},
		{"email", a.wireEmail},
		{"twilio", a.wireTwilio},
		{"slack", a.wireSlack},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return nil, fmt.Errorf("set up %s: %w", s.name, err)
		}
	}
	configured := map[string]bool{}
	for ch := range a.deliverers {
		configured[ch] = true
	}
	endpoints := map[string]bool{}
	for name := range cfg.Webhooks.Endpoints {
		endpoints[name] = true
	}
	agents := map[string]bool{}
	for name := range cfg.Agents {
		agents[name] = true
	}
	// Envelopes decoded at ingest go to the dispatcher without a store
	// read and a second decode.
	envelopes := channels.NewEnvelopeCache(4 << 20)
	a.dispatcher, err = channels.NewDispatcher(channels.DispatcherConfig{Workers: cfg.Dispatch.Workers, Policies: a.policies, Envelopes: envelopes,
		Shared: a.db.Shared()},
		a.db, a.deliverers, a.handles, a.apiMetrics, log.With("component", "dispatcher"))
	if err != nil {
		return nil, err
	}
	a.onWake(store.WakeDeliveries, a.dispatcher.Notify)
	a.enqueuer = api.NewIngester(api.IngestConfig{Registry: reg,
		Limits:        envelope.Limits{MaxBytes: cfg.Limits.MaxEnvelopeBytes, MaxParts: cfg.Limits.MaxParts},
		MaxRecipients: cfg.Limits.MaxRecipients, Channels: configured, Endpoints: endpoints, Agents: agents,
		Remember: envelopes.Put, HandOff: a.dispatcher, Approvers: cfg.ApproverSets(), Conversations: a.conversationsAPI()},
		a.db, a.preparer, a.dispatcher.Notify, a.apiMetrics.Ingested)
	if err := a.wireSchedules(); err != nil {
		return nil, fmt.Errorf("set up schedules: %w", err)
	}
	if err := a.wireConsole(); err != nil {
		return nil, fmt.Errorf("set up console: %w", err)
	}
	maxBody := cfg.Limits.MaxEnvelopeBytes
	if maxBody <= 0 {
		maxBody = envelope.DefaultLimits.MaxBytes
	}
	if err := a.wireMCP(maxBody + 64<<10); err != nil {
		return nil, fmt.Errorf("set up mcp: %w", err)
	}
	a.server, err = api.New(api.Config{APIKeys: config.KeysOf(cfg.APIKeys, config.RoleFull), ReadKeys: config.KeysOf(cfg.APIKeys, config.RoleRead), MaxBodyBytes: maxBody + 64<<10,
		Ready: a.readyErr, ReadyDetails: a.readyDetails, MetricsRequireKey: cfg.Metrics.RequireKey},
		a.db, a.enqueuer, a.apiMetrics, a.metrics, log.With("component", "api"), a.routes)
	if err != nil {
		return nil, err
	}
	a.workers = append([]worker{{name: "dispatcher", run: a.dispatcher.Run},
		{name: "retention", run: a.singleton(singletonRetention, a.prune), started: a.singletonStarted(singletonRetention, nil)}}, a.workers...)
	if a.db.Shared() {
		// This replica's liveness: while it holds the lease, the jobs it
		// leased are its own; once it dies, the others re-queue them. A
		// job leased before the lease is in the store would instead wait
		// for its own lease (four and a half minutes for email) if the
		// replica died then: the other workers, which lease jobs (the
		// dispatcher, and through it ingest's hand-offs; the injector; the
		// conversations), start once the lease is held.
		live := store.LivenessLease(holder)
		taken := a.singletons.Taken(live)
		for i, w := range a.workers {
			a.workers[i].run = func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return nil
				case <-taken:
				}
				return w.run(ctx)
			}
		}
		// First: /readyz names it while the others wait for it.
		a.workers = append([]worker{{name: "liveness", run: a.singleton(live, func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), started: func() bool {
			select {
			case <-taken:
				return true
			default:
				return false
			}
		}}}, a.workers...)
	}
	a.wireWakeups()
	return a, nil
}

// durationOr returns d, or def when d is zero.
func durationOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// prune removes finished work older than the retention period, every ten
// minutes, in transactions of at most 1,000 envelopes. It is a singleton:
// one replica prunes.
func (a *app) prune(ctx context.Context) error {
	keep := durationOr(a.cfg.Retention, 7*24*time.Hour)
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		total := 0
		for ctx.Err() == nil {
			n, err := a.db.Prune(ctx, a.now().Add(-keep), 1000)
			if err != nil {
				a.log.Error("prune finished work", "err", err)
				break
			}
			total += n
			if n == 0 {
				break
			}
		}
		records := 0
		for ctx.Err() == nil {
			n, err := a.db.PruneRecords(ctx, a.now().Add(-keep), 10000)
			if err != nil {
				a.log.Error("prune old idempotency keys and inbound records", "err", err)
				break
			}
			records += n
			if n == 0 {
				break
			}
		}
		if a.conversations != nil && ctx.Err() == nil {
			n, err := a.conversations.Prune(ctx, a.now().Add(-keep))
			if err != nil {
				a.log.Error("prune old inbound messages", "err", err)
			}
			records += n
		}
		if total > 0 || records > 0 {
			a.log.Info("pruned finished envelopes and old records", "envelopes", total, "records", records, "older_than", keep)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *app) readyErr() error {
	if a.stopping.Load() {
		return errors.New("stopping")
	}
	if !a.ready.Load() {
		return errors.New("starting")
	}
	for _, w := range a.workers {
		if w.started != nil && !w.started() {
			return fmt.Errorf("starting: %s", w.name)
		}
	}
	return nil
}

// addr is the bound listen address.
func (a *app) addr() string { return a.listener.Addr().String() }

// run serves HTTP and runs every worker until ctx ends, then shuts down:
// the HTTP server (10 s for requests in progress) and every worker stop
// together (the dispatcher gives sends in flight their grace period); once
// all have returned, the closers (the SMTP pool) and then the store are
// closed.
func (a *app) run(ctx context.Context) error {
	defer a.close()
	g, gctx := errgroup.WithContext(ctx)
	srv := &http.Server{Handler: a.server, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	// stopStart is when shutdown began (unix ns; 0: running), for the
	// durations the shutdown logs.
	var stopStart atomic.Int64
	since := func() time.Duration {
		if t := stopStart.Load(); t != 0 {
			return time.Since(time.Unix(0, t)).Round(time.Millisecond)
		}
		return 0
	}
	g.Go(func() error {
		if err := srv.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	// The workers stop when the shutdown has begun and said so, not when
	// they see the group end first: every "worker stopped" line comes after
	// "shutting down".
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(gctx))
	defer stopWorkers()
	g.Go(func() error {
		<-gctx.Done()
		stopStart.Store(time.Now().UnixNano())
		a.stopping.Store(true) // /readyz: 503 "stopping", not "starting: …" as workers end
		a.log.Info("shutting down", "reason", shutdownReason(ctx, gctx))
		stopWorkers()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		a.log.Info("http server stopped", "after", since(), "err", err)
		return err
	})
	for _, w := range a.workers {
		w := w
		g.Go(func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("%s panicked: %v\n%s", w.name, p, debug.Stack())
				}
				switch {
				case err != nil:
					a.log.Error("worker stopped", "worker", w.name, "after", since(), "err", err)
				case wctx.Err() == nil:
					// A one-shot worker (reading the agents' cards) is done
					// while beachd runs on: not a shutdown line.
					a.log.Debug("worker done", "worker", w.name)
				default:
					a.log.Info("worker stopped", "worker", w.name, "after", since())
				}
			}()
			if err := w.run(wctx); err != nil && wctx.Err() == nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			return nil
		})
	}
	a.ready.Store(true)
	for _, f := range a.onListen {
		f(a.addr())
	}
	a.log.Info("beachd is running", "listen", a.addr(), "data_dir", a.cfg.DataDir, "store", a.cfg.Store.Driver,
		"holder", a.singletons.Holder(), "channels", a.channelNames())
	err := g.Wait()
	a.ready.Store(false)
	a.close()
	if err != nil {
		a.log.Error("stopped", "after", since(), "err", err)
	} else {
		a.log.Info("stopped", "after", since())
	}
	return err
}

// shutdownReason says why the daemon stops: the signal ("interrupt signal
// received", from signal.NotifyContext's cause), or the error of the part
// that failed.
func shutdownReason(parent, group context.Context) string {
	if parent.Err() != nil {
		return context.Cause(parent).Error()
	}
	if err := context.Cause(group); err != nil {
		return err.Error()
	}
	return "stopped"
}

func (a *app) channelNames() []string {
	var out []string
	for ch := range a.deliverers {
		out = append(out, ch)
	}
	sort.Strings(out)
	return out
}

func (a *app) close() {
	for _, c := range a.closers {
		if err := c.close(); err != nil {
			a.log.Warn("close "+c.name, "err", err)
		}
	}
	a.closers = nil
	if a.listener != nil {
		a.listener.Close() // already closed by a clean shutdown; not when a build step failed
	}
	if a.db != nil {
		if err := a.db.Close(); err != nil {
			a.log.Error("close store", "err", err)
		}
		a.db = nil
	}
}

func newLogger(cfg config.LogConfig, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
