package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/textproto"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// TLS modes of SenderConfig.TLS.
const (
	TLSStartTLS = "starttls"
	TLSImplicit = "tls"
	TLSNone     = "none"
)

// SenderConfig configures a Sender. Zero values are the documented defaults.
type SenderConfig struct {
	// From is the sender, "Name <addr@domain>" or "addr@domain". Required.
	From string
	// ReplyTo is the base reply address LOCAL@REPLYDOMAIN; the renderer
	// adds +TOKEN for messages that ask for an approval. Empty: no Reply-To.
	ReplyTo string
	// MessageIDDomain defaults to From's domain.
	MessageIDDomain string
	// ConversationKey signs the reply address of a conversation answer
	// (ReplyAddress; the intake's IntakeConfig has the same key). Without
	// it an answer's Reply-To is ReplyTo.
	ConversationKey []byte
	// ConversationFrom, when set, are the addresses a conversation answer
	// may go out from (the agents' inbound addresses): an answer from any
	// other fails permanently. Empty accepts any.
	ConversationFrom []string

	Host     string
	Port     int    // default 587 (starttls), 465 (tls), 25 (none)
	Username string // empty: no AUTH
	Password string
	// TLS is starttls (default), tls (implicit, "SMTPS") or none (only for a
	// loopback host).
	TLS string
	// TLSConfig overrides the TLS client configuration (tests pin a CA).
	TLSConfig *tls.Config
	// HELO is the name we greet with; default the local host name.
	HELO string
	// Timeout bounds the connection set-up and each message's transaction;
	// default 30 s.
	Timeout time.Duration
	// PoolSize is how many connections are kept open and reused; default 2.
	PoolSize int
	// MaxIdle: a pooled connection idle longer than this is checked with
	// NOOP before it is reused; default 10 s.
	MaxIdle time.Duration

	// DKIM signs every message when Domain is set (dkim.go says which
	// header fields, and how they are over-signed).
	DKIM DKIMConfig

	// MaxArtifactBytes caps one fetched artifact (bigger: a link), and
	// twice it all of a message's attachments; default 10 MiB.
	// ArtifactTimeout bounds one fetch; default 20 s. All the fetches of an
	// attempt share at most half of its remaining time.
	MaxArtifactBytes int64
	ArtifactTimeout  time.Duration

	// Now is the clock (Date header); default time.Now.
	Now func() time.Time
}

// DKIMConfig selects DKIM signing.
type DKIMConfig struct {
	Domain   string
	Selector string
	// PrivateKeyPEM (PKCS#1 or PKCS#8, RSA or Ed25519) or PrivateKeyFile.
	PrivateKeyPEM  []byte
	PrivateKeyFile string
}

// IsLoopbackHost reports whether host names this machine (localhost, a
// loopback IP, or a .localhost name).
func IsLoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

func (c *SenderConfig) withDefaults() {
	if c.TLS == "" {
		c.TLS = TLSStartTLS
	}
	if c.Port == 0 {
		switch c.TLS {
		case TLSImplicit:
			c.Port = 465
		case TLSNone:
			c.Port = 25
		default:
			c.Port = 587
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.PoolSize <= 0 {
		c.PoolSize = 2
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = 10 * time.Second
	}
	if c.MaxArtifactBytes <= 0 {
		c.MaxArtifactBytes = 10 << 20
	}
	if c.ArtifactTimeout <= 0 {
		c.ArtifactTimeout = 20 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HELO == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			c.HELO = h
		} else {
			c.HELO = "localhost"
		}
	}
}

// Validate reports a configuration that cannot work.
func (c SenderConfig) Validate() error {
	var errs []error
	if _, err := mail.ParseAddress(c.From); err != nil {
		errs = append(errs, fmt.Errorf("from: %w", err))
	}
	if c.ReplyTo != "" {
		if _, err := mail.ParseAddress(c.ReplyTo); err != nil {
			errs = append(errs, fmt.Errorf("reply-to: %w", err))
		}
	}
	if c.Host == "" {
		errs = append(errs, errors.New("smtp host: required"))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, errors.New("smtp port: must be 1-65535"))
	}
	switch c.TLS {
	case "", TLSStartTLS, TLSImplicit:
	case TLSNone:
		if !IsLoopbackHost(c.Host) {
			errs = append(errs, fmt.Errorf("smtp tls: none is only allowed for a loopback host, not %q", c.Host))
		}
	default:
		errs = append(errs, fmt.Errorf("smtp tls: %q is not starttls, tls or none", c.TLS))
	}
	if c.DKIM.Domain != "" && (c.DKIM.Selector == "" || (len(c.DKIM.PrivateKeyPEM) == 0 && c.DKIM.PrivateKeyFile == "")) {
		errs = append(errs, errors.New("dkim: domain needs a selector and a private key"))
	}
	return errors.Join(errs...)
}

