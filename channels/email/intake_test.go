package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// recDecider records what the intake hands over; it fails the first
// failFirst calls.
type recDecider struct {
	mu        sync.Mutex
	got       []envelope.Inbound
	calls     int
	failFirst int
}

func (d *recDecider) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.calls <= d.failFirst {
		return envelope.InboundResult{}, errors.New("store unavailable")
	}
	d.got = append(d.got, in)
	return envelope.InboundResult{Outcome: "decided"}, nil
}

func (d *recDecider) inbound() []envelope.Inbound {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]envelope.Inbound(nil), d.got...)
}

func (d *recDecider) callCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("EMAIL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// runIntake runs an intake until the test ends and checks that Run
// returned nil.
func runIntake(t testing.TB, cfg IntakeConfig, kv KV, dec decider) {
	t.Helper()
	t.Cleanup(runIntakeStoppable(t, cfg, kv, dec))
}

// runIntakeStoppable runs an intake; the returned func stops it (once).
func runIntakeStoppable(t testing.TB, cfg IntakeConfig, kv KV, dec decider) func() {
	t.Helper()
	in, err := NewIntake(cfg, kv, dec, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
}

// mailbox is a test IMAP client acting as a person or an MTA.
type mailbox struct {
	t testing.TB
	c *imapclient.Client
}

func openMailbox(t testing.TB, addr, user, pass string) *mailbox {
	t.Helper()
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Login(user, pass).Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &mailbox{t: t, c: c}
}

func (m *mailbox) appendMsg(mbox string, raw string) {
	m.t.Helper()
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	cmd := m.c.Append(mbox, int64(len(raw)), nil)
	if _, err := cmd.Write([]byte(raw)); err != nil {
		m.t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		m.t.Fatal(err)
	}
	if _, err := cmd.Wait(); err != nil {
		m.t.Fatal(err)
	}
}

// count returns the number of messages in mbox and how many are \Seen.
func (m *mailbox) count(mbox string) (n, seen int) {
	m.t.Helper()
	st, err := m.c.Status(mbox, &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
	if err != nil {
		m.t.Fatalf("status %s: %v", mbox, err)
	}
	return int(*st.NumMessages), int(*st.NumMessages - *st.NumUnseen)
}

// fetchAll returns the raw messages of mbox.
func (m *mailbox) fetchAll(mbox string) []string {
	m.t.Helper()
	sel, err := m.c.Select(mbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		m.t.Fatal(err)
	}
	if sel.NumMessages == 0 {
		return nil
	}
	sec := &imap.FetchItemBodySection{Peek: true}
	var set imap.SeqSet
	set.AddRange(1, sel.NumMessages)
	msgs, err := m.c.Fetch(set, &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil {
		m.t.Fatal(err)
	}
	var out []string
	for _, msg := range msgs {
		out = append(out, string(msg.FindBodySection(sec)))
	}
	return out
}

func replyMsg(n int, msgID, body string) string {
	return fmt.Sprintf("From: Alice <alice@example.com>\r\nTo: agent+%s@beachd.localhost\r\nSubject: Re: Approval needed\r\n"+
		"Message-ID: <%s>\r\nDate: Mon, 2 Mar 2026 09:3%d:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n", tokA, msgID, n%10, body)
}

func devIntakeConfig(d *DevServer) IntakeConfig {
	return IntakeConfig{Host: "127.0.0.1", Port: d.IMAPPort(), TLS: TLSNone, Username: d.Agent.Address, Password: d.Agent.Password,
		PollInterval: time.Hour, IdleRefresh: time.Minute, CommandTimeout: 5 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Parse: ParseOptions{ReplyDomain: "beachd.localhost", ReplyLocal: "agent", OwnAddresses: []string{d.Agent.Address}, TrustUnauthenticated: true}}
}

func startDevServer(t testing.TB) *DevServer {
	t.Helper()
	d, err := NewDevServer(DevServerConfig{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev server Run: %v", err)
		}
	})
	return d
}

// TestIntakeMailboxRules runs the intake against the in-memory IMAP
// server: duplicates, oversize and unreadable mail, a decider that fails.
func TestIntakeMailboxRules(t *testing.T) {
	d := startDevServer(t)
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{failFirst: 2}
	person := openMailbox(t, d.IMAPAddr(), d.Agent.Address, d.Agent.Password)
	person.appendMsg("INBOX", replyMsg(1, "m1@example.com", "Approve"))
	person.appendMsg("INBOX", replyMsg(2, "m1@example.com", "Approve (the same message, delivered twice)"))
	person.appendMsg("INBOX", replyMsg(3, "big@example.com", strings.Repeat("x", 40_000)))
	person.appendMsg("INBOX", "X-Junk: "+strings.Repeat("y", 20_000)+"\r\n\r\nno header end")
	person.appendMsg("INBOX", replyMsg(4, "m4@example.com", "Deny"))
	cfg := devIntakeConfig(d)
	cfg.MaxMessageBytes = 32_000
	cfg.Parse.MaxHeaderBytes = 8 << 10
	runIntake(t, cfg, db, dec)

	poll.Eventually(t, 10*time.Second, "four mails handled", func() bool { return len(dec.inbound()) == 4 })
	got := dec.inbound()
	if got[0].MessageID != "m1@example.com" || got[0].Text != "Approve" || got[0].Token != tokA || got[0].TokenSource != SourceReplyTo ||
		got[0].IgnoredBecause != "" {
		t.Errorf("first: %+v", got[0])
	}
	// The oversize reply: its header alone, ignored, with the sizes.
	big := got[1]
	if big.MessageID != "big@example.com" || big.From != "alice@example.com" || big.Subject != "Re: Approval needed" ||
		big.Text != "" || big.FullText != "" || !strings.HasPrefix(big.IgnoredBecause, "message of 39.") ||
		!strings.HasSuffix(big.IgnoredBecause, " KiB is over the limit of 31.2 KiB (email.imap.max_message_bytes)") {
		t.Errorf("oversize: %+v", big)
	}
	// The unreadable mail has no Message-ID: the dedup key names it.
	junk := "X-Junk: " + strings.Repeat("y", 20_000) + "\r\n\r\nno header end"
	if u := got[2]; u.Channel != envelope.ChannelEmail || u.MessageID != dedupKey("", []byte(junk)) || u.From != "" || !u.AuthFailed ||
		!strings.HasPrefix(u.IgnoredBecause, "unreadable: unreadable message header") || len(u.IgnoredBecause) > 20+maxUnreadableReason {
		t.Errorf("unreadable: %+v", u)
	}
	if got[3].MessageID != "m4@example.com" || got[3].Text != "Deny" || got[3].IgnoredBecause != "" {
		t.Errorf("last: %+v", got[3])
	}
	if n := dec.callCount(); n != 6 { // 2 failures, then m1, big, junk, m4
		t.Errorf("decider called %d times", n)
	}
	// Every mail is moved (and \Seen): handled, oversize, unreadable and
	// the duplicate.
	poll.Eventually(t, 5*time.Second, "mail moved", func() bool {
		n, _ := person.count("INBOX")
		return n == 0
	})
	if n, seen := person.count("Processed"); n != 5 || seen != 5 {
		t.Errorf("Processed: %d messages, %d seen", n, seen)
	}
	for _, id := range []string{"m1@example.com", "big@example.com", "m4@example.com"} {
		if _, ok, _ := db.GetKV(context.Background(), "imap-msgid/"+dedupKey(id, nil)); !ok {
			t.Errorf("%s not recorded as processed", id)
		}
	}
	if _, ok, _ := db.GetKV(context.Background(), "imap-msgid/"+dedupKey("", []byte(junk))); !ok {
		t.Error("the unreadable mail is not recorded as processed")
	}
	poll.Eventually(t, 5*time.Second, "cursor past the last message", func() bool {
		cur, _, _ := db.GetKV(context.Background(), "imap/INBOX")
		return strings.Contains(string(cur), `"lastUid":5`)
	})
}

// TestDevServerRoundTrip: beachd's mail reaches the person's mailbox; the
// person's reply, sent through the same SMTP server, comes back through the
// intake with its token.
func TestDevServerRoundTrip(t *testing.T) {
	d := startDevServer(t)
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{}
	runIntake(t, devIntakeConfig(d), db, dec)

	s, err := NewSender(SenderConfig{From: "Travel Agent <" + d.Agent.Address + ">", ReplyTo: d.Agent.Address,
		MessageIDDomain: "beachd.localhost", Host: "127.0.0.1", Port: d.SMTPPort(), TLS: TLSNone,
		Username: d.Agent.Address, Password: d.Agent.Password, Timeout: 5 * time.Second}, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := job("dlvdev1", "alice@example.com", textEnvelope("Shall I book LH 902?"))
	j.Approvals = append(j.Approvals, handle(tokA))
	if _, err := s.Deliver(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	you := openMailbox(t, d.IMAPAddr(), d.You.Address, d.You.Password)
	var got []string
	poll.Eventually(t, 5*time.Second, "mail in your mailbox", func() bool { got = you.fetchAll("INBOX"); return len(got) == 1 })
	ours, err := ParseMessage([]byte(got[0]), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got[0], "Reply-To: <agent+"+tokA+"@beachd.localhost>") {
		t.Fatalf("no plus-address Reply-To:\n%s", got[0])
	}

	// The person answers from their mail client through the dev SMTP server.
	answer := fmt.Sprintf("From: Alice <alice@example.com>\r\nTo: agent+%s@beachd.localhost\r\nSubject: Re: %s\r\n"+
		"Message-ID: <answer1@example.com>\r\nIn-Reply-To: <%s>\r\nReferences: <%s>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+
		"Approve, thanks\r\n\r\nOn Mon, 2 Mar 2026 at 09:30, Travel Agent <agent@beachd.localhost> wrote:\r\n> Shall I book LH 902?\r\n",
		tokA, ours.Inbound.Subject, ours.Inbound.MessageID, ours.Inbound.MessageID)
	c, err := smtpDial(d.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendMail("alice@example.com", []string{"agent+" + tokA + "@beachd.localhost"}, strings.NewReader(answer)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	poll.Eventually(t, 10*time.Second, "reply handled", func() bool { return len(dec.inbound()) == 1 })
	in := dec.inbound()[0]
	if in.Token != tokA || in.TokenSource != SourceReplyTo || in.Text != "Approve, thanks" || in.From != "alice@example.com" || in.AutoGenerated {
		t.Fatalf("inbound %+v", in)
	}
	poll.Eventually(t, 5*time.Second, "dev server counted both messages", func() bool { return d.Received() == 2 })
}

func handle(token string) render.ApprovalHandle {
	return render.ApprovalHandle{ApprovalID: "ap1", Token: token,
		Request: envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book_flight"}}
}

func smtpDial(addr string) (*smtp.Client, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return nil, err
	}
	if err := c.Hello("client.test"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// blackhole is a TCP proxy that can stop forwarding without closing
// anything: the half-open connection of a crashed NAT or server.
type blackhole struct {
	ln       net.Listener
	target   string
	frozen   atomic.Bool
	accepted atomic.Int32
}

func newBlackhole(t testing.TB, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); up.Close() })
			go b.pipe(c, up)
			go b.pipe(up, c)
		}
	}()
	return b
}

func (b *blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		if b.frozen.Load() {
			continue // swallowed
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
	}
}

// TestIntakeDetectsDeadConnection: the server stops answering without
// closing the connection. Ending IDLE times out, the intake reconnects
// (with backoff while nothing answers) and, once the path works again,
// handles the mail that arrived meanwhile.
func TestIntakeDetectsDeadConnection(t *testing.T) {
	d := startDevServer(t)
	bh := newBlackhole(t, d.IMAPAddr())
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{}
	cfg := devIntakeConfig(d)
	cfg.Port = bh.ln.Addr().(*net.TCPAddr).Port
	cfg.IdleRefresh, cfg.CommandTimeout = 200*time.Millisecond, 400*time.Millisecond
	runIntake(t, cfg, db, dec)
	poll.Eventually(t, 5*time.Second, "connected", func() bool {
		_, ok, _ := db.GetKV(context.Background(), "imap/INBOX")
		return ok
	})
	bh.frozen.Store(true)
	mta := openMailbox(t, d.IMAPAddr(), d.Agent.Address, d.Agent.Password)
	mta.appendMsg("INBOX", replyMsg(1, "late@example.com", "Approve"))
	poll.Eventually(t, 10*time.Second, "reconnect attempts", func() bool { return bh.accepted.Load() >= 3 })
	if len(dec.inbound()) != 0 {
		t.Fatal("handled through a dead connection")
	}
	bh.frozen.Store(false)
	poll.Eventually(t, 10*time.Second, "handled after the path recovered", func() bool { return len(dec.inbound()) == 1 })
}

func openMailboxTLS(t testing.TB, port int, mode string, clientTLS *tls.Config) *mailbox {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var c *imapclient.Client
	var err error
	switch mode {
	case TLSImplicit:
		c, err = imapclient.DialTLS(addr, &imapclient.Options{TLSConfig: clientTLS})
	case TLSStartTLS:
		c, err = imapclient.DialStartTLS(addr, &imapclient.Options{TLSConfig: clientTLS})
	default:
		c, err = imapclient.DialInsecure(addr, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Login("agent@beachd.localhost", "pw").Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &mailbox{t: t, c: c}
}

// TestIntakePoisonMessageIsSkipped: a message the decider fails on every
// time is left unread after MaxFailures tries; the mail behind it flows.
func TestIntakePoisonMessageIsSkipped(t *testing.T) {
	d := startDevServer(t)
	db := storetest.Open(t, bolt.Options{})
	dec := &poisonDecider{poison: "poison@example.com"}
	mta := openMailbox(t, d.IMAPAddr(), d.Agent.Address, d.Agent.Password)
	mta.appendMsg("INBOX", replyMsg(1, "poison@example.com", "Approve"))
	mta.appendMsg("INBOX", replyMsg(2, "fine@example.com", "Deny"))
	cfg := devIntakeConfig(d)
	cfg.MaxFailures = 3
	runIntake(t, cfg, db, dec)
	poll.Eventually(t, 10*time.Second, "the next message handled", func() bool { return dec.handled.Load() == 1 })
	if n := dec.poisonCalls.Load(); n != 3 {
		t.Errorf("poison message tried %d times, want 3", n)
	}
	poll.Eventually(t, 5*time.Second, "poison left unread", func() bool {
		n, seen := mta.count("INBOX")
		return n == 1 && seen == 0
	})
}

type poisonDecider struct {
	poison      string
	poisonCalls atomic.Int32
	handled     atomic.Int32
}

func (p *poisonDecider) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	if in.MessageID == p.poison {
		p.poisonCalls.Add(1)
		return envelope.InboundResult{}, errors.New("cannot store this one")
	}
	p.handled.Add(1)
	return envelope.InboundResult{Outcome: "decided"}, nil
}
