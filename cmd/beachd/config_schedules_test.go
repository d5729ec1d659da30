package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

const scheduleBase = `
api_keys: ["0123456789abcdef0123"]
agents:
  travel: { a2a_url: "http://127.0.0.1:9/" }
  hooky: { injector: webhook, webhook_url: "http://127.0.0.1:9/hook", webhook_secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }
`

func TestScheduleConfig(t *testing.T) {
	good := scheduleBase + `
schedules:
  - name: morning-brief
    cron: "CRON_TZ=Europe/London 0 8 * * 1-5"
    agent: travel
    message: "Today's tasks"
    to: [ {channel: email, address: alice@example.org} ]
    timeout: 2m
    retries: 2
    retry_delay: 30s
    catch_up: run_once
    overlap: queue
    error_notice: true
  - { name: weekly, cron: "@weekly", time_zone: America/New_York, agent: travel, message: "Week", enabled: false,
      to: [ {channel: sms, address: "+15550001111"} ] }
`
	cfg, err := parseConfig([]byte(good), "good.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.validate(); err != nil && strings.Contains(err.Error(), "schedules") {
		t.Fatalf("good schedules refused: %v", err)
	}
	d := cfg.Schedules[0].definition()
	if d.Timeout != 2*time.Minute || d.RetryDelay != 30*time.Second || d.Retries != 2 || d.CatchUp != "run_once" ||
		d.Overlap != "queue" || !d.ErrorNotice || d.Disabled || d.To[0].Address != "alice@example.org" {
		t.Fatalf("definition = %+v", d)
	}
	if !cfg.Schedules[1].definition().Disabled {
		t.Fatal("enabled: false not honoured")
	}

	bad := scheduleBase + `
schedules:
  - { name: a, cron: "0 0 30 2 *", agent: travel, message: m, to: [ {channel: email, address: a@example.org} ] }
  - { name: b, cron: "0 8 * * *", time_zone: Mars/Base, agent: travel, message: m, to: [ {channel: email, address: a@example.org} ] }
  - { name: c, cron: "0 8 * * *", agent: nobody, message: m, to: [ {channel: email, address: a@example.org} ] }
  - { name: d, cron: "0 8 * * *", agent: travel, message: m }
  - { name: e, cron: "0 8 * * *", agent: hooky, message: m, to: [ {channel: webhook, endpoint: nowhere} ] }
  - { name: f, cron: "CRON_TZ=UTC 0 8 * * *", time_zone: Europe/Paris, agent: travel, message: m, to: [ {channel: email, address: a@example.org} ] }
`
	cfg, err = parseConfig([]byte(bad), "bad.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.validate()
	if err == nil {
		t.Fatal("bad schedules accepted")
	}
	for _, want := range []string{
		`schedules[0].cron: schedule "a": spec "0 0 30 2 *" never fires`,
		`schedules[1].time_zone: schedule "b": unknown time zone "Mars/Base"`,
		`schedules[2].agent: schedule "c": unknown agent "nobody"`,
		`schedules[3].to: schedule "d": at least one recipient is required`,
		`schedules[4].agent: schedule "e": agent "hooky" has no a2a_url`,
		`schedules[4].to[0].endpoint: schedule "e": unknown webhook endpoint "nowhere"`,
		`schedules[5].cron: schedule "f": spec says time zone "UTC" but time_zone is "Europe/Paris"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in:\n%v", want, err)
		}
	}

	if _, err := parseConfig([]byte(scheduleBase+"schedules:\n  - { name: x, crontab: '* * * * *' }\n"), "k.yaml",
		func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "crontab") {
		t.Fatalf("unknown key: %v", err)
	}
}

type cliAgents struct{}

func (cliAgents) StartTurn(ctx context.Context, agentName, text, contextID string) (*agent.Turn, error) {
	return &agent.Turn{ContextID: contextID, TaskID: "t1"}, nil
}

func (cliAgents) WaitTurn(ctx context.Context, agentName string, t *agent.Turn, poll time.Duration) (*envelope.Envelope, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

type cliEnqueuer struct{}

func (cliEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agentName, source string) (string, error) {
	return "env_1", nil
}

// TestSchedulesCommands drives `beachd schedules list|run|pause|resume` against the
// schedule routes of a running scheduler.
func TestSchedulesCommands(t *testing.T) {
	db := storetest.Open(t, bolt.Options{})
	s, err := schedule.New(schedule.Config{Schedules: []schedule.Definition{{Name: "morning-brief",
		Cron: "CRON_TZ=Europe/London 0 8 * * *", Agent: "travel", Message: "hi",
		To: []envelope.Recipient{{Channel: "email", Address: "a@example.org"}}}}}, db, cliAgents{}, cliEnqueuer{})
	if err != nil {
		t.Fatal(err)
	}
	const key = "0123456789abcdef0123"
	mux := http.NewServeMux()
	for _, r := range api.ScheduleRoutes(s, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		h := r.Handler
		mux.Handle(r.Method+" "+r.Pattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("Authorization") != "Bearer "+key {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		}))
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	beachd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(args, "--url", srv.URL, "--api-key", key),
			func(string) string { return "" }, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	var code int
	var out, errOut string
	poll.Eventually(t, 5*time.Second, "the scheduler to take a manual run (it answered \"not running\")", func() bool {
		code, out, errOut = beachd("schedules", "run", "morning-brief")
		return !strings.Contains(errOut, "not running")
	})
	if code != 0 || !strings.Contains(out, "started morning-brief@") {
		t.Fatalf("run: %d %q %q", code, out, errOut)
	}
	if code, _, errOut = beachd("schedules", "run", "morning-brief"); code != 1 || !strings.Contains(errOut, "in progress") {
		t.Fatalf("second run: %d %q", code, errOut)
	}
	if code, _, errOut = beachd("schedules", "run", "nope"); code != 1 || !strings.Contains(errOut, "unknown schedule") {
		t.Fatalf("unknown: %d %q", code, errOut)
	}
	code, out, errOut = beachd("schedules", "list")
	if code != 0 || !strings.Contains(out, "morning-brief") || !strings.Contains(out, "Europe/London") ||
		!strings.Contains(out, "running") {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = beachd("schedules", "list", "--json")
	var parsed struct{ Schedules []schedule.Status }
	if code != 0 || json.Unmarshal([]byte(out), &parsed) != nil || len(parsed.Schedules) != 1 || parsed.Schedules[0].Last == nil {
		t.Fatalf("list --json: %d %s", code, out)
	}
	if code, out, errOut = beachd("schedules", "pause", "morning-brief"); code != 0 ||
		!strings.Contains(out, "morning-brief: PAUSED since ") || !strings.Contains(out, "by api key ") {
		t.Fatalf("pause: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = beachd("schedules", "list"); code != 0 || !strings.Contains(out, "PAUSED since ") {
		t.Fatalf("list while paused: %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = beachd("schedules", "pause", "nope"); code != 1 || !strings.Contains(errOut, "unknown schedule") {
		t.Fatalf("pause unknown: %d %q", code, errOut)
	}
	if code, out, errOut = beachd("schedules", "resume", "morning-brief"); code != 0 ||
		!strings.Contains(out, "morning-brief: active; next slot 20") {
		t.Fatalf("resume: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = beachd("schedules", "list"); code != 0 || strings.Contains(out, "PAUSED") {
		t.Fatalf("list after resume: %d\n%s%s", code, out, errOut)
	}
}