// Sender delivers email jobs over SMTP. It is safe for concurrent use; at
// most PoolSize messages are in flight at once, each on its own connection.
type Sender struct {
	cfg      SenderConfig
	renderer *render.Renderer
	registry *envelope.Registry
	http     *http.Client // the guarded artifact client (channels/fetch)
	log      *slog.Logger
	dkim     *dkimSigner
	pool     *pool
	// admitted counts the jobs the dispatcher holds for this sender
	// (Admit, Done).
	admitted atomic.Int64
}

var (
	_ channels.Deliverer       = (*Sender)(nil)
	_ channels.ChannelAdmitter = (*Sender)(nil)
	_ channels.IDFreeAdmitter  = (*Sender)(nil)
)

// Admit lets the dispatcher hand this sender at most twice PoolSize jobs
// at once: while PoolSize are on the wire, as many more can render and
// fetch their artifacts. Without it every dispatch worker could end up
// waiting for a pooled connection, and deliveries on other channels
// would wait behind a slow mail server.
func (s *Sender) Admit(*store.Delivery) bool {
	if s.admitted.Add(1) > int64(2*s.cfg.PoolSize) {
		s.admitted.Add(-1)
		return false
	}
	return true
}

// AdmitsWithoutID: Admit and Done count jobs only
// (channels.IDFreeAdmitter), so fresh deliveries can be handed off.
func (s *Sender) AdmitsWithoutID() {}

// Done gives back the place Admit gave.
func (s *Sender) Done(*store.Delivery) { s.admitted.Add(-1) }

// RefusesChannel: a refusal is about the connection pool, not the
// recipient (channels.ChannelAdmitter).
func (s *Sender) RefusesChannel() {}

// NewSender builds a Sender. renderer may be nil: the message is then the
// plain text of the envelope's response parts (fallbackEmail). fetcher is
// the guarded client that fetches artifacts, whose URLs come from content
// (nil: one that reaches the public internet only).
func NewSender(cfg SenderConfig, renderer *render.Renderer, registry *envelope.Registry, fetcher *fetch.Client, log *slog.Logger) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if fetcher == nil {
		var err error
		if fetcher, err = fetch.New(fetch.Config{Timeout: cfg.ArtifactTimeout, MaxBytes: cfg.MaxArtifactBytes + 1}); err != nil {
			return nil, fmt.Errorf("artifact fetcher: %w", err)
		}
	}
	s := &Sender{cfg: cfg, renderer: renderer, registry: registry, http: fetcher.HTTPClient(), log: log}
	if cfg.DKIM.Domain != "" {
		pem := cfg.DKIM.PrivateKeyPEM
		if len(pem) == 0 {
			b, err := os.ReadFile(cfg.DKIM.PrivateKeyFile)
			if err != nil {
				return nil, fmt.Errorf("dkim private key: %w", err)
			}
			pem = b
		}
		signer, err := newDKIMSigner(cfg.DKIM.Domain, cfg.DKIM.Selector, pem)
		if err != nil {
			return nil, fmt.Errorf("dkim private key: %w", err)
		}
		s.dkim = signer
	}
	s.pool = &pool{size: cfg.PoolSize, sem: make(chan struct{}, cfg.PoolSize), dial: s.dial, maxIdle: cfg.MaxIdle, timeout: cfg.Timeout, now: cfg.Now}
	return s, nil
}

// Close closes the pooled connections (QUIT).
func (s *Sender) Close() error { return s.pool.close() }

// conn is one SMTP connection: go-mail's SMTP client (dialled, with TLS
// and AUTH done, by go-mail's Client) for the transaction and the raw
// socket, which is closed to abort a transaction when the context ends
// (the SMTP client holds its lock across a read).
type conn struct {
	sc       *smtp.Client
	raw      net.Conn
	lastUsed time.Time
	reused   bool // taken from the idle pool
}

