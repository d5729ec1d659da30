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
