package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cool-ai/beachd/store"
)

type fakeTurns struct{ turns map[string]*TurnItem }

func (f *fakeTurns) ListTurns(_ context.Context, state string, limit int) ([]TurnItem, error) {
	var out []TurnItem
	for _, t := range f.turns {
		if (state == "" || t.State == state) && len(out) < limit {
			out = append(out, *t)
		}
	}
	return out, nil
}

func (f *fakeTurns) RetryTurn(_ context.Context, id string) (*TurnItem, error) {
	t, ok := f.turns[id]
	if !ok {
		return nil, fmt.Errorf("turn %s: %w", id, store.ErrNotFound)
	}
	if t.State != "dead" {
		return nil, fmt.Errorf("turn is %s: %w", t.State, store.ErrBadState)
	}
	t.State = "queued"
	return t, nil
}

// fakeReleaser is fakeTurns that also releases held inbound messages.
type fakeReleaser struct {
	fakeTurns
	held map[string]*InboundItem
}

func (f *fakeReleaser) ReleaseInbound(_ context.Context, id string) (*InboundItem, error) {
	it, ok := f.held[id]
	if !ok {
		return nil, fmt.Errorf("inbound %s: %w", id, store.ErrNotFound)
	}
	if it.Disposition != "held" {
		return nil, fmt.Errorf("inbound %s is %s: %w", id, it.Disposition, store.ErrBadState)
	}
	it.Disposition, it.TurnID = "turn", "trn_released"
	return it, nil
}

func TestReleaseRoute(t *testing.T) {
	if len(TurnRoutes(&fakeTurns{}, nil)) != 2 {
		t.Fatal("a Turns that releases nothing got a release route")
	}
	f := &fakeReleaser{held: map[string]*InboundItem{
		"inb_held": {ID: "inb_held", Disposition: "held", Reason: "sender limit: 5 turns a minute"},
		"inb_turn": {ID: "inb_turn", Disposition: "turn"},
	}}
	mux := http.NewServeMux()
	for _, r := range TurnRoutes(f, nil) {
		mux.Handle(r.Method+" "+r.Pattern, r.Handler)
	}
	do := func(target string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", target, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	for target, want := range map[string]int{"/v1/inbound/release/inb_turn": 409, "/v1/inbound/release/inb_nope": 404,
		"/v1/inbound/release/trn_x": 400} {
		if code, body := do(target); code != want {
			t.Errorf("%s: %d %v, want %d", target, code, body, want)
		}
	}
	code, body := do("/v1/inbound/release/inb_held")
	if it, _ := body["inbound"].(map[string]any); code != 200 || it["disposition"] != "turn" || it["turnId"] != "trn_released" {
		t.Errorf("release of a held message: %d %v", code, body)
	}
}

func TestTurnRoutes(t *testing.T) {
	f := &fakeTurns{turns: map[string]*TurnItem{
		"trn_dead": {ID: "trn_dead", State: "dead", Agent: "travel"},
		"trn_done": {ID: "trn_done", State: "answered", Agent: "travel"},
	}}
	mux := http.NewServeMux()
	for _, r := range TurnRoutes(f, nil) {
		mux.Handle(r.Method+" "+r.Pattern, r.Handler)
	}
	do := func(method, target string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	if code, body := do("GET", "/v1/turns?state=dead"); code != 200 || len(body["turns"].([]any)) != 1 {
		t.Errorf("dead turns: %d %v", code, body)
	}
	for _, q := range []string{"state=gone", "limit=0", "limit=x", "color=red", "state=dead&state=queued"} {
		if code, body := do("GET", "/v1/turns?"+q); code != 400 || body["problems"] == nil {
			t.Errorf("?%s: %d %v, want 400 naming the problem", q, code, body)
		}
	}
	if code, _ := do("POST", "/v1/turns/trn_done/retry"); code != 409 {
		t.Errorf("retry of an answered turn: %d, want 409", code)
	}
	if code, _ := do("POST", "/v1/turns/trn_nope/retry"); code != 404 {
		t.Errorf("retry of an unknown turn: %d, want 404", code)
	}
	if code, _ := do("POST", "/v1/turns/dlv_x/retry"); code != 400 {
		t.Errorf("retry of a delivery id: %d, want 400", code)
	}
	if code, body := do("POST", "/v1/turns/trn_dead/retry"); code != 200 || body["turn"].(map[string]any)["state"] != "queued" {
		t.Errorf("retry of a dead turn: %d %v", code, body)
	}
}
