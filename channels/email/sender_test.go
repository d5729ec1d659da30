package email

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

var testNow = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)

func textEnvelope(text string, extra ...envelope.Part) *envelope.Envelope {
	parts := []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": "response"}}}
	return &envelope.Envelope{Role: "agent", Parts: append(parts, extra...),
		Meta: envelope.Meta{SessionID: "s1", TurnID: "t1", ProducedAt: testNow, FinalizedBy: "respond"}}
}

func dataPart(t testing.TB, partType string, v any) envelope.Part {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Part{Data: b, Metadata: map[string]any{"partType": partType}}
}

func job(id, to string, env *envelope.Envelope) *channels.Job {
	return &channels.Job{Delivery: &store.Delivery{ID: id, Channel: "email", To: to}, Envelope: env, Attempt: 1}
}

// newTestSender is a sender for the sink on port whose artifact fetcher
// allows loopback: the tests serve artifacts from httptest servers on
// 127.0.0.1, which the default fetcher refuses.
func newTestSender(t testing.TB, port int, mut func(*SenderConfig), withRenderer bool) *Sender {
	t.Helper()
	return newTestSenderFetching(t, port, mut, withRenderer, loopbackFetcher(t))
}

// loopbackFetcher is a guarded artifact client that also allows
// 127.0.0.0/8, as `fetch: {allow: [127.0.0.0/8]}` would.
func loopbackFetcher(t testing.TB) *fetch.Client {
	t.Helper()
	f, err := fetch.New(fetch.Config{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// newTestSenderFetching: newTestSender with the given artifact fetcher
// (nil: the default, which reaches the public internet only).
func newTestSenderFetching(t testing.TB, port int, mut func(*SenderConfig), withRenderer bool, fetcher *fetch.Client) *Sender {
	t.Helper()
	cfg := SenderConfig{From: "Travel Agent <agent@beachd.test>", ReplyTo: "approvals@reply.beachd.test",
		MessageIDDomain: "beachd.test", Host: "127.0.0.1", Port: port, TLS: TLSNone, HELO: "beachd.test",
		Timeout: 5 * time.Second, Now: func() time.Time { return testNow }}
	if mut != nil {
		mut(&cfg)
	}
	var r *render.Renderer
	if withRenderer {
		var err error
		if r, err = render.New(render.Config{PublicURL: "https://beachd.test"}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSender(cfg, r, envelope.NewRegistry(), fetcher, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSenderDeliversRenderedMessage(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, nil, true)
	exp := testNow.Add(24 * time.Hour)
	env := textEnvelope("I found a flight. Shall I book it?", dataPart(t, "approval-request", envelope.ApprovalRequest{
		ApprovalID: "ap1", ToolName: "book_flight", ToolCallID: "tc1", Args: map[string]any{"flight": "LH902"},
		Handler: "h", Turn: "t1", Session: "s1", ExpiresAt: &exp, Summary: "Book LH 902"}))
	j := job("dlv01abc", "alice@example.com", env)
	j.Approvals = []render.ApprovalHandle{{ApprovalID: "ap1", Token: tokA, LinkURL: "https://beachd.test/a/x", ExpiresAt: exp,
		Request: envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book_flight", Summary: "Book LH 902"}}}
	j.Delivery.Extra = map[string]string{ExtraInReplyTo: "<CAF3a@mail.gmail.com>", ExtraReferences: "<root@mail.gmail.com>"}
	res, err := s.Deliver(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	msgs := be.Raw()
	if len(msgs) != 1 {
		t.Fatalf("%d messages accepted", len(msgs))
	}
	wantID := "dlv01abc." + tokA + "@beachd.test"
	if res.ProviderID != "" { // go-smtp names no queue id
		t.Errorf("provider id %q", res.ProviderID)
	}
	if res.Receipt.Meta["source"] != "smtp" || res.Receipt.Meta["code"] != 250 || res.Receipt.Meta["enhancedCode"] != "2.0.0" {
		t.Errorf("receipt %+v", res.Receipt)
	}
	// The receipt is stored: it names the message without its token.
	rb, _ := json.Marshal(res.Receipt)
	if strings.Contains(string(rb), tokA) || !strings.Contains(string(rb), `"messageId":"dlv01abc.[token]@beachd.test"`) {
		t.Errorf("receipt %s", rb)
	}
	// Read it back as a reply would be read: the token comes back from
	// each place we put it.
	p, err := ParseMessage(msgs[0], corpusOptions(testNow))
	if err != nil {
		t.Fatal(err)
	}
	raw := string(msgs[0])
	for _, h := range []string{"Message-ID: <" + wantID + ">", "Auto-Submitted: auto-generated", "X-Auto-Response-Suppress: All",
		"In-Reply-To: <CAF3a@mail.gmail.com>", "References: <root@mail.gmail.com> <CAF3a@mail.gmail.com>",
		"approvals+" + tokA + "@reply.beachd.test", "To: <alice@example.com>"} {
		if !strings.Contains(raw, h) {
			t.Errorf("message lacks %q:\n%s", h, raw[:min(len(raw), 1500)])
		}
	}
	if p.Inbound.MessageID != wantID || !strings.Contains(p.Inbound.Subject, "[approval:"+tokA+"]") {
		t.Errorf("read back: id %q subject %q", p.Inbound.MessageID, p.Inbound.Subject)
	}
	if !p.Inbound.AutoGenerated {
		t.Error("our own mail does not read as auto-generated")
	}
}

func TestSenderFallbackWithoutRenderer(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, nil, false)
	if _, err := s.Deliver(context.Background(), job("dlv02", "bob@example.com", textEnvelope("Your report is ready."))); err != nil {
		t.Fatal(err)
	}
	raw := string(be.Raw()[0])
	if !strings.Contains(raw, "Subject: Your report is ready.") || !strings.Contains(raw, "Message-ID: <dlv02@beachd.test>") {
		t.Errorf("fallback message:\n%s", raw)
	}
}

// TestSenderFailureClasses is the SMTP transcript of every way a send can
// fail, and what the dispatcher is told.
func TestSenderFailureClasses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       func(s *smtptest.Server)
		permanent bool
		maybeSent bool
		code      int
		enhanced  string
	}{
		{name: "4xx at MAIL", set: func(s *smtptest.Server) {
			s.MailErr = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
		}, code: 451, enhanced: "4.3.0"},
		{name: "5xx at RCPT", set: func(s *smtptest.Server) {
			s.RcptErr = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		}, permanent: true, code: 550, enhanced: "5.1.1"},
		{name: "4xx after DATA", set: func(s *smtptest.Server) {
			s.DataErr = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: "mailbox full"}
		}, code: 452, enhanced: "4.2.2"},
		{name: "5xx after DATA", set: func(s *smtptest.Server) {
			s.DataErr = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "rejected as spam"}
		}, permanent: true, code: 554, enhanced: "5.7.1"},
		{name: "drop after final dot", set: func(s *smtptest.Server) { s.DropAfterData = true }, maybeSent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &smtptest.Server{Keep: true}
			port, _ := smtptest.Start(t, be, TLSNone)
			s := newTestSender(t, port, nil, false)
			be.Set(tc.set)
			_, err := s.Deliver(context.Background(), job("dlv03", "carol@example.com", textEnvelope("hello")))
			var ce *channels.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v", err)
			}
			if ce.Permanent != tc.permanent || ce.MaybeSent != tc.maybeSent {
				t.Fatalf("permanent=%v maybeSent=%v, want %v %v (%v)", ce.Permanent, ce.MaybeSent, tc.permanent, tc.maybeSent, err)
			}
			// The error text is logged and stored: no recipient address.
			if strings.Contains(err.Error(), "carol@example.com") {
				t.Errorf("error text names the recipient: %v", err)
			}
			if tc.code != 0 {
				if ce.Receipt == nil || ce.Receipt.Meta["code"] != tc.code || ce.Receipt.Meta["enhancedCode"] != tc.enhanced {
					t.Fatalf("receipt %+v", ce.Receipt)
				}
			}
			// The next attempt, once the server behaves, goes through on a
			// fresh or reused connection.
			be.Set(func(s *smtptest.Server) { s.MailErr, s.RcptErr, s.DataErr, s.DropAfterData = nil, nil, nil, false })
			if _, err := s.Deliver(context.Background(), job("dlv03", "carol@example.com", textEnvelope("hello"))); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if n := len(be.Raw()); n != 1 {
				t.Fatalf("%d messages accepted after the retry", n)
			}
		})
	}
}

func TestSenderDropMidDataIsTemporary(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, nil, false)
	be.Set(func(s *smtptest.Server) { s.DropMidData = true })
	big := strings.Repeat("all work and no play makes jack a dull boy\n", 100_000) // ~4 MB
	_, err := s.Deliver(context.Background(), job("dlv04", "dave@example.com", textEnvelope(big)))
	ce := channels.AsError(err)
	if err == nil || ce.Permanent {
		t.Fatalf("err = %v", err)
	}
	if len(be.Raw()) != 0 {
		t.Fatal("server kept a message it hung up on")
	}
}

func TestSenderHangingServerTimesOut(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, func(c *SenderConfig) { c.Timeout = 300 * time.Millisecond }, false)
	hang := make(chan struct{})
	defer close(hang)
	be.Set(func(s *smtptest.Server) { s.Hang = hang })
	start := time.Now()
	_, err := s.Deliver(context.Background(), job("dlv05", "erin@example.com", textEnvelope("hi")))
	ce := channels.AsError(err)
	if err == nil || ce.Permanent || !ce.MaybeSent {
		t.Fatalf("err = %v (maybeSent %v)", err, ce.MaybeSent)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestSenderContextCancelAbortsSend(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, nil, false)
	hang := make(chan struct{})
	defer close(hang)
	be.Set(func(s *smtptest.Server) { s.Hang = hang })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := s.Deliver(ctx, job("dlv06", "erin@example.com", textEnvelope("hi")))
	if err == nil || channels.AsError(err).Permanent || !channels.AsError(err).MaybeSent {
		t.Fatalf("err = %v", err)
	}
}

func TestSenderGarbageServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "220 hello\r\n")
				bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "what is this\r\n\x00\x01\r\n")
			}()
		}
	}()
	s := newTestSender(t, ln.Addr().(*net.TCPAddr).Port, nil, false)
	_, err = s.Deliver(context.Background(), job("dlv07", "f@example.com", textEnvelope("hi")))
	if err == nil || channels.AsError(err).Permanent || channels.AsError(err).MaybeSent {
		t.Fatalf("err = %v", err)
	}
}

