package approvals

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// TestNoEmailLinks (THREATS #3): with approvals.email_links off, a mail
// carries no confirmation link, a link sent by mail before the switch no
// longer decides (GET or POST, even with a page nonce taken while it
// still worked), and a reply from the recipient still does.
func TestNoEmailLinks(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	env := h.suspend("appr-nolinks")
	d := h.ingest(env, email(alice))[0]
	old := h.handle(d)
	if old.LinkURL == "" {
		t.Fatal("links are on by default, but the mail has none")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/a/{token}", func(w http.ResponseWriter, r *http.Request) { h.svc.LinkHandler().ServeHTTP(w, r) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	link := srv.URL + strings.TrimPrefix(old.LinkURL, "https://beachd.example.org")
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(readAll(t, res))[1]

	// The operator turns links in mail off: the same store and secret.
	svc, err := New(Config{Secret: []byte(strings.Repeat("k", 32)), PublicURL: "https://beachd.example.org", Now: h.clock.Now,
		NoEmailLinks: true}, h.db, h.enq, h.inj, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	hd := h.handle(d)
	if hd.LinkURL != "" || hd.Token != old.Token {
		t.Fatalf("handle with links off: %+v", hd)
	}
	res, err = http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(body, "Reply to the message instead") || strings.Contains(body, "<form") {
		t.Fatalf("GET of a mailed link: %d\n%s", res.StatusCode, body)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = noRedirect.PostForm(link, url.Values{"decision": {"granted"}, "nonce": {nonce}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || h.approval("appr-nolinks").State != store.ApprovalPending {
		t.Fatalf("POST through a mailed link: %d, state %s", res.StatusCode, h.approval("appr-nolinks").State)
	}
	// Straight to HandleInbound, as the page would: refused too.
	tok := strings.TrimPrefix(old.LinkURL, "https://beachd.example.org/a/")
	if r := h.inbound(envelope.Inbound{Channel: ChannelLink, Token: tok, TokenSource: "link", MessageID: "page:" + nonce,
		Decision: "granted", ReceivedAt: h.clock.Now()}); r.Outcome != OutcomeUnknownToken {
		t.Fatalf("link token through HandleInbound: %+v", r)
	}
	// A reply still decides.
	if r := h.inbound(envelope.Inbound{Channel: "email", From: alice, MessageID: "<r1@mail>", Token: hd.Token,
		TokenSource: "subject", Text: "Yes, go ahead"}); r.Outcome != OutcomeDecided || r.Decision != "granted" {
		t.Fatalf("reply: %+v", r)
	}
	checkReceived(t, h, env, "appr-nolinks", "granted", alice)
}

// TestNoEmailLinksOneApprovalAMail: without links, a mail is answered by
// replying, and a reply answers the one approval its subject names; an
// envelope asking two approvals of a mail recipient is refused before
// anything is stored, naming the recipient. Other channels may still ask
// several.
func TestNoEmailLinksOneApprovalAMail(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.NoEmailLinks = true }})
	env := h.suspend("appr-one")
	second := h.suspend("appr-two")
	env.Parts = append(env.Parts, second.PartsOf("approval-request")...)
	_, _, err := h.svc.Prepare(h.ctx, env, []envelope.Recipient{sms(bob), email(alice)}, "travel")
	var ve *envelope.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "to[1]" || !strings.Contains(ve.Problems[0].Reason, "one envelope per approval") {
		t.Fatalf("two approvals to a mail recipient: %v", err)
	}
	if _, _, err := h.svc.Prepare(h.ctx, env, []envelope.Recipient{sms(bob)}, "travel"); err != nil {
		t.Fatalf("two approvals by SMS: %v", err)
	}
}
