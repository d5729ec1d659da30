package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// sendAPI is the delivery API on a store, with the channels, endpoint and
// agent `beachd dev` has; posts counts the requests that reached it.
func sendAPI(t *testing.T) (*bolt.DB, *httptest.Server, *atomic.Int32) {
	t.Helper()
	db := storetest.Open(t, bolt.Options{})
	ing := api.NewIngester(api.IngestConfig{Registry: envelope.NewRegistry(),
		Channels:  map[string]bool{"email": true, "sms": true, "webhook": true},
		Endpoints: map[string]bool{devSinkEndpoint: true}, Agents: map[string]bool{devAgentName: true, "travel": true}}, db, nil, nil, nil)
	srv, err := api.New(api.Config{APIKeys: []string{"key"}}, db, ing, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var posts atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return db, hs, &posts
}

func sendCLI(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(append([]string{"send"}, args...), "--url", url, "--api-key", "key"),
		func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

// A file that is a whole delivery request — the README's
// testdata/dev-request.json — is sent as it is, to the recipients it
// names; --to replaces them and --agent its agent.
func TestSendDeliveryRequestFile(t *testing.T) {
	db, hs, _ := sendAPI(t)
	code, out, errs := sendCLI(t, hs.URL, "../../testdata/dev-request.json")
	if code != 0 {
		t.Fatalf("send testdata/dev-request.json: %d %s %s", code, out, errs)
	}
	var acc api.Accepted
	if err := json.Unmarshal([]byte(out), &acc); err != nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	var got []string
	for _, d := range acc.Deliveries {
		got = append(got, d.Channel+":"+d.To)
	}
	if want := "webhook:dev-sink email:you@beachd.localhost sms:+15555550100"; strings.Join(got, " ") != want {
		t.Errorf("deliveries %v, want %s", got, want)
	}
	// Byte for byte: the stored envelope is the file's.
	file, _ := os.ReadFile("../../testdata/dev-request.json")
	var req struct{ Envelope json.RawMessage }
	json.Unmarshal(file, &req)
	stored, err := db.Envelope(t.Context(), acc.ID)
	if err != nil || !bytes.Equal(stored.Envelope, req.Envelope) {
		t.Errorf("stored envelope differs from the file's (%v)", err)
	}

	code, out, errs = sendCLI(t, hs.URL, "../../testdata/dev-request.json", "--to", "email:bob@example.org", "--agent", "travel")
	if code != 0 {
		t.Fatalf("with --to: %d %s", code, errs)
	}
	acc = api.Accepted{}
	json.Unmarshal([]byte(out), &acc)
	if len(acc.Deliveries) != 1 || acc.Deliveries[0].To != "bob@example.org" {
		t.Errorf("--to did not replace the file's recipients: %s", out)
	}
	if rec, err := db.Envelope(t.Context(), acc.ID); err != nil || rec.Agent != "travel" {
		t.Errorf("--agent: stored %+v %v", rec, err)
	}

	// An envelope file still needs --to, and says so.
	envFile := filepath.Join(t.TempDir(), "env.json")
	os.WriteFile(envFile, req.Envelope, 0o600)
	if code, _, errs := sendCLI(t, hs.URL, envFile); code != 2 || !strings.Contains(errs, "--to is required") || !strings.Contains(errs, `"to"`) {
		t.Errorf("envelope without --to: %d %q", code, errs)
	}
	noTo := filepath.Join(t.TempDir(), "req.json")
	os.WriteFile(noTo, []byte(`{"envelope":`+string(req.Envelope)+`,"to":[]}`), 0o600)
	if code, _, errs := sendCLI(t, hs.URL, noTo); code != 2 || !strings.Contains(errs, "names no recipients") {
		t.Errorf("request without recipients: %d %q", code, errs)
	}
}

// What is wrong with a file is said as the API says it — a title, then
// each problem with its path — not as a Go error, and before anything is
// sent; a wrong member name says which was meant. What only the server can
// judge comes back from it, printed the same way.
func TestSendSaysWhatIsWrong(t *testing.T) {
	_, hs, posts := sendAPI(t)
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	env, _ := os.ReadFile("../../testdata/envelopes/flight-results.json")
	for name, tt := range map[string]struct {
		file string
		want []string
	}{
		"not JSON": {file("broken.json", `{"role": "agent", "parts": [`), []string{"broken.json: invalid envelope\n  malformed JSON: unexpected end of input"}},
		"wrong recipient member": {file("type.json", `{"envelope":`+string(env)+`,"to":[{"type":"email","address":"a@example.org"}]}`),
			[]string{"type.json: invalid delivery request\n  to[0].type: unknown field; did you mean \"channel\"?"}},
		"recipients for to": {file("recipients.json", `{"envelope":`+string(env)+`,"recipients":[{"channel":"email","address":"a@example.org"}]}`),
			[]string{"recipients: unknown field; did you mean \"to\"?"}},
		"wrong envelope member": {file("metdata.json", `{"role":"agent","parts":[{"text":"x","metdata":{}}]}`),
			[]string{"metdata.json: invalid envelope\n  parts[0].metdata: unknown field; did you mean \"metadata\"?"}},
	} {
		code, _, errs := sendCLI(t, hs.URL, tt.file, "--to", "email:a@example.org")
		for _, w := range tt.want {
			if code != 1 || !strings.Contains(errs, w) {
				t.Errorf("%s: %d %q, want it to say %q", name, code, errs, w)
			}
		}
		if strings.Contains(errs, "MarshalJSON") || strings.Contains(errs, " json: ") || strings.Contains(errs, "jsontext") {
			t.Errorf("%s: a Go error: %q", name, errs)
		}
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("%d invalid files were sent", n)
	}
	// The server's problems: an unknown channel and endpoint.
	bad := file("bad.json", `{"envelope":`+string(env)+`,"to":[{"channel":"fax","address":"1"},{"channel":"webhook","endpoint":"nope"}]}`)
	code, _, errs := sendCLI(t, hs.URL, bad)
	if code != 1 || !strings.Contains(errs, "invalid request (HTTP 400)\n  to[0].channel: ") || !strings.Contains(errs, "\n  to[1].endpoint: ") {
		t.Errorf("server problems: %d %q", code, errs)
	}
}