func TestSenderReusesConnections(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, func(c *SenderConfig) { c.PoolSize = 1 }, false)
	for i := 0; i < 5; i++ {
		if _, err := s.Deliver(context.Background(), job(fmt.Sprintf("dlv1%d", i), "g@example.com", textEnvelope("hi"))); err != nil {
			t.Fatal(err)
		}
	}
	if n := be.Stats().Sessions; n != 1 {
		t.Fatalf("%d SMTP sessions for 5 messages, want 1", n)
	}
	if n := len(be.Raw()); n != 5 {
		t.Fatalf("%d accepted", n)
	}
}

func TestSenderTLSAndAuth(t *testing.T) {
	for _, mode := range []string{TLSStartTLS, TLSImplicit} {
		t.Run(mode, func(t *testing.T) {
			be := &smtptest.Server{Keep: true, RequireAuth: true}
			port, clientTLS := smtptest.Start(t, be, mode)
			s := newTestSender(t, port, func(c *SenderConfig) {
				c.TLS, c.TLSConfig, c.Username, c.Password = mode, clientTLS, "beachd", "s3cret"
			}, false)
			if _, err := s.Deliver(context.Background(), job("dlv20", "h@example.com", textEnvelope("secure hello"))); err != nil {
				t.Fatal(err)
			}
			if len(be.Raw()) != 1 || len(be.Auths()) != 1 {
				t.Fatalf("accepted %d, auths %v", len(be.Raw()), be.Auths())
			}
			// Wrong credentials: temporary (our configuration, not the
			// message), with the server's reply as the receipt.
			wrong := newTestSender(t, port, func(c *SenderConfig) {
				c.TLS, c.TLSConfig, c.Username, c.Password = mode, clientTLS, "beachd", "nope"
			}, false)
			_, err := wrong.Deliver(context.Background(), job("dlv22", "h@example.com", textEnvelope("x")))
			if ce := channels.AsError(err); err == nil || ce.Permanent || ce.Receipt == nil || ce.Receipt.Meta["code"] != 535 {
				t.Fatalf("wrong password: %v %+v", err, ce.Receipt)
			}
			// A server whose certificate we do not trust is a TLS failure:
			// temporary, nothing sent.
			bad := newTestSender(t, port, func(c *SenderConfig) {
				c.TLS, c.Username, c.Password = mode, "beachd", "s3cret"
			}, false)
			_, err = bad.Deliver(context.Background(), job("dlv21", "h@example.com", textEnvelope("x")))
			if err == nil || channels.AsError(err).Permanent {
				t.Fatalf("untrusted certificate: %v", err)
			}
		})
	}
}

