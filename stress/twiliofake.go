package stress

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Credentials the fake Twilio accepts.
const (
	TwilioAccount = "AC0123456789abcdef0123456789abcdef"
	TwilioToken   = "0123456789abcdef0123456789abcdef"
)

// TwilioReply is a canned answer to one POST.
type TwilioReply struct {
	Status int
	Header map[string]string
	Body   string
}

// TwilioError is Twilio's error JSON with the given HTTP status and code.
func TwilioError(status, code int, msg string) *TwilioReply {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code), "status": status})
	return &TwilioReply{Status: status, Body: string(b), Header: map[string]string{"Content-Type": "application/json"}}
}

// TwilioMessage is one created message.
type TwilioMessage struct {
	SID, From, To, Body, ContentSID, ContentVariables string
	Created                                           time.Time
}

// FakeTwilio answers the Messages API (create, fetch by SID, list by
// To/From) like Twilio, records what was created by From/To/Body, and can
// be told to fail a POST (Fail). A POST whose form cannot be read (a
// request cut mid-transfer) creates nothing.
type FakeTwilio struct {
	// Fail, when set, is asked for every authenticated POST (n counts them
	// from 1); a non-nil reply is sent instead of creating the message.
	Fail func(n int, to, body string) *TwilioReply
	Now  func() time.Time

	mu      sync.Mutex
	posts   int
	created []*TwilioMessage
	byKey   map[string][]string
}

// NewFakeTwilio builds the fake; serve it with httptest or net/http.
func NewFakeTwilio() *FakeTwilio {
	return &FakeTwilio{Now: time.Now, byKey: map[string][]string{}}
}

// Key is how messages are recorded: our From, their To, and the Body (or
// the content template variables when there is no body).
func TwilioKey(from, to, body string) string { return from + "\x00" + to + "\x00" + body }

func (f *FakeTwilio) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != TwilioAccount || pass != TwilioToken {
		writeTwilio(w, TwilioError(401, 20003, "Authenticate"))
		return
	}
	prefix := "/2010-04-01/Accounts/" + TwilioAccount + "/Messages"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == prefix+".json":
		if err := r.ParseForm(); err != nil {
			return // cut mid-transfer: nothing created
		}
		f.mu.Lock()
		f.posts++
		n := f.posts
		f.mu.Unlock()
		to, body := r.PostForm.Get("To"), r.PostForm.Get("Body")
		if body == "" {
			body = r.PostForm.Get("ContentVariables")
		}
		if f.Fail != nil {
			if rep := f.Fail(n, to, body); rep != nil {
				writeTwilio(w, rep)
				return
			}
		}
		m := f.create(r.PostForm.Get("From"), to, body, r.PostForm.Get("ContentSid"), r.PostForm.Get("ContentVariables"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(resource(m))
	case r.Method == http.MethodGet && r.URL.Path == prefix+".json":
		to, from := r.URL.Query().Get("To"), r.URL.Query().Get("From")
		f.mu.Lock()
		var out []map[string]any
		for i := len(f.created) - 1; i >= 0 && len(out) < 50; i-- {
			m := f.created[i]
			if m.To == to && (from == "" || m.From == from) {
				out = append(out, resource(m))
			}
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"messages": out, "page": 0, "page_size": 50})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix+"/"):
		sid := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix+"/"), ".json")
		f.mu.Lock()
		var found *TwilioMessage
		for _, m := range f.created {
			if m.SID == sid {
				found = m
			}
		}
		f.mu.Unlock()
		if found == nil {
			writeTwilio(w, TwilioError(404, 20404, "The requested resource "+r.URL.Path+" was not found"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resource(found))
	default:
		writeTwilio(w, TwilioError(404, 20404, "not found"))
	}
}

func resource(m *TwilioMessage) map[string]any {
	return map[string]any{"sid": m.SID, "account_sid": TwilioAccount, "status": "queued", "to": m.To, "from": m.From,
		"body": m.Body, "direction": "outbound-api", "date_created": m.Created.UTC().Format(time.RFC1123Z),
		"num_segments": "1", "api_version": "2010-04-01", "error_code": nil}
}

func (f *FakeTwilio) create(from, to, body, contentSID, vars string) *TwilioMessage {
	var b [16]byte
	rand.Read(b[:])
	m := &TwilioMessage{SID: "SM" + hex.EncodeToString(b[:]), From: from, To: to, Body: body,
		ContentSID: contentSID, ContentVariables: vars, Created: f.Now()}
	f.mu.Lock()
	f.created = append(f.created, m)
	k := TwilioKey(from, to, body)
	f.byKey[k] = append(f.byKey[k], m.SID)
	f.mu.Unlock()
	return m
}

func writeTwilio(w http.ResponseWriter, r *TwilioReply) {
	for k, v := range r.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(r.Status)
	fmt.Fprint(w, r.Body)
}

// Posts is the number of authenticated, readable POSTs.
func (f *FakeTwilio) Posts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts
}

// Created returns every created message.
func (f *FakeTwilio) Created() []TwilioMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]TwilioMessage, len(f.created))
	for i, m := range f.created {
		out[i] = *m
	}
	return out
}

// Matching returns the SIDs created for to whose body contains marker.
func (f *FakeTwilio) Matching(to, marker string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sids []string
	for _, m := range f.created {
		if m.To == to && strings.Contains(m.Body, marker) {
			sids = append(sids, m.SID)
		}
	}
	return sids
}