func (s *Sender) dial(ctx context.Context) (*conn, error) {
	c := &conn{}
	// rawMu: dialFn sets c.raw while the context watcher may read it.
	var rawMu sync.Mutex
	closeRaw := func() {
		rawMu.Lock()
		defer rawMu.Unlock()
		if c.raw != nil {
			c.raw.Close()
		}
	}
	dialer := &net.Dialer{Timeout: s.cfg.Timeout}
	dialFn := func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if s.cfg.TLS == TLSImplicit {
			tc := tls.Client(raw, s.tlsConfig())
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, fmt.Errorf("tls handshake: %w", err)
			}
			raw = tc
		}
		rawMu.Lock()
		c.raw = raw
		rawMu.Unlock()
		return raw, nil
	}
	opts := []gomail.Option{
		gomail.WithPort(s.cfg.Port), gomail.WithTimeout(s.cfg.Timeout), gomail.WithHELO(s.cfg.HELO),
		gomail.WithDialContextFunc(dialFn), gomail.WithTLSConfig(s.tlsConfig()),
	}
	switch s.cfg.TLS {
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		// Implicit TLS is done by dialFn; none is loopback only.
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if s.cfg.Username != "" {
		auth := gomail.SMTPAuthAutoDiscover
		if s.cfg.TLS != TLSStartTLS {
			// go-mail cannot see that dialFn encrypted the connection
			// (tls) and refuses PLAIN; none is loopback only (Validate).
			auth = gomail.SMTPAuthPlainNoEnc
		}
		opts = append(opts, gomail.WithSMTPAuth(auth), gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	// go-mail's Client only dials (greeting, EHLO, STARTTLS, AUTH); the
	// transaction is transact's, so that the bytes signed are the bytes
	// sent.
	mc, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp client: %w", err)
	}
	stop := context.AfterFunc(ctx, closeRaw)
	sc, err := mc.DialToSMTPClientWithContext(ctx)
	stop()
	if err != nil {
		closeRaw()
		return nil, err
	}
	c.sc, c.lastUsed = sc, s.cfg.Now()
	return c, nil
}

func (s *Sender) tlsConfig() *tls.Config {
	if s.cfg.TLSConfig != nil {
		c := s.cfg.TLSConfig.Clone()
		if c.ServerName == "" {
			c.ServerName = s.cfg.Host
		}
		return c
	}
	return &tls.Config{ServerName: s.cfg.Host, MinVersion: tls.VersionTLS12}
}

// Deliver renders and sends one job. See the package comment for how
// failures are classified.
func (s *Sender) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	d := job.Delivery
	if err := templateRefusal(d.Extra); err != nil {
		return nil, channels.Permanent(err)
	}
	em, err := s.render(ctx, job)
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("render email: %w", err))
	}
	from := s.cfg.From
	if d.Extra[envelope.ExtraConversation] != "" {
		if from, err = s.conversationAnswer(em, d.Extra); err != nil {
			return nil, channels.Permanent(err)
		}
	}
	msg, err := BuildMessage(from, d.To, s.cfg.Now(), em)
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("build email: %w", err))
	}
	if from != s.cfg.From {
		// The envelope sender stays the configured one: bounces come back
		// where they always do, and SPF is the relay's as for every other
		// message.
		if err := msg.EnvelopeFrom(s.cfg.From); err != nil {
			return nil, channels.Permanent(fmt.Errorf("envelope from: %w", err))
		}
	}
	raw, err := s.wire(msg)
	if err != nil {
		return nil, channels.Permanent(err)
	}
	sender, err := msg.GetSender(false)
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("envelope from: %w", err))
	}
	rcpts, err := msg.GetRecipients()
	if err != nil {
		return nil, channels.Permanent(fmt.Errorf("recipients: %w", err))
	}
	// Receipts, errors and logs carry the Message-ID with the approval
	// token cut out: the token is a credential and is stored only hashed.
	msgID := redactToken(strings.Trim(em.MessageID, "<>"))
	var c *conn
	var resp string
	healthy := true
	for try := 0; ; try++ {
		c, err = s.pool.get(ctx)
		if err != nil {
			return nil, s.failure(err, msgID, nil)
		}
		stop := context.AfterFunc(ctx, func() { c.raw.Close() })
		resp, err = transact(c.sc, s.cfg.Timeout, sender, rcpts, raw)
		aborted := !stop()
		if err == nil {
			// The server accepted the message, even if the deadline came
			// as it answered: that is a send, not a failure to repeat
			// (but the connection the deadline closed is not reused).
			healthy = !aborted
			break
		}
		s.pool.put(c, false)
		// A pooled connection the server closed while it was idle fails
		// at MAIL FROM, before anything was sent: once, dial afresh.
		if try == 0 && c.reused && !aborted && staleConn(err) {
			continue
		}
		return nil, s.failure(err, msgID, []string{d.To, em.MessageID})
	}
	s.pool.put(c, healthy)
	r := parseReply(250, resp)
	return &channels.Result{ProviderID: r.QueueID, Receipt: r.receipt(msgID)}, nil
}

