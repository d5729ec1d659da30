package email

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-message"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// DevDomain is the default domain of the dev mailboxes: you@DevDomain and
// agent@DevDomain.
const DevDomain = "beachd.localhost"

// DevServerConfig configures the local mail server of `beachd dev`.
type DevServerConfig struct {
	// Domain of the two dev mailboxes; default DevDomain.
	Domain string
	// Host to listen on; default 127.0.0.1. Ports 0 choose free ones.
	Host               string
	SMTPPort, IMAPPort int
	// Rand makes the passwords; default crypto/rand.
	Rand io.Reader
	// MaxMessageBytes accepted by SMTP; default 25 MiB.
	MaxMessageBytes int64
}

// DevUser is one mailbox of the dev server.
type DevUser struct {
	Address  string // also the login name
	Password string
}

// DevServer is an SMTP server that files every message it accepts into an
// in-memory IMAP server. Mail to the agent's address (plus-addresses
// included) lands in the agent's mailbox, which beachd's intake reads; all
// other mail, whatever its domain, lands in the person's mailbox ("you"),
// which a mail client opens. Nothing leaves the machine. The agent's
// address is at once beachd's sending address, where approval replies go
// (agent+<token>@…), and the dev agent's inbound address: a new mail to it
// starts a conversation, a reply to an answer (agent+c-<conversation>…@…)
// continues one.
type DevServer struct {
	cfg        DevServerConfig
	log        *slog.Logger
	You, Agent DevUser
	imapMem    *imapmemserver.Server
	users      map[string]*imapmemserver.User // by address
	smtpLn     net.Listener
	imapLn     net.Listener

	mu       sync.Mutex
	received int
	kept     []DevMessage // the newest DevKeep, oldest first
}

// DevKeep is how many accepted messages the dev server keeps for the dev
// inbox; older ones drop off (the mailboxes keep them all).
const DevKeep = 200

// devMaxText bounds the text kept of one message.
const devMaxText = 16 << 10

// DevMessage is one message the dev server accepted, as the dev inbox
// shows it: read with ParseMessage, whatever its sender.
type DevMessage struct {
	At time.Time
	// Mailboxes it was filed into: "you", "agent" or both.
	Mailboxes []string
	// From is the header's first address; To its recipients (To and Cc).
	From    string
	To      []string
	Subject string
	// ReplyTo is where a reply goes: for an approval request, the
	// agent+token address a reply decides through.
	ReplyTo   string
	MessageID string
	// Text is the plain text (or the HTML part's text), at most 16 KiB;
	// Cut says it was longer.
	Text string
	Cut  bool
}

// NewDevServer creates the dev server and binds its two listeners, so that
// the addresses are known before Run (the sender and the intake are
// configured with them). Close releases them if Run is never called.
func NewDevServer(cfg DevServerConfig, log *slog.Logger) (*DevServer, error) {
	if cfg.Domain == "" {
		cfg.Domain = DevDomain
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 25 << 20
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &DevServer{cfg: cfg, log: log, imapMem: imapmemserver.New(), users: map[string]*imapmemserver.User{}}
	for _, u := range []*DevUser{&d.You, &d.Agent} {
		local := "you"
		if u == &d.Agent {
			local = "agent"
		}
		pw, err := devPassword(cfg.Rand)
		if err != nil {
			return nil, err
		}
		*u = DevUser{Address: local + "@" + cfg.Domain, Password: pw}
		mu := imapmemserver.NewUser(u.Address, pw)
		if err := mu.Create("INBOX", nil); err != nil {
			return nil, fmt.Errorf("dev mailbox: %w", err)
		}
		d.imapMem.AddUser(mu)
		d.users[u.Address] = mu
	}
	var err error
	if d.smtpLn, err = net.Listen("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.SMTPPort))); err != nil {
		return nil, fmt.Errorf("dev smtp listen: %w", err)
	}
	if d.imapLn, err = net.Listen("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.IMAPPort))); err != nil {
		d.smtpLn.Close()
		return nil, fmt.Errorf("dev imap listen: %w", err)
	}
	return d, nil
}

func devPassword(r io.Reader) (string, error) {
	var b [10]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("dev password: %w", err)
	}
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])), nil
}

// SMTPAddr and IMAPAddr are host:port of the listeners.
func (d *DevServer) SMTPAddr() string { return d.smtpLn.Addr().String() }
func (d *DevServer) IMAPAddr() string { return d.imapLn.Addr().String() }

