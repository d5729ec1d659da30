// Package twiliotest is the fake Twilio the tests share: an http.Handler
// that answers the Messages API (create, fetch by SID, list by To/From)
// and the Content API's create (POST /v1/Content) the way Twilio does — JSON message resources, Twilio's error JSON, HTTP
// basic auth with the account SID and auth token — keeps what was created,
// and can be told to fail, hang or answer any POST or GET. No real peer can
// stand in for Twilio, so this fake is the peer. Production code never
// imports this package.
package twiliotest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is a canned answer to one request.
type Reply struct {
	Status int
	Header map[string]string
	Body   string
	// Hang answers nothing until the client gives up; the message is
	// created all the same, as Twilio does when the response is lost.
	Hang bool
}

// Error is Twilio's error JSON with the given HTTP status and error code.
func Error(status, code int, msg string) Reply {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code), "status": status})
	return Reply{Status: status, Body: string(b), Header: map[string]string{"Content-Type": "application/json"}}
}

// Message is one created message, as the POST's form gave it.
type Message struct {
	SID, From, To, Body                               string
	ContentSID, ContentVariables, MessagingServiceSID string
	Created                                           time.Time
}

// Server is the fake. Its exported fields are set before it serves.
type Server struct {
	// Account and Token are the only credentials it accepts.
	Account, Token string
	// Fail, when set, is asked for every authenticated POST that no queued
	// reply answered (n counts the POSTs from 1; body is the Body, or the
	// content variables when there is none); a non-nil reply is sent
	// instead of creating the message.
	Fail func(n int, to, body string) *Reply
	// Now stamps created messages; time.Now when nil.
	Now func() time.Time
	// URL is the base URL when the server was started by Start.
	URL string

	mu       sync.Mutex
	contents []Content
	cqueue   []Reply // answers the next Content API POSTs
	posts    int
	authBad  int
	skip     int
	queue    []Reply // answers the next POSTs
	getQueue []Reply // answers the next GETs
	forms    []url.Values
	created  []*Message
}

// Content is one content created through the Content API: its SID and
// the JSON request body.
type Content struct {
	SID  string
	Body []byte
}

// FailContent answers the next Content API POSTs with r, one each.
func (f *Server) FailContent(r ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cqueue = append(f.cqueue, r...)
}

// Contents returns every content created, oldest first.
func (f *Server) Contents() []Content {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Content(nil), f.contents...)
}

// New returns a fake that accepts account and token; serve it with
// httptest or net/http (or Start it).
func New(account, token string) *Server { return &Server{Account: account, Token: token} }

// Start serves a new fake on a local port until the test ends.
func Start(t testing.TB, account, token string) *Server {
	f := New(account, token)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// FailNext answers the next POSTs with r, one each, in order.
func (f *Server) FailNext(r ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, r...)
}

// FailAfter lets n POSTs through, then answers r once.
func (f *Server) FailAfter(n int, r Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skip = n
	f.queue = append(f.queue, r)
}

// FailGet answers the next GETs with r, one each, in order.
func (f *Server) FailGet(r ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.getQueue = append(f.getQueue, r...)
}

// Posts is the number of authenticated, readable POSTs.
func (f *Server) Posts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts
}

// AuthFailures is the number of requests refused for their credentials.
func (f *Server) AuthFailures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.authBad
}

// LastForm is the form of the last POST, nil before the first.
func (f *Server) LastForm() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.forms) == 0 {
		return nil
	}
	return f.forms[len(f.forms)-1]
}

// Created returns every created message, oldest first.
func (f *Server) Created() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Message, len(f.created))
	for i, m := range f.created {
		out[i] = *m
	}
	return out
}

// Matching returns the SIDs created for to whose body (or content
// variables) contains marker.
func (f *Server) Matching(to, marker string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sids []string
	for _, m := range f.created {
		if m.To == to && strings.Contains(m.Body+m.ContentVariables, marker) {
			sids = append(sids, m.SID)
		}
	}
	return sids
}

