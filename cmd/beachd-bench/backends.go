package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The backend comparison (-backends): the same load through beachd on the
// embedded bbolt file, on PostgreSQL with one replica, and on PostgreSQL
// with three replicas, in one run on one machine; then the singletons'
// failover time after a SIGKILL of their holder.

// backendRun is one configuration's figures.
type backendRun struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Envelopes acknowledged per second while the clients posted, and
	// delivered per second from the first post to the last delivery.
	IngestRate   float64 `json:"ingestPerSec"`
	DeliveryRate float64 `json:"deliveredPerSec"`
	IngestP99ms  float64 `json:"ingestP99ms"`
	E2EP50ms     float64 `json:"e2eP50ms"`
	E2EP99ms     float64 `json:"e2eP99ms"`
	// CPU per envelope: the beachd processes, and the PostgreSQL server's
	// processes (0 on bbolt).
	CPUPerEnvelopeUs         float64 `json:"cpuPerEnvelopeUs"`
	PostgresCPUPerEnvelopeUs float64 `json:"postgresCpuPerEnvelopeUs"`
	// What the database did per envelope (PostgreSQL runs): transactions
	// committed in the database (pg_stat_database), and WAL bytes and
	// fsyncs of the whole server (pg_stat_wal, PostgreSQL 14 and later),
	// from before the processes started to after they stopped.
	Postgres   *pgWork `json:"postgresPerEnvelope,omitempty"`
	Lost       int     `json:"lost"`
	Duplicates int     `json:"duplicates"`
}

// pgWork is what PostgreSQL did per envelope in one run.
type pgWork struct {
	Commits  float64 `json:"commits"`
	WALBytes float64 `json:"walBytes,omitempty"`
	WALSyncs float64 `json:"walSyncs,omitempty"`
}

// failover is how long the singletons took to move after a SIGKILL.
type failover struct {
	LeaseTTL string `json:"leaseTtl"`
	// Singletons is each singleton's time from the kill to another
	// replica holding its lease, in ms.
	Singletons map[string]float64 `json:"singletonsMs"`
}

// backendsResult is the comparison.
type backendsResult struct {
	Machine  string       `json:"machine"`
	N        int          `json:"n"`
	C        int          `json:"c"`
	Runs     []backendRun `json:"runs"`
	Failover *failover    `json:"failover,omitempty"`
	// VsRiver is beachd on PostgreSQL against the River comparator.
	VsRiver *riverRatios `json:"vsRiver,omitempty"`
	Note    string       `json:"note"`
	// Keys: each request carried an Idempotency-Key of its own (-keys).
	Keys bool `json:"keys,omitempty"`
}

// riverRatios are beachd's figures on PostgreSQL divided by River's (above
// 1: beachd is faster, or uses less CPU for cpu figures below 1).
type riverRatios struct {
	Ingest    float64 `json:"ingest"`
	Delivered float64 `json:"delivered"`
	// CPU is beachd's CPU per envelope (its process and PostgreSQL's)
	// divided by River's.
	CPU float64 `json:"cpu"`
	// ThreeReplicas is beachd's delivered/s with three replicas divided by
	// its delivered/s with one.
	ThreeReplicas float64 `json:"threeReplicasVsOne"`
}

// run is the run of name with that many replicas, or nil.
func (r *backendsResult) run(name string, replicas int) *backendRun {
	for i := range r.Runs {
		if r.Runs[i].Name == name && r.Runs[i].Replicas == replicas {
			return &r.Runs[i]
		}
	}
	return nil
}

// vsRiver compares the one-replica PostgreSQL run with River's.
func vsRiver(r *backendsResult) *riverRatios {
	pg1, pg3, rv := r.run("postgres", 1), r.run("postgres", 3), r.run("river", 1)
	if pg1 == nil || rv == nil || rv.IngestRate == 0 || rv.DeliveryRate == 0 {
		return nil
	}
	out := &riverRatios{Ingest: pg1.IngestRate / rv.IngestRate, Delivered: pg1.DeliveryRate / rv.DeliveryRate}
	if c := rv.CPUPerEnvelopeUs + rv.PostgresCPUPerEnvelopeUs; c > 0 {
		out.CPU = (pg1.CPUPerEnvelopeUs + pg1.PostgresCPUPerEnvelopeUs) / c
	}
	if pg3 != nil && pg1.DeliveryRate > 0 {
		out.ThreeReplicas = pg3.DeliveryRate / pg1.DeliveryRate
	}
	return out
}

