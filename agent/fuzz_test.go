package agent

import (
	"encoding/json"
	"net/url"
	"testing"
)

var seedTask10 = `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"ok","metadata":{"partType":"response"}},{"data":{"approvalId":"a"},"metadata":{"partType":"approval-request"}}]}},"artifacts":[{"artifactId":"a1","parts":[{"url":"https://x/y.pdf","filename":"y.pdf","mediaType":"application/pdf"},{"raw":"aGk=","filename":"h.txt"}]}],"history":[{"messageId":"u","role":"ROLE_USER","parts":[{"text":"hi"}]}]}`

var seedTask03 = `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"input-required","message":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"ok"},{"kind":"data","data":{"a":1}}]}},"artifacts":[{"artifactId":"a1","parts":[{"kind":"file","file":{"name":"y.pdf","mimeType":"application/pdf","uri":"https://x/y.pdf"}},{"kind":"file","file":{"bytes":"aGk="}}]}],"history":[{"kind":"message","messageId":"u","role":"user","parts":[{"kind":"text","text":"hi"}]}]}`

// roundTrip10 checks that what the 1.0 decoder accepts re-encodes to
// something it accepts again, unchanged.
func roundTrip10(t *testing.T, task *Task) {
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	again, err := DecodeTask(b)
	if err != nil {
		t.Fatalf("re-decode %s: %v", b, err)
	}
	b2, _ := json.Marshal(again)
	if string(b) != string(b2) {
		t.Fatalf("round trip changed:\n%s\n%s", b, b2)
	}
}

func FuzzDecodeTask(f *testing.F) {
	f.Add([]byte(seedTask10))
	f.Add([]byte(`{"id":"t","status":{"state":"TASK_STATE_COMPLETED"}}`))
	f.Add([]byte(`{"id":"t","status":{"state":"TASK_STATE_DONE"}}`))
	f.Add([]byte(`{"id":"t","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"a","data":1}]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := DecodeTask(b)
		if err != nil {
			return
		}
		if task.ID == "" || !knownStates[task.Status.State] {
			t.Fatalf("accepted %+v", task)
		}
		roundTrip10(t, task)
		_ = TaskEnvelope(task, testNow)
	})
}

func FuzzDecodeSendResult(f *testing.F) {
	f.Add([]byte(`{"task":` + seedTask10 + `}`))
	f.Add([]byte(`{"message":{"messageId":"m","contextId":"c","role":"ROLE_AGENT","parts":[{"text":"hello"}]}}`))
	f.Add([]byte(`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[]},"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, task, err := DecodeSendResult(b)
		if err != nil {
			return
		}
		if (m == nil) == (task == nil) {
			t.Fatalf("want exactly one of message, task: %v %v", m, task)
		}
		if m != nil {
			if m.MessageID == "" || (m.Role != RoleUser && m.Role != RoleAgent) {
				t.Fatalf("accepted %+v", m)
			}
			_ = MessageEnvelope(m, "complete", testNow)
		} else {
			roundTrip10(t, task)
		}
	})
}

func FuzzDecode03(f *testing.F) {
	f.Add([]byte(seedTask03))
	f.Add([]byte(`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hello"}]}`))
	f.Add([]byte(`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","data":{}}]}`))
	f.Add([]byte(`{"kind":"task","id":"t","status":{"state":"weird"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, task, err := DecodeSendResult03(b)
		if err != nil {
			return
		}
		if (m == nil) == (task == nil) {
			t.Fatal("want exactly one of message, task")
		}
		if task != nil {
			if task.ID == "" || !knownStates[task.Status.State] {
				t.Fatalf("accepted %+v", task)
			}
			// A 0.3 task is a valid 1.0 task once converted.
			roundTrip10(t, task)
			_ = TaskEnvelope(task, testNow)
		}
		if m != nil {
			// And a 0.3 message re-encodes for the 0.3 wire.
			if _, err := json.Marshal(toMessage03(m)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzDecodeRPCResponse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"abc","result":{"task":{}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"abc","error":{"code":-32009,"message":"no","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"VERSION_NOT_SUPPORTED","domain":"a2a-protocol.org"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"abc","error":{"code":-32001,"message":"x","data":{"error":"t"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"other","result":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := DecodeRPCResponse(b, "abc", V10)
		if err == nil && res == nil {
			t.Fatal("no error and no result")
		}
		if ae, ok := err.(*Error); ok {
			_ = ae.Error()
			_ = ae.Permanent()
		}
	})
}

func FuzzDecodeRESTError(f *testing.F) {
	f.Add(404, []byte(`{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`))
	f.Add(400, []byte(`{"error":{"code":400,"details":{"reason":"VERSION_NOT_SUPPORTED"}}}`))
	f.Add(502, []byte(`<html>bad gateway</html>`))
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		e := DecodeRESTError(status, b)
		if e.Status != status || len(e.Message) > 200 || len(e.Reason) > 200 {
			t.Fatalf("%+v", e)
		}
		_ = e.Error()
	})
}

func FuzzDecodeCard(f *testing.F) {
	f.Add([]byte(`{"name":"a","supportedInterfaces":[{"url":"http://h/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0","tenant":"t"}]}`))
	f.Add([]byte(`{"name":"a","url":"http://h/","protocolVersion":"0.3.0","preferredTransport":"JSONRPC","additionalInterfaces":[{"url":"http://h/rest","transport":"HTTP+JSON"}]}`))
	f.Add([]byte(`{"schemaVersion":"1.0","transports":[{"protocol":"a2a","version":"1.0","endpoint":"https://h/a2a"}]}`))
	f.Add([]byte(`{"supportedInterfaces":[{"url":"ftp://h","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`))
	base, _ := url.Parse("http://h/.well-known/agent-card.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		ifaces, err := DecodeCard(b, base)
		if err != nil {
			return
		}
		if len(ifaces) == 0 || len(ifaces) > 3*maxInterfaces+1 {
			t.Fatalf("%d interfaces", len(ifaces))
		}
		for _, i := range ifaces {
			u, err := url.Parse(i.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || i.Binding == "" || i.Version == "" {
				t.Fatalf("accepted %+v", i)
			}
		}
		if p, ok := Pick(ifaces); ok && p.Version != V10 && p.Version != V03 {
			t.Fatalf("picked %+v", p)
		}
	})
}
