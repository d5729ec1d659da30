package email

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/charset"

	"github.com/cool-ai/beachd/envelope"
)

// Parser limits (defaults for ParseOptions' zero values).
const (
	DefaultMaxMessageBytes = 10 << 20
	DefaultMaxHeaderBytes  = 256 << 10
	DefaultMaxDepth        = 8
	DefaultMaxParts        = 64
	DefaultMaxTextBytes    = 1 << 20
	// DefaultMaxAttachments and DefaultMaxAttachmentBytes bound the
	// attachments kept of one message: past the count they are not listed
	// (a warning says how many); past the bytes they are listed with their
	// Size and without Data.
	DefaultMaxAttachments     = 20
	DefaultMaxAttachmentBytes = 25 << 20
	// MaxFullTextBytes bounds Inbound.FullText, the untrimmed text.
	MaxFullTextBytes = 64 << 10
	// MaxRecipients bounds Inbound.Recipients.
	MaxRecipients = 50
)

// Sentinel errors of ParseMessage.
var (
	// ErrTooLarge: the raw message is larger than ParseOptions.MaxBytes.
	ErrTooLarge = errors.New("message too large")
	// ErrNoHeader: the input has no readable RFC 5322 header.
	ErrNoHeader = errors.New("unreadable message header")
)

// ParseOptions say what the parser knows about our own mail. The zero value
// parses with the default limits and finds tokens in the subject and in any
// Message-ID of our form.
type ParseOptions struct {
	// ReplyDomain and ReplyLocal: our Reply-To is LOCAL+TOKEN@REPLYDOMAIN.
	// ReplyLocal empty accepts any local part at the reply domain.
	ReplyDomain string
	ReplyLocal  string
	// MessageIDDomain: our Message-IDs are <DELIVERYID.TOKEN@DOMAIN>; empty
	// accepts any domain.
	MessageIDDomain string
	// OwnAddresses are our sending addresses; mail from them is ignored.
	OwnAddresses []string
	// AuthServID is the authserv-id of the receiving server whose
	// Authentication-Results verify the sender (authres.go has the rule).
	// Empty verifies no sender: every message is AuthFailed, unless
	// TrustUnauthenticated is set.
	AuthServID string
	// TrustUnauthenticated skips sender verification: From alone is
	// believed (when it is one clean mailbox). Only for a mail server that
	// adds no Authentication-Results and accepts mail from nobody but the
	// people it serves (the embedded server of `beachd dev`).
	TrustUnauthenticated bool
	// DKIMAlignment is how a DKIM signing domain must match From's domain
	// for a dkim=pass to verify a sender whose domain has no DMARC policy:
	// AlignRelaxed (the default, "") or AlignStrict.
	DKIMAlignment string
	// ConversationKey verifies signed conversation reply addresses
	// (ReplyAddress) among the recipients; without it no message names a
	// conversation.
	ConversationKey []byte
	// Limits; zero means the default.
	MaxBytes           int
	MaxHeaderBytes     int
	MaxDepth           int
	MaxParts           int
	MaxTextBytes       int
	MaxAttachments     int
	MaxAttachmentBytes int
	// ReceivedAt stamps the Inbound (the caller's clock).
	ReceivedAt time.Time
}

func (o ParseOptions) withDefaults() ParseOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxBytes, DefaultMaxMessageBytes)
	def(&o.MaxHeaderBytes, DefaultMaxHeaderBytes)
	def(&o.MaxDepth, DefaultMaxDepth)
	def(&o.MaxParts, DefaultMaxParts)
	def(&o.MaxTextBytes, DefaultMaxTextBytes)
	def(&o.MaxAttachments, DefaultMaxAttachments)
	def(&o.MaxAttachmentBytes, DefaultMaxAttachmentBytes)
	return o
}

// Parsed is what ParseMessage made of a message.
type Parsed struct {
	Inbound envelope.Inbound
	// HTMLOnly: the reply text came from an HTML part.
	HTMLOnly bool
	// Warnings list what could not be read (bad charset, truncated part,
	// nesting too deep); the message is still usable.
	Warnings []string
}

