package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
)

// slowAgents holds every turn until release is closed.
type slowAgents struct{ release chan struct{} }

func (a slowAgents) StartTurn(ctx context.Context, agentName, text, contextID string) (*agent.Turn, error) {
	return &agent.Turn{ContextID: contextID, TaskID: "t1"}, nil
}

func (a slowAgents) WaitTurn(ctx context.Context, agentName string, t *agent.Turn, poll time.Duration) (*envelope.Envelope, error) {
	select {
	case <-a.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s := "ok"
	return &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Text: &s, Metadata: map[string]any{"partType": "response"}}}}, nil
}

type countingEnqueuer struct {
	mu sync.Mutex
	n  int
}

func (e *countingEnqueuer) Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agentName, source string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	return "env_1", nil
}

func TestScheduleRoutes(t *testing.T) {
	agents := slowAgents{release: make(chan struct{})}
	s, _ := schedule.NewScheduler(t, schedule.Config{Schedules: []schedule.Definition{{Name: "brief", Cron: "CRON_TZ=Europe/London 0 8 * * *",
		Agent: "travel", Message: "hi", To: []envelope.Recipient{{Channel: "webhook", Endpoint: "ops"}}}}}, agents, &countingEnqueuer{}, time.Time{})
	mux := http.NewServeMux()
	for _, r := range api.ScheduleRoutes(s, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		if !r.Auth {
			t.Fatalf("%s %s does not require the API key", r.Method, r.Pattern)
		}
		mux.Handle(r.Method+" "+r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, _ := do("POST", "/v1/schedules/brief/run"); code != http.StatusServiceUnavailable {
		t.Fatalf("run before Run: %d", code)
	}
	schedule.Running(t, s)
	defer close(agents.release)
	// Run is active once RunNow stops answering 503.
	var code int
	var body map[string]any
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if code, body = do("POST", "/v1/schedules/brief/run"); code != http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusAccepted {
		t.Fatalf("run: %d %v", code, body)
	}
	run := body["run"].(map[string]any)
	if run["trigger"] != "manual" || run["state"] != "running" || run["id"] == "" {
		t.Fatalf("run = %v", run)
	}
	if code, _ := do("POST", "/v1/schedules/brief/run"); code != http.StatusConflict {
		t.Fatalf("second run: %d, want 409", code)
	}
	if code, _ := do("POST", "/v1/schedules/nope/run"); code != http.StatusNotFound {
		t.Fatalf("unknown: %d, want 404", code)
	}
	code, body = do("GET", "/v1/schedules")
	if code != http.StatusOK {
		t.Fatalf("list: %d", code)
	}
	list := body["schedules"].([]any)
	first := list[0].(map[string]any)
	if len(list) != 1 || first["name"] != "brief" || first["running"] != true || first["timeZone"] != "Europe/London" ||
		first["next"] == nil || first["last"].(map[string]any)["id"] != run["id"] {
		t.Fatalf("list = %v", list)
	}
}

// POST /v1/schedules/{name}/pause and /resume through the API server: the
// read-write key pauses and resumes, a read-only key is refused, an unknown
// schedule is 404, and the answer is the schedule's status.
func TestSchedulePauseResumeRoutes(t *testing.T) {
	s, db := schedule.NewScheduler(t, schedule.Config{Schedules: []schedule.Definition{{Name: "brief", Cron: "0 8 * * *",
		Agent: "travel", Message: "hi", To: []envelope.Recipient{{Channel: "webhook", Endpoint: "ops"}}}}},
		slowAgents{release: make(chan struct{})}, &countingEnqueuer{}, time.Time{})
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(), Channels: map[string]bool{"webhook": true},
		Agents: map[string]bool{"travel": true}}, db, nil, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"rw"}, ReadKeys: []string{"ro"}}, db, ing, nil, nil, nil,
		api.ScheduleRoutes(s, slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	do := func(key, path string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", hs.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, _ := do("ro", "/v1/schedules/brief/pause"); code != http.StatusForbidden {
		t.Fatalf("pause with a read-only key: %d, want 403", code)
	}
	for _, p := range []string{"/v1/schedules/nope/pause", "/v1/schedules/nope/resume"} {
		if code, _ := do("rw", p); code != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", p, code)
		}
	}
	code, body := do("rw", "/v1/schedules/brief/pause")
	st, _ := body["schedule"].(map[string]any)
	if code != http.StatusOK || st["name"] != "brief" || st["paused"] != true || st["pausedAt"] == nil ||
		!strings.HasPrefix(fmt.Sprint(st["pausedBy"]), "api key ") || st["next"] != nil {
		t.Fatalf("pause: %d %v", code, body)
	}
	code, body = do("rw", "/v1/schedules/brief/resume")
	st, _ = body["schedule"].(map[string]any)
	if code != http.StatusOK || st["paused"] != false || st["pausedAt"] != nil || st["next"] == nil {
		t.Fatalf("resume: %d %v", code, body)
	}
}
