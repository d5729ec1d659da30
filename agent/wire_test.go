package agent

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)

func TestDecodersAreStrict(t *testing.T) {
	bad10 := map[string]string{
		"two contents":     `{"id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"a","data":{}}]}}}`,
		"no content":       `{"id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"metadata":{}}]}}}`,
		"0.3 role":         `{"id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"agent","parts":[]}}}`,
		"0.3 state":        `{"id":"t","status":{"state":"completed"}}`,
		"unspecified":      `{"id":"t","status":{"state":"TASK_STATE_UNSPECIFIED"}}`,
		"no id":            `{"status":{"state":"TASK_STATE_COMPLETED"}}`,
		"bad base64":       `{"id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"raw":"!!"}]}}}`,
		"duplicate member": `{"id":"t","id":"u","status":{"state":"TASK_STATE_COMPLETED"}}`,
		"wrong case":       `{"ID":"t","status":{"state":"TASK_STATE_COMPLETED"}}`,
		"array":            `[]`,
	}
	for name, b := range bad10 {
		if _, err := DecodeTask([]byte(b)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad03 := map[string]string{
		"no kind":       `{"messageId":"m","role":"agent","parts":[]}`,
		"1.0 role":      `{"kind":"message","messageId":"m","role":"ROLE_AGENT","parts":[]}`,
		"kind mismatch": `{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","data":{}}]}`,
		"file both":     `{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"file","file":{"uri":"http://x","bytes":"aGk="}}]}`,
		"1.0 state":     `{"kind":"task","id":"t","status":{"state":"TASK_STATE_COMPLETED"}}`,
	}
	for name, b := range bad03 {
		if _, _, err := DecodeSendResult03([]byte(b)); err == nil {
			t.Errorf("0.3 %s: accepted", name)
		}
	}
	if _, _, err := DecodeSendResult([]byte(`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}`)); err == nil {
		t.Error("both message and task: accepted")
	}
	var many strings.Builder
	many.WriteString(`{"messageId":"m","role":"ROLE_AGENT","parts":[`)
	for i := 0; i <= maxList; i++ {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"text":""}`)
	}
	many.WriteString(`]}`)
	if _, _, err := DecodeSendResult([]byte(`{"message":` + many.String() + `}`)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%d parts: %v", maxList+1, err)
	}
}

func TestDecodeBothGenerationsAlike(t *testing.T) {
	t10, err := DecodeTask([]byte(seedTask10))
	if err != nil {
		t.Fatal(err)
	}
	t03, err := DecodeTask03([]byte(seedTask03))
	if err != nil {
		t.Fatal(err)
	}
	if t10.Status.State != StateInputRequired || t03.Status.State != StateInputRequired ||
		t03.History[0].Role != RoleUser || t03.Artifacts[0].Parts[0].URL != "https://x/y.pdf" ||
		string(t03.Artifacts[0].Parts[1].Raw) != "hi" || string(t10.Artifacts[0].Parts[1].Raw) != "hi" {
		t.Fatalf("1.0 %+v\n0.3 %+v", t10, t03)
	}
	env := TaskEnvelope(t10, testNow)
	if env.Meta.FinalizedBy != "suspended" || len(env.PartsOf("artifact")) != 2 || len(env.PartsOf("approval-request")) != 1 {
		t.Fatalf("%+v", env)
	}
}

func TestErrorTaxonomy(t *testing.T) {
	cases := []struct {
		err       *Error
		sentinel  error
		permanent bool
	}{
		{&Error{Code: -32001}, ErrTaskNotFound, true},
		{&Error{Code: -32009}, ErrVersionNotSupported, true},
		{&Error{Code: -32603}, ErrInternal, false},
		{&Error{Code: -32006}, ErrInvalidAgentResponse, false},
		{&Error{Code: -32099}, nil, false},
		{&Error{Status: 404, Reason: "TASK_NOT_FOUND"}, ErrTaskNotFound, true},
		{&Error{Status: 400, Reason: "VERSION_NOT_SUPPORTED"}, ErrVersionNotSupported, true},
		{&Error{Status: 401}, nil, true},
		{&Error{Status: 429}, nil, false},
		{&Error{Status: 503}, nil, false},
	}
	for _, c := range cases {
		if c.sentinel != nil && !errors.Is(c.err, c.sentinel) {
			t.Errorf("%v is not %v", c.err, c.sentinel)
		}
		if IsPermanent(c.err) != c.permanent {
			t.Errorf("%v: permanent = %v", c.err, !c.permanent)
		}
	}
}

func TestCardPick(t *testing.T) {
	base, _ := url.Parse("http://agent.example/.well-known/agent-card.json")
	cases := map[string]struct{ card, url, binding, version string }{
		"1.0 json-rpc first": {`{"supportedInterfaces":[{"url":"/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"},{"url":"/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"/old","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]}`,
			"http://agent.example/rpc", BindingJSONRPC, V10},
		"1.0 http+json only": {`{"supportedInterfaces":[{"url":"http://agent.example/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0.0"},{"url":"agent.example:443","protocolBinding":"GRPC","protocolVersion":"1.0"}]}`,
			"http://agent.example/rest", BindingHTTPJSON, V10},
		"0.3 card": {`{"url":"http://agent.example/a2a","protocolVersion":"0.3.0","preferredTransport":"JSONRPC"}`,
			"http://agent.example/a2a", BindingJSONRPC, V03},
		"0.3 grpc preferred, json-rpc additional": {`{"url":"http://agent.example/g","protocolVersion":"0.3.0","preferredTransport":"GRPC","additionalInterfaces":[{"url":"http://agent.example/j","transport":"JSONRPC"}]}`,
			"http://agent.example/j", BindingJSONRPC, V03},
		"beach transports": {`{"schemaVersion":"1.0","transports":[{"protocol":"mcp","version":"stable","endpoint":"http://agent.example/mcp"},{"protocol":"a2a","version":"1.0","endpoint":"http://agent.example/a2a/messages"}]}`,
			"http://agent.example/a2a/messages", BindingJSONRPC, V10},
	}
	for name, c := range cases {
		ifaces, err := DecodeCard([]byte(c.card), base)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		p, ok := Pick(ifaces)
		if !ok || p.URL != c.url || p.Binding != c.binding || p.Version != c.version {
			t.Errorf("%s: picked %+v (%v)", name, p, ok)
		}
	}
	ifaces, err := DecodeCard([]byte(`{"supportedInterfaces":[{"url":"/g","protocolBinding":"GRPC","protocolVersion":"1.0"},{"url":"/x","protocolBinding":"JSONRPC","protocolVersion":"2.0"}]}`), base)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Pick(ifaces); ok {
		t.Error("picked an interface beachd does not speak")
	}
	if msg := errNoCommonVersion(ifaces, "", "").Error(); !strings.Contains(msg, "1.0 GRPC") || !strings.Contains(msg, "2.0 JSONRPC") {
		t.Errorf("error %q does not say what the card offers", msg)
	}
}
