package stress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// SMTPMessage is one message the sink accepted.
type SMTPMessage struct {
	MessageID string
	From      string
	To        []string
	Subject   string
	Size      int
	At        time.Time
}

// SMTPSink is an SMTP server on 127.0.0.1 that accepts every message (or
// refuses it, when Refuse says so) and records it by Message-ID.
type SMTPSink struct {
	// Refuse, when set, is asked at the end of DATA; a non-nil reply
	// refuses the message. It is called with the message's recipients.
	Refuse func(rcpts []string, msgID string) *smtp.SMTPError
	// RcptRefuse, when set, is asked for each RCPT TO.
	RcptRefuse func(rcpt string) *smtp.SMTPError
	// Now is the clock of At; default time.Now.
	Now func() time.Time
	// Keep: keep every message (default keeps only counts and first times).
	Keep bool

	srv *smtp.Server
	ln  net.Listener

	mu       sync.Mutex
	first    map[string]time.Time
	count    map[string]int
	msgs     []SMTPMessage
	sessions int
	partial  int
	total    int
	changed  chan struct{}
}

// StartSMTPSink serves a sink on 127.0.0.1:0. Set the hooks before the
// first message; Close stops it.
func StartSMTPSink(s *SMTPSink) (*SMTPSink, error) {
	if s == nil {
		s = &SMTPSink{}
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	s.first, s.count, s.changed = map[string]time.Time{}, map[string]int{}, make(chan struct{})
	s.srv = smtp.NewServer(sinkBackend{s})
	s.srv.Domain = "sink.localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	s.srv.MaxMessageBytes = 64 << 20
	s.srv.MaxRecipients = 1000
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.ln = ln
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is host:port.
func (s *SMTPSink) Addr() string { return s.ln.Addr().String() }

// Port is the listening port.
func (s *SMTPSink) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops the server and closes every connection.
func (s *SMTPSink) Close() error { return s.srv.Close() }

// Count is how many times msgID was accepted.
func (s *SMTPSink) Count(msgID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[strings.Trim(msgID, "<>")]
}

// First is when msgID was first accepted.
func (s *SMTPSink) First(msgID string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.first[strings.Trim(msgID, "<>")]
	return t, ok
}

// SMTPStats are the sink's counters.
type SMTPStats struct {
	// Total accepted messages, Unique Message-IDs, Duplicates = Total-Unique.
	Total, Unique, Duplicates int
	// Sessions opened; Partial: DATA that ended before the final "." (the
	// message was not accepted).
	Sessions, Partial int
}

// Stats returns the counters.
func (s *SMTPSink) Stats() SMTPStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SMTPStats{Total: s.total, Unique: len(s.count), Duplicates: s.total - len(s.count), Sessions: s.sessions, Partial: s.partial}
}

// Messages returns the kept messages (Keep).
func (s *SMTPSink) Messages() []SMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMTPMessage(nil), s.msgs...)
}

// Changed is closed at the next accepted message.
func (s *SMTPSink) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

type sinkBackend struct{ s *SMTPSink }

func (b sinkBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	b.s.mu.Lock()
	b.s.sessions++
	b.s.mu.Unlock()
	return &sinkSession{s: b.s}, nil
}

type sinkSession struct {
	s     *SMTPSink
	from  string
	rcpts []string
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.from, ss.rcpts = from, nil
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.s.RcptRefuse != nil {
		if e := ss.s.RcptRefuse(to); e != nil {
			return e
		}
	}
	ss.rcpts = append(ss.rcpts, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		// The connection ended inside DATA: nothing is accepted.
		ss.s.mu.Lock()
		ss.s.partial++
		ss.s.mu.Unlock()
		return err
	}
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(b))).ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "unreadable header"}
	}
	id := strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>")
	if ss.s.Refuse != nil {
		if e := ss.s.Refuse(ss.rcpts, id); e != nil {
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
		ss.s.msgs = append(ss.s.msgs, SMTPMessage{MessageID: id, From: ss.from, To: append([]string(nil), ss.rcpts...),
			Subject: h.Get("Subject"), Size: len(b), At: now})
	}
	close(ss.s.changed)
	ss.s.changed = make(chan struct{})
	return nil
}

func (ss *sinkSession) Reset()        { ss.from, ss.rcpts = "", nil }
func (ss *sinkSession) Logout() error { return nil }
