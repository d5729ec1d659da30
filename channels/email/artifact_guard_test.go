package email

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// lockedBuffer is a log destination the fetches may write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// guardSender is a sender with a renderer, the given artifact fetcher (nil:
// the default) and a log the test reads.
func guardSender(t *testing.T, port int, fetcher *fetch.Client) (*Sender, *lockedBuffer) {
	t.Helper()
	r, err := render.New(render.Config{PublicURL: "https://beachd.test"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg := SenderConfig{From: "Travel Agent <agent@beachd.test>", MessageIDDomain: "beachd.test", Host: "127.0.0.1", Port: port,
		TLS: TLSNone, HELO: "beachd.test", Timeout: 5 * time.Second, ArtifactTimeout: 2 * time.Second,
		Now: func() time.Time { return testNow }}
	s, err := NewSender(cfg, r, envelope.NewRegistry(), fetcher, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// secretServer stands for what listens on beachd's own loopback: its API,
// /metrics, the dev pages. It counts the requests that reach it.
func secretServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "beachd_deliveries_total 42 the secret")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func artifactParts(t *testing.T, uris ...string) []envelope.Part {
	var parts []envelope.Part
	for i, u := range uris {
		parts = append(parts, dataPart(t, "artifact", envelope.Artifact{ArtifactID: fmt.Sprintf("a%d", i),
			MimeType: "text/plain", Name: fmt.Sprintf("a%d.txt", i), URI: u}))
	}
	return parts
}

// TestArtifactsCannotReachLocalAddresses: an artifact URL pointing at
// beachd's own loopback (by IP, by name, IPv4-mapped, with user-info) or
// at the cloud metadata address is not fetched; the mail goes out with the
// one note and no attachment, and the cause is in the operator's log.
func TestArtifactsCannotReachLocalAddresses(t *testing.T) {
	secret, hits := secretServer(t)
	p := secret.Listener.Addr().(*net.TCPAddr).Port
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s, logs := guardSender(t, port, nil) // the default: nothing allowed
	uris := []string{
		secret.URL + "/secret",
		fmt.Sprintf("http://localhost:%d/metrics", p),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/dev/messages", p),
		fmt.Sprintf("http://user:pw@127.0.0.1:%d/secret", p),
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1/x",
		"http://[::1]:8025/metrics",
		"http://[64:ff9b::7f00:1]:8025/metrics",
	}
	env := textEnvelope("Here are your files.", artifactParts(t, uris...)...)
	for _, f := range s.fetchArtifacts(context.Background(), env) {
		if f.Note != noteNotAttached || f.Bytes != nil {
			t.Errorf("%s: note %q, %d bytes", f.ArtifactID, f.Note, len(f.Bytes))
		}
	}
	if _, err := s.Deliver(context.Background(), job("dlv-ssrf", "outsider@example.com", env)); err != nil {
		t.Fatal(err)
	}
	raw := string(be.Raw()[0])
	if strings.Contains(raw, "attachment;") || strings.Contains(raw, base64.StdEncoding.EncodeToString([]byte("beachd_deliveries_total"))[:16]) {
		t.Errorf("something was attached:\n%s", raw)
	}
	if !strings.Contains(raw, noteNotAttached) {
		t.Errorf("no note in the mail:\n%s", raw)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
	if l := logs.String(); !strings.Contains(l, "artifact fetch refused") || !strings.Contains(l, "loopback") || !strings.Contains(l, "link-local") {
		t.Errorf("the causes are not logged:\n%s", l)
	}
}

// TestArtifactRedirectToLoopbackIsNotFollowed: a server the operator
// allowed answers 302 to beachd's loopback; the redirect is checked.
func TestArtifactRedirectToLoopbackIsNotFollowed(t *testing.T) {
	secret, hits := secretServer(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("SKIPPED: cannot listen on 127.0.0.2 here (%v): a redirect from an allowed server cannot be shown", err)
	}
	allowed := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.RedirectHandler(secret.URL+"/secret", http.StatusFound)}}
	allowed.Start()
	defer allowed.Close()
	f, err := fetch.New(fetch.Config{Allow: []string{"127.0.0.2/32"}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := guardSender(t, 2525, f)
	got := s.fetchArtifacts(context.Background(), textEnvelope("x", artifactParts(t, allowed.URL+"/file.txt")...))
	if len(got) != 1 || got[0].Note != noteNotAttached || got[0].Bytes != nil {
		t.Fatalf("%+v", got)
	}
	if hits.Load() != 0 {
		t.Fatal("the redirect reached the loopback server")
	}
}

// TestArtifactNoteDoesNotTellWhy: whatever failed — a refused address, a
// closed port, an error status, a reset, a login page, a slow server — the
// recipient reads the same note, so the mail is no port scanner.
func TestArtifactNoteDoesNotTellWhy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		case "/500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/login":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>log in</html>")
		case "/reset":
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		case "/slow":
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/x"
	closed.Close()
	// The operator allowed loopback: these reach real sockets.
	f, err := fetch.New(fetch.Config{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s, logs := guardSender(t, port, f)
	s.cfg.ArtifactTimeout = 300 * time.Millisecond
	uris := []string{"http://169.254.169.254/latest/", closedURL, srv.URL + "/404", srv.URL + "/500",
		srv.URL + "/reset", srv.URL + "/login", srv.URL + "/slow"}
	env := textEnvelope("Files.", artifactParts(t, uris...)...)
	for i, a := range s.fetchArtifacts(context.Background(), env) {
		if a.Note != noteNotAttached {
			t.Errorf("%s (%s): note %q, want %q", a.ArtifactID, uris[i], a.Note, noteNotAttached)
		}
	}
	if _, err := s.Deliver(context.Background(), job("dlv-scan", "outsider@example.com", env)); err != nil {
		t.Fatal(err)
	}
	raw := string(be.Raw()[0])
	for _, leak := range []string{"refused", "in time", "another type", "Not Found", "status", "connection", "fetched"} {
		if strings.Contains(raw, leak) {
			t.Errorf("the mail says %q", leak)
		}
	}
	if strings.Count(logs.String(), "artifact fetch") < len(uris) {
		t.Errorf("not every cause is logged:\n%s", logs.String())
	}
}

// headerKeys are the field names of raw's header and of every MIME part's
// header, as a mail reader sees them.
func headerKeys(t *testing.T, raw string) []string {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	var keys []string
	var walk func(h textproto.MIMEHeader, body io.Reader)
	walk = func(h textproto.MIMEHeader, body io.Reader) {
		for k := range h {
			keys = append(keys, k)
		}
		mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
		if err != nil || !strings.HasPrefix(mt, "multipart/") {
			return
		}
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			walk(p.Header, p)
		}
	}
	walk(textproto.MIMEHeader(msg.Header), msg.Body)
	return keys
}

// TestContentCannotWriteHeaders: CR/LF in an artifact's media type and
// name, the subject, and the thread ids of the mail we answer never start
// a header line of their own.
func TestContentCannotWriteHeaders(t *testing.T) {
	evil := "text/html\r\nContent-Disposition: inline\r\nX-Injected-Type: yes"
	art := dataPart(t, "artifact", envelope.Artifact{ArtifactID: "a1", MimeType: evil,
		Name: "a.pdf\r\nX-Injected-Name: yes", Bytes: []byte("hello")})
	extra := map[string]string{ExtraInReplyTo: "abc@x.example>\r\nX-Injected-Thread: yes\r\nY: <d@y.example",
		ExtraReferences: "<r1@x.example>\rX-Injected-Refs: yes"}

	check := func(t *testing.T, raw string) {
		t.Helper()
		for _, k := range headerKeys(t, raw) {
			if strings.HasPrefix(k, "X-Injected") || k == "Y" {
				t.Errorf("injected header %q in:\n%s", k, raw)
			}
		}
		if strings.Contains(raw, "Content-Disposition: inline") {
			t.Errorf("injected disposition in:\n%s", raw)
		}
		if strings.Count(raw, "\r") != strings.Count(raw, "\r\n") {
			t.Errorf("a bare CR in:\n%s", raw)
		}
	}
	t.Run("rendered", func(t *testing.T) {
		be := &smtptest.Server{Keep: true}
		port, _ := smtptest.Start(t, be, TLSNone)
		s := newTestSender(t, port, nil, true)
		j := job("dlv-hdr1", "a@example.com", textEnvelope("Your file.", art))
		j.Delivery.Extra = extra
		if _, err := s.Deliver(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		raw := string(be.Raw()[0])
		check(t, raw)
		if !strings.Contains(raw, "Content-Type: application/octet-stream") {
			t.Errorf("the bad media type was not replaced:\n%s", raw)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		be := &smtptest.Server{Keep: true}
		port, _ := smtptest.Start(t, be, TLSNone)
		s := newTestSender(t, port, nil, false)
		j := job("dlv-hdr2", "a@example.com", textEnvelope("Hello\rX-Injected-Subject: yes\nmore", art))
		j.Delivery.Extra = extra
		if _, err := s.Deliver(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		check(t, string(be.Raw()[0]))
	})
}

func TestAttachmentType(t *testing.T) {
	for in, want := range map[string]string{
		"application/pdf":                       "application/pdf",
		"Text/Plain; charset=UTF-8":             "text/plain; charset=UTF-8",
		"text/plain; charset=\"a b\"":           "text/plain",
		"":                                      "application/octet-stream",
		"pdf":                                   "application/octet-stream",
		"text/html\r\nContent-Disposition: x":   "application/octet-stream",
		"text/html; x=\"a\r\nX-Injected: yes\"": "application/octet-stream",
	} {
		if got := attachmentType(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// FuzzHeaderValues: whatever content gives, the attachment type is an RFC
// 2045 media type and no header text keeps a control character.
func FuzzHeaderValues(f *testing.F) {
	for _, s := range []string{"application/pdf", "text/html\r\nContent-Disposition: inline", "text/plain; charset=\"a\r\nb\"",
		"a\u2028b", "x\x00y", "Text/Plain; Charset=UTF-8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mt := attachmentType(s)
		if strings.ContainsAny(mt, "\r\n") {
			t.Fatalf("%q: type %q", s, mt)
		}
		if base, _, err := mime.ParseMediaType(mt); err != nil || !envelope.ValidMediaType(base) {
			t.Fatalf("%q: type %q is not a media type", s, mt)
		}
		if h := headerText(s); strings.ContainsFunc(h, isCtl) {
			t.Fatalf("%q: header text %q", s, h)
		}
	})
}
