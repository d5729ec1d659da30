package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// report is everything -all measures.
type report struct {
	Machine    string          `json:"machine"`
	LoadAvg    []string        `json:"loadAverageAtStartAndEnd,omitempty"`
	Started    string          `json:"started,omitempty"`
	Finished   string          `json:"finished,omitempty"`
	Throughput *result         `json:"throughput,omitempty"`
	Crash      *crashSummary   `json:"crashLoop,omitempty"`
	Faults     *faultsSummary  `json:"faults,omitempty"`
	Fuzz       *fuzzSummary    `json:"fuzz,omitempty"`
	Scale      *scaleResult    `json:"scale,omitempty"`
	Soak       *soakResult     `json:"soak,omitempty"`
	Postfix    *postfixResult  `json:"postfix,omitempty"`
	Backends   *backendsResult `json:"backends,omitempty"`
	Steady     *steadyResult   `json:"steady,omitempty"`
	Goals      []goal          `json:"goals,omitempty"`
	Failed     []string        `json:"failed,omitempty"`
}

// crashSummary is what cmd/beachd's TestCrashLoopMixed writes to
// $BEACHD_CRASH_JSON.
type crashSummary struct {
	Kills        int            `json:"kills"`
	Acknowledged int            `json:"acknowledged"`
	Delivered    int            `json:"delivered"`
	Lost         int            `json:"lost"`
	Duplicates   int            `json:"duplicates"`
	InFlightMax  int            `json:"duplicateBound"`
	ByChannel    map[string]int `json:"deliveredByChannel,omitempty"`
	DupsByChan   map[string]int `json:"duplicatesByChannel,omitempty"`
	BoltCheck    string         `json:"boltCheck"`
	Passed       bool           `json:"passed"`
	Output       string         `json:"failureOutput,omitempty"`
}

type faultLine struct {
	Scenario string `json:"scenario"`
	Verdict  struct {
		Deliveries int `json:"deliveries"`
		Delivered  int `json:"delivered"`
		Dead       int `json:"deadLettered"`
		Duplicates int `json:"duplicates"`
		Attempts   int `json:"attempts"`
	} `json:"verdict"`
	Before struct{ Goroutines, FDs int } `json:"before"`
	After  struct{ Goroutines, FDs int } `json:"after"`
}

type faultsSummary struct {
	Passed    bool        `json:"passed"`
	Scenarios []faultLine `json:"scenarios"`
	Output    string      `json:"failureOutput,omitempty"`
}

type fuzzTarget struct {
	Package string  `json:"package"`
	Name    string  `json:"name"`
	Execs   int64   `json:"execs"`
	Seconds float64 `json:"seconds"`
	Passed  bool    `json:"passed"`
	Output  string  `json:"failureOutput,omitempty"`
}

type fuzzSummary struct {
	PerTarget string       `json:"fuzztimePerTarget"`
	Targets   []fuzzTarget `json:"targets"`
	Execs     int64        `json:"totalExecs"`
	Failed    int          `json:"failed"`
}

func tail(b []byte, n int) string {
	s := string(b)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// runSuites runs the crash loop, the fault suite and every fuzz target,
// collecting their figures.
func runSuites(fuzztime time.Duration, fail func(string, error)) (*crashSummary, *faultsSummary, *fuzzSummary) {
	tmp, err := os.MkdirTemp("", "beachd-suites-")
	if err != nil {
		fail("suites", err)
		return nil, nil, nil
	}
	defer os.RemoveAll(tmp)

	// Crash loop.
	crashJSON := filepath.Join(tmp, "crash.json")
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestCrashLoopMixed$", "-v", "./cmd/beachd")
	cmd.Env = append(os.Environ(), "BEACHD_CRASH_JSON="+crashJSON)
	fmt.Fprintln(os.Stderr, "== crash loop (go test -run TestCrashLoopMixed ./cmd/beachd)")
	out, err := cmd.CombinedOutput()
	crash := &crashSummary{}
	if b, rerr := os.ReadFile(crashJSON); rerr == nil {
		json.Unmarshal(b, crash)
	}
	crash.Passed = err == nil
	if err != nil {
		crash.Output = tail(out, 4000)
		fail("crash loop", err)
	}

	// Faults.
	faultsJSON := filepath.Join(tmp, "faults.jsonl")
	cmd = exec.Command("go", "test", "-count=1", "-run", "^(TestFaults|TestFullDisk)$", "-v", "./stress")
	cmd.Env = append(os.Environ(), "BEACHD_FAULTS_JSON="+faultsJSON)
	fmt.Fprintln(os.Stderr, "== fault suite (go test -run 'TestFaults|TestFullDisk' ./stress)")
	out, err = cmd.CombinedOutput()
	faults := &faultsSummary{Passed: err == nil}
	if err != nil {
		faults.Output = tail(out, 4000)
		fail("faults", err)
	}
	if f, ferr := os.Open(faultsJSON); ferr == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var fl faultLine
			if json.Unmarshal(sc.Bytes(), &fl) == nil {
				faults.Scenarios = append(faults.Scenarios, fl)
			}
		}
		f.Close()
	}

	// Fuzzing: every Fuzz target in the module.
	fz := &fuzzSummary{PerTarget: fuzztime.String()}
	for _, t := range fuzzTargets() {
		fmt.Fprintf(os.Stderr, "== fuzz %s %s (%s)\n", t.Package, t.Name, fuzztime)
		start := time.Now()
		cmd := exec.Command("go", "test", "-run=^$", "-fuzz=^"+t.Name+"$", "-fuzztime="+fuzztime.String(), "./"+t.Package)
		out, err := cmd.CombinedOutput()
		t.Seconds = time.Since(start).Seconds()
		t.Passed = err == nil
		for _, m := range execsRe.FindAllSubmatch(out, -1) {
			if v, perr := strconv.ParseInt(string(m[1]), 10, 64); perr == nil {
				t.Execs = v
			}
		}
		if err != nil {
			t.Output = tail(out, 2000)
			fz.Failed++
			fail("fuzz "+t.Name, err)
		}
		fz.Execs += t.Execs
		fz.Targets = append(fz.Targets, t)
	}
	return crash, faults, fz
}

