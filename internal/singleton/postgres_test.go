package singleton

import (
	"context"
	"testing"
	"time"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// realReplica is startReplica on the real clock.
func realReplica(t *testing.T, leases store.Leases, holder string, ttl time.Duration, sh *shared) *replica {
	t.Helper()
	f := &flaky{Leases: leases}
	r, err := New(Config{Leases: f, Holder: holder, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rep := &replica{r: r, leases: f, cancel: cancel, done: make(chan error, 1)}
	go func() {
		rep.done <- r.Run(ctx, "scheduler", func(ctx context.Context) error {
			if sh.running.Add(1) > 1 {
				sh.overlap.Store(true)
			}
			rep.running.Store(true)
			<-ctx.Done()
			rep.running.Store(false)
			sh.running.Add(-1)
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-rep.done
	})
	return rep
}

// The runner on PostgreSQL, each replica with its own connection pool and
// the real clock: one holder at a time; a killed holder's lease is taken
// once it ran out; a stopped holder's at once.
func TestReplicasOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func() *postgres.DB {
		db, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	const ttl = 1500 * time.Millisecond
	sh := &shared{}
	a := realReplica(t, dbA, "a", ttl, sh)
	waitReal(t, "a to run the singleton", a.running.Load)
	b := realReplica(t, dbB, "b", ttl, sh)
	waitReal(t, "b to settle", func() bool { return b.r.Settled("scheduler") })
	time.Sleep(2 * ttl) // renewals
	if !a.running.Load() || b.r.Holds("scheduler") {
		t.Fatalf("after renewals: a runs %v, b holds %v", a.running.Load(), b.r.Holds("scheduler"))
	}
	a.kill(t)
	until := leaseOf(t, dbB, "scheduler").Until
	waitReal(t, "b to take over", func() bool { return b.r.Holds("scheduler") && b.running.Load() })
	if h := b.r.Held(); len(h) != 1 || h[0].Since.Before(until.Add(-100*time.Millisecond)) {
		t.Errorf("b holds %+v; a's lease ran out at %s", h, until)
	}
	if l := leaseOf(t, dbB, "scheduler"); l.Holder != "b" || l.Generation != 2 {
		t.Errorf("lease after the kill = %+v, want b at generation 2", l)
	}

	a2 := realReplica(t, dbA, "a2", ttl, sh)
	waitReal(t, "a2 to settle", func() bool { return a2.r.Settled("scheduler") })
	b.stop(t)
	stopped := time.Now()
	waitReal(t, "a2 to take over", func() bool { return a2.r.Holds("scheduler") })
	if took := time.Since(stopped); took > ttl/3+ttl/5 {
		t.Errorf("a2 took over %s after a clean stop; want within ttl/3 (%s)", took, ttl/3)
	}
	if sh.overlap.Load() {
		t.Error("two replicas ran the singleton at once")
	}
}
