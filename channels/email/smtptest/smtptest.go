// Package smtptest is the fake SMTP server the tests share: a go-smtp
// server on 127.0.0.1 that accepts every message, or fails at the step a
// test chooses (MAIL, RCPT, after DATA, by hanging up before or after the
// final ".", or by hanging), optionally over STARTTLS or implicit TLS with
// a throw-away certificate and with PLAIN authentication. It counts what it
// accepted by Message-ID, so duplicates show. Tests that can use a real
// MTA do (see scripts/peers); this fake is for the steps no real peer can
// be made to fail at on demand. Production code never imports it.
package smtptest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The TLS modes of Listen and Start.
const (
	Plain       = "none"     // no TLS
	StartTLS    = "starttls" // STARTTLS offered
	ImplicitTLS = "tls"      // TLS from the first byte
)

// The credentials PLAIN authentication accepts.
const (
	Username = "beachd"
	Password = "s3cret"
)

// Message is one accepted message.
type Message struct {
	MessageID string // without the angle brackets
	From      string
	To        []string
	Subject   string
	Size      int
	At        time.Time
	Raw       []byte
}

// Stats are the server's counters.
type Stats struct {
	// Total accepted messages, Unique Message-IDs, Duplicates = Total-Unique.
	Total, Unique, Duplicates int
	// Sessions opened; Partial: DATA that ended before the final "." (the
	// message was not accepted).
	Sessions, Partial int
}

// Server is the fake. Its exported fields are set before it serves, or
// later under Set.
type Server struct {
	// MailErr, RcptErr and DataErr, when set, are the replies to every
	// MAIL FROM, RCPT TO and end of DATA.
	MailErr, RcptErr, DataErr *smtp.SMTPError
	// Refuse, when set, is asked at the end of DATA with the message's
	// recipients and Message-ID; a non-nil reply refuses the message.
	Refuse func(rcpts []string, msgID string) *smtp.SMTPError
	// RcptRefuse, when set, is asked for each RCPT TO.
	RcptRefuse func(rcpt string) *smtp.SMTPError
	// DropMidData reads 1 KiB of the message and closes the connection;
	// DropAfterData reads all of it and closes without a reply.
	DropMidData, DropAfterData bool
	// Hang, when set, makes DATA wait after the message until it is
	// closed; the message is then refused, unless Hang was cleared first.
	Hang chan struct{}
	// RequireAuth refuses MAIL FROM before PLAIN authentication.
	RequireAuth bool
	// Keep keeps every accepted message (Messages, Raw); otherwise only
	// the counters and first-acceptance times are kept.
	Keep bool
	// Now is the clock of Message.At; time.Now when nil.
	Now func() time.Time

	srv *smtp.Server
	ln  net.Listener

	mu       sync.Mutex
	first    map[string]time.Time
	count    map[string]int
	msgs     []Message
	auths    []string
	conns    []*smtp.Conn
	sessions int
	partial  int
	total    int
	changed  chan struct{}
}

// Start serves s on 127.0.0.1:0 in TLS mode (Plain, StartTLS or
// ImplicitTLS) until the test ends. It returns the port and, with TLS, a
// client configuration that trusts the server's certificate.
func Start(t testing.TB, s *Server, mode string) (int, *tls.Config) {
	t.Helper()
	clientTLS, err := s.Listen(mode)
	if err != nil {
		t.Fatalf("start fake smtp server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Port(), clientTLS
}

// Listen serves s on 127.0.0.1:0 until Close, for callers that are not
// tests (the stress rig's benchmarks).
func (s *Server) Listen(mode string) (*tls.Config, error) {
	s.mu.Lock()
	if s.Now == nil {
		s.Now = time.Now
	}
	s.first, s.count, s.changed = map[string]time.Time{}, map[string]int{}, make(chan struct{})
	s.mu.Unlock()
	srv := smtp.NewServer(backend{s})
	srv.Domain = "sink.localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 64 << 20
	srv.MaxRecipients = 1000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	var clientTLS *tls.Config
	switch mode {
	case Plain, "":
	case StartTLS, ImplicitTLS:
		serverTLS, pool, err := SelfSigned()
		if err != nil {
			ln.Close()
			return nil, err
		}
		clientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
		srv.TLSConfig = serverTLS
		if mode == ImplicitTLS {
			ln = tls.NewListener(ln, serverTLS)
		}
	default:
		ln.Close()
		return nil, fmt.Errorf("unknown tls mode %q", mode)
	}
	s.srv, s.ln = srv, ln
	go srv.Serve(ln)
	return clientTLS, nil
}

// Addr is the listening address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the listening port.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops the server and closes every connection.
func (s *Server) Close() error { return s.srv.Close() }

// Set changes the server's settings while it serves.
func (s *Server) Set(f func(s *Server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// DropAll closes every connection, as a server's idle timeout would.
func (s *Server) DropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Conn().Close()
	}
	s.conns = nil
}

// Raw returns the kept messages as received (Keep).
func (s *Server) Raw() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = m.Raw
	}
	return out
}

