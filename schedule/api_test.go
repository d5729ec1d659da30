package schedule_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
