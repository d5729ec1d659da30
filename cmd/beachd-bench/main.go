// Command beachd-bench measures beachd end to end on this machine and
// prints JSON: it builds and starts the real daemon with a temporary store
// and one webhook endpoint pointing at a local sink, drives N envelopes from
// C concurrent clients through POST /v1/deliveries, and waits until the sink
// has every one. In the same run it measures a raw net/http POST loop (same
// clients, same body size) to the same sink, and reports the ratios.
//
//	go run ./cmd/beachd-bench -n 20000 -c 64
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Machine string    `json:"machine"`
	N       int       `json:"envelopes"`
	C       int       `json:"clients"`
	RawRate float64   `json:"rawPostsPerSec"`
	RawRuns []float64 `json:"rawRunsPerSec"`
	// Relays: the ceiling of any daemon that takes envelopes and delivers
	// them over HTTP (relay.go), measured in the same run.
	Direct             *relayFigures `json:"directRelay"`
	Queued             *relayFigures `json:"queuedRelay"`
	DirectRatio        float64       `json:"directRelayDeliveredVsRaw"`
	QueuedIngestRatio  float64       `json:"queuedRelayIngestVsRaw"`
	QueuedDeliverRatio float64       `json:"queuedRelayDeliveredVsRaw"`
	IngestRate         float64       `json:"ingestPerSec"`
	DeliveryRate       float64       `json:"deliveredPerSec"`
	IngestRatio        float64       `json:"ingestVsRaw"`
	DeliverRatio       float64       `json:"deliveryVsRaw"`
	IngestP50ms        float64       `json:"ingestP50ms"`
	IngestP99ms        float64       `json:"ingestP99ms"`
	E2EP50ms           float64       `json:"ingestToDeliveredP50ms"`
	E2EP99ms           float64       `json:"ingestToDeliveredP99ms"`
	PeakRSSMiB         float64       `json:"beachdPeakRSSMiB"`
	// CPUPerEnvelopeUs is the daemon's own CPU time (user + system, from
	// start-up to the last delivery) divided by the envelopes, in µs; the
	// relays report the same.
	CPUPerEnvelopeUs float64 `json:"beachdCPUPerEnvelopeUs"`
	// RawCPUPerPostUs is this process's CPU time over the raw loops (client
	// and sink) per POST; ClientsCPUPerEnvelopeUs the same while beachd
	// ran (the ingest clients and the sink), per envelope.
	RawCPUPerPostUs         float64 `json:"rawCPUPerPostUs"`
	ClientsCPUPerEnvelopeUs float64 `json:"clientsAndSinkCPUPerEnvelopeUs"`
	Duplicates              int     `json:"duplicates"`
	Lost                    int     `json:"lost"`
	// Steady is the default run's steady-rate phase (steady.go); Goals the
	// figures against their goals (goals.go).
	Steady  *steadyResult `json:"steady,omitempty"`
	LoadAvg []string      `json:"loadAverageAtStartAndEnd,omitempty"`
	Goals   []goal        `json:"goals,omitempty"`
}

// sink counts webhooks by webhook-id and remembers when each first arrived.
type sink struct {
	mu    sync.Mutex
	first map[string]time.Time
	dups  int
	total atomic.Int64
	done  chan struct{}
	want  atomic.Int64
}