var execsRe = regexp.MustCompile(`execs: (\d+)`)

var fuzzFuncRe = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

func fuzzTargets() []fuzzTarget {
	var ts []fuzzTarget
	filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			return nil
		}
		for _, m := range fuzzFuncRe.FindAllSubmatch(b, -1) {
			ts = append(ts, fuzzTarget{Package: filepath.Dir(path), Name: string(m[1])})
		}
		return nil
	})
	sort.Slice(ts, func(i, j int) bool { return ts[i].Package+ts[i].Name < ts[j].Package+ts[j].Name })
	return ts
}

// markdown is the short table of a report.
func markdown(r *report) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "| Figure | Value |\n|---|---|\n")
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, a...)) }
	row("Machine", "%s", r.Machine)
	if len(r.LoadAvg) > 0 {
		row("Load average (1/5/15 min) at start, end", "%s (the machine is shared: other processes compete for its CPUs)", strings.Join(r.LoadAvg, "; "))
	}
	if t := r.Throughput; t != nil {
		row("Webhook throughput", "%d envelopes, %d clients: ingest %.0f/s (%.2f× raw), delivered %.0f/s (%.2f× raw); raw POST loop %.0f/s", t.N, t.C, t.IngestRate, t.IngestRatio, t.DeliveryRate, t.DeliverRatio, t.RawRate)
		row("Webhook latency", "ingest p50 %.1f ms / p99 %.1f ms; ingest→delivered p50 %.1f ms / p99 %.1f ms; lost %d, duplicates %d", t.IngestP50ms, t.IngestP99ms, t.E2EP50ms, t.E2EP99ms, t.Lost, t.Duplicates)
	}
	if s := r.Steady; s != nil {
		row("Steady rate", "%d/s offered for %s (achieved %.0f/s, %d late sends > %.0f ms): %d accepted, %d delivered, %d errors; ingest→delivered p50 %.1f / p90 %.1f / p99 %.1f / max %.1f ms; ingest p99 %.1f ms",
			s.Rate, s.Duration, s.OfferedRate, s.Late, s.LateAfterMs, s.Accepted, s.Delivered, s.Errors, s.E2EP50ms, s.E2EP90ms, s.E2EP99ms, s.E2EMaxms, s.IngestP99ms)
	}
	if c := r.Crash; c != nil {
		row("Crash loop (SIGKILL)", "%d kills under mixed webhook/email/SMS/WhatsApp load: %d acknowledged, %d delivered, **%d lost**, %d duplicates (bound %d); bbolt check: %s; %s", c.Kills, c.Acknowledged, c.Delivered, c.Lost, c.Duplicates, c.InFlightMax, c.BoltCheck, passed(c.Passed))
	}
	if f := r.Faults; f != nil {
		var names []string
		for _, s := range f.Scenarios {
			names = append(names, fmt.Sprintf("%s (%d/%d delivered, %d dead, %d dup)", s.Scenario, s.Verdict.Delivered, s.Verdict.Deliveries, s.Verdict.Dead, s.Verdict.Duplicates))
		}
		row("Faults survived (toxiproxy)", "%d scenarios, %s, no goroutine/fd leak: %s", len(f.Scenarios), passed(f.Passed), strings.Join(names, "; "))
	}
	if z := r.Fuzz; z != nil {
		row("Fuzzing", "%d targets × %s: %d executions, %d failed", len(z.Targets), z.PerTarget, z.Execs, z.Failed)
	}
	if s := r.Scale; s != nil {
		row("Scale: queued deliveries", "%d (file %.0f MiB, loaded at %.0f/s)", s.Queued, s.FileMiB, s.LoadPerSec)
		row("Scale: start-up to /readyz", "%.0f ms (restart after draining: %.0f ms)", s.StartupMs, s.RestartMs)
		row("Scale: beachd RSS", "%.1f MiB at ready (anonymous %.1f MiB, the rest bbolt's file map), %.1f MiB peak while delivering %.0f/s from the backlog (anonymous %.1f MiB)", s.RSSAtReadyMiB, s.AnonAtReadyMiB, s.PeakRSSMiB, s.DrainedPerSec, s.AnonPeakMiB)
		row("Scale: claim rate", "%.0f claims/s (64 per transaction, %d measured)", s.ClaimPerSec, s.Claimed)
	}
	if s := r.Soak; s != nil {
		row("Soak", "%s at %d/s (achieved %.0f/s): %d accepted, %d delivered, %d undelivered at the end, %d errors", s.Duration, s.Rate, s.AchievedRate, s.Accepted, s.Delivered, s.Undelivered, s.Errors)
		row("Soak stability", "%s — %s", map[bool]string{true: "stable", false: "NOT stable"}[s.Stable], s.StableWhy)
	}
	if p := r.Postfix; p != nil {
		row("Beside Postfix", "%d messages each to the same SMTP sink; Postfix %s", p.N, p.PostfixVersion)
		row("Accepted/s", "beachd %.0f, Postfix %.0f: **%.2f×**", p.Beachd.AcceptedPerSec, p.Postfix.AcceptedPerSec, p.AcceptRatio)
		row("Delivered/s", "beachd %.0f, Postfix %.0f: **%.2f×**", p.Beachd.DeliveredPerSec, p.Postfix.DeliveredPerSec, p.DeliverRatio)
		row("p99 accept latency", "beachd %.1f ms, Postfix %.1f ms (p50 %.1f / %.1f)", p.Beachd.AcceptP99ms, p.Postfix.AcceptP99ms, p.Beachd.AcceptP50ms, p.Postfix.AcceptP50ms)
	}
	if be := r.Backends; be != nil {
		for _, x := range be.Runs {
			row(fmt.Sprintf("Store %s, %d replica(s)", x.Name, x.Replicas), "%d envelopes, %d clients: ingest %.0f/s, delivered %.0f/s, ingest→delivered p50 %.1f / p99 %.1f ms, CPU per envelope %.0f µs (PostgreSQL's %.0f µs); lost %d, duplicates %d",
				be.N, be.C, x.IngestRate, x.DeliveryRate, x.E2EP50ms, x.E2EP99ms, x.CPUPerEnvelopeUs, x.PostgresCPUPerEnvelopeUs, x.Lost, x.Duplicates)
		}
	}
	for _, g := range r.Goals {
		op := map[string]string{">=": "≥", "<=": "≤"}[g.Op]
		note := ""
		if g.Note != "" {
			note = "; " + g.Note
		}
		row("Goal: "+g.Name, "**%.2f %s** (goal %s %g %s, %s) — %s%s", g.Value, g.Unit, op, g.Target, g.Unit, map[bool]string{true: "met", false: "not met"}[g.Met], g.Figures, note)
	}
	for _, f := range r.Failed {
		row("FAILED", "%s", strings.ReplaceAll(f, "\n", " "))
	}
	return b.String()
}

