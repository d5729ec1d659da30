package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// secretServer is a loopback server standing for beachd's own listeners
// (the API, /metrics, the dev pages): it counts the requests that reach it.
func secretServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			w.Header().Set("X-Got-Auth", "yes")
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "the secret")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func mustNew(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t *testing.T, c *Client, u string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestDefaultClientReachesNothingLocal: loopback by IP, by name (the DNS
// answer is checked when dialling) and as an IPv4-mapped IPv6 literal are
// refused before any byte is sent.
func TestDefaultClientReachesNothingLocal(t *testing.T) {
	srv, hits := secretServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := mustNew(t, Config{})
	for _, u := range []string{
		srv.URL + "/secret",
		fmt.Sprintf("http://localhost:%d/secret", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/secret", port),
		fmt.Sprintf("http://127.1:%d/secret", port),
		fmt.Sprintf("http://2130706433:%d/secret", port),
		fmt.Sprintf("http://0.0.0.0:%d/secret", port),
		fmt.Sprintf("http://user:pw@127.0.0.1:%d/secret", port),
	} {
		body, err := get(t, c, u)
		if err == nil {
			t.Errorf("%s: fetched %q", u, body)
			continue
		}
		// A name the resolver does not know is no proof of the check.
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			t.Logf("%s: %v (not resolvable here)", u, err)
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
}

// TestHostNameResolvingToLoopbackIsRefusedWhenDialled: the check is on the
// address the name resolves to, not on the name.
func TestHostNameResolvingToLoopbackIsRefusedWhenDialled(t *testing.T) {
	addrs, err := net.DefaultResolver.LookupHost(context.Background(), "localhost")
	if err != nil || len(addrs) == 0 {
		t.Skipf("SKIPPED: localhost does not resolve on this machine (%v): the DNS-answer check cannot be shown", err)
	}
	srv, hits := secretServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	_, err = get(t, mustNew(t, Config{}), fmt.Sprintf("http://localhost:%d/metrics", port))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("localhost: %v, want refused as loopback", err)
	}
	if hits.Load() != 0 {
		t.Fatal("reached")
	}
	// Allowed by name, it is dialled whatever it resolves to.
	body, err := get(t, mustNew(t, Config{Allow: []string{"localhost"}}), fmt.Sprintf("http://localhost:%d/metrics", port))
	if err != nil || body != "the secret" {
		t.Fatalf("allowed host: %q, %v", body, err)
	}
}

func TestAllowedNetworkIsFetched(t *testing.T) {
	srv, _ := secretServer(t)
	body, err := get(t, mustNew(t, Config{Allow: []string{"127.0.0.0/8"}}), srv.URL+"/a")
	if err != nil || body != "the secret" {
		t.Fatalf("%q, %v", body, err)
	}
}

// TestUserInfoIsNeverSentAsBasicAuth: user-info is refused, on the first
// URL and on a redirect, even to an allowed server.
func TestUserInfoIsNeverSentAsBasicAuth(t *testing.T) {
	srv, hits := secretServer(t)
	c := mustNew(t, Config{Allow: []string{"127.0.0.0/8"}})
	withUser := strings.Replace(srv.URL, "http://", "http://user:pw@", 1) + "/secret"
	if _, err := get(t, c, withUser); !errors.Is(err, ErrRefused) {
		t.Fatalf("user-info: %v", err)
	}
	// Through the *http.Client too (which would set Authorization itself).
	req, _ := http.NewRequest(http.MethodGet, withUser, nil)
	if resp, err := c.HTTPClient().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("user-info through HTTPClient: %s", resp.Status)
	} else if !errors.Is(err, ErrRefused) {
		t.Fatalf("user-info through HTTPClient: %v", err)
	}
	redir := httptest.NewServer(http.RedirectHandler(withUser, http.StatusFound))
	defer redir.Close()
	if _, err := get(t, c, redir.URL); !errors.Is(err, ErrRefused) {
		t.Fatalf("redirect to user-info: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the server was reached with user-info")
	}
}

// TestRedirectsAreCheckedWhenDialled: a server the operator allowed
// redirects to loopback (by IP, by name, IPv4-mapped) and to other
// schemes; none is followed.
func TestRedirectsAreCheckedWhenDialled(t *testing.T) {
	secret, hits := secretServer(t)
	port := secret.Listener.Addr().(*net.TCPAddr).Port
	// The allowed server listens on 127.0.0.2, allowed alone.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("SKIPPED: cannot listen on 127.0.0.2 here (%v): redirects from an allowed server cannot be shown", err)
	}
	targets := map[string]string{
		"/ip":     fmt.Sprintf("http://127.0.0.1:%d/secret", port),
		"/name":   fmt.Sprintf("http://localhost:%d/secret", port),
		"/mapped": fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/secret", port),
		"/meta":   "http://169.254.169.254/latest/meta-data/",
		"/file":   "file:///etc/passwd",
		"/ftp":    "ftp://127.0.0.2/x",
	}
	allowed := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, targets[r.URL.Path], http.StatusFound)
	})}}
	allowed.Start()
	defer allowed.Close()
	c := mustNew(t, Config{Allow: []string{"127.0.0.2"}})
	for path := range targets {
		body, err := get(t, c, allowed.URL+path)
		if err == nil {
			t.Errorf("%s: followed to %q", path, body)
			continue
		}
		var dnsErr *net.DNSError
		if path == "/name" && errors.As(err, &dnsErr) {
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", path, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("a redirect reached the loopback server")
	}
}

