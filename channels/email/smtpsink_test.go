package email

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// sink is a go-smtp backend the test controls: it accepts, refuses with a
// chosen reply at a chosen step, hangs up after the final ".", or hangs.
type sink struct {
	mu       sync.Mutex
	accepted [][]byte
	sessions int
	auths    []string

	// Set by the test before a send (under mu).
	mailErr, rcptErr, dataErr *smtp.SMTPError
	dropAfterData             bool          // read the whole message, close without a reply
	dropMidData               bool          // read 1 KiB of the message, close
	hang                      chan struct{} // after the message, wait for this; then fail, or accept if hang was cleared first
	requireAuth               bool
	discard                   bool // count, do not keep (benchmarks)
	count                     int
	conns                     []*smtp.Conn
}

// dropAll closes every connection, as a server's idle timeout would.
func (s *sink) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Conn().Close()
	}
	s.conns = nil
}

func (s *sink) NewSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	s.sessions++
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	return &sinkSession{s: s, c: c}, nil
}

func (s *sink) set(f func(s *sink)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *sink) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.accepted...)
}

func (s *sink) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

type sinkSession struct {
	s      *sink
	c      *smtp.Conn
	authed bool
}

func (ss *sinkSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *sinkSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != "beachd" || password != "s3cret" {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		ss.authed = true
		ss.s.mu.Lock()
		ss.s.auths = append(ss.s.auths, username)
		ss.s.mu.Unlock()
		return nil
	}), nil
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	if ss.s.requireAuth && !ss.authed {
		return smtp.ErrAuthRequired
	}
	if ss.s.mailErr != nil {
		return ss.s.mailErr
	}
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	if ss.s.rcptErr != nil {
		return ss.s.rcptErr
	}
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	ss.s.mu.Lock()
	dataErr, dropAfter, dropMid, hang := ss.s.dataErr, ss.s.dropAfterData, ss.s.dropMidData, ss.s.hang
	ss.s.mu.Unlock()
	if dropMid {
		_, _ = io.CopyN(io.Discard, r, 1024)
		ss.c.Conn().Close()
		return errors.New("dropped")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if dropAfter {
		ss.c.Conn().Close()
		return errors.New("dropped")
	}
	if hang != nil {
		<-hang
		ss.s.mu.Lock()
		stillHung := ss.s.hang != nil
		ss.s.mu.Unlock()
		if stillHung {
			return errors.New("hung")
		}
		// Released by clearing hang first: the message is taken.
	}
	if dataErr != nil {
		return dataErr
	}
	ss.s.mu.Lock()
	ss.s.count++
	if !ss.s.discard {
		ss.s.accepted = append(ss.s.accepted, b)
	}
	ss.s.mu.Unlock()
	return nil
}

func (ss *sinkSession) Reset()        {}
func (ss *sinkSession) Logout() error { return nil }

// startSink serves be on 127.0.0.1:0. mode is none, starttls or tls. It
// returns the port and a client TLS config that trusts the server.
func startSink(t testing.TB, be smtp.Backend, mode string) (int, *tls.Config) {
	t.Helper()
	srv := smtp.NewServer(be)
	srv.Domain = "sink.localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 64 << 20
	var clientTLS *tls.Config
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if mode != TLSNone {
		serverTLS, pool := selfSigned(t)
		clientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
		srv.TLSConfig = serverTLS
		if mode == TLSImplicit {
			ln = tls.NewListener(ln, serverTLS)
		}
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	port, _ := strconv.Atoi(ln.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):])
	return port, clientTLS
}

func selfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}
