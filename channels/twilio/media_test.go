package twilio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/fetch"
)

// Twilio's OpenAPI description has the Media resource only as its JSON
// metadata (…/Media/{Sid}.json); the media URL an inbound message carries
// (…/Media/{Sid}, no extension) answers with the bytes, by a redirect to
// Twilio's media store, and is not described. So FetchMedia is tested
// against servers shaped like Twilio's: the API host checks basic auth
// and redirects (307) to a signed URL on a second server, the media store,
// which needs no credentials.

const mediaPath = "/2010-04-01/Accounts/" + testAccount + "/Messages/MM0123456789abcdef0123456789abcdef/Media/ME0123456789abcdef0123456789abcdef"

var pngBytes = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 100)...)

type mediaPeers struct {
	api, store *httptest.Server
	mu         sync.Mutex
	apiAuth    []string // the Authorization header of each API request
	storeAuth  []string // the Authorization header of each media store request
	// serve answers the media store request; default: pngBytes as image/png.
	serve func(w http.ResponseWriter, r *http.Request)
	// direct, when set, answers the API request itself (no redirect).
	direct func(w http.ResponseWriter, r *http.Request)
}

func newMediaPeers(t *testing.T) *mediaPeers {
	p := &mediaPeers{}
	p.store = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.storeAuth = append(p.storeAuth, r.Header.Get("Authorization"))
		serve := p.serve
		p.mu.Unlock()
		if r.URL.Query().Get("Signature") != "sig" {
			http.Error(w, "AccessDenied", http.StatusForbidden)
			return
		}
		if serve != nil {
			serve(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	}))
	t.Cleanup(p.store.Close)
	p.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.apiAuth = append(p.apiAuth, r.Header.Get("Authorization"))
		direct := p.direct
		p.mu.Unlock()
		if u, pw, ok := r.BasicAuth(); !ok || u != testAccount || pw != testToken {
			http.Error(w, `{"code":20003,"message":"Authenticate","status":401}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != mediaPath {
			http.Error(w, `{"code":20404,"message":"not found","status":404}`, http.StatusNotFound)
			return
		}
		if direct != nil {
			direct(w, r)
			return
		}
		http.Redirect(w, r, p.store.URL+"/media.twiliocdn.com/"+testAccount+"/abc?Expires=1&Signature=sig", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(p.api.Close)
	return p
}

func (p *mediaPeers) auth() (api, store []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.apiAuth...), append([]string(nil), p.storeAuth...)
}

// mediaClient is a client whose API base is the fake API host and whose
// guarded fetch client may reach the local media store.
func mediaClient(t *testing.T, p *mediaPeers) *Client {
	t.Helper()
	fc, err := fetch.New(fetch.Config{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: testToken, APIBaseURL: p.api.URL, Timeout: 5 * time.Second, MediaFetch: fc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFetchMediaFollowsTheRedirectWithoutCredentials(t *testing.T) {
	p := newMediaPeers(t)
	c := mediaClient(t, p)
	for _, u := range []string{"https://api.twilio.com" + mediaPath, p.api.URL + mediaPath} {
		data, mt, err := c.FetchMedia(context.Background(), u, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if !bytes.Equal(data, pngBytes) || mt != "image/png" {
			t.Errorf("%s: got %d bytes of %q", u, len(data), mt)
		}
	}
	api, store := p.auth()
	if len(api) != 2 || len(store) != 2 {
		t.Fatalf("requests: api %d, store %d", len(api), len(store))
	}
	for _, a := range api {
		if !strings.HasPrefix(a, "Basic ") {
			t.Errorf("API request without basic auth: %q", a)
		}
	}
	for _, a := range store {
		if a != "" {
			t.Errorf("the media store got credentials: %q", a)
		}
	}
}

func TestFetchMediaRefusesURLsOffTwilio(t *testing.T) {
	p := newMediaPeers(t)
	c := mediaClient(t, p)
	bad := []string{
		"",
		"http://api.twilio.com" + mediaPath,
		"https://evil.example.org" + mediaPath,
		"https://api.twilio.com.evil.example.org" + mediaPath,
		"https://user:pw@api.twilio.com" + mediaPath,
		"https://api.twilio.com:8443" + mediaPath,
		"https://api.twilio.com" + mediaPath + "?x=1",
		"https://api.twilio.com/2010-04-01/Accounts/" + testAccount + "/Messages.json",
		"https://api.twilio.com/2010-04-01/Accounts/AC99999999999999999999999999999999/Messages/MM1/Media/ME1",
		"https://api.twilio.com/2010-04-01/Accounts/" + testAccount + "/Messages/MM1/Media/../../../Calls",
		p.store.URL + mediaPath,
		"https://api.twilio.com/" + strings.Repeat("a", 3000) + "/Media/x",
	}
	for _, u := range bad {
		if _, _, err := c.FetchMedia(context.Background(), u, 1<<20); !errors.Is(err, ErrMediaURL) {
			t.Errorf("%q: err = %v, want ErrMediaURL", u, err)
		}
	}
	if api, store := p.auth(); len(api)+len(store) != 0 {
		t.Errorf("a refused URL was fetched: api %d, store %d requests", len(api), len(store))
	}
	if !MediaURLOnTwilio("https://api.twilio.com"+mediaPath) || MediaURLOnTwilio(p.api.URL+mediaPath) {
		t.Error("MediaURLOnTwilio does not single out Twilio's API host")
	}
}

func TestFetchMediaBounds(t *testing.T) {
	ctx := context.Background()
	t.Run("declared length over the bound", func(t *testing.T) {
		p := newMediaPeers(t)
		c := mediaClient(t, p)
		if _, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 50); !errors.Is(err, ErrMediaTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("streamed body over the bound", func(t *testing.T) {
		p := newMediaPeers(t)
		p.serve = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			for range 10 {
				w.Write(pngBytes) // no Content-Length: chunked
				w.(http.Flusher).Flush()
			}
		}
		c := mediaClient(t, p)
		if _, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 500); !errors.Is(err, ErrMediaTooLarge) {
			t.Fatalf("err = %v", err)
		}
		if data, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, int64(10*len(pngBytes))); err != nil || len(data) != 10*len(pngBytes) {
			t.Fatalf("at the bound: %d bytes, %v", len(data), err)
		}
	})
	t.Run("no media type: sniffed", func(t *testing.T) {
		p := newMediaPeers(t)
		p.direct = func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			w.Write(pngBytes)
		}
		c := mediaClient(t, p)
		_, mt, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0)
		if err != nil || mt != "image/png" {
			t.Fatalf("type %q, err %v", mt, err)
		}
	})
	t.Run("unreadable media type", func(t *testing.T) {
		p := newMediaPeers(t)
		p.serve = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "image png;;")
			w.Write(pngBytes)
		}
		c := mediaClient(t, p)
		if _, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0); !errors.Is(err, ErrMediaType) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("media type parameters dropped", func(t *testing.T) {
		p := newMediaPeers(t)
		p.serve = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "Text/Plain; charset=utf-8")
			w.Write([]byte("hello"))
		}
		c := mediaClient(t, p)
		if _, mt, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0); err != nil || mt != "text/plain" {
			t.Fatalf("type %q, err %v", mt, err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		p := newMediaPeers(t)
		release := make(chan struct{})
		p.serve = func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		defer close(release)
		c := mediaClient(t, p)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, _, err := c.FetchMedia(cctx, p.api.URL+mediaPath, 0); err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %s", d)
		}
	})
}

func TestFetchMediaErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("wrong credentials", func(t *testing.T) {
		p := newMediaPeers(t)
		c, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: "wrong", APIBaseURL: p.api.URL})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unknown media", func(t *testing.T) {
		p := newMediaPeers(t)
		c := mediaClient(t, p)
		u := p.api.URL + strings.Replace(mediaPath, "ME0", "ME9", 1)
		if _, _, err := c.FetchMedia(ctx, u, 0); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the default guarded client refuses a media store on loopback", func(t *testing.T) {
		p := newMediaPeers(t)
		c := newTestClient(t, p.api.URL, 5*time.Second)
		_, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0)
		if !errors.Is(err, fetch.ErrRefused) {
			t.Fatalf("err = %v, want the fetch client's refusal", err)
		}
		if _, store := p.auth(); len(store) != 0 {
			t.Errorf("the media store was reached")
		}
	})
	t.Run("redirect to a scheme other than http(s)", func(t *testing.T) {
		p := newMediaPeers(t)
		p.direct = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "ftp://media.example.org/x")
			w.WriteHeader(http.StatusFound)
		}
		c := mediaClient(t, p)
		if _, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0); err == nil || !strings.Contains(err.Error(), "https only") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("media store refuses", func(t *testing.T) {
		p := newMediaPeers(t)
		p.serve = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "AccessDenied", http.StatusForbidden) }
		c := mediaClient(t, p)
		_, _, err := c.FetchMedia(ctx, p.api.URL+mediaPath, 0)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", http.StatusForbidden)) {
			t.Fatalf("err = %v", err)
		}
	})
}

// Every FetchMedia error is a MediaError that says whether a later try can
// fetch the media: a 4xx (but 408 and 429) from Twilio or its media store,
// a refused URL or redirect, too large: permanent; a 5xx, 408, 429 or no
// answer: temporary. Its reason names no URL and nothing of the body.
func TestFetchMediaErrorsSayWhetherToRetry(t *testing.T) {
	ctx := context.Background()
	status := func(where string, code int) func(p *mediaPeers) {
		return func(p *mediaPeers) {
			h := func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"code":20404,"message":"secret-body","status":`+fmt.Sprint(code)+`}`, code)
			}
			if where == "api" {
				p.direct = h
			} else {
				p.serve = h
			}
		}
	}
	cases := []struct {
		name      string
		setup     func(p *mediaPeers)
		url       func(p *mediaPeers) string
		status    int
		permanent bool
		reason    string
	}{
		{"API 401", status("api", 401), nil, 401, true, "Twilio answered HTTP 401 (Unauthorized)"},
		{"API 403", status("api", 403), nil, 403, true, "Twilio answered HTTP 403 (Forbidden)"},
		{"API 404", status("api", 404), nil, 404, true, "Twilio answered HTTP 404 (Not Found)"},
		{"API 410", status("api", 410), nil, 410, true, "Twilio answered HTTP 410 (Gone)"},
		{"API 500", status("api", 500), nil, 500, false, "Twilio answered HTTP 500 (Internal Server Error)"},
		{"API 503", status("api", 503), nil, 503, false, "Twilio answered HTTP 503 (Service Unavailable)"},
		{"API 429", status("api", 429), nil, 429, false, "Twilio answered HTTP 429 (Too Many Requests)"},
		{"API 408", status("api", 408), nil, 408, false, "Twilio answered HTTP 408 (Request Timeout)"},
		{"media store 403", status("store", 403), nil, 403, true, "Twilio's media store answered HTTP 403 (Forbidden)"},
		{"media store 404", status("store", 404), nil, 404, true, "Twilio's media store answered HTTP 404 (Not Found)"},
		{"media store 502", status("store", 502), nil, 502, false, "Twilio's media store answered HTTP 502 (Bad Gateway)"},
		{"a URL off Twilio", nil, func(p *mediaPeers) string { return "https://evil.example.org" + mediaPath }, 0, true,
			"its address is not a media URL of this Twilio account"},
		{"a redirect to ftp", func(p *mediaPeers) {
			p.direct = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", "ftp://media.example.org/x")
				w.WriteHeader(http.StatusFound)
			}
		}, nil, 0, true, "Twilio redirected it to an address beachd does not follow"},
		{"too large", func(p *mediaPeers) {
			p.serve = func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("x"), 100)) }
		}, nil, 0, true, "it is larger than allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newMediaPeers(t)
			if c.setup != nil {
				c.setup(p)
			}
			u := p.api.URL + mediaPath
			if c.url != nil {
				u = c.url(p)
			}
			_, _, err := mediaClient(t, p).FetchMedia(ctx, u, 50)
			var me *MediaError
			if !errors.As(err, &me) {
				t.Fatalf("err %v (%T), want a *MediaError", err, err)
			}
			if me.Status != c.status || me.Permanent != c.permanent || me.Reason != c.reason {
				t.Fatalf("status %d permanent %v reason %q; want %d %v %q", me.Status, me.Permanent, me.Reason, c.status, c.permanent, c.reason)
			}
			if me.MediaPermanent() != c.permanent || me.MediaReason() != c.reason {
				t.Fatal("the MediaPermanent/MediaReason methods disagree with the fields")
			}
			if strings.Contains(me.Reason, "secret-body") || strings.Contains(me.Reason, "http") || strings.Contains(me.Reason, testAccount) {
				t.Fatalf("reason %q carries the body, a URL or the account", me.Reason)
			}
		})
	}
	t.Run("the guarded client refuses the media store's address", func(t *testing.T) {
		p := newMediaPeers(t)
		_, _, err := newTestClient(t, p.api.URL, 5*time.Second).FetchMedia(ctx, p.api.URL+mediaPath, 0)
		var me *MediaError
		if !errors.As(err, &me) || !me.Permanent || !errors.Is(err, fetch.ErrRefused) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("no answer in time is temporary", func(t *testing.T) {
		p := newMediaPeers(t)
		release := make(chan struct{})
		defer close(release)
		p.serve = func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, _, err := mediaClient(t, p).FetchMedia(cctx, p.api.URL+mediaPath, 0)
		var me *MediaError
		if !errors.As(err, &me) || me.Permanent || me.Reason != "no answer in time" {
			t.Fatalf("err %v (%+v)", err, me)
		}
	})
}