func TestAtMostThreeRedirects(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/%d", &n)
		if n == 0 {
			io.WriteString(w, "end")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("%s/%d", srv.URL, n-1), http.StatusFound)
	}))
	defer srv.Close()
	c := mustNew(t, Config{Allow: []string{"127.0.0.0/8"}})
	if body, err := get(t, c, srv.URL+"/3"); err != nil || body != "end" {
		t.Fatalf("3 redirects: %q, %v", body, err)
	}
	if _, err := get(t, c, srv.URL+"/4"); !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("4 redirects: %v", err)
	}
}

func TestBodyAndTimeBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			for range 10 {
				w.Write([]byte(strings.Repeat("x", 100)))
				w.(http.Flusher).Flush()
			}
		case "/length":
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte(strings.Repeat("x", 1000)))
		case "/fits":
			w.Write([]byte(strings.Repeat("x", 500)))
		case "/slow":
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	c := mustNew(t, Config{Allow: []string{"127.0.0.0/8"}, MaxBytes: 500, Timeout: 300 * time.Millisecond})
	for _, p := range []string{"/chunked", "/length"} {
		if _, err := get(t, c, srv.URL+p); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", p, err)
		}
	}
	if body, err := get(t, c, srv.URL+"/fits"); err != nil || len(body) != 500 {
		t.Errorf("/fits: %d bytes, %v", len(body), err)
	}
	start := time.Now()
	if _, err := get(t, c, srv.URL+"/slow"); err == nil {
		t.Error("/slow: no timeout")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("/slow took %s", d)
	}
}

// TestNoProxyFromTheEnvironment: a proxy would dial for us, unchecked.
func TestNoProxyFromTheEnvironment(t *testing.T) {
	c := mustNew(t, Config{})
	gt, ok := c.hc.Transport.(*guardedTransport)
	if !ok {
		t.Fatalf("transport %T", c.hc.Transport)
	}
	if tr := gt.base.(*http.Transport); tr.Proxy != nil {
		t.Fatal("the transport takes a proxy")
	}
}

// TestWrappedTransportStillGuarded: HTTPClient's Transport may be wrapped
// (to count bytes, say) without losing the checks.
func TestWrappedTransportStillGuarded(t *testing.T) {
	srv, hits := secretServer(t)
	hc := mustNew(t, Config{}).HTTPClient()
	var seen atomic.Int64
	base := hc.Transport
	hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen.Add(1)
		return base.RoundTrip(r)
	})
	resp, err := hc.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("fetched loopback through a wrapped transport")
	}
	if !errors.Is(err, ErrRefused) || hits.Load() != 0 || seen.Load() != 1 {
		t.Fatalf("%v, %d hits, %d round trips", err, hits.Load(), seen.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{MaxRedirects: -1}, {MaxRedirects: 11}, {Timeout: -1}, {MaxBytes: -1}, {Allow: []string{"x/y"}}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