// wire is the message as it goes on the wire: written out by go-mail and,
// when DKIM is configured, with its DKIM-Signature on top. These are the
// very bytes that were signed.
func (s *Sender) wire(msg *gomail.Msg) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("write email: %w", err)
	}
	if s.dkim == nil {
		return buf.Bytes(), nil
	}
	sig, err := s.dkim.signature(buf.Bytes())
	if err != nil {
		return nil, err
	}
	return append([]byte(sig), buf.Bytes()...), nil
}

// The steps of an SMTP transaction, named in a txError.
const (
	stepConn      = "connection check"
	stepMail      = "mail from"
	stepRcpt      = "rcpt to"
	stepData      = "data"
	stepWrite     = "write message"
	stepDataClose = "end of data"
)

// txError is a failed step of a transaction; err is the server's reply
// (a *textproto.Error) or the network error.
type txError struct {
	step string
	err  error
}

func (e *txError) Error() string { return e.step + ": " + e.err.Error() }
func (e *txError) Unwrap() error { return e.err }

// transact sends raw (CRLF line ends, dot-stuffed by the client) over sc:
// MAIL FROM sender, RCPT TO each of rcpts, DATA. It returns the server's
// reply to the end of data. After a failure the connection is not reused,
// so nothing is reset.
func transact(sc *smtp.Client, timeout time.Duration, sender string, rcpts []string, raw []byte) (string, error) {
	if !sc.HasConnection() {
		return "", &txError{stepConn, errors.New("no connection")}
	}
	if err := sc.UpdateDeadline(timeout); err != nil {
		return "", &txError{stepConn, err}
	}
	if err := sc.Mail(sender); err != nil {
		return "", &txError{stepMail, err}
	}
	for _, r := range rcpts {
		if err := sc.Rcpt(r); err != nil {
			return "", &txError{stepRcpt, err}
		}
	}
	w, err := sc.Data()
	if err != nil {
		return "", &txError{stepData, err}
	}
	if _, err := w.Write(raw); err != nil {
		return "", &txError{stepWrite, err}
	}
	if err := w.Close(); err != nil {
		return "", &txError{stepDataClose, err}
	}
	if dc, ok := w.(*smtp.DataCloser); ok {
		return dc.ServerResponse(), nil
	}
	return "", nil
}

// staleConn: the connection was dead before the transaction started (no
// reply from the server at MAIL FROM, or no connection at all).
func staleConn(err error) bool {
	var te *txError
	var pe *textproto.Error
	return errors.As(err, &te) && (te.step == stepConn || te.step == stepMail) && !errors.As(err, &pe)
}

// failure classifies a send error. secrets (the recipient, our raw
// Message-ID) are cut out of the error text, which is logged and stored.
func (s *Sender) failure(err error, msgID string, secrets []string) error {
	var te *txError
	if !errors.As(err, &te) {
		// Dial, greeting, STARTTLS, AUTH, or a context that ended before
		// the transaction: the message was not sent; try again later.
		r := replyFromError(err)
		ce := &channels.Error{Err: &sendError{msg: "smtp connect: " + scrub(err.Error(), secrets), err: err}}
		if r.Code != 0 {
			ce.Receipt = ptr(r.receipt(msgID))
		}
		return ce
	}
	var r reply
	if pe := (*textproto.Error)(nil); errors.As(err, &pe) {
		r = parseReply(pe.Code, pe.Msg)
		r.Text = strings.TrimSpace(strings.TrimPrefix(r.Text, r.EnhancedCode))
	}
	r.Text = scrub(r.Text, secrets)
	ce := &channels.Error{Err: &sendError{msg: "smtp " + scrub(te.Error(), secrets), err: err}}
	if r.Code != 0 {
		ce.Receipt = ptr(r.receipt(msgID))
	}
	switch {
	case r.Code >= 500 && r.Code < 600:
		ce.Permanent = true
	case r.Code >= 400:
		// temporary
	case te.step == stepDataClose:
		// The final "." was written and no reply came: the server may have
		// queued the message. The retry sends the same Message-ID.
		ce.MaybeSent = true
	}
	return ce
}

// sendError prints a scrubbed text and unwraps to the cause.
type sendError struct {
	msg string
	err error
}