// SMTPPort and IMAPPort are the listening ports.
func (d *DevServer) SMTPPort() int { return d.smtpLn.Addr().(*net.TCPAddr).Port }
func (d *DevServer) IMAPPort() int { return d.imapLn.Addr().(*net.TCPAddr).Port }

// Banner is what `beachd dev` prints about the mail server.
func (d *DevServer) Banner() []string {
	return []string{
		fmt.Sprintf("mail server  SMTP %s, IMAP %s (plain, no TLS; loopback only)", d.SMTPAddr(), d.IMAPAddr()),
		fmt.Sprintf("  your mailbox   %s  password %s  (all mail beachd sends lands here)", d.You.Address, d.You.Password),
		fmt.Sprintf("  agent mailbox  %s  password %s  (beachd reads it: approval replies, and mail to the agent — write to it to talk with the dev agent)", d.Agent.Address, d.Agent.Password),
	}
}

// Received counts the messages accepted so far.
func (d *DevServer) Received() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.received
}

// Messages are the newest messages accepted (at most DevKeep), oldest
// first.
func (d *DevServer) Messages() []DevMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DevMessage(nil), d.kept...)
}

// keep reads an accepted message for the dev inbox; a message the parser
// cannot read is kept with what its header says, or as unreadable.
func (d *DevServer) keep(raw []byte, boxes []string, now time.Time) {
	m := DevMessage{At: now, Mailboxes: boxes}
	if p, err := ParseMessage(raw, ParseOptions{TrustUnauthenticated: true, ReceivedAt: now, MaxBytes: int(d.cfg.MaxMessageBytes) + 4096}); err == nil {
		in := p.Inbound
		m.From, m.To, m.Subject, m.MessageID = in.From, in.Recipients, in.Subject, in.MessageID
		m.Text = in.FullText
		if ent, err := message.Read(bytes.NewReader(raw)); ent != nil && (err == nil || message.IsUnknownCharset(err) || message.IsUnknownEncoding(err)) {
			m.ReplyTo = firstAddress(ent.Header, "Reply-To")
		}
	} else {
		m.Text = "(unreadable message: " + err.Error() + ")"
	}
	if len(m.Text) > devMaxText {
		m.Text, m.Cut = capText(m.Text, devMaxText), true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.received++
	d.kept = append(d.kept, m)
	if len(d.kept) > DevKeep {
		d.kept = append(d.kept[:0:0], d.kept[len(d.kept)-DevKeep:]...)
	}
}

// Close releases the listeners (Run does it itself when ctx ends).
func (d *DevServer) Close() error {
	return errors.Join(d.smtpLn.Close(), d.imapLn.Close())
}

// Run serves SMTP and IMAP until ctx ends; it returns nil then.
func (d *DevServer) Run(ctx context.Context) error {
	ss := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &devSession{d: d}, nil }))
	ss.Domain = d.cfg.Domain
	ss.ErrorLog = slogLogger{d.log, ctx}
	ss.AllowInsecureAuth = true
	ss.MaxMessageBytes = d.cfg.MaxMessageBytes
	ss.MaxRecipients = 100
	ss.ReadTimeout = 5 * time.Minute
	ss.WriteTimeout = time.Minute
	is := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return IdleFlushing(d.imapMem.NewSession()), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}, imap.CapIdle: {}, imap.CapMove: {}, imap.CapUIDPlus: {}},
		InsecureAuth: true,
		Logger:       slogLogger{d.log, ctx},
	})
	errc := make(chan error, 2)
	go func() { errc <- ss.Serve(d.smtpLn) }()
	go func() { errc <- is.Serve(d.imapLn) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	ss.Close()
	is.Close()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("dev mail server: %w", err)
}

// slogLogger takes the mail servers' own error lines: warnings while the
// server runs; once it is stopping, the connections it and its clients close
// ("handling IDLE command: … use of closed network connection") are the
// expected end of a clean stop, logged at debug level.
type slogLogger struct {
	log *slog.Logger
	ctx context.Context
}

func (l slogLogger) Printf(format string, args ...any) { l.print(fmt.Sprintf(format, args...)) }
func (l slogLogger) Println(args ...any)               { l.print(fmt.Sprint(args...)) }

func (l slogLogger) print(msg string) {
	if l.ctx.Err() != nil {
		l.log.Debug(msg)
		return
	}
	l.log.Warn(msg)
}