// expect forgets what the sink has seen and closes done once it has n
// distinct webhook-ids.
func (s *sink) expect(n int) {
	s.mu.Lock()
	s.first = map[string]time.Time{}
	s.dups = 0
	s.done = make(chan struct{})
	s.want.Store(int64(n))
	s.mu.Unlock()
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	if id := r.Header.Get("webhook-id"); id != "" {
		s.mu.Lock()
		if _, ok := s.first[id]; ok {
			s.dups++
		} else {
			s.first[id] = now
		}
		if w := s.want.Load(); w > 0 && int64(len(s.first)) == w {
			select {
			case <-s.done:
			default:
				close(s.done)
			}
		}
		s.mu.Unlock()
	}
	s.total.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

func main() {
	if spec := os.Getenv(relayEnv); spec != "" {
		serveRelay(spec)
		return
	}
	if spec := os.Getenv(riverEnv); spec != "" {
		serveRiver(spec)
		return
	}
	n := flag.Int("n", 20000, "envelopes to send")
	c := flag.Int("c", 64, "concurrent clients")
	bin := flag.String("beachd", "", "beachd binary (default: build ./cmd/beachd)")
	workers := flag.Int("workers", 64, "beachd dispatch workers")
	out := flag.String("o", "", "also write the JSON here")
	scale := flag.Int("scale", 0, "load this many queued deliveries into a store and measure start-up, RSS and claim rate")
	drain := flag.Duration("drain", 15*time.Second, "with -scale: how long the daemon delivers from the backlog")
	soak := flag.Duration("soak", 0, "run a steady load for this long, sampling RSS and latency")
	rate := flag.Int("rate", 0, "offer this many envelopes/s at a steady rate (open loop) for -duration and report ingest→delivered latency; with -soak: the soak's rate (default 1000)")
	duration := flag.Duration("duration", 20*time.Second, "with -rate: how long to offer the rate")
	steady := flag.Duration("steady", 10*time.Second, "the default run's (and -throughput's) steady 2000/s phase; 0 skips it")
	interval := flag.Duration("interval", 10*time.Second, "with -soak: sampling interval")
	plot := flag.String("plot", "soak.png", "with -soak: the PNG plot")
	samples := flag.String("samples", "soak.json", "with -soak: the samples as JSON")
	pf := flag.Bool("postfix", false, "beachd beside Postfix: the same messages to the same SMTP sink")
	pfN := flag.Int("postfix-n", 5000, "with -postfix: messages each")
	pfC := flag.Int("postfix-c", 32, "with -postfix: concurrent clients each")
	all := flag.Bool("all", false, "every figure: throughput, crash loop, faults, fuzzing, scale, soak, Postfix")
	md := flag.String("md", "", "with -all (or any mode): write a Markdown table here")
	fuzztime := flag.Duration("fuzztime", 10*time.Second, "with -all: fuzzing time per target")
	thr := flag.Bool("throughput", false, "with other modes: also run the default daemon-vs-raw throughput bench")
	backends := flag.Bool("backends", false, "beachd on bbolt, on PostgreSQL with 1 and with 3 replicas, and the River job queue on the same PostgreSQL (the same load, -n and -c), and the singletons' failover after a SIGKILL")
	dsn := flag.String("dsn", "postgres://127.0.0.1:5432/test?sslmode=disable", "with -backends: the PostgreSQL server (each run uses a fresh schema)")
	runs := flag.String("runs", "", "with -backends: only these of its runs, comma-separated: bbolt, postgres (one replica), river, postgres3 (three replicas)")
	leaseTTL := flag.Duration("lease-ttl", 15*time.Second, "with -backends: the singletons' lease for the failover measurement (0 skips it)")
	efficiency := flag.Bool("efficiency", false, "every figure of the efficiency goals in one run: the default run (bbolt against the relays, then its steady phase), -backends without the failover (PostgreSQL with 1 and 3 replicas against River) and -scale (1000000 unless given)")
	keys := flag.Bool("keys", false, "every delivery request carries an Idempotency-Key of its own, which beachd stores and checks (River's process ignores it)")
	merge := flag.String("merge", "", "comma-separated report JSON files to merge (later sections win) into -o and -md; runs nothing")
	flag.Parse()
	idempotencyKeys = *keys
	if *merge != "" {
		rep, err := mergeReports(strings.Split(*merge, ","))
		if err != nil {
			fmt.Fprintln(os.Stderr, "beachd-bench:", err)
			os.Exit(1)
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
		if *out != "" {
			os.WriteFile(*out, append(b, '\n'), 0o644)
		}
		if *md != "" {
			os.WriteFile(*md, []byte(markdown(rep)), 0o644)
		}
		return
	}
	if *runs != "" && (!*backends || *efficiency || *all) {
		fmt.Fprintln(os.Stderr, "beachd-bench: -runs picks runs of -backends alone (not with -efficiency or -all)")
		os.Exit(2)
	}
	if *efficiency {
		*thr, *backends = true, true
		if *scale == 0 {
			*scale = 1000000
		}
	}
	if *backends && !*efficiency && !*all {
		only, err := parseRuns(*runs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "beachd-bench:", err)
			os.Exit(2)
		}
		res, err := backendsRun(*n, *c, *bin, *dsn, *leaseTTL, only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "beachd-bench:", err)
			os.Exit(1)
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(b))
		fmt.Fprint(os.Stderr, "\n"+backendsText(res))
		if *out != "" {
			os.WriteFile(*out, append(b, '\n'), 0o644)
		}
		return
	}
	steadyOnly := *rate > 0 && *soak == 0
	if !*all && *scale == 0 && *soak == 0 && !*pf && !*thr && !steadyOnly {
		// The default: daemon vs raw net/http and the relays, then a short
		// steady phase at the rate of the latency goal.
		res, err := defaultRun(*n, *c, *bin, *workers, *steady)
		if err != nil {
			fmt.Fprintln(os.Stderr, "beachd-bench:", err)
			os.Exit(1)
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(b))
		fmt.Fprintf(os.Stderr, "\nLoad average (1/5/15 min) at start, end: %s\n%s", strings.Join(res.LoadAvg, "; "), goalsText(res.Goals))
		if *out != "" {
			os.WriteFile(*out, append(b, '\n'), 0o644)
		}
		if *md != "" {
			os.WriteFile(*md, []byte(markdown(&report{Machine: machine(), LoadAvg: res.LoadAvg, Throughput: res, Steady: res.Steady, Goals: res.Goals})), 0o644)
		}
		return
	}
	if *soak > 0 && *rate == 0 {
		*rate = 1000
	}
	rep := &report{Machine: machine(), Started: time.Now().UTC().Format(time.RFC3339), LoadAvg: []string{loadAvg()}}
	var failed []string
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "beachd-bench: %s: %v\n", what, err)
		failed = append(failed, what+": "+err.Error())
	}
	if *all {
		if *scale == 0 {
			*scale = 1000000
		}
		if *soak == 0 {
			*soak = 10 * time.Minute
		}
		*pf = true
		if res, err := bench(*n, *c, *bin, *workers); err != nil {
			fail("throughput", err)
		} else {
			rep.Throughput = res
		}
		rep.Crash, rep.Faults, rep.Fuzz = runSuites(*fuzztime, fail)
	} else if *thr {
		if res, err := bench(*n, *c, *bin, *workers); err != nil {
			fail("throughput", err)
		} else {
			rep.Throughput = res
		}
	}
	if steadyOnly {
		if res, err := steadyRun(*rate, *duration, *bin); err != nil {
			fail("steady", err)
		} else {
			rep.Steady = res
		}
	} else if (*all || *thr) && *steady > 0 {
		if res, err := steadyRun(goalSteadyRate, *steady, *bin); err != nil {
			fail("steady", err)
		} else {
			rep.Steady = res
		}
	}
	if *backends {
		if res, err := backendsRun(*n, *c, *bin, *dsn, 0, nil); err != nil {
			fail("backends", err)
		} else {
			rep.Backends = res
		}
	}
	if *scale > 0 {
		if res, err := scaleRun(*scale, *bin, *drain); err != nil {
			fail("scale", err)
		} else {
			rep.Scale = res
		}
	}
	if *soak > 0 {
		if res, err := soakRun(*soak, *rate, *interval, *bin, *plot, *samples); err != nil {
			fail("soak", err)
		} else {
			rep.Soak = res
		}
	}
	if *pf {
		if res, err := postfixRun(*pfN, *pfC, *bin); err != nil {
			fail("postfix", err)
		} else {
			rep.Postfix = res
		}
	}
	rep.Failed = failed
	rep.LoadAvg = append(rep.LoadAvg, loadAvg())
	rep.Finished = time.Now().UTC().Format(time.RFC3339)
	rep.Goals = goals(rep.Throughput, rep.Steady, rep.Scale, rep.Backends)
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Println(string(b))
	fmt.Fprintf(os.Stderr, "\nLoad average (1/5/15 min) at start, end: %s\n%s", strings.Join(rep.LoadAvg, "; "), goalsText(rep.Goals))
	if *out != "" {
		os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	if *md != "" {
		os.WriteFile(*md, []byte(markdown(rep)), 0o644)
	}
	if len(failed) > 0 {
		os.Exit(1)
	}
}

