package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// open opens a store on a fresh schema, closed when the test ends.
func open(t *testing.T, now func() time.Time) *DB {
	t.Helper()
	db, err := Open(context.Background(), pgtest.DSN(t), Options{Now: now})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenMigratesOnceAndRefusesNewer(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		db, err := Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var n int
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM beachd_schema`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != SchemaVersion() {
			t.Fatalf("open %d: %d migrations recorded, want %d", i, n, SchemaVersion())
		}
		if i == 1 {
			if _, err := db.pool.Exec(ctx, `INSERT INTO beachd_schema (version, name) VALUES ($1, 'from-the-future')`, SchemaVersion()+1); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	if _, err := Open(ctx, dsn, Options{}); !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("open a newer schema: %v, want ErrNewerSchema", err)
	}
}

func TestWakeupsCrossConnections(t *testing.T) {
	testWakeups(t, pgtest.DSN(t))
}

// A schema name of PostgreSQL's full 63 bytes: "beachd_" and the name no
// longer fit in a channel name, which pg_notify refused ("channel name too
// long") in every transaction that woke the other replicas — every decision.
func TestWakeupsWithALongSchemaName(t *testing.T) {
	var b [32]byte
	rand.Read(b[:])
	schema := "beachd_t_long_" + hex.EncodeToString(b[:])
	schema = schema[:63]
	testWakeups(t, pgtest.DSNNamed(t, schema))
}

func TestNotifyChannelFits(t *testing.T) {
	for _, schema := range []string{"public", strings.Repeat("s", 56), strings.Repeat("s", 57), strings.Repeat("é", 31)} {
		c := NotifyChannel(schema)
		if len(c) > 63 {
			t.Errorf("NotifyChannel(%q) = %q: %d bytes, more than an identifier holds", schema, c, len(c))
		}
		if len(schema) <= 56 && c != "beachd_"+schema {
			t.Errorf("NotifyChannel(%q) = %q, want the name older replicas use", schema, c)
		}
	}
	if NotifyChannel(strings.Repeat("a", 60)) == NotifyChannel(strings.Repeat("a", 61)) {
		t.Error("two long schema names share a channel")
	}
}

// The outbox's wake-ups of the replicas' dispatchers are at most one
// NOTIFY a notifyGap however many commits ask for one, and the last ask is
// never dropped: a NOTIFY follows it.
func TestDeliveryWakeupsAreSpacedAndNeverLost(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{db.channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// next is the time of the next delivery wake-up heard within d.
	next := func(d time.Duration) (time.Time, bool) {
		for {
			wctx, cancel := context.WithTimeout(ctx, d)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				return time.Time{}, false
			}
			if n.Payload == store.WakeDeliveries {
				return time.Now(), true
			}
		}
	}
	const asking = 12 * notifyGap
	start := time.Now()
	var last time.Time // the last ask
	for time.Since(start) < asking {
		last = time.Now()
		db.wakeDispatchers(ctx)
		time.Sleep(time.Millisecond)
	}
	var heard []time.Time
	for {
		at, ok := next(4 * notifyGap)
		if !ok {
			break
		}
		heard = append(heard, at)
	}
	// One at the start, then at most one a gap while asking, and one
	// after the last ask.
	if max := int(asking/notifyGap) + 2; len(heard) > max || len(heard) < 2 {
		t.Fatalf("%d wake-ups for %v of asking every millisecond; want 2 to %d", len(heard), asking, max)
	}
	if end := heard[len(heard)-1]; end.Before(last) {
		t.Fatalf("the last wake-up was heard %v before the last ask: the ask was dropped", last.Sub(end))
	}
	// An ask within the gap after a wake-up waits for the gap's end; it is
	// not dropped.
	db.wakeDispatchers(ctx)
	first, ok := next(10 * time.Second)
	if !ok {
		t.Fatal("no wake-up for a lone ask")
	}
	db.wakeDispatchers(ctx)
	second, ok := next(10 * time.Second)
	if !ok {
		t.Fatal("the ask within the gap was dropped")
	}
	// Heard, not sent: a late hearing of the first narrows the gap seen,
	// so half of it is asked for (without the gap they are a few ms apart).
	if d := second.Sub(first); d < notifyGap/2 {
		t.Fatalf("two wake-ups %v apart; want about %v", d, notifyGap)
	}
}

func testWakeups(t *testing.T, dsn string) {
	ctx := context.Background()
	a, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The listener may not have subscribed yet: notify until b hears it.
	deadline := time.After(10 * time.Second)
	for {
		if err := a.tx(ctx, func(tx pgx.Tx) error { return a.notify(ctx, tx, store.WakeTurns) }); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-b.Wakeups():
			if got != store.WakeTurns {
				t.Fatalf("wake-up %q, want %q", got, store.WakeTurns)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake-up reached the other store")
		}
	}
}

// TestJITOffUnlessTheDSNSetsIt: beachd's connections run with jit off, and
// with the DSN's jit when it names one, as a parameter or in options.
func TestJITOffUnlessTheDSNSetsIt(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	for _, c := range []struct{ dsn, want string }{{dsn, "off"}, {dsn + "&jit=on", "on"}, {dsn + "&options=-c%20jit%3Don", "on"}} {
		db, err := Open(ctx, c.dsn, Options{})
		if err != nil {
			t.Fatalf("open %s: %v", c.dsn, err)
		}
		var got string
		err = db.pool.QueryRow(ctx, "SHOW jit").Scan(&got)
		db.Close()
		if err != nil || got != c.want {
			t.Errorf("%s: jit %q (%v), want %q", c.dsn, got, err, c.want)
		}
	}
}

// TestPoolSizeFromTheDSN: the pool is 10 connections unless the DSN's
// pool_max_conns names another size; fewer than 2 is refused by name.
func TestPoolSizeFromTheDSN(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	for _, c := range []struct {
		dsn  string
		want int32
	}{{dsn, 10}, {dsn + "&pool_max_conns=4", 4}} {
		db, err := Open(ctx, c.dsn, Options{})
		if err != nil {
			t.Fatalf("open %s: %v", c.dsn, err)
		}
		if got := db.pool.Config().MaxConns; got != c.want {
			t.Errorf("%s: pool of %d, want %d", c.dsn, got, c.want)
		}
		db.Close()
	}
	if _, err := Open(ctx, dsn+"&pool_max_conns=1", Options{}); err == nil || !strings.Contains(err.Error(), "pool_max_conns=1") {
		t.Fatalf("a pool of 1: %v, want an error naming pool_max_conns", err)
	}
}
