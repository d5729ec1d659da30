package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestDevReplyRefusesCrossOrigin: /dev/reply and the dev agent take posts
// without a key on loopback, so a web page the developer visits must not
// be able to make the browser post to them. Cross-origin browser posts
// (by Sec-Fetch-Site or Origin), browser posts without an Origin, and
// posts whose Host is a rebound DNS name are refused 403 with a sentence;
// a same-origin post and a client that is no browser (curl) are accepted.
func TestDevReplyRefusesCrossOrigin(t *testing.T) {
	d := startDev(t)
	host := strings.TrimPrefix(d.base, "http://")
	port := host[strings.LastIndexByte(host, ':'):]
	post := func(path string, header map[string]string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", d.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	form := func(from string) string {
		return url.Values{"channel": {"sms"}, "from": {from}, "body": {"Flights to Lisbon?"}}.Encode()
	}
	for name, h := range map[string]map[string]string{
		"cross-site by Sec-Fetch-Site": {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
		"same-site other port":         {"Origin": "http://127.0.0.1:9999", "Sec-Fetch-Site": "same-site"},
		"cross-origin by Origin alone": {"Origin": "https://evil.example"},
		"opaque origin":                {"Origin": "null"},
		"browser without Origin":       {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
		"same-origin without Origin":   {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate"},
		"DNS rebinding":                {"Host": "evil.example" + port, "Origin": "http://evil.example" + port, "Sec-Fetch-Site": "same-origin"},
	} {
		code, body := post("/dev/reply", h, form("+447700900501"))
		if code != http.StatusForbidden || !strings.Contains(body, "refused") && !strings.Contains(body, "not this machine") {
			t.Errorf("%s: %d %q, want 403 saying why", name, code, body)
		}
		if code, body := post("/dev/agent/", h, `{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{}}`); code != http.StatusForbidden {
			t.Errorf("%s to the dev agent: %d %q, want 403", name, code, body)
		}
	}
	var in struct{ Inbound []struct{ From string } }
	d.do("GET", "/v1/inbound", nil, "", &in)
	for _, m := range in.Inbound {
		if m.From == "+447700900501" {
			t.Fatalf("a refused post reached the intake: %+v", in.Inbound)
		}
	}
	for name, h := range map[string]map[string]string{
		"same-origin (the console's page)": {"Origin": d.base, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate"},
		"same-origin, older browser":       {"Origin": d.base},
		"localhost":                        {"Host": "localhost" + port, "Origin": "http://localhost" + port, "Sec-Fetch-Site": "same-origin"},
		"curl":                             {},
	} {
		code, body := post("/dev/reply", h, form("+447700900502"))
		if code != http.StatusOK || !strings.Contains(body, `"outcome": "turn"`) {
			t.Errorf("%s: %d %q, want 200 and a turn", name, code, body)
		}
	}
}

// TestDevReplyMediaGuarded: a media URL in a /dev/reply message is content;
// beachd fetches it through the guarded client, so a URL to loopback or to
// the cloud metadata address is not fetched: the turn goes on, and the
// agent is told the attachment is not included because its address was
// refused.
func TestDevReplyMediaGuarded(t *testing.T) {
	var hits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("internal secret"))
	}))
	defer internal.Close()
	d := startDev(t)
	const person = "+447700900503"
	res := d.devSay(`{"channel":"whatsapp","from":"` + person + `","text":"Two photos.","media":[
		{"mediaType":"image/png","filename":"loopback.png","url":"` + internal.URL + `/x.png"},
		{"mediaType":"text/plain","filename":"metadata.txt","url":"http://169.254.169.254/latest/meta-data/iam/"}]}`)
	if res.Outcome != envelope.DispositionTurn {
		t.Fatalf("message: %+v", res)
	}
	var answer string
	poll.Eventually(t, 30*time.Second, "the dev agent's answer", func() bool {
		for _, m := range d.messages().Messages {
			if m.To == person && strings.Contains(m.Body, res.Conversation) {
				answer = m.Body
				return true
			}
		}
		return false
	})
	if hits.Load() != 0 {
		t.Errorf("beachd fetched a media URL on loopback (%d requests)", hits.Load())
	}
	// The note about the attachments follows the text on a line of its own.
	for _, w := range []string{`"Two photos.\n[Attachment 1 of 2 (loopback.png) is not included`, "metadata.txt", "address was refused"} {
		if !strings.Contains(answer, w) {
			t.Errorf("answer %q lacks %q", answer, w)
		}
	}
	if strings.Contains(answer, "internal secret") || strings.Contains(answer, "15 bytes") {
		t.Errorf("answer %q carries the internal server's bytes", answer)
	}
}
