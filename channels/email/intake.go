package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message"

	"github.com/cool-ai/beachd/envelope"
)

// decider receives each parsed reply (approvals.Service implements it).
type decider interface {
	HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error)
}

// KV is the small durable key-value store the intake keeps its cursor and
// the Message-IDs it processed in (every store.Store implements it).
type KV interface {
	GetKV(ctx context.Context, key string) ([]byte, bool, error)
	PutKV(ctx context.Context, key string, val []byte) error
}

// IntakeConfig configures an Intake. Zero values are the documented
// defaults.
type IntakeConfig struct {
	Host     string
	Port     int // default 993 (tls), 143 (starttls, none)
	Username string
	Password string
	// TLS is tls (default), starttls or none (loopback only).
	TLS       string
	TLSConfig *tls.Config
	// Mailbox is watched (default INBOX); Processed receives handled
	// messages (default "Processed"; created when missing).
	Mailbox   string
	Processed string
	// PollInterval is the check interval on a server without IDLE
	// (default 1 min). IdleRefresh ends and re-issues IDLE (which also
	// proves the connection is alive); default 5 min, at most 28 min.
	PollInterval time.Duration
	IdleRefresh  time.Duration
	// CommandTimeout bounds one IMAP command (a dead connection is found
	// when a command does not complete); default 1 min.
	CommandTimeout time.Duration
	// MaxMessageBytes: of a bigger message only the header is read; it
	// is handed to the decider as ignored (IgnoredBecause says the sizes)
	// and moved to Processed. Default 10 MiB.
	MaxMessageBytes int64
	// MinBackoff and MaxBackoff bound the reconnect delay (1 s, 5 min).
	MinBackoff, MaxBackoff time.Duration
	// MaxFailures: a message whose handling failed this many times (with
	// growing backoff between tries) is skipped, left unread in the
	// mailbox, so that it cannot block the messages behind it (default 10).
	MaxFailures int
	// Parse is passed to ParseMessage (ReceivedAt is set per message).
	Parse ParseOptions
	// ConversationKey verifies the signed conversation reply addresses
	// of inbound mail (ReplyAddress; the sender's SenderConfig has the
	// same key). Without it no mail names a conversation by its address.
	// It is used when Parse.ConversationKey is empty.
	ConversationKey []byte
	Now             func() time.Time
}