func (e *sendError) Error() string { return e.msg }
func (e *sendError) Unwrap() error { return e.err }

// scrub removes go-mail's "affected recipient(s)" and "affected message
// ID" suffixes and any of the secrets from an error text.
func scrub(s string, secrets []string) string {
	for _, marker := range []string{", affected recipient(s): ", ", affected message ID: "} {
		if i := strings.Index(s, marker); i >= 0 {
			s = s[:i]
		}
	}
	for _, x := range secrets {
		if x = strings.Trim(x, "<>"); x != "" {
			s = strings.ReplaceAll(s, x, "[redacted]")
		}
	}
	return s
}

// redactToken turns DELIVERYID.TOKEN@DOMAIN into DELIVERYID.[token]@DOMAIN.
func redactToken(id string) string {
	local, domain, ok := strings.Cut(id, "@")
	if i := strings.LastIndexByte(local, '.'); ok && i >= 0 && IsToken(local[i+1:]) {
		return local[:i] + ".[token]@" + domain
	}
	return id
}

func ptr[T any](v T) *T { return &v }

// reply is an SMTP server reply, as recorded in a receipt.
type reply struct {
	Code         int    `json:"code"`
	EnhancedCode string `json:"enhancedCode,omitempty"`
	Text         string `json:"text"`
	QueueID      string `json:"queueId,omitempty"`
}

func (r reply) receipt(msgID string) channels.Receipt {
	data := map[string]any{"code": r.Code, "text": r.Text, "messageId": msgID}
	if r.EnhancedCode != "" {
		data["enhancedCode"] = r.EnhancedCode
	}
	if r.QueueID != "" {
		data["queueId"] = r.QueueID
	}
	meta := map[string]any{"source": "smtp", "code": r.Code}
	if r.EnhancedCode != "" {
		meta["enhancedCode"] = r.EnhancedCode
	}
	return channels.Receipt{Data: data, Meta: meta}
}

