package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
)

type fakeDecider struct {
	mu      sync.Mutex
	got     []envelope.Inbound
	err     error
	discard bool // count nothing (fuzzing)
}

func (f *fakeDecider) HandleInbound(_ context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.discard {
		f.got = append(f.got, in)
	}
	if f.err != nil {
		return envelope.InboundResult{}, f.err
	}
	return envelope.InboundResult{Outcome: "decided", ApprovalID: "appr_1", Decision: in.Decision}, nil
}

func (f *fakeDecider) calls() []envelope.Inbound {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]envelope.Inbound(nil), f.got...)
}

func inboundServer(t testing.TB, clk *fakeclock.Clock, dec Decider) *httptest.Server {
	d := newDeliverer(t, clk, "https://ops.example.org/hook")
	mux := http.NewServeMux()
	mux.Handle("POST /v1/inbound/webhook/{endpoint}", NewInboundHandler(d, dec, clk.Now, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func postSigned(t testing.TB, url string, signer *Signer, id string, ts time.Time, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if signer != nil {
		signer.SetHeaders(req.Header, id, ts, body)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestInboundDecision(t *testing.T) {
	clk := newClock()
	dec := &fakeDecider{}
	srv := inboundServer(t, clk, dec)
	url := srv.URL + "/v1/inbound/webhook/ops"
	good := []byte(`{"approvalId":"appr_1","token":"abcdefghijklmnopqrstuvwxyz","decision":"Approved","reason":" fine by me ","decidedBy":"ops-bot"}`)
	signer := mustSigner(t, vectorSecret)

	code, body := postSigned(t, url, signer, "msg_1", clk.Now(), good)
	if code != 200 || body["outcome"] != "decided" || body["decision"] != "granted" {
		t.Fatalf("good decision: %d %v", code, body)
	}
	got := dec.calls()
	if len(got) != 1 {
		t.Fatalf("decider calls %d", len(got))
	}
	in := got[0]
	if in.Channel != "webhook" || in.From != "ops" || in.Token != "abcdefghijklmnopqrstuvwxyz" || in.Decision != "granted" ||
		in.Reason != "fine by me" || in.MessageID != "webhook:ops:msg_1" || !in.ReceivedAt.Equal(clk.Now()) {
		t.Errorf("inbound %+v", in)
	}

	tests := []struct {
		name   string
		url    string
		signer *Signer
		ts     time.Time
		body   []byte
		want   int
	}{
		{"unsigned", url, nil, clk.Now(), good, 401},
		{"other secret", url, mustSigner(t, otherSecret), clk.Now(), good, 401},
		{"replayed later", url, signer, clk.Now().Add(-6 * time.Minute), good, 401},
		{"unknown endpoint", srv.URL + "/v1/inbound/webhook/nope", signer, clk.Now(), good, 401},
		{"malformed JSON", url, signer, clk.Now(), []byte(`{"token":`), 400},
		{"unknown field", url, signer, clk.Now(), []byte(`{"token":"t","decision":"granted","extra":1}`), 400},
		{"no token", url, signer, clk.Now(), []byte(`{"decision":"granted"}`), 400},
		{"unclear decision", url, signer, clk.Now(), []byte(`{"token":"t","decision":"maybe"}`), 400},
		{"too large", url, signer, clk.Now(), []byte(`{"token":"t","decision":"granted","reason":"` + strings.Repeat("x", MaxInboundBody) + `"}`), 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(dec.calls())
			code, body := postSigned(t, tt.url, tt.signer, "msg_x", tt.ts, tt.body)
			if code != tt.want {
				t.Fatalf("status %d (%v), want %d", code, body, tt.want)
			}
			if len(dec.calls()) != before {
				t.Fatal("decider called for a refused request")
			}
		})
	}

	// Unknown and known endpoints answer a bad request alike: endpoint
	// names cannot be enumerated.
	codeU, bodyU := postSigned(t, srv.URL+"/v1/inbound/webhook/nope", signer, "msg_u", clk.Now(), good)
	codeK, bodyK := postSigned(t, url, mustSigner(t, otherSecret), "msg_k", clk.Now(), good)
	if codeU != codeK || fmt.Sprint(bodyU) != fmt.Sprint(bodyK) {
		t.Errorf("unknown endpoint answers %d %v, known endpoint with a bad signature %d %v", codeU, bodyU, codeK, bodyK)
	}

	dec.err = errors.New("store down")
	if code, body := postSigned(t, url, signer, "msg_2", clk.Now(), good); code != 500 || strings.Contains(body["error"].(string), "store down") {
		t.Errorf("decider failure: %d %v", code, body)
	}
}

func FuzzInboundDecision(f *testing.F) {
	f.Add([]byte(`{"approvalId":"appr_1","token":"abc","decision":"granted","reason":"ok","decidedBy":"x"}`))
	f.Add([]byte(`{"token":"abc","decision":"DENIED"}`))
	f.Add([]byte(`{"token":"","decision":"granted"}`))
	f.Add([]byte(`{"token":"a b","decision":"deny"}`))
	f.Add([]byte(`{"token":"t","decision":"granted","reason":"\xff"}`))
	f.Add([]byte(`{"token":"t","decision":"granted"} {}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	clk := newClock()
	dec := &fakeDecider{discard: true}
	d := newDeliverer(f, clk, "https://ops.example.org/hook")
	h := NewInboundHandler(d, dec, clk.Now, nil)
	signer := mustSigner(f, vectorSecret)
	f.Fuzz(func(t *testing.T, b []byte) {
		pd, err := ParseDecision(b)
		if err == nil {
			if pd.Token == "" || (pd.Decision != envelope.DecisionGranted && pd.Decision != envelope.DecisionDenied) {
				t.Fatalf("accepted %q as %+v", b, pd)
			}
			if !utf8.ValidString(pd.Reason) || !utf8.ValidString(pd.DecidedBy) {
				t.Fatalf("accepted invalid UTF-8: %+v", pd)
			}
		}
		// Through the handler, signed: 200 exactly when ParseDecision accepts.
		req := httptest.NewRequest(http.MethodPost, "/v1/inbound/webhook/ops", bytes.NewReader(b))
		req.SetPathValue("endpoint", "ops")
		signer.SetHeaders(req.Header, "msg_f", clk.Now(), b)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case err == nil && rec.Code != 200:
			t.Fatalf("valid decision %q answered %d", b, rec.Code)
		case err != nil && len(b) <= MaxInboundBody && rec.Code != 400:
			t.Fatalf("invalid decision %q answered %d", b, rec.Code)
		}
	})
}
