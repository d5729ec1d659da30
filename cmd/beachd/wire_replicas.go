package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/singleton"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/postgres"
)

// Singletons: the parts that run in one replica at a time (docs/replicas.md).
const (
	singletonScheduler = "scheduler"
	singletonExpiry    = "approval-expiry"
	singletonRetention = "retention"
)

// imapSingleton names a mailbox's intake: one per account and mailbox.
func imapSingleton(m *config.IMAPConfig) string {
	return "imap:" + m.Username + "@" + m.Host + "/" + m.Mailbox
}

// openStore opens the configured store: the embedded file under data_dir
// (one process), or PostgreSQL (shared by replicas), where holder names
// this replica on the jobs it leases.
func openStore(ctx context.Context, cfg *config.Config, holder string, log *slog.Logger) (store.Store, error) {
	if cfg.Store.Driver == config.DriverPostgres {
		db, err := postgres.Open(ctx, cfg.Store.DSN, postgres.Options{Log: log.With("component", "store"), Holder: holder})
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	db, err := bolt.Open(cfg.BoltPath(), bolt.Options{})
	if err != nil {
		return nil, err
	}
	return db, nil
}

// wireSingletons builds the runner that holds this replica's singleton
// leases, with its metrics. On the embedded store every lease is this
// process's.
func (a *app) wireSingletons(holder string) error {
	r, err := singleton.New(singleton.Config{Leases: a.db, Exclusive: !a.db.Shared(), TTL: a.cfg.Store.LeaseTTL, Holder: holder,
		Log: a.log.With("component", "singleton")})
	if err != nil {
		return err
	}
	a.singletons = r
	return r.Register(a.metrics)
}

// singleton is run as the singleton name: it runs only while this replica
// holds name's lease (always, on the embedded store).
func (a *app) singleton(name string, run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return a.singletons.Run(ctx, name, run) }
}

// singletonStarted is a singleton worker's readiness: settled (this
// replica knows whether it holds name) and, when it holds it, active (nil:
// at once).
func (a *app) singletonStarted(name string, active func() bool) func() bool {
	return func() bool {
		return a.singletons.Settled(name) && (!a.singletons.Holds(name) || active == nil || active())
	}
}

// onWake makes f run when another replica makes work of topic due
// (store.Wakeups).
func (a *app) onWake(topic string, f func()) {
	if a.wakes == nil {
		a.wakes = map[string][]func(){}
	}
	a.wakes[topic] = append(a.wakes[topic], f)
}

// onWakeArg makes f run with arg when another replica wakes this one with
// the topic name + " " + arg (store.Wakeups).
func (a *app) onWakeArg(name string, f func(arg string)) {
	if a.wakeArgs == nil {
		a.wakeArgs = map[string]func(string){}
	}
	a.wakeArgs[name] = f
}

// wireWakeups adds the worker that passes the store's wake-ups to the
// parts that wait for due work; the embedded store has none.
func (a *app) wireWakeups() {
	ch := a.db.Wakeups()
	if ch == nil {
		return
	}
	wakes, args := a.wakes, a.wakeArgs
	a.workers = append(a.workers, worker{name: "wakeups", run: func(ctx context.Context) error {
		routeWakeups(ctx, ch, wakes, args)
		return nil
	}})
}

// routeWakeups calls the functions of each topic received on ch (or, for
// a topic "name arg", args[name] with arg) until ctx ends or ch is closed.
func routeWakeups(ctx context.Context, ch <-chan string, wakes map[string][]func(), args map[string]func(string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case topic, ok := <-ch:
			if !ok {
				return
			}
			if name, arg, ok := strings.Cut(topic, " "); ok {
				if f := args[name]; f != nil {
					f(arg)
				}
				continue
			}
			for _, f := range wakes[topic] {
				f()
			}
		}
	}
}

// readyDetails is what /readyz adds to its status: this replica's holder
// id and the singletons it holds.
func (a *app) readyDetails() map[string]any {
	held := a.singletons.Held()
	if held == nil {
		held = []singleton.Held{}
	}
	out := map[string]any{"store": a.cfg.Store.Driver, "holder": a.singletons.Holder(), "singletons": held}
	if s := a.slackReady(); s != nil {
		out["slack"] = s
	}
	return out
}

// approvalKeyKV is where replicas on a shared store keep the approvals
// secret the first of them generated, when approvals.secret is not set:
// tokens, codes and links made by one replica are checked by another, and
// data_dir/approval.key is one machine's.
const approvalKeyKV = "approvals/secret"

// sharedApprovalKey reads the replicas' approvals secret from the store,
// or generates it there. Replicas starting together agree on one: only the
// holder of a short lease (approvalKeyKV, holder this replica) writes it; a
// replica that died holding the lease before writing leaves it to run out,
// and the next replica takes it. The others wait for the secret until ctx
// ends.
func sharedApprovalKey(ctx context.Context, st store.Store, holder string) (string, error) {
	for {
		v, ok, err := st.GetKV(ctx, approvalKeyKV)
		if err != nil {
			return "", fmt.Errorf("read the replicas' secret: %w", err)
		}
		if ok {
			return string(v), nil
		}
		l, mine, err := st.AcquireLease(ctx, approvalKeyKV, holder, 0, 30*time.Second)
		if err != nil {
			return "", fmt.Errorf("claim the replicas' secret: %w", err)
		}
		if mine {
			return writeSharedApprovalKey(ctx, st, l)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("another replica is writing the replicas' secret and has not: set approvals.secret (the same on every replica): %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeSharedApprovalKey writes a new secret under the lease l, unless a
// previous holder wrote one before its lease ran out, and ends the lease.
func writeSharedApprovalKey(ctx context.Context, st store.Store, l store.Lease) (string, error) {
	defer st.ReleaseLease(context.WithoutCancel(ctx), l.Name, l.Holder, l.Generation)
	v, ok, err := st.GetKV(ctx, approvalKeyKV)
	if err != nil {
		return "", fmt.Errorf("read the replicas' secret: %w", err)
	}
	if ok {
		return string(v), nil
	}
	secret := randomToken(32)
	if err := st.PutKV(ctx, approvalKeyKV, []byte(secret)); err != nil {
		return "", fmt.Errorf("write the replicas' secret: %w", err)
	}
	return secret, nil
}
