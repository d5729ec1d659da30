package fetch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func endpointGet(t *testing.T, hc *http.Client, u string) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"decision":"granted"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := hc.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestEndpointClientDialsOnlyItsEndpoint: the configured endpoint is
// reached though it is on loopback — by address, and by a name that
// resolves there — while every other host:port on a non-public address is
// refused when dialled, before a byte is sent: another port of the same
// host, the same port under another name (the check is on the resolved
// address), the cloud metadata address.
func TestEndpointClientDialsOnlyItsEndpoint(t *testing.T) {
	agent, agentHits := secretServer(t)
	other, otherHits := secretServer(t)
	_, agentPort, _ := net.SplitHostPort(agent.Listener.Addr().String())

	hc, err := EndpointClient(agent.URL+"/a2a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := endpointGet(t, hc, agent.URL+"/a2a"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the configured endpoint on loopback: %v", err)
	}
	if agentHits.Load() != 1 {
		t.Fatalf("the agent got %d requests, want 1", agentHits.Load())
	}
	for _, u := range []string{
		other.URL + "/a2a",                    // another port on loopback
		"http://localhost:" + agentPort + "/", // the same port under another name: resolved, then refused
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:127.0.0.1]:" + agentPort + "/",
	} {
		_, err := endpointGet(t, hc, u)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: err = %v, want ErrRefused", u, err)
		}
	}
	if otherHits.Load() != 0 || agentHits.Load() != 1 {
		t.Fatalf("refused dials reached a server: other %d, agent %d", otherHits.Load(), agentHits.Load())
	}

	// An endpoint configured by name is dialled whatever the name resolves to.
	byName, err := EndpointClient("http://LOCALHOST.:"+agentPort+"/a2a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := endpointGet(t, byName, "http://localhost:"+agentPort+"/a2a"); err != nil {
		t.Fatalf("the configured endpoint by name: %v", err)
	}
	if agentHits.Load() != 2 {
		t.Fatalf("the agent got %d requests, want 2", agentHits.Load())
	}
}

// TestEndpointClientFollowsNoRedirect: a 302 or 307 comes back as it is;
// the place it points at (here another loopback port, which the address
// check would refuse besides) receives nothing.
func TestEndpointClientFollowsNoRedirect(t *testing.T) {
	var trapHits atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { trapHits.Add(1) }))
	defer trap.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, trap.URL+"/steal?x=1", status)
		}))
		hc, err := EndpointClient(agent.URL, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := endpointGet(t, hc, agent.URL)
		if err != nil || resp.StatusCode != status || !IsRedirect(resp.StatusCode) {
			t.Fatalf("%d: resp %v, err %v, want the redirect itself", status, resp, err)
		}
		if got := RedirectTarget(resp); got != trap.URL {
			t.Errorf("%d: RedirectTarget = %q, want the origin %q", status, got, trap.URL)
		}
		agent.Close()
	}
	if trapHits.Load() != 0 {
		t.Fatalf("the redirect target received %d requests", trapHits.Load())
	}
}

func TestEndpointClientRefusesBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x/", "/relative", "http://"} {
		if _, err := EndpointClient(u, 0); err == nil {
			t.Errorf("%q: want an error", u)
		}
	}
}

func TestRedirectTarget(t *testing.T) {
	base, _ := http.NewRequest(http.MethodGet, "https://agent.example.org:8443/a2a/rpc", nil)
	for loc, want := range map[string]string{
		"":                                      "(no Location)",
		"/elsewhere":                            "https://agent.example.org:8443",
		"http://evil.example:81/x?token=secret": "http://evil.example:81",
		"https://user:pw@evil.example/":         "https://evil.example",
		"//other.example/p":                     "https://other.example",
		"http://[::1]:9/":                       "http://[::1]:9",
		"%zz":                                   "(unreadable Location)",
	} {
		resp := &http.Response{Header: http.Header{}, Request: base}
		if loc != "" {
			resp.Header.Set("Location", loc)
		}
		if got := RedirectTarget(resp); got != want {
			t.Errorf("Location %q: %q, want %q", loc, got, want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://a.example/x", "http://a.example/y", true},
		{"http://a.example/x", "http://A.EXAMPLE.:80/y", true},
		{"https://a.example/x", "https://a.example:443/", true},
		{"http://a.example/x", "https://a.example/x", false},
		{"http://a.example/x", "http://a.example:8080/x", false},
		{"http://a.example/x", "http://b.example/x", false},
		{"http://127.0.0.1:80/", "http://localhost:80/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
		{"/relative", "/relative", false},
		{"http://a.example/", "%zz", false},
	} {
		if got := SameOrigin(c.a, c.b); got != c.same {
			t.Errorf("SameOrigin(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