var (
	enhancedRe = regexp.MustCompile(`^([245]\.\d{1,3}\.\d{1,3})\s*`)
	// Postfix "queued as 4Xyz", Exim "id=1rQ…", Sendmail/others
	// "Message accepted for delivery <id>", Gmail "OK 1705… d3-…
	// - gsmtp", go-smtp "OK: queued".
	queueIDRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)queued as ([A-Za-z0-9][A-Za-z0-9._-]{2,})`),
		regexp.MustCompile(`(?i)\bid=([A-Za-z0-9][A-Za-z0-9._-]{2,})`),
		regexp.MustCompile(`(?i)^(?:[245]\.\d{1,3}\.\d{1,3}\s+)?(?:ok|accepted)\s+(?:\d+\s+)?([A-Za-z0-9][A-Za-z0-9._-]{5,})\s+-\s+gsmtp`),
	}
)

// parseReply reads "2.0.0 Ok: queued as ABC" (go-mail strips the code).
func parseReply(code int, text string) reply {
	text = strings.TrimSpace(strings.ReplaceAll(text, "\n", " "))
	r := reply{Code: code, Text: text}
	if m := enhancedRe.FindStringSubmatch(text); m != nil {
		r.EnhancedCode = m[1]
	}
	for _, re := range queueIDRes {
		if m := re.FindStringSubmatch(text); m != nil {
			r.QueueID = strings.TrimRight(m[1], ".")
			break
		}
	}
	return r
}

var smtpErrRe = regexp.MustCompile(`\b([245]\d\d)[ -]([245]\.\d{1,3}\.\d{1,3})?\s*(.*)$`)

// replyFromError finds the server's reply in an error from go-mail (its
// textproto error, wrapped in a SendError's text).
func replyFromError(err error) reply {
	s := err.Error()
	if m := smtpErrRe.FindStringSubmatch(s); m != nil {
		code, _ := strconv.Atoi(m[1])
		text := strings.TrimSpace(m[3])
		if i := strings.Index(text, ", affected "); i >= 0 {
			text = text[:i]
		}
		r := parseReply(code, text)
		if m[2] != "" {
			r.EnhancedCode = m[2]
		}
		r.Text = strings.TrimSpace(strings.TrimPrefix(r.Text, r.EnhancedCode))
		return r
	}
	return reply{}
}

// buildMessage turns a rendition into a go-mail message from the
// configured sender.
func (s *Sender) buildMessage(to string, em *render.Email) (*gomail.Msg, error) {
	return BuildMessage(s.cfg.From, to, s.cfg.Now(), em)
}

// BuildMessage turns an email rendition into the message the sender sends:
// `beachd render --format mime` prints it with this same function.
func BuildMessage(from, to string, date time.Time, em *render.Email) (*gomail.Msg, error) {
	m := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := m.From(from); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if err := m.To(to); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	// Every value below may carry content (the subject, thread ids from an
	// inbound mail, an artifact's name and type): none is written into the
	// header unchecked, so a CR or LF cannot start a header of its own.
	m.Subject(headerText(em.Subject))
	m.SetDateWithValue(date)
	m.SetMessageIDWithValue(headerText(strings.Trim(em.MessageID, "<>")))
	for k, v := range em.Headers {
		switch strings.ToLower(k) {
		case "message-id", "from", "to", "subject", "date":
		case "reply-to":
			if err := m.ReplyTo(v); err != nil {
				return nil, fmt.Errorf("reply-to: %w", err)
			}
		default:
			if !headerName(k) {
				return nil, fmt.Errorf("header %q: not a header field name", k)
			}
			// Preformatted: go-mail writes it as it is.
			m.SetGenHeaderPreformatted(gomail.Header(k), headerText(v))
		}
	}
	m.SetBodyString(gomail.TypeTextPlain, em.Text)
	if em.HTML != "" {
		m.AddAlternativeString(gomail.TypeTextHTML, em.HTML)
	}
	for _, a := range em.Attachments {
		// go-mail writes the type into Content-Type as it is (and
		// replaces control characters in the file name itself).
		mt := attachmentType(a.MimeType)
		if err := m.AttachReader(headerText(a.Filename), bytes.NewReader(a.Bytes), gomail.WithFileContentType(gomail.ContentType(mt))); err != nil {
			return nil, fmt.Errorf("attachment %q: %w", a.Filename, err)
		}
	}
	return m, nil
}

// headerText makes s one header line: every control character (CR and LF
// above all) becomes a space.
func headerText(s string) string {
	if !strings.ContainsFunc(s, isCtl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isCtl(r) {
			return ' '
		}
		return r
	}, s)
}

// isCtl: C0 controls but tab, DEL, C1 controls and the Unicode line and
// paragraph separators.
func isCtl(r rune) bool {
	return r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f || r == '\u2028' || r == '\u2029'
}

// headerName: an RFC 5322 field name (printable ASCII but ':').
func headerName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 33 || k[i] > 126 || k[i] == ':' {
			return false
		}
	}
	return true
}

// attachmentType is the Content-Type written for an attachment: an RFC
// 2045 type/subtype (lower case) and a token charset if any; anything
// else is application/octet-stream.
func attachmentType(s string) string {
	mt, params, err := mime.ParseMediaType(s)
	if err != nil || !envelope.ValidMediaType(mt) {
		return "application/octet-stream"
	}
	if cs := params["charset"]; cs != "" && envelope.IsToken(cs) {
		return mt + "; charset=" + cs
	}
	return mt
}

// pool keeps up to size connections; get blocks while size are in use.
type pool struct {
	size    int
	sem     chan struct{}
	dial    func(context.Context) (*conn, error)
	maxIdle time.Duration
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

var errPoolClosed = errors.New("sender closed")

func (p *pool) get(ctx context.Context) (*conn, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.sem
			return nil, errPoolClosed
		}
		var c *conn
		if n := len(p.idle); n > 0 {
			c, p.idle = p.idle[n-1], p.idle[:n-1]
		}
		p.mu.Unlock()
		if c == nil {
			break
		}
		c.reused = true
		if p.now().Sub(c.lastUsed) <= p.maxIdle {
			return c, nil
		}
		// Idle for a while: the server may have dropped it.
		_ = c.raw.SetDeadline(p.now().Add(p.timeout))
		stop := context.AfterFunc(ctx, func() { c.raw.Close() })
		err := c.sc.Noop()
		stop()
		if err == nil {
			return c, nil
		}
		c.raw.Close()
	}
	c, err := p.dial(ctx)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return c, nil
}

// put returns a connection; a broken one (ok false) is closed.
func (p *pool) put(c *conn, ok bool) {
	defer func() { <-p.sem }()
	if ok {
		c.lastUsed = p.now()
		p.mu.Lock()
		if !p.closed {
			p.idle = append(p.idle, c)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	c.raw.Close()
}

func (p *pool) close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.raw.SetDeadline(time.Now().Add(2 * time.Second))
		_ = c.sc.Quit()
		c.raw.Close()
	}
	return nil
}
