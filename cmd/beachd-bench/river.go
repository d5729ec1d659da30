package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/cool-ai/beachd/channels/webhook"
)

// The River comparator. River (github.com/riverqueue/river) is a well-kept
// general-purpose job queue on PostgreSQL; beachd on PostgreSQL should not
// be slower than it on the same database under the same load. The
// comparator is a separate process (as beachd is), started from this
// binary: an HTTP handler takes the same delivery request beachd takes,
// decodes it, and inserts one River job with Client.Insert (its own
// transaction); 64 River workers each make the same Standard
// Webhooks-signed POST to the sink that beachd's webhook channel makes.
// River is tuned as its own benchmark tunes it (FetchCooldown 2 ms,
// FetchPollInterval 20 ms) with a pgx pool of 10 connections, beachd's
// default. The daemon never links River: only this bench does.

// riverEnv, when set, turns this process into the River comparator: the
// value is "listen-address sink-url dsn".
const riverEnv = "BEACHD_BENCH_RIVER"

// riverHookArgs is one webhook job: the request's envelope, kept as the
// raw JSON it arrived as.
type riverHookArgs struct {
	Envelope json.RawMessage `json:"envelope"`
}

func (riverHookArgs) Kind() string { return "webhook" }

// riverHookWorker POSTs a job's envelope to the sink, signed.
type riverHookWorker struct {
	river.WorkerDefaults[riverHookArgs]
	hc      *http.Client
	sinkURL string
	signer  *webhook.Signer
}

func (w *riverHookWorker) Work(ctx context.Context, job *river.Job[riverHookArgs]) error {
	id := "rvr_" + strconv.FormatInt(job.ID, 10)
	var body bytes.Buffer
	body.Grow(len(job.Args.Envelope) + 128)
	body.WriteString(`{"type":"beach.envelope","timestamp":"`)
	body.WriteString(time.Now().UTC().Format(time.RFC3339))
	body.WriteString(`","data":{"deliveryId":"`)
	body.WriteString(id)
	body.WriteString(`","envelope":`)
	body.Write(job.Args.Envelope)
	body.WriteString(`}}`)
	req, err := http.NewRequestWithContext(ctx, "POST", w.sinkURL, bytes.NewReader(body.Bytes()))
	if err != nil {
		return err
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, w.signer.Sign(id, now, body.Bytes()))
	resp, err := w.hc.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("sink answered %d", resp.StatusCode)
	}
	return nil
}

// serveRiver runs the comparator until killed. It is called from main when
// riverEnv is set.
func serveRiver(spec string) {
	var addr, sinkURL, dsn string
	if _, err := fmt.Sscan(spec, &addr, &sinkURL, &dsn); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(2)
	}
	if err := runRiver(addr, sinkURL, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

func runRiver(addr, sinkURL, dsn string) error {
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	pcfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	signer, err := webhook.ParseSigner(benchWebhookSecret)
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverHookWorker{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, sinkURL: sinkURL, signer: signer})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 64}},
		Workers:           workers,
		Logger:            nil,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	// The ingest handler: the delivery request beachd takes, bounded as
	// beachd bounds it, decoded, and one job inserted per request.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var req struct {
			To []struct {
				Channel  string `json:"channel"`
				Endpoint string `json:"endpoint"`
			} `json:"to"`
			Envelope json.RawMessage `json:"envelope"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || len(req.To) != 1 || len(req.Envelope) == 0 {
			http.Error(w, "bad request", 400)
			return
		}
		res, err := client.Insert(r.Context(), riverHookArgs{Envelope: req.Envelope}, nil)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"deliveries":[{"id":"rvr_`+strconv.FormatInt(res.Job.ID, 10)+`"}]}`)
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return http.Serve(l, h)
}

// startRiver starts the comparator as a child process on a fresh schema
// and waits until it listens; it returns a proc like a daemon's.
func startRiver(dir, dsn, sinkURL string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &proc{base: "http://" + addr, stderr: &bytes.Buffer{}, stopSamp: make(chan struct{}), sampDone: make(chan struct{})}
	p.cmd = exec.Command(self)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), riverEnv+"="+addr+" "+sinkURL+" "+dsn)
	p.cmd.Stderr = p.stderr
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go p.sample()
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			p.Ready = time.Since(start)
			return p, nil
		}
		if time.Since(start) > 30*time.Second {
			p.kill()
			return nil, fmt.Errorf("river comparator did not listen on %s: %w\n%s", addr, err, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
