// Package postgres keeps beachd's records in PostgreSQL, so that several
// beachd replicas can share them (store.Store with Shared true).
//
// Each record is a row: the columns a query or a claim needs, and the
// whole record as JSON in doc. Times that a claim or a lease compares are
// bigint nanoseconds since the epoch (the _ns columns), so they round-trip
// exactly as on the embedded store; the record's own times live in doc.
// Claims take rows with FOR UPDATE SKIP LOCKED; a commit that makes work
// due notifies the other replicas (Wakeups). The schema is embedded SQL,
// applied in order under an advisory lock (migrate.go).
package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cool-ai/beachd/internal/cpubusy"
	"github.com/cool-ai/beachd/store"
)

// Options tune Open. The zero value is sensible.
type Options struct {
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Rand is the randomness for ids; default crypto/rand.
	Rand io.Reader
	// MaxConns bounds the connection pool; default the DSN's pool_max_conns
	// (pgx's own parameter) if it names one, else 10. One connection of the
	// pool listens for other replicas' wake-ups, so at least 2.
	MaxConns int32
	// Log receives the listener's reconnects; default slog.Default().
	Log *slog.Logger
	// Holder names this replica on the jobs it leases. While the replica
	// holds its liveness lease (store.LivenessLease(Holder)) the jobs are
	// its; once that lease has run out, RequeueExpired re-queues them
	// without waiting for their own leases. Empty: jobs wait for their
	// leases.
	Holder string
}

// DB is beachd's store in PostgreSQL.
type DB struct {
	pool *pgxpool.Pool
	now  func() time.Time
	rand io.Reader
	log  *slog.Logger
	// holder is Options.Holder.
	holder string
	// channel is the NOTIFY channel: one per schema, so that two beachd
	// installations (or two tests) in one database do not wake each other.
	channel string
	wake    chan string
	stop    context.CancelFunc
	done    chan struct{}
	randMu  sync.Mutex
	// wakeReq asks the notifier for one wake-up of the replicas'
	// dispatchers; notifierDone is closed when the notifier has ended.
	wakeReq      chan struct{}
	notifierDone chan struct{}
	// records takes Record calls to the recorders, and ingests plain
	// ingests to the ingesters; both end when closing is closed.
	records chan *recordReq
	ingests chan *ingestReq
	closing chan struct{}
	// cpu says whether the processors are saturated: the committers wait
	// for company only then (committer).
	cpu *cpubusy.Gauge
	// planEach, as a statement's first argument, has PostgreSQL plan it
	// for each execution (planEachMode).
	planEach pgx.QueryExecMode
	// claimed are the records of the jobs this process leased, as read.
	claimed   claimedDocs
	workers   sync.WaitGroup
	closeOnce sync.Once
}

// defaultMaxConns is the pool's size when neither Options nor the DSN
// names one. Replicas sharing a small database may do better with fewer
// each (docs/replicas.md).
const defaultMaxConns = 10

// PoolConfig is the pool beachd opens for dsn: maxConns connections if
// above 0, else the DSN's pool_max_conns (pgx's own parameter, which is
// not sent to the server) if it names one, else defaultMaxConns. A pool of
// fewer than 2 is refused: one connection listens for other replicas'
// wake-ups. JIT compilation is off unless the DSN sets jit. beachd config
// check calls it too.
func PoolConfig(dsn string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	switch {
	case maxConns > 0:
		cfg.MaxConns = maxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.MaxConns < 2 {
		return nil, fmt.Errorf("pool_max_conns=%d: beachd needs at least 2 connections (one listens for other replicas' wake-ups)", cfg.MaxConns)
	}
	if !setsJIT(cfg.ConnConfig) {
		// beachd's statements are short, and PostgreSQL compiles one whose
		// plan it costs above jit_above_cost, which a table without
		// statistics makes likely (a new database before its first
		// autoanalyze, a server without autovacuum): the lease sweep over
		// 43,653 deliveries without statistics took 189–225 ms with JIT,
		// 148–155 ms of it compiling, and 24 ms without
		// (docs/performance.md). A SET on each new connection rather than a
		// startup parameter, which a connection pooler may refuse.
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			if _, err := c.Exec(ctx, "SET jit = off"); err != nil {
				return fmt.Errorf("turn JIT compilation off: %w", err)
			}
			return nil
		}
	}
	return cfg, nil
}

// planEachMode is how to run the statements that find rows by a list of
// ids (of deliveries and envelopes, and the rows of other tables that a
// check locks or a prune removes): as unnamed statements, which
// PostgreSQL plans each time they run. A prepared statement's plan is
// made generic after five executions and kept until the connection
// closes: made while the table was small (a new schema, a store just
// pruned), it reads the whole table for each execution (a hash join over
// a sequential scan), and goes on doing so as the table grows, until its
// statistics change (an ANALYZE, which nothing runs where autovacuum is
// off). Planned each time, such a statement finds its rows by their index
// once the table has grown. Every mode but the default prepares nothing,
// and a DSN that chose one keeps it; without pgx's description cache,
// each such statement is described first (a second round trip).
func planEachMode(c *pgx.ConnConfig) pgx.QueryExecMode {
	switch {
	case c.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement:
		return c.DefaultQueryExecMode
	case c.DescriptionCacheCapacity == 0:
		return pgx.QueryExecModeDescribeExec
	}
	return pgx.QueryExecModeCacheDescribe
}