func (c *IntakeConfig) withDefaults() {
	if c.TLS == "" {
		c.TLS = TLSImplicit
	}
	if c.Port == 0 {
		c.Port = 143
		if c.TLS == TLSImplicit {
			c.Port = 993
		}
	}
	if c.Mailbox == "" {
		c.Mailbox = "INBOX"
	}
	if c.Processed == "" {
		c.Processed = "Processed"
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Minute
	}
	if c.IdleRefresh <= 0 {
		c.IdleRefresh = 5 * time.Minute
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = time.Minute
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Minute
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 10
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a configuration that cannot work.
func (c IntakeConfig) Validate() error {
	var errs []error
	if c.Host == "" {
		errs = append(errs, errors.New("imap host: required"))
	}
	if c.Username == "" {
		errs = append(errs, errors.New("imap username: required"))
	}
	switch c.TLS {
	case "", TLSImplicit, TLSStartTLS:
	case TLSNone:
		if !IsLoopbackHost(c.Host) {
			errs = append(errs, fmt.Errorf("imap tls: none is only allowed for a loopback host, not %q", c.Host))
		}
	default:
		errs = append(errs, fmt.Errorf("imap tls: %q is not tls, starttls or none", c.TLS))
	}
	if c.IdleRefresh > 28*time.Minute {
		errs = append(errs, errors.New("imap idle refresh: must be at most 28 minutes (servers drop IDLE after 30)"))
	}
	if c.Processed != "" && c.Processed == c.Mailbox {
		errs = append(errs, errors.New("imap processed: must differ from the watched mailbox"))
	}
	// Without a trusted authserv-id every reply would be quarantined; say
	// so now rather than at the first reply.
	if strings.TrimSpace(c.Parse.AuthServID) == "" && !c.Parse.TrustUnauthenticated {
		errs = append(errs, errors.New("imap parse: an authserv-id to verify senders is required (or trust unauthenticated senders explicitly)"))
	}
	switch c.Parse.DKIMAlignment {
	case "", AlignRelaxed, AlignStrict:
	default:
		errs = append(errs, fmt.Errorf("imap parse: dkim alignment %q is not relaxed or strict", c.Parse.DKIMAlignment))
	}
	return errors.Join(errs...)
}

// Intake reads replies from one IMAP mailbox and hands them to the decider.
type Intake struct {
	cfg IntakeConfig
	kv  KV
	dec decider
	log *slog.Logger
	// failures counts handling failures per (uidvalidity, uid); only Run's
	// goroutine touches it.
	failures map[string]int
}

// NewIntake builds an Intake; nothing runs until Run.
func NewIntake(cfg IntakeConfig, kv KV, dec decider, log *slog.Logger) (*Intake, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Intake{cfg: cfg, kv: kv, dec: dec, log: log, failures: map[string]int{}}, nil
}

// cursor is the stored position in the mailbox.
type cursor struct {
	UIDValidity uint32 `json:"uidValidity"`
	LastUID     uint32 `json:"lastUid"`
}

func (in *Intake) cursorKey() string { return CursorKey(in.cfg.Mailbox) }

// CursorKey is the store key of the intake's cursor in mailbox (the
// UIDVALIDITY and the last UID handled).
func CursorKey(mailbox string) string { return "imap/" + mailbox }

// Run watches the mailbox until ctx ends, reconnecting with exponential
// backoff after any failure. It returns nil when ctx ends.
func (in *Intake) Run(ctx context.Context) error {
	backoff := in.cfg.MinBackoff
	for {
		progress, err := in.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if progress {
			backoff = in.cfg.MinBackoff
		}
		in.log.Warn("imap session ended; reconnecting", "error", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff *= 2
		if backoff > in.cfg.MaxBackoff {
			backoff = in.cfg.MaxBackoff
		}
	}
}

// conn wraps a client with per-command timeouts: a command that does not
// complete in time closes the connection (it is dead or hung).
type imapConn struct {
	c       *imapclient.Client
	timeout time.Duration
}

var errCommandTimeout = errors.New("imap command timed out")

func (ic *imapConn) do(what string, f func() error) error {
	t := time.AfterFunc(ic.timeout, func() { ic.c.Close() })
	err := f()
	if !t.Stop() {
		return fmt.Errorf("%s: %w", what, errCommandTimeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (in *Intake) dial(ctx context.Context, newMail chan<- struct{}) (*imapclient.Client, error) {
	addr := net.JoinHostPort(in.cfg.Host, strconv.Itoa(in.cfg.Port))
	d := &net.Dialer{Timeout: in.cfg.CommandTimeout}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	tlsCfg := in.cfg.TLSConfig
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsCfg = tlsCfg.Clone()
	if tlsCfg.ServerName == "" {
		tlsCfg.ServerName = in.cfg.Host
	}
	opts := &imapclient.Options{TLSConfig: tlsCfg, UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(data *imapclient.UnilateralDataMailbox) {
			if data.NumMessages != nil {
				select {
				case newMail <- struct{}{}:
				default:
				}
			}
		},
	}}
	switch in.cfg.TLS {
	case TLSImplicit:
		tc := tls.Client(raw, tlsCfg)
		hctx, cancel := context.WithTimeout(ctx, in.cfg.CommandTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		return imapclient.New(tc, opts), nil
	case TLSStartTLS:
		_ = raw.SetDeadline(time.Now().Add(in.cfg.CommandTimeout))
		c, err := imapclient.NewStartTLS(raw, opts)
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("starttls: %w", err)
		}
		_ = raw.SetDeadline(time.Time{})
		return c, nil
	default:
		return imapclient.New(raw, opts), nil
	}
}

// session is one connection: log in, select, then process and wait for
// new mail until something fails. progress reports whether the session got
// as far as waiting for new mail (the backoff restarts from the minimum
// then); a session that fails on the same message each time backs off.
func (in *Intake) session(ctx context.Context) (progress bool, err error) {
	newMail := make(chan struct{}, 1)
	c, err := in.dial(ctx, newMail)
	if err != nil {
		return false, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	ic := &imapConn{c: c, timeout: in.cfg.CommandTimeout}

	if err := ic.do("greeting", c.WaitGreeting); err != nil {
		return false, err
	}
	if err := ic.do("login", func() error { return c.Login(in.cfg.Username, in.cfg.Password).Wait() }); err != nil {
		return false, err
	}
	if err := in.ensureMailbox(ic, in.cfg.Processed); err != nil {
		return false, err
	}
	var sel *imap.SelectData
	if err := ic.do("select "+in.cfg.Mailbox, func() (err error) {
		sel, err = c.Select(in.cfg.Mailbox, nil).Wait()
		return err
	}); err != nil {
		return false, err
	}
	cur, err := in.loadCursor(ctx)
	if err != nil {
		return false, err
	}
	if cur.UIDValidity != sel.UIDValidity {
		if cur.UIDValidity != 0 {
			in.log.Warn("imap UIDVALIDITY changed; rescanning the mailbox", "mailbox", in.cfg.Mailbox,
				"old", cur.UIDValidity, "new", sel.UIDValidity)
		}
		cur = cursor{UIDValidity: sel.UIDValidity}
		if err := in.saveCursor(ctx, cur); err != nil {
			return false, err
		}
	}
	in.log.Info("imap intake connected", "mailbox", in.cfg.Mailbox, "idle", c.Caps().Has(imap.CapIdle))
	for {
		if err := in.processNew(ctx, ic, &cur); err != nil {
			return progress, err
		}
		if err := in.wait(ctx, ic, newMail); err != nil {
			return progress, err
		}
		progress = true
		if ctx.Err() != nil {
			return true, nil
		}
	}
}

// wait returns when new mail may be there: IDLE until the server reports
// a change or IdleRefresh passes (then IDLE is ended, which also proves the
// connection is alive); without IDLE, after PollInterval.
func (in *Intake) wait(ctx context.Context, ic *imapConn, newMail <-chan struct{}) error {
	c := ic.c
	if !c.Caps().Has(imap.CapIdle) {
		t := time.NewTimer(in.cfg.PollInterval)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-c.Closed():
			return errors.New("connection closed")
		}
		return ic.do("noop", func() error { return c.Noop().Wait() })
	}
	var idle *imapclient.IdleCommand
	if err := ic.do("idle", func() (err error) { idle, err = c.Idle(); return err }); err != nil {
		return err
	}
	t := time.NewTimer(in.cfg.IdleRefresh)
	defer t.Stop()
	var closed bool
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-newMail:
	case <-c.Closed():
		closed = true
	}
	if closed {
		return errors.New("connection closed during IDLE")
	}
	return ic.do("end idle", func() error {
		if err := idle.Close(); err != nil {
			return err
		}
		return idle.Wait()
	})
}

func (in *Intake) ensureMailbox(ic *imapConn, name string) error {
	var found bool
	if err := ic.do("list "+name, func() error {
		list, err := ic.c.List("", name, nil).Collect()
		found = len(list) > 0
		return err
	}); err != nil {
		return err
	}
	if found {
		return nil
	}
	err := ic.do("create "+name, func() error { return ic.c.Create(name, nil).Wait() })
	var ie *imap.Error
	if errors.As(err, &ie) && ie.Code == imap.ResponseCodeAlreadyExists {
		return nil
	}
	return err
}

func (in *Intake) loadCursor(ctx context.Context) (cursor, error) {
	var cur cursor
	b, ok, err := in.kv.GetKV(ctx, in.cursorKey())
	if err != nil {
		return cur, fmt.Errorf("load imap cursor: %w", err)
	}
	if ok {
		if err := json.Unmarshal(b, &cur); err != nil {
			in.log.Warn("imap cursor unreadable; starting over", "error", err)
			return cursor{}, nil
		}
	}
	return cur, nil
}

func (in *Intake) saveCursor(ctx context.Context, cur cursor) error {
	b, _ := json.Marshal(cur)
	if err := in.kv.PutKV(ctx, in.cursorKey(), b); err != nil {
		return fmt.Errorf("save imap cursor: %w", err)
	}
	return nil
}

// processNew handles every message above the cursor, in UID order.
func (in *Intake) processNew(ctx context.Context, ic *imapConn, cur *cursor) error {
	c := ic.c
	var uids []imap.UID
	var set imap.UIDSet
	set.AddRange(imap.UID(cur.LastUID+1), 0)
	if err := ic.do("uid search", func() error {
		data, err := c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{set}}, nil).Wait()
		if err == nil {
			uids = data.AllUIDs()
		}
		return err
	}); err != nil {
		return err
	}
	for _, uid := range uids {
		if uint32(uid) <= cur.LastUID { // "n:*" always matches the last message
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if err := in.processOne(ctx, ic, cur.UIDValidity, uid); err != nil {
			return err
		}
		cur.LastUID = uint32(uid)
		if err := in.saveCursor(ctx, *cur); err != nil {
			return err
		}
	}
	return nil
}

// processOne handles one message. It returns an error only for failures
// that should end the session (connection, store). Every message reaches
// the decider and is recorded there: a message over MaxMessageBytes with
// its header alone, and a message the parser refuses with what could be
// found of it, both with IgnoredBecause set (so neither starts a turn nor
// decides an approval); then it is moved to the processed mailbox.
func (in *Intake) processOne(ctx context.Context, ic *imapConn, validity uint32, uid imap.UID) error {
	c := ic.c
	log := in.log.With("mailbox", in.cfg.Mailbox, "uid", uint32(uid))
	uidSet := imap.UIDSetNum(uid)
	var size int64
	if err := ic.do("fetch size", func() error {
		msgs, err := c.Fetch(uidSet, &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
		if err == nil && len(msgs) > 0 {
			size = msgs[0].RFC822Size
		}
		return err
	}); err != nil {
		return err
	}
	opts := in.cfg.Parse
	opts.MaxBytes = int(in.cfg.MaxMessageBytes)
	opts.ReceivedAt = in.cfg.Now()
	if len(opts.ConversationKey) == 0 {
		opts.ConversationKey = in.cfg.ConversationKey
	}
	oversize := size > in.cfg.MaxMessageBytes
	section := &imap.FetchItemBodySection{Peek: true}
	if oversize {
		// The header alone, bounded: a header past the parser's limit is
		// cut and then refused by it (the mail is recorded as unreadable
		// and over the limit).
		limit := opts.MaxHeaderBytes
		if limit <= 0 {
			limit = DefaultMaxHeaderBytes
		}
		opts.MaxBytes = limit + 2 // the empty line ending the header
		section = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true,
			Partial: &imap.SectionPartial{Size: int64(opts.MaxBytes)}}
	}
	var raw []byte
	if err := ic.do("fetch body", func() error {
		msgs, err := c.Fetch(uidSet, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
		if err == nil && len(msgs) > 0 {
			raw = msgs[0].FindBodySection(section)
		}
		return err
	}); err != nil {
		return err
	}
	if raw == nil { // expunged meanwhile
		return nil
	}
	var msg envelope.Inbound
	p, err := ParseMessage(raw, opts)
	if err != nil {
		msg = unreadableInbound(raw, err, opts.ReceivedAt)
		log.Warn("inbound mail unreadable; recorded as ignored and moved aside", "error", err, "oversize", oversize)
	} else {
		msg = p.Inbound
		if len(p.Warnings) > 0 && !oversize { // a header alone has no body to read
			// What could not be read: the message goes on with the rest.
			log.Warn("inbound mail partly unreadable", "warnings", p.Warnings)
		}
	}
	// The dedup key of a message without a Message-ID hashes the bytes
	// fetched (the header alone of an oversize message).
	seenKey := "imap-msgid/" + dedupKey(msg.MessageID, raw)
	if err != nil && msg.MessageID == "" {
		msg.MessageID = dedupKey("", raw)
	}
	if oversize {
		msg.IgnoredBecause = tooLargeReason(size, in.cfg.MaxMessageBytes)
		log.Warn("inbound mail too large: its header alone is handed on, as ignored", "bytes", size,
			"limit", in.cfg.MaxMessageBytes, "from", msg.From, "message_id", msg.MessageID)
	}
	if _, seen, err := in.kv.GetKV(ctx, seenKey); err != nil {
		return fmt.Errorf("check message id: %w", err)
	} else if seen {
		log.Info("inbound mail already processed (same Message-ID); moved aside")
		return in.moveProcessed(ic, uidSet)
	}
	res, err := in.dec.HandleInbound(ctx, msg)
	if err != nil {
		key := fmt.Sprintf("%d/%d", validity, uid)
		in.failures[key]++
		if in.failures[key] < in.cfg.MaxFailures {
			return fmt.Errorf("handle inbound mail uid %d: %w", uid, err)
		}
		delete(in.failures, key)
		log.Error("inbound mail failed repeatedly; skipped and left in the mailbox", "error", err)
		return nil
	}
	log.Info("inbound mail handled", "outcome", res.Outcome, "approval_id", res.ApprovalID,
		"auto", msg.AutoGenerated, "ignored_because", msg.IgnoredBecause, "token_source", msg.TokenSource,
		"sender_verified", !msg.AuthFailed, "auth_detail", msg.AuthDetail,
		"conversation", msg.Conversation, "attachments", attachmentSummary(msg.Attachments))
	if err := in.kv.PutKV(ctx, seenKey, []byte(in.cfg.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("record message id: %w", err)
	}
	return in.moveProcessed(ic, uidSet)
}

// maxUnreadableReason bounds the parse error quoted in IgnoredBecause
// (it may quote the message).
const maxUnreadableReason = 300

// unreadableInbound is what is known of a message ParseMessage refused:
// the channel, and From, Subject and Message-ID when header fields so
// named can be found (the caller puts the dedup key in place of a missing
// Message-ID), and why. Its sender is not verified (AuthFailed).
func unreadableInbound(raw []byte, parseErr error, receivedAt time.Time) envelope.Inbound {
	reason := strings.Join(strings.Fields(strings.ToValidUTF8(parseErr.Error(), "?")), " ")
	if len(reason) > maxUnreadableReason {
		reason = capText(reason, maxUnreadableReason) + "…"
	}
	h := salvageHeader(raw)
	in := envelope.Inbound{Channel: envelope.ChannelEmail, MessageID: firstMsgID(h.Get("Message-Id")), ReceivedAt: receivedAt,
		Subject: decodeHeader(h.Get("Subject")), AuthFailed: true, AuthDetail: "message unreadable", IgnoredBecause: "unreadable: " + reason}
	if froms := addresses(h, "From"); len(froms) > 0 {
		in.From = froms[0]
	}
	return in
}

// salvageMaxField bounds one salvaged header field.
const salvageMaxField = 4 << 10

// salvageHeader reads From, Subject and Message-ID from the lines before
// the first empty line of raw, a header the parser refused (a line
// without a colon, too long, no end): the first field of each name, with
// its folded lines, at most salvageMaxField bytes each. Other lines are
// skipped.
func salvageHeader(raw []byte) message.Header {
	var h message.Header
	rest := raw
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			break
		}
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		key := textproto.CanonicalMIMEHeaderKey(string(bytes.TrimSpace(name)))
		if key != "From" && key != "Subject" && key != "Message-Id" {
			continue
		}
		v := string(val)
		for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
			var cont []byte
			cont, rest, _ = bytes.Cut(rest, []byte("\n"))
			if len(v) < salvageMaxField {
				v += string(bytes.TrimRight(cont, "\r")) // unfolded: the line break goes, the space stays
			}
		}
		if !h.Has(key) {
			h.Set(key, strings.TrimSpace(capText(strings.ToValidUTF8(v, "?"), salvageMaxField)))
		}
	}
	return h
}

// tooLargeReason says why an oversize message was not read.
func tooLargeReason(size, limit int64) string {
	return fmt.Sprintf("message of %s is over the limit of %s (email.imap.max_message_bytes)", humanBytes(size), humanBytes(limit))
}

// humanBytes writes n in MiB, or KiB below 1 MiB, or bytes below 1 KiB,
// with at most one decimal.
func humanBytes(n int64) string {
	f := func(v float64, unit string) string {
		s := strconv.FormatFloat(v, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + " " + unit
	}
	switch {
	case n < 1<<10:
		return strconv.FormatInt(n, 10) + " bytes"
	case n < 1<<20:
		return f(float64(n)/(1<<10), "KiB")
	}
	return f(float64(n)/(1<<20), "MiB")
}

// moveProcessed marks a message \Seen and moves it to the processed
// mailbox (go-imap falls back to COPY + \Deleted + EXPUNGE without MOVE).
func (in *Intake) moveProcessed(ic *imapConn, uidSet imap.UIDSet) error {
	if err := ic.do("store \\Seen", func() error {
		return ic.c.Store(uidSet, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
	}); err != nil {
		return err
	}
	return ic.do("move to "+in.cfg.Processed, func() error {
		_, err := ic.c.Move(uidSet, in.cfg.Processed).Wait()
		return err
	})
}

func dedupKey(messageID string, raw []byte) string {
	var sum [32]byte
	if messageID != "" {
		sum = sha256.Sum256([]byte(messageID))
	} else {
		sum = sha256.Sum256(raw)
	}
	return hex.EncodeToString(sum[:16])
}