func (f *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != f.Account || pass != f.Token {
		f.mu.Lock()
		f.authBad++
		f.mu.Unlock()
		write(w, Error(401, 20003, "Authenticate"))
		return
	}
	prefix := "/2010-04-01/Accounts/" + f.Account + "/Messages"
	if r.Method == http.MethodGet {
		f.mu.Lock()
		var rep *Reply
		if len(f.getQueue) > 0 {
			rep = &f.getQueue[0]
			f.getQueue = f.getQueue[1:]
		}
		f.mu.Unlock()
		if rep != nil {
			write(w, *rep)
			return
		}
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/Content":
		f.postContent(w, r)
	case r.Method == http.MethodPost && r.URL.Path == prefix+".json":
		f.post(w, r)
	case r.Method == http.MethodGet && r.URL.Path == prefix+".json":
		to, from := r.URL.Query().Get("To"), r.URL.Query().Get("From")
		f.mu.Lock()
		var out []map[string]any
		for i := len(f.created) - 1; i >= 0 && len(out) < 50; i-- {
			m := f.created[i]
			if m.To == to && (from == "" || m.From == from) {
				out = append(out, f.resource(m))
			}
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"messages": out, "page": 0, "page_size": 50})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix+"/"):
		sid := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix+"/"), ".json")
		f.mu.Lock()
		var found map[string]any
		for _, m := range f.created {
			if m.SID == sid {
				found = f.resource(m)
			}
		}
		f.mu.Unlock()
		if found == nil {
			write(w, Error(404, 20404, "The requested resource "+r.URL.Path+" was not found"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(found)
	default:
		write(w, Error(404, 20404, "not found"))
	}
}

func (f *Server) post(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		return // cut mid-transfer: nothing created
	}
	f.mu.Lock()
	f.posts++
	n := f.posts
	f.forms = append(f.forms, r.PostForm)
	var rep *Reply
	if f.skip > 0 {
		f.skip--
	} else if len(f.queue) > 0 {
		rep = &f.queue[0]
		f.queue = f.queue[1:]
	}
	f.mu.Unlock()
	if rep != nil {
		if rep.Hang {
			<-r.Context().Done()
			f.create(r.PostForm) // created all the same
			return
		}
		write(w, *rep)
		return
	}
	if f.Fail != nil {
		body := r.PostForm.Get("Body")
		if body == "" {
			body = r.PostForm.Get("ContentVariables")
		}
		if rep := f.Fail(n, r.PostForm.Get("To"), body); rep != nil {
			write(w, *rep)
			return
		}
	}
	m := f.create(r.PostForm)
	f.mu.Lock()
	res := f.resource(m)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(res)
}

func (f *Server) postContent(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var req struct {
		FriendlyName string                     `json:"friendly_name"`
		Language     string                     `json:"language"`
		Variables    map[string]string          `json:"variables"`
		Types        map[string]json.RawMessage `json:"types"`
	}
	if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &req) != nil || req.Language == "" || len(req.Types) == 0 {
		write(w, Error(400, 20001, "Invalid content request"))
		return
	}
	f.mu.Lock()
	var rep *Reply
	if len(f.cqueue) > 0 {
		rep = &f.cqueue[0]
		f.cqueue = f.cqueue[1:]
	}
	f.mu.Unlock()
	if rep != nil {
		write(w, *rep)
		return
	}
	var b [16]byte
	rand.Read(b[:])
	sid := "HX" + hex.EncodeToString(b[:])
	f.mu.Lock()
	f.contents = append(f.contents, Content{SID: sid, Body: body})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"sid": sid, "account_sid": f.Account, "friendly_name": req.FriendlyName,
		"language": req.Language, "variables": req.Variables, "types": req.Types,
		"url": "https://content.twilio.com/v1/Content/" + sid})
}

func (f *Server) create(form url.Values) *Message {
	var b [16]byte
	rand.Read(b[:])
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	m := &Message{SID: "SM" + hex.EncodeToString(b[:]), From: form.Get("From"), To: form.Get("To"), Body: form.Get("Body"),
		ContentSID: form.Get("ContentSid"), ContentVariables: form.Get("ContentVariables"),
		MessagingServiceSID: form.Get("MessagingServiceSid"), Created: now()}
	f.mu.Lock()
	f.created = append(f.created, m)
	f.mu.Unlock()
	return m
}

// resource is m as Twilio's JSON message resource; f.mu is held.
func (f *Server) resource(m *Message) map[string]any {
	res := map[string]any{"sid": m.SID, "account_sid": f.Account, "status": "queued", "to": m.To, "from": m.From,
		"body": m.Body, "direction": "outbound-api", "date_created": m.Created.UTC().Format(time.RFC1123Z),
		"num_segments": "1", "api_version": "2010-04-01", "error_code": nil}
	if m.MessagingServiceSID != "" {
		res["messaging_service_sid"] = m.MessagingServiceSID
	}
	return res
}

func write(w http.ResponseWriter, r Reply) {
	for k, v := range r.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(r.Status)
	fmt.Fprint(w, r.Body)
}