// setsJIT reports whether the DSN sets jit itself: as a parameter of its
// own (jit=on) or in options (options=-c jit=on).
func setsJIT(c *pgx.ConnConfig) bool {
	_, set := c.RuntimeParams["jit"]
	return set || strings.Contains(c.RuntimeParams["options"], "jit")
}

// Open connects to the database at dsn, brings its schema up to date (or
// refuses a newer one) and starts listening for other replicas' wake-ups.
func Open(ctx context.Context, dsn string, opt Options) (*DB, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Rand == nil {
		opt.Rand = rand.Reader
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	cfg, err := PoolConfig(dsn, opt.MaxConns)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s: %w", redact(cfg.ConnConfig), err)
	}
	s := &DB{pool: pool, now: opt.Now, rand: opt.Rand, log: opt.Log, holder: opt.Holder, planEach: planEachMode(cfg.ConnConfig), wake: make(chan string, 16), done: make(chan struct{}),
		wakeReq: make(chan struct{}, 1), notifierDone: make(chan struct{}),
		records: make(chan *recordReq), ingests: make(chan *ingestReq), closing: make(chan struct{}), cpu: cpubusy.New()}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: read current schema: %w", err)
	}
	s.channel = NotifyChannel(schema)
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.listen(lctx)
	go s.notifier(lctx)
	for range recordWorkers {
		s.workers.Add(1)
		go committer(&s.workers, s.closing, s.records, maxRecordGroup, s.busy, lingerMax, s.recordGroup, func(r *recordReq) { close(r.done) })
	}
	for range ingestWorkers {
		s.workers.Add(1)
		go committer(&s.workers, s.closing, s.ingests, maxIngestGroup, s.busy, lingerMax, s.ingestGroup, func(r *ingestReq) { close(r.done) })
	}
	return s, nil
}

// busy reports whether the machine's processors are saturated.
func (s *DB) busy() bool { return s.cpu.Saturated(time.Now()) }

// maxIdentifier is PostgreSQL's longest identifier in bytes (NAMEDATALEN-1):
// LISTEN cuts a longer channel name short while pg_notify refuses it, so a
// channel name must fit.
const maxIdentifier = 63

// NotifyChannel is the LISTEN/NOTIFY channel of the beachd tables in schema:
// "beachd_<schema>" while that fits in an identifier (so that replicas of
// different beachd versions on one schema still wake each other), else
// "beachd_" and the first 128 bits of the schema name's SHA-256 in hex.
func NotifyChannel(schema string) string {
	if c := "beachd_" + schema; len(c) <= maxIdentifier {
		return c
	}
	sum := sha256.Sum256([]byte(schema))
	return "beachd_" + hex.EncodeToString(sum[:16])
}

// redact names the server without the password.
func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Close stops the listener and closes the pool.
func (s *DB) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.workers.Wait()
	s.stop()
	<-s.done
	<-s.notifierDone
	s.pool.Close()
	return nil
}

// Shared is true: other replicas may use the database at the same time.
func (s *DB) Shared() bool { return true }

// Wakeups delivers the topics other replicas (and this one) notified.
func (s *DB) Wakeups() <-chan string { return s.wake }

// NewID returns a new sortable id with the prefix.
func (s *DB) NewID(prefix string) string {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return store.NewIDAt(s.now(), s.rand, prefix)
}

// nanos is t as bigint nanoseconds for the _ns columns; the zero time is 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// tx runs fn in a transaction and commits it. A serialization failure or a
// deadlock (another replica's transaction) runs fn again, up to five times.
func (s *DB) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return retrying(func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
}

// retrying runs fn again, up to five times in all, while it fails with a
// serialization failure or a deadlock.
func retrying(fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt == 4 || !retryable(err) {
			return err
		}
	}
}

// retryable reports a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// uniqueViolation reports an insert refused by a unique constraint.
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// notify tells every replica, at tx's commit, that work of topic is due.
func (s *DB) notify(ctx context.Context, tx pgx.Tx, topic string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel, topic); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	return nil
}

// listen holds one connection that LISTENs on the channel and passes each
// notification's topic to Wakeups, reconnecting after a failure. A full
// wake channel drops the topic: the reader is already due to look.
func (s *DB) listen(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("postgres listener lost its connection; reconnecting", "err", err)
		// Work may have become due while no one listened.
		for _, t := range []string{store.WakeDeliveries, store.WakeTurns, store.WakeInjections} {
			s.send(t)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *DB) listenOnce(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	defer func() {
		// The connection returns to the pool: stop listening on it.
		uctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "UNLISTEN *"); err != nil {
			conn.Conn().Close(uctx)
		}
	}()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		s.send(n.Payload)
	}
}

func (s *DB) send(topic string) {
	select {
	case s.wake <- topic:
	default:
	}
}

// CheckInvariants reports the first broken invariant of each area's records.
func (s *DB) CheckInvariants() error {
	ctx := context.Background()
	for _, check := range []func(context.Context) error{s.checkDeliveries, s.checkApprovals, s.checkConversations} {
		if err := check(ctx); err != nil {
			return err
		}
	}
	return nil
}

var _ store.Store = (*DB)(nil)
