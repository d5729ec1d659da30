package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var (
	seedPushStatus10   = `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"done"}]}}}}`
	seedPushArtifact10 = `{"artifactUpdate":{"taskId":"t1","contextId":"c1","append":false,"lastChunk":true,"artifact":{"artifactId":"a1","name":"brief","parts":[{"text":"Brief"}]}}}`
	seedPushStatus03   = `{"kind":"status-update","taskId":"t1","contextId":"c1","final":true,"status":{"state":"completed"}}`
	seedPushArtifact03 = `{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"Brief"}]}}`
)

// FuzzDecodeUpdate: whatever a push body holds, DecodeUpdate returns an
// update of a known kind with what that kind needs, or an error.
func FuzzDecodeUpdate(f *testing.F) {
	for _, s := range []string{`{"task":` + seedTask10 + `}`, seedTask10, seedTask03, seedPushStatus10, seedPushArtifact10,
		seedPushStatus03, seedPushArtifact03, `{"message":{"messageId":"m","role":"ROLE_AGENT","taskId":"t1","parts":[]}}`,
		`{"task":{"id":"t"},"statusUpdate":{}}`, `{"kind":"x"}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeUpdate(b)
		if err != nil {
			return
		}
		switch u.Kind {
		case UpdateTask:
			if u.Task == nil || u.Task.ID == "" || u.TaskID != u.Task.ID || !knownStates[u.Task.Status.State] {
				t.Fatalf("task update %+v", u)
			}
		case UpdateStatus:
			if u.Status == nil || u.TaskID == "" || !knownStates[u.Status.State] {
				t.Fatalf("status update %+v", u)
			}
		case UpdateArtifact:
			if u.Artifact == nil || u.Artifact.ArtifactID == "" || u.TaskID == "" {
				t.Fatalf("artifact update %+v", u)
			}
		case UpdateMessage:
			if u.Message == nil || u.Message.MessageID == "" {
				t.Fatalf("message update %+v", u)
			}
		default:
			t.Fatalf("kind %q", u.Kind)
		}
		pt := &pushTurn{}
		pt.apply(u) // never panics
	})
}

// TestDecodeUpdateShapes: every shape the SDKs post decodes to its kind,
// in both generations; what is not one is refused naming the problem.
func TestDecodeUpdateShapes(t *testing.T) {
	for _, c := range []struct {
		body, kind, gen string
	}{
		{`{"task":` + seedTask10 + `}`, "task", V10},
		{seedTask10, "task", V10},
		{seedPushStatus10, "status-update", V10},
		{seedPushArtifact10, "artifact-update", V10},
		{`{"message":{"messageId":"m","role":"ROLE_AGENT","taskId":"t1","parts":[{"text":"hi"}]}}`, "message", V10},
		{seedTask03, "task", V03},
		{seedPushStatus03, "status-update", V03},
		{seedPushArtifact03, "artifact-update", V03},
		{`{"kind":"message","messageId":"m","role":"agent","taskId":"t1","parts":[{"kind":"text","text":"hi"}]}`, "message", V03},
	} {
		u, err := DecodeUpdate([]byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if string(u.Kind) != c.kind || u.Generation != c.gen || u.TaskID != "t1" {
			t.Errorf("%s: kind %s generation %s task %s", c.body, u.Kind, u.Generation, u.TaskID)
		}
	}
	for body, want := range map[string]string{
		`garbage`: "not a JSON object",
		`{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED"}},"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED"}}}`: "exactly one",
		`{}`: "need one of",
		`{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_DONE"}}}`: "not a known task state",
		`{"statusUpdate":{"status":{"state":"TASK_STATE_COMPLETED"}}}`:         "taskId: missing",
		`{"artifactUpdate":{"taskId":"t"}}`:                                    "artifact: missing",
		`{"kind":"status-update","taskId":"t","status":{"state":"done"}}`:      "not a known task state",
		`{"kind":"push"}`: `kind: "push"`,
	} {
		if _, err := DecodeUpdate([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", body, err, want)
		}
	}
}

// TestPushRoute: the bad inputs of the push route, each refused or
// ignored with its reason, and the fold of a turn's updates.
func TestPushRoute(t *testing.T) {
	p := NewPushes([]byte(strings.Repeat("s", 32)), "https://beachd.example.org/", nil)
	p.maxBytes = 4 << 10
	post := func(id, token, body string) (int, string) {
		r := httptest.NewRequest(http.MethodPost, PushPath+id, strings.NewReader(body))
		if token != "" {
			r.Header.Set(PushTokenHeader, token)
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		var e pushError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		return w.Code, e.Error
	}
	pt := p.register(context.Background(), "travel")
	other := p.register(context.Background(), "travel")
	p.setTask(pt, "t1")
	if u := p.URL(pt.id); u != "https://beachd.example.org/v1/a2a/push/"+pt.id {
		t.Errorf("push URL %s", u)
	}
	tok := p.Token(pt.id)
	cases := []struct {
		name, id, token, body string
		code                  int
		reason                string
	}{
		{"no token", pt.id, "", seedPushStatus10, 401, "token missing or wrong"},
		{"wrong token", pt.id, tok + "x", seedPushStatus10, 401, "token missing or wrong"},
		{"another turn's token", other.id, tok, seedPushStatus10, 401, "token missing or wrong"},
		{"wrong token, unknown turn", "beachd-unknown", tok, seedPushStatus10, 401, "token missing or wrong"},
		{"long id", strings.Repeat("x", 200), tok, seedPushStatus10, 401, "token missing or wrong"},
		{"garbage", pt.id, tok, "\x00garbage", 400, "not a JSON object"},
		{"huge", pt.id, tok, `{"task":"` + strings.Repeat("x", 5<<10) + `"}`, 413, "larger than 4096 bytes"},
		{"unknown turn", "beachd-unknown", p.Token("beachd-unknown"), seedPushStatus10, 410, "not waiting for an answer (finished or unknown)"},
		{"another task", pt.id, tok, strings.Replace(seedPushStatus10, `"t1"`, `"t2"`, 1), 400, "is not this turn's task"},
	}
	for _, c := range cases {
		code, reason := post(c.id, c.token, c.body)
		if code != c.code || !strings.Contains(reason, c.reason) {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, reason, c.code, c.reason)
		}
	}
	// No update got through: the turn knows nothing yet.
	if pt.task != nil {
		t.Fatalf("a refused push changed the turn: %+v", pt.task)
	}
	// Parts of a task, no whole task yet: settled, but the task must be read.
	if code, _ := post(pt.id, tok, seedPushArtifact10); code != 204 {
		t.Fatalf("artifact update: %d", code)
	}
	if code, _ := post(pt.id, tok, seedPushStatus10); code != 204 {
		t.Fatalf("status update: %d", code)
	}
	if _, ok := p.settled(pt); ok || !p.needsPoll(pt) {
		t.Fatal("settled from parts alone; want a read of the task")
	}
	// The whole task, then an appended chunk and the final status.
	task := `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`
	chunk := strings.Replace(seedPushArtifact10, `"append":false`, `"append":true`, 1)
	for _, b := range []string{task, seedPushArtifact10, chunk, seedPushStatus10} {
		if code, reason := post(pt.id, tok, b); code != 204 {
			t.Fatalf("%s: %d %s", b, code, reason)
		}
	}
	got, ok := p.settled(pt)
	if !ok || len(got.Artifacts) != 1 || len(got.Artifacts[0].Parts) != 2 || got.Status.State != StateCompleted {
		t.Fatalf("settled %v: %+v", ok, got)
	}
	// Finished: the same final update again is ignored, with the reason.
	p.release(pt)
	if code, reason := post(pt.id, tok, seedPushStatus10); code != 410 || !strings.Contains(reason, "finished") {
		t.Errorf("push after the turn finished: %d %q", code, reason)
	}
	// A GET with the right token is told to POST; without, 401.
	r := httptest.NewRequest(http.MethodGet, PushPath+other.id, nil)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Errorf("GET without token: %d", w.Code)
	}
	r.Header.Set(PushTokenHeader, p.Token(other.id))
	w = httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Code != 405 {
		t.Errorf("GET with token: %d", w.Code)
	}
}