// Messages returns the kept messages (Keep).
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Auths lists the usernames that authenticated, one per success.
func (s *Server) Auths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

// Count is how many times msgID was accepted.
func (s *Server) Count(msgID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[strings.Trim(msgID, "<>")]
}

// First is when msgID was first accepted.
func (s *Server) First(msgID string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.first[strings.Trim(msgID, "<>")]
	return t, ok
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Total: s.total, Unique: len(s.count), Duplicates: s.total - len(s.count), Sessions: s.sessions, Partial: s.partial}
}

// Changed is closed at the next accepted message.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

type backend struct{ s *Server }

func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	b.s.mu.Lock()
	b.s.sessions++
	b.s.conns = append(b.s.conns, c)
	b.s.mu.Unlock()
	return &session{s: b.s, c: c}, nil
}

type session struct {
	s      *Server
	c      *smtp.Conn
	authed bool
	from   string
	rcpts  []string
}

func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != Username || password != Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		ss.authed = true
		ss.s.mu.Lock()
		ss.s.auths = append(ss.s.auths, username)
		ss.s.mu.Unlock()
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	if ss.s.RequireAuth && !ss.authed {
		return smtp.ErrAuthRequired
	}
	if ss.s.MailErr != nil {
		return ss.s.MailErr
	}
	ss.from, ss.rcpts = from, nil
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.mu.Lock()
	rcptErr, refuse := ss.s.RcptErr, ss.s.RcptRefuse
	ss.s.mu.Unlock()
	if rcptErr != nil {
		return rcptErr
	}
	if refuse != nil {
		if e := refuse(to); e != nil {
			return e
		}
	}
	ss.rcpts = append(ss.rcpts, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	ss.s.mu.Lock()
	dataErr, dropAfter, dropMid, hang, refuse := ss.s.DataErr, ss.s.DropAfterData, ss.s.DropMidData, ss.s.Hang, ss.s.Refuse
	ss.s.mu.Unlock()
	if dropMid {
		_, _ = io.CopyN(io.Discard, r, 1024)
		ss.c.Conn().Close()
		return errors.New("dropped")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		// The connection ended inside DATA: nothing is accepted.
		ss.s.mu.Lock()
		ss.s.partial++
		ss.s.mu.Unlock()
		return err
	}
	if dropAfter {
		ss.c.Conn().Close()
		return errors.New("dropped")
	}
	if hang != nil {
		<-hang
		ss.s.mu.Lock()
		stillHung := ss.s.Hang != nil
		ss.s.mu.Unlock()
		if stillHung {
			return errors.New("hung")
		}
		// Released by clearing Hang first: the message is taken.
	}
	if dataErr != nil {
		return dataErr
	}
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(b))).ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "unreadable header"}
	}
	id := strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>")
	if refuse != nil {
		if e := refuse(ss.rcpts, id); e != nil {
			return e
		}
	}
	now := ss.s.Now()
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.total++
	if _, ok := ss.s.first[id]; !ok {
		ss.s.first[id] = now
	}
	ss.s.count[id]++
	if ss.s.Keep {
		ss.s.msgs = append(ss.s.msgs, Message{MessageID: id, From: ss.from, To: append([]string(nil), ss.rcpts...),
			Subject: h.Get("Subject"), Size: len(b), At: now, Raw: b})
	}
	close(ss.s.changed)
	ss.s.changed = make(chan struct{})
	return nil
}

func (ss *session) Reset()        { ss.from, ss.rcpts = "", nil }
func (ss *session) Logout() error { return nil }

// SelfSigned returns a server TLS configuration with a throw-away
// certificate for 127.0.0.1 and localhost, and a pool that trusts it.
func SelfSigned() (*tls.Config, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sink"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool, nil
}