// mailboxFor routes a recipient: the agent's address (with any +tag) to
// the agent, everything else to you.
func (d *DevServer) mailboxFor(rcpt string) *imapmemserver.User {
	a := strings.ToLower(strings.Trim(rcpt, "<> "))
	local, domain, _ := strings.Cut(a, "@")
	base, _, _ := strings.Cut(local, "+")
	if domain == d.cfg.Domain {
		if u := d.users[base+"@"+domain]; u != nil {
			return u
		}
	}
	return d.users[d.You.Address]
}

// boxName names a mailbox of the dev server: "agent" or "you".
func (d *DevServer) boxName(u *imapmemserver.User) string {
	if u == d.users[d.Agent.Address] {
		return "agent"
	}
	return "you"
}

type devSession struct {
	d    *DevServer
	rcpt []*imapmemserver.User
}

func (s *devSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *devSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		for _, u := range []DevUser{s.d.You, s.d.Agent} {
			if strings.EqualFold(username, u.Address) && password == u.Password {
				return nil
			}
		}
		return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
	}), nil
}

func (s *devSession) Mail(string, *smtp.MailOptions) error { return nil }

func (s *devSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	u := s.d.mailboxFor(to)
	for _, r := range s.rcpt {
		if r == u {
			return nil
		}
	}
	s.rcpt = append(s.rcpt, u)
	return nil
}

func (s *devSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	now := time.Now()
	b = s.d.stamp(b, now)
	var boxes []string
	for _, u := range s.rcpt {
		if _, err := u.Append("INBOX", bytes.NewReader(b), &imap.AppendOptions{Time: now}); err != nil {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "mailbox unavailable"}
		}
		boxes = append(boxes, s.d.boxName(u))
	}
	s.d.keep(b, boxes, now)
	return nil
}

// stamp does what a real submission server does to a message: it adds the
// Message-ID and Date a sender left out (as Postfix's
// always_add_missing_headers does) and a Received line. Without them, two
// identical mails written by hand (curl, the banner's line) would be one
// message to the intake, and an answer could not thread under it.
func (d *DevServer) stamp(b []byte, now time.Time) []byte {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		end = bytes.Index(b, []byte("\n\n"))
	}
	header := b
	if end >= 0 {
		header = b[:end]
	}
	has := func(name string) bool {
		for _, line := range bytes.Split(header, []byte("\n")) {
			if k, _, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(strings.TrimSpace(string(k)), name) {
				return true
			}
		}
		return false
	}
	var id [10]byte
	_, _ = rand.Read(id[:])
	tag := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(id[:]))
	add := fmt.Sprintf("Received: from localhost by %s (beachd dev) id %s; %s\r\n", d.cfg.Domain, tag, now.UTC().Format(time.RFC1123Z))
	if !has("Message-ID") {
		add += fmt.Sprintf("Message-ID: <%s@%s>\r\n", tag, d.cfg.Domain)
	}
	if !has("Date") {
		add += "Date: " + now.UTC().Format(time.RFC1123Z) + "\r\n"
	}
	return append([]byte(add), b...)
}

func (s *devSession) Reset()        { s.rcpt = nil }
func (s *devSession) Logout() error { return nil }

// IdleFlushing makes a session of go-imap's in-memory server report, during
// IDLE, the changes made before IDLE began. Its own IDLE waits for the next
// change, so a message delivered between a client's last command and its
// IDLE went unannounced until the client ended the IDLE (our intake: its
// idle_refresh). This one sends what is queued when IDLE begins and again
// every second, as a real server reports such changes when IDLE begins.
// It keeps the session's IMAP4rev2 methods (MOVE, NAMESPACE), which the
// server looks for by type.
func IdleFlushing(sess imapserver.Session) imapserver.Session {
	if s, ok := sess.(imapserver.SessionIMAP4rev2); ok {
		return idleFlushing{s}
	}
	return sess
}

type idleFlushing struct{ imapserver.SessionIMAP4rev2 }

func (s idleFlushing) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	for {
		if err := s.Poll(w, true); err != nil {
			return err
		}
		inner := make(chan struct{})
		var once sync.Once
		var ended atomic.Bool
		end := func() { once.Do(func() { ended.Store(true); close(inner) }) }
		t := time.AfterFunc(time.Second, end)
		go func() {
			select {
			case <-stop:
				end()
			case <-inner:
			}
		}()
		err := s.SessionIMAP4rev2.Idle(w, inner)
		t.Stop()
		stopped := ended.Load() // before end() below: did the wait end by our hand?
		end()
		select {
		case <-stop:
			return err
		default:
		}
		if err != nil || !stopped {
			return err // ended by itself (no mailbox selected), as without the wrapper
		}
	}
}