// ParseMessage reads a raw message into a normalised inbound reply: sender,
// recipients, ids, the approval token and where it was found, the trimmed
// reply text and the full text, the attachments, the conversation a signed
// reply address names, and whether the message is automatic, a bounce, or
// has a sender the receiving server's Authentication-Results do not verify
// (AuthFailed: see authres.go for the rule). It does no I/O and returns an
// error only when the message is too large or has no header at all: a
// broken MIME tree yields what could be read, and Warnings say what could
// not.
func ParseMessage(raw []byte, opts ParseOptions) (res *Parsed, err error) {
	opts = opts.withDefaults()
	if len(raw) > opts.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(raw), opts.MaxBytes)
	}
	p := &Parsed{}
	defer func() {
		// A decoder that panics on hostile input must not lose the
		// message: what was read so far is kept, with a note.
		if r := recover(); r != nil {
			p.warn("message unreadable past this point: %v", r)
			res, err = p, nil
		}
	}()
	ent, err := message.ReadWithOptions(bytes.NewReader(raw), &message.ReadOptions{MaxHeaderBytes: int64(opts.MaxHeaderBytes)})
	if err != nil && ent == nil {
		return nil, fmt.Errorf("%w: %v", ErrNoHeader, err)
	}
	if err != nil {
		p.warn("top-level part: %v", err)
	}
	h := ent.Header
	in := &p.Inbound
	in.Channel = envelope.ChannelEmail
	in.ReceivedAt = opts.ReceivedAt
	froms := addresses(h, "From")
	if len(froms) > 0 {
		in.From = froms[0]
	}
	in.To = firstAddress(h, "To")
	in.Subject = decodeHeader(h.Get("Subject"))
	in.Recipients = recipients(h, p)
	in.Conversation = conversationOf(in.Recipients, opts.ConversationKey, p)
	in.MessageID = firstMsgID(h.Get("Message-Id"))
	in.InReplyTo = firstMsgID(h.Get("In-Reply-To"))
	in.References = msgIDs(h.Get("References"))

	ct, _, _ := h.ContentType()
	c := classify(h, ct, in.From, in.Subject, opts)
	in.AutoGenerated, in.Bounce, in.IgnoredBecause = c.auto, c.bounce, c.reason
	v := verifySender(h, opts)
	if !v.verified {
		in.AuthFailed, in.AuthDetail = true, v.detail
	}
	in.Evidence = map[string]string{"senderAuth": v.detail}
	findToken(h, in, opts)

	w := walker{opts: opts, p: p}
	w.walkSafely(ent)
	text := w.plain
	if strings.TrimSpace(text) == "" && w.html != "" {
		text = htmlToText(w.html, opts.MaxTextBytes)
		p.HTMLOnly = true
	}
	in.FullText = capText(text, MaxFullTextBytes)
	if len(in.FullText) < len(text) {
		p.warn("full text cut at %d bytes", MaxFullTextBytes)
	}
	in.Attachments = w.atts
	if w.unlisted > 0 {
		p.warn("%d attachments over the limit of %d not kept", w.unlisted, opts.MaxAttachments)
	}
	in.Text = TrimReply(text)
	return p, nil
}

// walkSafely walks the MIME tree; a panic in a decoder ends the walk with
// a warning and keeps what was read.
func (w *walker) walkSafely(e *message.Entity) {
	defer func() {
		if r := recover(); r != nil {
			w.p.warn("MIME structure unreadable past this point: %v", r)
		}
	}()
	w.walk(e, 0)
}

// capText cuts s to at most n bytes at a rune boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// recipients are the addresses of To, Cc, Delivered-To and X-Original-To,
// lower-case, each once, at most MaxRecipients.
func recipients(h message.Header, p *Parsed) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range []string{"To", "Cc", "Delivered-To", "X-Original-To"} {
		for _, a := range addresses(h, k) {
			if a == "" || len(a) > 320 || seen[a] || strings.ContainsFunc(a, isCtl) {
				continue
			}
			if len(out) == MaxRecipients {
				p.warn("more than %d recipients; the rest ignored", MaxRecipients)
				return out
			}
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// conversationOf is the conversation a signed reply address among the
// recipients names; none when there is no key, no such address, or two
// that name different conversations.
func conversationOf(rcpts []string, key []byte, p *Parsed) string {
	if len(key) == 0 {
		return ""
	}
	var cnv string
	for _, r := range rcpts {
		c, ok := ConversationFromAddress(key, r)
		if !ok {
			continue
		}
		if cnv != "" && c != cnv {
			p.warn("reply addresses of two conversations; neither is followed")
			return ""
		}
		cnv = c
	}
	return cnv
}

func (p *Parsed) warn(format string, args ...any) {
	if len(p.Warnings) < 20 {
		p.Warnings = append(p.Warnings, fmt.Sprintf(format, args...))
	}
}

// walker collects the first text/plain and text/html bodies of the MIME
// tree, outside attachments and embedded messages, within the limits.
type walker struct {
	opts  ParseOptions
	p     *Parsed
	parts int
	plain string
	html  string
	// budget is what is left of MaxTextBytes for all decoded text.
	spent int
	// atts are the attachments kept; attBytes their Data in all; unlisted
	// counts those past MaxAttachments.
	atts     []envelope.InboundAttachment
	attBytes int64
	unlisted int
}

func (w *walker) walk(e *message.Entity, depth int) {
	w.parts++
	if w.parts > w.opts.MaxParts {
		if w.parts == w.opts.MaxParts+1 {
			w.p.warn("more than %d parts; the rest ignored", w.opts.MaxParts)
		}
		return
	}
	if depth > w.opts.MaxDepth {
		w.p.warn("multipart nesting deeper than %d ignored", w.opts.MaxDepth)
		return
	}
	if mr := e.MultipartReader(); mr != nil {
		mt, _, _ := e.Header.ContentType()
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return
			}
			if err != nil && part == nil {
				w.p.warn("%s: %v", mt, err)
				return
			}
			if err != nil {
				w.p.warn("part: %v", err)
			}
			// A delivery report's machine part and the returned message are
			// not the reply; only its human-readable first part is.
			w.walk(part, depth+1)
			if w.parts > w.opts.MaxParts {
				return
			}
		}
	}
	mt, params, err := e.Header.ContentType()
	typeUnknown := false
	if err != nil {
		// Read what can be read of a broken Content-Type: its type
		// (go-message hands back the raw value with the error).
		mt, typeUnknown = "text/plain", true
		if v := leadingValue(e.Header.Get("Content-Type")); envelope.ValidMediaType(v) {
			mt, typeUnknown = v, false
		}
		if e.Header.Has("Content-Type") {
			w.p.warn("part Content-Type unreadable (read as %s)", mt)
		}
	}
	disp, dparams, err := e.Header.ContentDisposition()
	if err != nil {
		disp = ""
		if e.Header.Has("Content-Disposition") {
			disp = leadingValue(e.Header.Get("Content-Disposition"))
			w.p.warn("part Content-Disposition unreadable (read as %q)", clip(headerText(disp), 32))
		}
	}
	// An attachment is a part the sender marked so, or any part with a
	// file name (an inline image without one is part of the body's
	// layout, not a file the person sent).
	if name := partFilename(dparams, params); disp == "attachment" || name != "" {
		if typeUnknown {
			mt = "application/octet-stream"
		}
		w.attachment(e, mt, name)
		return
	}
	switch mt {
	case "text/plain", "text/html":
	default:
		return
	}
	if (mt == "text/plain" && w.plain != "") || (mt == "text/html" && w.html != "") {
		return
	}
	left := w.opts.MaxTextBytes - w.spent
	if left <= 0 {
		w.p.warn("decoded text over %d bytes ignored", w.opts.MaxTextBytes)
		return
	}
	// go-message decodes known charsets itself (the charset package is
	// imported for that); an unknown or mislabelled charset is read as
	// Latin-1 below rather than dropped.
	b, err := io.ReadAll(io.LimitReader(e.Body, int64(left)+1))
	if err != nil {
		w.p.warn("%s body: %v", mt, err)
	}
	if len(b) > left {
		b = b[:left]
		w.p.warn("%s body truncated at %d bytes", mt, w.opts.MaxTextBytes)
	}
	w.spent += len(b)
	s := toValidUTF8(b)
	if mt == "text/plain" {
		w.plain = s
	} else {
		w.html = s
	}
}