func passed(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// mergeReports combines reports: each later file's non-empty sections
// replace earlier ones; machine and load averages are concatenated.
func mergeReports(paths []string) (*report, error) {
	out := &report{}
	for _, p := range paths {
		b, err := os.ReadFile(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if out.Machine == "" {
			out.Machine = r.Machine
		}
		if out.Started == "" || (r.Started != "" && r.Started < out.Started) {
			out.Started = r.Started
		}
		if r.Finished > out.Finished {
			out.Finished = r.Finished
		}
		out.LoadAvg = append(out.LoadAvg, r.LoadAvg...)
		if r.Throughput != nil {
			out.Throughput = r.Throughput
		}
		if r.Crash != nil {
			out.Crash = r.Crash
		}
		if r.Faults != nil {
			out.Faults = r.Faults
		}
		if r.Fuzz != nil {
			out.Fuzz = r.Fuzz
		}
		if r.Scale != nil {
			out.Scale = r.Scale
		}
		if r.Soak != nil {
			out.Soak = r.Soak
		}
		if r.Backends != nil {
			out.Backends = r.Backends
		}
		if r.Postfix != nil {
			out.Postfix = r.Postfix
		}
		if r.Steady != nil {
			out.Steady = r.Steady
		}
	}
	out.Goals = goals(out.Throughput, out.Steady, out.Scale, out.Backends)
	return out, nil
}