// defaultRun is the run without a mode flag: bench, then (unless steady
// is 0) a steady phase at the latency goal's rate on the same build, and
// the goals.
func defaultRun(n, c int, bin string, workers int, steady time.Duration) (*result, error) {
	load0 := loadAvg()
	tmp, err := os.MkdirTemp("", "beachd-bench-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if bin, err = buildBeachd(bin, tmp); err != nil {
		return nil, err
	}
	res, err := bench(n, c, bin, workers)
	if err != nil {
		return nil, err
	}
	if steady > 0 {
		if res.Steady, err = steadyRun(goalSteadyRate, steady, bin); err != nil {
			return nil, fmt.Errorf("steady: %w", err)
		}
	}
	res.LoadAvg = []string{load0, loadAvg()}
	res.Goals = goals(res, res.Steady, nil, nil)
	return res, nil
}

const envelopeJSON = `{"role":"agent","parts":[{"text":"Two direct flights found, 15 August 2026 LGW to CFU. Cheapest is easyJet EJ4521 at 94 GBP per person (06:15-12:00). More convenient is British Airways BA2043 at 187 GBP per person (08:45-14:20).","metadata":{"partType":"response"}},{"data":{"route":{"origin":"London Gatwick","destination":"Corfu"},"flights":[{"flightNumber":"BA 2043","airline":"British Airways","departure":"2026-08-15T08:45:00","arrival":"2026-08-15T14:20:00","pricePerPerson":187,"currency":"GBP","stops":0},{"flightNumber":"EJ 4521","airline":"easyJet","departure":"2026-08-15T06:15:00","arrival":"2026-08-15T12:00:00","pricePerPerson":94,"currency":"GBP","stops":0}]},"metadata":{"partType":"domain-data"}}],"meta":{"sessionId":"sess_bench","turnId":"turn_bench","producedAt":"2026-04-20T09:50:00Z","finalizedBy":"complete"}}`

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func bench(n, c int, bin string, workers int) (*result, error) {
	dir, err := os.MkdirTemp("", "beachd-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "beachd")
		build := exec.Command("go", "build", "-o", bin, "./cmd/beachd")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build beachd (run from the repository root): %w", err)
		}
	}
	s := &sink{first: map[string]time.Time{}, done: make(chan struct{})}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sinkSrv := &http.Server{Handler: s}
	go sinkSrv.Serve(sl)
	defer sinkSrv.Close()
	sinkURL := "http://" + sl.Addr().String() + "/hook"

	tr := &http.Transport{MaxIdleConns: c * 2, MaxIdleConnsPerHost: c * 2, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}

	// 1. The raw baseline: the same number of POSTs of a webhook-sized body
	// straight to the sink from the same number of clients. A loop of n
	// posts lasts a fraction of a second, so on a shared machine one run
	// can land on a busy moment: it runs three times and the fastest
	// counts (the baseline most favourable to raw net/http).
	rawBody := []byte(`{"type":"beach.envelope","timestamp":"2026-04-20T09:50:00Z","data":{"deliveryId":"dlv_0123456789abcdefghjkmnpqrs","envelope":` + envelopeJSON + `}}`)
	var rawRate float64
	var rawRuns []float64
	rawCPU := cpuSeconds(os.Getpid())
	for run := 0; run < 3; run++ {
		rawStart := time.Now()
		if err := postLoop(n, c, hc, sinkURL, rawBody, 0); err != nil {
			return nil, fmt.Errorf("raw loop: %w", err)
		}
		r := float64(n) / time.Since(rawStart).Seconds()
		rawRuns = append(rawRuns, r)
		rawRate = max(rawRate, r)
	}
	rawCPU = cpuSeconds(os.Getpid()) - rawCPU
	body := []byte(`{"to":[{"channel":"webhook","endpoint":"sink"}],"envelope":` + envelopeJSON + `}`)

	// 2. The relay ceilings (relay.go): two round trips per envelope and
	// nothing else, through a process of its own.
	direct, err := relayRun("direct", n, c, hc, s, sinkURL, body)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	queued, err := relayRun("queued", n, c, hc, s, sinkURL, body)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	s.expect(n)

	// 3. beachd.
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	key := "bench-key-0123456789abcdef"
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
api_keys: ["%s"]
log: {level: warn}
dispatch: {workers: %d}
webhooks:
  endpoints:
    sink: {url: "%s", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", max_concurrency: %d}
`, addr, filepath.Join(dir, "data"), key, workers, sinkURL, workers)
	cfgPath := filepath.Join(dir, "beachd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfgPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	base := "http://" + addr
	if err := waitReady(base, 20*time.Second); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	posted := make([]time.Time, n)
	acked := make([]time.Duration, n)
	ids := make([]string, n)
	benchCPU := cpuSeconds(os.Getpid())
	ingestStart := time.Now()
	err = drive(n, c, func(i int) error {
		var err error
		posted[i] = time.Now()
		ids[i], err = ingestOne(hc, base, key, body)
		acked[i] = time.Since(posted[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	ingestTook := time.Since(ingestStart)
	select {
	case <-s.done:
	case <-time.After(5 * time.Minute):
	}
	deliverTook := time.Since(ingestStart)
	rss := peakRSS(cmd.Process.Pid)
	cpu := cpuSeconds(cmd.Process.Pid)
	benchCPU = cpuSeconds(os.Getpid()) - benchCPU

	s.mu.Lock()
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
	dups := s.dups
	s.mu.Unlock()
	r := &result{Machine: machine(), N: n, C: c, RawRate: rawRate, RawRuns: rawRuns,
		Direct: direct, Queued: queued, DirectRatio: direct.Delivered / rawRate,
		QueuedIngestRatio: queued.Ingest / rawRate, QueuedDeliverRatio: queued.Delivered / rawRate,
		IngestRate: float64(n) / ingestTook.Seconds(), DeliveryRate: float64(n-lost) / deliverTook.Seconds(),
		IngestP50ms: pct(acked, 50), IngestP99ms: pct(acked, 99), E2EP50ms: pct(e2e, 50), E2EP99ms: pct(e2e, 99),
		PeakRSSMiB: rss, CPUPerEnvelopeUs: cpu / float64(n) * 1e6,
		RawCPUPerPostUs: rawCPU / float64(3*n) * 1e6, ClientsCPUPerEnvelopeUs: benchCPU / float64(n) * 1e6, Duplicates: dups, Lost: lost}
	r.IngestRatio = r.IngestRate / rawRate
	r.DeliverRatio = r.DeliveryRate / rawRate
	return r, nil
}

// With -keys every request carries an Idempotency-Key of its own: keyRun
// (the run's start) and a sequence number.
var (
	idempotencyKeys bool
	keyRun          = time.Now().UnixNano()
	keySeq          atomic.Int64
)

// ingestOne posts one envelope (body, one recipient) to the daemon at base
// and returns the id of its delivery once acknowledged.
func ingestOne(hc *http.Client, base, key string, body []byte) (string, error) {
	req, _ := http.NewRequest("POST", base+"/v1/deliveries", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKeys {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d-%d", keyRun, keySeq.Add(1)))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var a struct {
		Deliveries []struct{ ID string } `json:"deliveries"`
	}
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("ingest: HTTP %d: %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Deliveries) != 1 {
		return "", fmt.Errorf("ingest answer: %v", err)
	}
	return a.Deliveries[0].ID, nil
}

// postLoop POSTs body to url n times from c clients; want, when not 0, is
// the status every answer must have.
func postLoop(n, c int, hc *http.Client, url string, body []byte, want int) error {
	return drive(n, c, func(int) error {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want != 0 && resp.StatusCode != want {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})
}

func drive(n, c int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func waitReady(base string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("beachd not ready at %s after %s", base, d)
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i].Microseconds()) / 1000
}

// cpuSeconds reads a process's user and system CPU time from /proc (Linux;
// USER_HZ is 100 there), or 0.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis (state is field 3, utime 14, stime 15).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// peakRSS reads VmHWM of a process from /proc (Linux), in MiB.
func peakRSS(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d CPUs, %s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, runtime.Version())
}