// backendRuns are -backends' runs, in the order they run. River runs right
// after beachd's one-replica PostgreSQL run, on a fresh schema of the same
// server, so the pair shares the machine's state as closely as one run
// allows.
var backendRuns = []struct {
	run      string // its name in -runs
	name     string
	replicas int
	postgres bool
	river    bool
}{{"bbolt", "bbolt", 1, false, false}, {"postgres", "postgres", 1, true, false}, {"river", "river", 1, true, true},
	{"postgres3", "postgres", 3, true, false}}

// parseRuns reads -runs: a comma-separated list of backendRuns' names, or
// "" for all of them.
func parseRuns(s string) (map[string]bool, error) {
	if s == "" {
		return nil, nil
	}
	var names []string
	for _, r := range backendRuns {
		names = append(names, r.run)
	}
	out := map[string]bool{}
	for _, r := range strings.Split(s, ",") {
		if !slices.Contains(names, r) {
			return nil, fmt.Errorf("-runs: %q is not one of %s", r, strings.Join(names, ", "))
		}
		out[r] = true
	}
	return out, nil
}

// backendsRun runs the comparison against the PostgreSQL server at dsn, each
// configuration on a fresh schema that is dropped afterwards; only (from
// parseRuns) limits it to some runs when not nil.
func backendsRun(n, c int, bin, dsn string, leaseTTL time.Duration, only map[string]bool) (*backendsResult, error) {
	dir, err := os.MkdirTemp("", "beachd-bench-backends-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if bin, err = buildBeachd(bin, dir); err != nil {
		return nil, err
	}
	res := &backendsResult{Machine: machine(), N: n, C: c, Keys: idempotencyKeys,
		Note: fmt.Sprintf("%d CPUs: the replicas, PostgreSQL, the clients and the sink share them, so three replicas show the cost of sharing one database, not the gain of three machines", runtime.NumCPU())}
	for _, cfg := range backendRuns {
		if only != nil && !only[cfg.run] {
			continue
		}
		var store, schemaDSN string
		if cfg.postgres {
			d, drop, err := freshSchema(dsn)
			if err != nil {
				return nil, err
			}
			defer drop()
			schemaDSN = d
			store = fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", schemaDSN)
		}
		var r *backendRun
		if cfg.river {
			r, err = loadThrough(n, c, 1, schemaDSN, func(_ int, _, sinkURL string) (*proc, error) {
				return startRiver(dir, schemaDSN, sinkURL)
			})
		} else {
			r, err = backendLoad(n, c, bin, dir, cfg.replicas, store, schemaDSN)
		}
		if err != nil {
			return nil, fmt.Errorf("%s with %d replicas: %w", cfg.name, cfg.replicas, err)
		}
		r.Name, r.Replicas = cfg.name, cfg.replicas
		res.Runs = append(res.Runs, *r)
	}
	res.VsRiver = vsRiver(res)
	if leaseTTL <= 0 {
		return res, nil
	}
	fo, err := failoverRun(bin, dir, dsn, leaseTTL)
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	res.Failover = fo
	return res, nil
}

// backendLoad posts n envelopes from c clients spread over the replicas and
// waits for every delivery at the sink; dsn is the PostgreSQL the store
// names ("" for none).
func backendLoad(n, c int, bin, dir string, replicas int, storeCfg, dsn string) (*backendRun, error) {
	return loadThrough(n, c, replicas, dsn, func(i int, sinkCfg, _ string) (*proc, error) {
		return startDaemon(bin, dir, filepath.Join(dir, fmt.Sprintf("data-%d-%d", time.Now().UnixNano(), i)), storeCfg+sinkCfg, 60*time.Second)
	})
}