func TestSenderConfigValidate(t *testing.T) {
	ok := SenderConfig{From: "a@b.example", Host: "smtp.example.org"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []SenderConfig{
		{From: "a@b.example", Host: "smtp.example.org", TLS: TLSNone},
		{From: "not an address", Host: "smtp.example.org"},
		{From: "a@b.example", Host: "smtp.example.org", TLS: "ssl3"},
		{From: "a@b.example"},
		{From: "a@b.example", Host: "x", DKIM: DKIMConfig{Domain: "b.example"}},
	} {
		if tc.Validate() == nil {
			t.Errorf("%+v accepted", tc)
		}
	}
	for _, h := range []string{"127.0.0.1", "localhost", "::1", "mail.localhost"} {
		if err := (SenderConfig{From: "a@b.example", Host: h, TLS: TLSNone}).Validate(); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
}

func TestSenderDKIM(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, func(c *SenderConfig) {
		c.DKIM = DKIMConfig{Domain: "beachd.test", Selector: "sel1", PrivateKeyPEM: pemKey}
	}, false)
	if _, err := s.Deliver(context.Background(), job("dlv30", "i@example.com", textEnvelope("signed"))); err != nil {
		t.Fatal(err)
	}
	raw := string(be.Raw()[0])
	if !strings.HasPrefix(raw, "DKIM-Signature:") || !strings.Contains(raw, "d=beachd.test") || !strings.Contains(raw, "s=sel1") {
		t.Fatalf("no DKIM signature:\n%s", raw[:min(len(raw), 600)])
	}
}

func TestSenderArtifacts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte("%PDF-1.4 tiny"))
		case "/big.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte(strings.Repeat("x", 4096)))
		case "/login.pdf":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>please log in</html>"))
		case "/slow.pdf":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, func(c *SenderConfig) { c.MaxArtifactBytes = 1024; c.ArtifactTimeout = 300 * time.Millisecond }, true)
	art := func(id, path string) envelope.Part {
		return dataPart(t, "artifact", envelope.Artifact{ArtifactID: id, MimeType: "application/pdf", Name: id + ".pdf", URI: srv.URL + path})
	}
	env := textEnvelope("Here are your documents.", art("ok", "/ok.pdf"), art("big", "/big.pdf"), art("login", "/login.pdf"), art("slow", "/slow.pdf"))
	got := s.fetchArtifacts(context.Background(), env)
	notes := map[string]string{}
	for _, f := range got {
		notes[f.ArtifactID] = f.Note
		if f.ArtifactID == "ok" && string(f.Bytes) != "%PDF-1.4 tiny" {
			t.Errorf("ok: bytes %q", f.Bytes)
		}
	}
	want := map[string]string{"ok": "", "big": "too large to attach", "login": noteNotAttached, "slow": noteNotAttached}
	for id, n := range want {
		if notes[id] != n {
			t.Errorf("%s: note %q, want %q", id, notes[id], n)
		}
	}
	if _, err := s.Deliver(context.Background(), job("dlv40", "j@example.com", env)); err != nil {
		t.Fatal(err)
	}
	raw := string(be.Raw()[0])
	if !strings.Contains(raw, `filename="ok.pdf"`) || strings.Contains(raw, `filename="big.pdf"`) {
		t.Errorf("attachments wrong:\n%s", raw)
	}
}

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		text, enhanced, queue string
	}{
		{"2.0.0 Ok: queued as 4Xyz9K1mQz", "2.0.0", "4Xyz9K1mQz"},
		{"OK id=1rQabc-0004Xy-2Z", "", "1rQabc-0004Xy-2Z"},
		{"2.0.0 OK  1705314300 d3-20020a05600c0a0300b0040e5f1a2b3csi1234567wmq.12 - gsmtp", "2.0.0", "d3-20020a05600c0a0300b0040e5f1a2b3csi1234567wmq.12"},
		{"2.6.0 <AM6PR05MB1234@eurprd05.prod.outlook.com> [InternalId=123] Queued mail for delivery", "2.6.0", ""},
		{"OK: queued", "", ""},
	} {
		r := parseReply(250, tc.text)
		if r.EnhancedCode != tc.enhanced || r.QueueID != tc.queue {
			t.Errorf("%q: enhanced %q queue %q", tc.text, r.EnhancedCode, r.QueueID)
		}
	}
	if got := redactToken("dlv1." + tokA + "@d.test"); got != "dlv1.[token]@d.test" {
		t.Errorf("redact: %q", got)
	}
	if got := redactToken("dlv1@d.test"); got != "dlv1@d.test" {
		t.Errorf("redact without token: %q", got)
	}
}