// leadingValue is a header value's first word before any parameters,
// lower case ("attachment; filename=…" → "attachment").
func leadingValue(v string) string {
	v, _, _ = strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(v))
}

// toValidUTF8 reads invalid UTF-8 as Latin-1, the usual mislabel.
func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(rune(b[0]))
		} else {
			sb.WriteRune(r)
		}
		b = b[n:]
	}
	return sb.String()
}

func newWordDecoder() *mime.WordDecoder { return &mime.WordDecoder{CharsetReader: charset.Reader} }

func decodeHeader(s string) string {
	d, err := newWordDecoder().DecodeHeader(s)
	if err != nil {
		return strings.TrimSpace(s)
	}
	return strings.TrimSpace(d)
}

// addresses returns the lower-cased addresses of a header, leniently: when
// the list does not parse, anything between <> or shaped like an address.
func addresses(h message.Header, key string) []string {
	var out []string
	addrParser := mail.AddressParser{WordDecoder: newWordDecoder()}
	for _, v := range h.Values(key) {
		if list, err := addrParser.ParseList(v); err == nil {
			for _, a := range list {
				out = append(out, strings.ToLower(a.Address))
			}
			continue
		}
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
			if a := looseAddress(f); a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}

func looseAddress(s string) string {
	if i := strings.LastIndexByte(s, '<'); i >= 0 {
		s = s[i+1:]
		if j := strings.IndexByte(s, '>'); j >= 0 {
			s = s[:j]
		}
	}
	s = strings.Trim(strings.TrimSpace(s), `"'`)
	if strings.Count(s, "@") != 1 || strings.ContainsAny(s, " \t") {
		return ""
	}
	return strings.ToLower(s)
}

func firstAddress(h message.Header, key string) string {
	if a := addresses(h, key); len(a) > 0 {
		return a[0]
	}
	return ""
}

// msgIDs extracts every <…> id from a header value (In-Reply-To and
// References are often malformed; this accepts anything between brackets).
func msgIDs(v string) []string {
	var out []string
	for {
		i := strings.IndexByte(v, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(v[i:], '>')
		if j < 0 {
			break
		}
		if id := strings.TrimSpace(v[i+1 : i+j]); id != "" && len(out) < 100 {
			out = append(out, id)
		}
		v = v[i+j+1:]
	}
	if len(out) == 0 {
		if f := strings.Fields(v); len(f) == 1 && strings.Contains(f[0], "@") {
			out = append(out, f[0])
		}
	}
	return out
}

func firstMsgID(v string) string {
	if ids := msgIDs(v); len(ids) > 0 {
		return ids[0]
	}
	return ""
}