// loadThrough is backendLoad through the processes start starts (beachd's
// replicas, or the River comparator); dsn, when set, is the PostgreSQL
// whose CPU and work count.
func loadThrough(n, c, replicas int, dsn string, startProc func(i int, sinkCfg, sinkURL string) (*proc, error)) (*backendRun, error) {
	postgres := dsn != ""
	var work0 pgCounters
	if postgres {
		work0 = readPGCounters(dsn)
	}
	s := &sink{first: map[string]time.Time{}, done: make(chan struct{})}
	s.expect(n)
	sinkCfg, sinkURL, stopSink, err := startSinkURL(s)
	if err != nil {
		return nil, err
	}
	defer stopSink()
	procs := make([]*proc, 0, replicas)
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := 0; i < replicas; i++ {
		p, err := startProc(i, sinkCfg, sinkURL)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	pgCPU0 := postgresCPU()
	tr := &http.Transport{MaxIdleConns: c * 2, MaxIdleConnsPerHost: c * 2, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	body := []byte(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":` + envelopeJSON + `}`)
	posted := make([]time.Time, n)
	acked := make([]time.Duration, n)
	ids := make([]string, n)
	start := time.Now()
	err = drive(n, c, func(i int) error {
		var err error
		posted[i] = time.Now()
		ids[i], err = ingestOne(hc, procs[i%len(procs)].base, benchKey, body)
		acked[i] = time.Since(posted[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	ingestTook := time.Since(start)
	select {
	case <-s.done:
	case <-time.After(5 * time.Minute):
	}
	deliverTook := time.Since(start)
	var cpu float64
	for _, p := range procs {
		cpu += cpuSeconds(p.cmd.Process.Pid)
	}
	pgCPU := postgresCPU() - pgCPU0
	s.mu.Lock()
	defer s.mu.Unlock()
	var e2e []time.Duration
	lost := 0
	for i, id := range ids {
		t, ok := s.first[id]
		if !ok {
			lost++
			continue
		}
		e2e = append(e2e, t.Sub(posted[i]))
	}
	r := &backendRun{IngestRate: float64(n) / ingestTook.Seconds(), DeliveryRate: float64(n-lost) / deliverTook.Seconds(),
		IngestP99ms: pct(acked, 99), E2EP50ms: pct(e2e, 50), E2EP99ms: pct(e2e, 99),
		CPUPerEnvelopeUs: cpu / float64(n) * 1e6, Lost: lost, Duplicates: s.dups}
	if postgres {
		r.PostgresCPUPerEnvelopeUs = pgCPU / float64(n) * 1e6
		// The backends report their counts when they end: stop the
		// processes first.
		for _, p := range procs {
			p.stop()
		}
		procs = nil
		r.Postgres = readPGCounters(dsn).since(work0, n)
	}
	return r, nil
}

// pgCounters are PostgreSQL's cumulative counters at one moment; a
// negative field could not be read.
type pgCounters struct {
	commits, walBytes, walSyncs float64
}

// readPGCounters reads the counters of the database at dsn, and of the
// server's WAL, on a connection of its own (so a fresh statistics
// snapshot).
func readPGCounters(dsn string) pgCounters {
	out := pgCounters{-1, -1, -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := connect(ctx, dsn)
	if err != nil {
		return out
	}
	defer conn.Close(ctx)
	conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&out.commits)
	conn.QueryRow(ctx, `SELECT wal_bytes, wal_sync FROM pg_stat_wal`).Scan(&out.walBytes, &out.walSyncs)
	return out
}

// since is the work per envelope from a to c over n envelopes (nil when
// the commits could not be read; the WAL's figures 0 where unread).
func (c pgCounters) since(a pgCounters, n int) *pgWork {
	if c.commits < 0 || a.commits < 0 || n == 0 {
		return nil
	}
	w := &pgWork{Commits: (c.commits - a.commits) / float64(n)}
	if c.walBytes >= 0 && a.walBytes >= 0 {
		w.WALBytes, w.WALSyncs = (c.walBytes-a.walBytes)/float64(n), (c.walSyncs-a.walSyncs)/float64(n)
	}
	return w
}

// failoverRun starts three replicas on a fresh schema, SIGKILLs the replica
// that holds the singletons' leases, and measures until another replica
// holds each of them (read from the database).
func failoverRun(bin, dir, dsn string, ttl time.Duration) (*failover, error) {
	schemaDSN, drop, err := freshSchema(dsn)
	if err != nil {
		return nil, err
	}
	defer drop()
	cfg := fmt.Sprintf("store: {driver: postgres, dsn: %q, lease_ttl: %s}\n", schemaDSN, ttl)
	var procs []*proc
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.stop()
			}
		}
	}()
	for i := 0; i < 3; i++ {
		p, err := startDaemon(bin, dir, filepath.Join(dir, fmt.Sprintf("fo-%d-%d", time.Now().UnixNano(), i)), cfg, 60*time.Second)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	ctx := context.Background()
	conn, err := connect(ctx, schemaDSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	type lease struct {
		holder string
		until  int64
	}
	read := func() (map[string]lease, error) {
		// Held leases only: not the replicas' liveness leases, nor a
		// lease already released (the one a replica writes a shared
		// secret under).
		rows, err := conn.Query(ctx, `SELECT name, holder, until_ns FROM singleton_leases
			WHERE generation > 0 AND name NOT LIKE 'replica/%' AND until_ns > $1`, time.Now().UnixNano())
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]lease{}
		for rows.Next() {
			var name string
			var l lease
			if err := rows.Scan(&name, &l.holder, &l.until); err != nil {
				return nil, err
			}
			out[name] = l
		}
		return out, rows.Err()
	}
	// Wait until the singletons are held, then find the holder's process:
	// holder ids name the pid.
	var before map[string]lease
	deadline := time.Now().Add(3 * ttl)
	for {
		if before, err = read(); err != nil {
			return nil, err
		}
		if len(before) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no singleton lease taken within %s", 3*ttl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	victim := -1
	for _, l := range before {
		for i, p := range procs {
			if strings.Contains(l.holder, "/"+strconv.Itoa(p.cmd.Process.Pid)+"/") {
				victim = i
			}
		}
		break
	}
	if victim < 0 {
		return nil, fmt.Errorf("no replica's pid in the lease holders %v", before)
	}
	victimHolder := ""
	held := map[string]bool{}
	for name, l := range before {
		if strings.Contains(l.holder, "/"+strconv.Itoa(procs[victim].cmd.Process.Pid)+"/") {
			held[name], victimHolder = true, l.holder
		}
	}
	killed := time.Now()
	procs[victim].kill()
	procs[victim] = nil
	fo := &failover{LeaseTTL: ttl.String(), Singletons: map[string]float64{}}
	deadline = killed.Add(3*ttl + 10*time.Second)
	for len(fo.Singletons) < len(held) {
		now, err := read()
		if err != nil {
			return nil, err
		}
		for name := range held {
			if _, done := fo.Singletons[name]; done {
				continue
			}
			if l, ok := now[name]; ok && l.holder != victimHolder {
				fo.Singletons[name] = float64(time.Since(killed).Microseconds()) / 1000
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("singletons not taken over within %s: %v", time.Since(killed).Round(time.Second), now)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fo, nil
}

// connect opens one connection to dsn; the pool's own parameters
// (pool_max_conns, which beachd's pool reads) are not sent to the server.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

// freshSchema creates an empty schema on the server at dsn and returns a
// DSN whose search_path is that schema, and the function that drops it.
func freshSchema(dsn string) (string, func(), error) {
	ctx := context.Background()
	conn, err := connect(ctx, dsn)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL at %s: %w (set -dsn)", dsn, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	schema := "beachd_bench_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() {
		if c, err := connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	}
	return u.String(), drop, nil
}

// postgresCPU is the CPU seconds of every process named postgres (the
// server and its connection backends) that is alive now.
func postgresCPU() float64 {
	entries, _ := os.ReadDir("/proc")
	var total float64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		total += cpuSeconds(pid)
	}
	return total
}

// backendsText is the comparison as a table for the terminal.
func backendsText(r *backendsResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %8s %12s %14s %10s %10s %10s %12s %12s\n", "store", "replicas", "ingest/s", "delivered/s", "ingest p99", "e2e p50", "e2e p99", "cpu µs/env", "pg cpu µs/env")
	base := r.run("bbolt", 1)
	for _, x := range r.Runs {
		fmt.Fprintf(&b, "%-10s %8d %12.0f %14.0f %8.1fms %8.1fms %8.1fms %12.0f %12.0f", x.Name, x.Replicas, x.IngestRate, x.DeliveryRate,
			x.IngestP99ms, x.E2EP50ms, x.E2EP99ms, x.CPUPerEnvelopeUs, x.PostgresCPUPerEnvelopeUs)
		if base != nil && base.DeliveryRate > 0 {
			fmt.Fprintf(&b, "   (delivered %.2f× bbolt)", x.DeliveryRate/base.DeliveryRate)
		}
		b.WriteByte('\n')
	}
	for _, x := range r.Runs {
		if w := x.Postgres; w != nil {
			procs := "replicas"
			if x.Replicas == 1 {
				procs = "replica"
			}
			if x.Name == "river" {
				procs = "process"
			}
			fmt.Fprintf(&b, "%s, %d %s: per envelope %.2f transactions committed, %.0f WAL bytes, %.2f WAL fsyncs (pg_stat_database; pg_stat_wal, the whole server's)\n",
				x.Name, x.Replicas, procs, w.Commits, w.WALBytes, w.WALSyncs)
		}
	}
	if v := r.VsRiver; v != nil {
		fmt.Fprintf(&b, "beachd on PostgreSQL (1 replica) ÷ River: ingest %.2f×, delivered %.2f×, CPU per envelope (with PostgreSQL's) %.2f×; 3 replicas ÷ 1: delivered %.2f×\n", v.Ingest, v.Delivered, v.CPU, v.ThreeReplicas)
	}
	if r.Failover != nil {
		fmt.Fprintf(&b, "failover after SIGKILL (lease %s):", r.Failover.LeaseTTL)
		for name, ms := range r.Failover.Singletons {
			fmt.Fprintf(&b, " %s %.0f ms;", name, ms)
		}
		b.WriteString("\n")
	}
	if r.Keys {
		b.WriteString("Each delivery request carried an Idempotency-Key of its own (-keys); River's process ignores it.\n")
	}
	b.WriteString(r.Note + "\n")
	return b.String()
}