func TestSenderConcurrentUsesAtMostPoolSize(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, func(c *SenderConfig) { c.PoolSize = 2 }, false)
	errc := make(chan error, 20)
	for i := 0; i < 20; i++ {
		go func(i int) {
			_, err := s.Deliver(context.Background(), job(fmt.Sprintf("dlvc%d", i), "k@example.com", textEnvelope("hi")))
			errc <- err
		}(i)
	}
	for i := 0; i < 20; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if n, sess := len(be.Raw()), be.Stats().Sessions; n != 20 || sess > 2 {
		t.Fatalf("%d accepted over %d sessions", n, sess)
	}
}

// FuzzParseReply: SMTP server replies are outside input too.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{"2.0.0 Ok: queued as 4Xyz9K1mQz", "OK id=1rQabc-0004Xy-2Z", "550 5.1.1 <a@b>: no such user, affected recipient(s): a@b",
		"sending SMTP DATA command: 452 4.2.2 mailbox full", "\x00\xff 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := parseReply(250, s)
		if r.EnhancedCode != "" && !enhancedRe.MatchString(r.EnhancedCode) {
			t.Fatalf("enhanced code %q", r.EnhancedCode)
		}
		e := replyFromError(errors.New(s))
		if e.Code != 0 && (e.Code < 200 || e.Code > 599) {
			t.Fatalf("code %d", e.Code)
		}
		if got := scrub(s, []string{"a@b"}); strings.Contains(got, "a@b") {
			t.Fatalf("scrub left a secret: %q", got)
		}
	})
}

// TestSenderRedialsAStalePooledConnection: the server closed the pooled
// connection while it was idle; the next message goes out on a fresh one
// instead of failing.
func TestSenderRedialsAStalePooledConnection(t *testing.T) {
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	s := newTestSender(t, port, func(c *SenderConfig) { c.PoolSize = 1 }, false)
	if _, err := s.Deliver(context.Background(), job("dlvs1", "l@example.com", textEnvelope("one"))); err != nil {
		t.Fatal(err)
	}
	be.DropAll()
	if _, err := s.Deliver(context.Background(), job("dlvs2", "l@example.com", textEnvelope("two"))); err != nil {
		t.Fatalf("after the server dropped the idle connection: %v", err)
	}
	if n, sess := len(be.Raw()), be.Stats().Sessions; n != 2 || sess != 2 {
		t.Fatalf("%d accepted over %d sessions", n, sess)
	}
}

// TestArtifactsLeaveTheSMTPTimeItsShare: slow artifact servers cost at most
// half of what is left of the attempt (fetched side by side, not one after
// another), so the message still goes out in time, linking them; and the
// attachments together stay within twice MaxArtifactBytes.
func TestArtifactsLeaveTheSMTPTimeItsShare(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/slow") {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/pdf")
		w.Write([]byte(strings.Repeat("x", 600)))
	}))
	defer srv.Close()
	be := &smtptest.Server{Keep: true}
	port, _ := smtptest.Start(t, be, TLSNone)
	// Each fetch alone may take 10 s: six one after another would outlast
	// the attempt three times over.
	s := newTestSender(t, port, func(c *SenderConfig) { c.MaxArtifactBytes = 1024; c.ArtifactTimeout = 10 * time.Second }, true)
	parts := []envelope.Part{}
	for i := range 4 {
		parts = append(parts, dataPart(t, "artifact", envelope.Artifact{ArtifactID: fmt.Sprintf("ok%d", i), MimeType: "application/pdf",
			Name: fmt.Sprintf("ok%d.pdf", i), URI: srv.URL + fmt.Sprintf("/ok%d.pdf", i)}))
	}
	for i := range 6 {
		parts = append(parts, dataPart(t, "artifact", envelope.Artifact{ArtifactID: fmt.Sprintf("slow%d", i), MimeType: "application/pdf",
			Name: fmt.Sprintf("slow%d.pdf", i), URI: srv.URL + fmt.Sprintf("/slow%d.pdf", i)}))
	}
	env := textEnvelope("Your documents.", parts...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	got := s.fetchArtifacts(ctx, env)
	if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
		t.Fatalf("the fetches used the whole attempt: %v", ctx.Err())
	}
	attached := 0
	for _, f := range got {
		switch {
		case strings.HasPrefix(f.ArtifactID, "slow") && f.Note != noteNotAttached:
			t.Errorf("%s: note %q", f.ArtifactID, f.Note)
		case strings.HasPrefix(f.ArtifactID, "ok") && len(f.Bytes) > 0:
			attached++
		case strings.HasPrefix(f.ArtifactID, "ok") && f.Note != "too large to attach with the other files":
			t.Errorf("%s: note %q", f.ArtifactID, f.Note)
		}
	}
	if attached != 3 { // 3 × 600 bytes ≤ 2 × 1024 < 4 × 600
		t.Errorf("%d attached, want 3", attached)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel2()
	if _, err := s.Deliver(ctx2, job("dlv41", "k@example.com", env)); err != nil {
		t.Fatalf("the message did not go out within the attempt: %v", err)
	}
}
