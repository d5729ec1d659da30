package config

import (
	"fmt"
	"io"
	"net/mail"
	"os"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels/email"
	gomail "github.com/wneessen/go-mail"
)

// EmailConfig is the `email:` section: sending over SMTP and reading
// replies over IMAP.
//
//	email:
//	  from: "Travel agent <agent@example.org>"
//	  reply_domain: reply.example.org      # Reply-To: reply_local+TOKEN@reply_domain
//	  reply_local: approvals               # default: the local part of from
//	  message_id_domain: example.org       # default: the domain of from
//	  authserv_id: mx.example.org          # required with imap: whose Authentication-Results verify senders
//	  dkim_alignment: relaxed              # relaxed (default) | strict: how an aligned dkim=pass is judged
//	  trust_unauthenticated: false         # true: believe From unverified (a server that adds no results)
//	  lifetime: 120h                       # retries give up after, default 5 days
//	  smtp:
//	    host: smtp.example.org
//	    port: 587                          # default 587 (starttls), 465 (tls), 25 (none)
//	    username: agent@example.org
//	    password: "${SMTP_PASSWORD}"
//	    tls: starttls                      # starttls (default) | tls | none (loopback only)
//	    helo: beachd.example.org
//	    timeout: 30s
//	    pool_size: 2
//	    dkim: { domain: example.org, selector: beachd, private_key_file: /etc/beachd/dkim.pem }
//	  imap:                                # optional: without it replies are not read
//	    host: imap.example.org
//	    port: 993
//	    username: agent@example.org
//	    password: "${IMAP_PASSWORD}"
//	    tls: tls                           # tls (default) | starttls | none (loopback only)
//	    mailbox: INBOX
//	    processed: Processed               # created when missing
//	    poll_interval: 1m                  # without IDLE
//	    max_message_bytes: 10485760
type EmailConfig struct {
	From            string `yaml:"from"`
	ReplyDomain     string `yaml:"reply_domain"`
	ReplyLocal      string `yaml:"reply_local"`
	MessageIDDomain string `yaml:"message_id_domain"`
	AuthServID      string `yaml:"authserv_id"`
	// DKIMAlignment is how an aligned DKIM pass is judged: relaxed (the
	// default: the signing domain and From's domain share their
	// organisational domain) or strict (they are the same).
	DKIMAlignment string `yaml:"dkim_alignment"`
	// TrustUnauthenticated believes a reply's From without any
	// Authentication-Results: only for a receiving server that adds none
	// and accepts mail from nobody but the people it serves.
	TrustUnauthenticated bool          `yaml:"trust_unauthenticated"`
	Lifetime             time.Duration `yaml:"lifetime"`
	SMTP                 SMTPConfig    `yaml:"smtp"`
	IMAP                 *IMAPConfig   `yaml:"imap"`
}

// SMTPConfig is `email.smtp`.
type SMTPConfig struct {
	Host     string        `yaml:"host"`
	Port     int           `yaml:"port"`
	Username string        `yaml:"username"`
	Password string        `yaml:"password"`
	TLS      string        `yaml:"tls"`
	HELO     string        `yaml:"helo"`
	Timeout  time.Duration `yaml:"timeout"`
	PoolSize int           `yaml:"pool_size"`
	DKIM     *DKIMConfig   `yaml:"dkim"`
}

// DKIMConfig is `email.smtp.dkim`.
type DKIMConfig struct {
	Domain         string `yaml:"domain"`
	Selector       string `yaml:"selector"`
	PrivateKeyFile string `yaml:"private_key_file"`
}

// IMAPConfig is `email.imap`.
type IMAPConfig struct {
	Host            string        `yaml:"host"`
	Port            int           `yaml:"port"`
	Username        string        `yaml:"username"`
	Password        string        `yaml:"password"`
	TLS             string        `yaml:"tls"`
	Mailbox         string        `yaml:"mailbox"`
	Processed       string        `yaml:"processed"`
	PollInterval    time.Duration `yaml:"poll_interval"`
	MaxMessageBytes int64         `yaml:"max_message_bytes"`
}

// ReplyLocalPart is the local part of the Reply-To base address.
func (c *EmailConfig) ReplyLocalPart() string {
	if c.ReplyLocal != "" {
		return c.ReplyLocal
	}
	if a, err := mail.ParseAddress(c.From); err == nil {
		local, _, _ := strings.Cut(a.Address, "@")
		return local
	}
	return ""
}

// ReplyTo is the base reply address, "" without a reply domain.
func (c *EmailConfig) ReplyTo() string {
	if c.ReplyDomain == "" {
		return ""
	}
	return c.ReplyLocalPart() + "@" + c.ReplyDomain
}

// FromAddress is the bare sending address.
func (c *EmailConfig) FromAddress() string {
	if a, err := mail.ParseAddress(c.From); err == nil {
		return strings.ToLower(a.Address)
	}
	return ""
}

func (c *EmailConfig) validate(v *validator) {
	if _, err := mail.ParseAddress(c.From); err != nil {
		v.errorf("email.from", "must be an address (\"Name <a@b>\" or \"a@b\"): %v", err)
	}
	if c.ReplyDomain != "" && (strings.ContainsAny(c.ReplyDomain, "@ <>") || !strings.Contains(c.ReplyDomain, ".") && !email.IsLoopbackHost(c.ReplyDomain)) {
		v.errorf("email.reply_domain", "must be a domain name, got %q", c.ReplyDomain)
	}
	if strings.ContainsAny(c.ReplyLocal, "@+ <>") {
		v.errorf("email.reply_local", "must be a plain local part without '+', got %q", c.ReplyLocal)
	}
	if strings.ContainsAny(c.MessageIDDomain, "@ <>") {
		v.errorf("email.message_id_domain", "must be a domain name, got %q", c.MessageIDDomain)
	}
	if c.Lifetime < 0 {
		v.errorf("email.lifetime", "must not be negative")
	}
	c.validateSenderCheck(v)
	s := c.SMTP
	if s.Host == "" {
		v.errorf("email.smtp.host", "required")
	}
	if s.Port < 0 || s.Port > 65535 {
		v.errorf("email.smtp.port", "must be 1-65535")
	}
	switch s.TLS {
	case "", email.TLSStartTLS, email.TLSImplicit:
	case email.TLSNone:
		if s.Host != "" && !email.IsLoopbackHost(s.Host) {
			v.errorf("email.smtp.tls", "none is only allowed for a loopback host (127.0.0.1, ::1, localhost), not %q", s.Host)
		}
	default:
		v.errorf("email.smtp.tls", "must be starttls, tls or none, got %q", s.TLS)
	}
	if s.Username == "" && s.Password != "" {
		v.errorf("email.smtp.username", "required with password")
	}
	if s.Timeout < 0 {
		v.errorf("email.smtp.timeout", "must not be negative")
	}
	if s.PoolSize < 0 || s.PoolSize > 64 {
		v.errorf("email.smtp.pool_size", "must be 1-64")
	}
	if d := s.DKIM; d != nil {
		if d.Domain == "" {
			v.errorf("email.smtp.dkim.domain", "required")
		}
		if d.Selector == "" {
			v.errorf("email.smtp.dkim.selector", "required")
		}
		if d.PrivateKeyFile == "" {
			v.errorf("email.smtp.dkim.private_key_file", "required")
		} else if err := checkDKIMKey(d.PrivateKeyFile); err != nil {
			v.errorf("email.smtp.dkim.private_key_file", "%v", err)
		}
	}
	if m := c.IMAP; m != nil {
		if m.Host == "" {
			v.errorf("email.imap.host", "required")
		}
		if m.Port < 0 || m.Port > 65535 {
			v.errorf("email.imap.port", "must be 1-65535")
		}
		if m.Username == "" {
			v.errorf("email.imap.username", "required")
		}
		switch m.TLS {
		case "", email.TLSStartTLS, email.TLSImplicit:
		case email.TLSNone:
			if m.Host != "" && !email.IsLoopbackHost(m.Host) {
				v.errorf("email.imap.tls", "none is only allowed for a loopback host, not %q", m.Host)
			}
		default:
			v.errorf("email.imap.tls", "must be tls, starttls or none, got %q", m.TLS)
		}
		if m.Processed != "" && m.Processed == m.Mailbox {
			v.errorf("email.imap.processed", "must differ from mailbox")
		}
		if m.PollInterval < 0 {
			v.errorf("email.imap.poll_interval", "must not be negative")
		}
		if m.MaxMessageBytes < 0 {
			v.errorf("email.imap.max_message_bytes", "must not be negative")
		}
	}
}

// validateSenderCheck: replies read over IMAP decide approvals, so the
// server whose Authentication-Results verify their senders must be named,
// or the operator must say explicitly that senders go unverified.
func (c *EmailConfig) validateSenderCheck(v *validator) {
	id := strings.TrimSpace(c.AuthServID)
	if id != "" && (strings.ContainsAny(id, "; \t()\"") || len(id) > 255) {
		v.errorf("email.authserv_id", "must be an authserv-id (the first word of the Authentication-Results fields your mail server adds, usually its host name), got %q", c.AuthServID)
	}
	switch c.DKIMAlignment {
	case "", "relaxed", "strict":
	default:
		v.errorf("email.dkim_alignment", "must be relaxed or strict, got %q", c.DKIMAlignment)
	}
	if id != "" && c.TrustUnauthenticated {
		v.errorf("email.trust_unauthenticated", "cannot be combined with email.authserv_id: either senders are verified by that server's Authentication-Results, or not at all")
	}
	if c.IMAP != nil && id == "" && !c.TrustUnauthenticated {
		v.errorf("email.authserv_id", "required with email.imap: replies decide approvals, and a reply's From is only believed when the Authentication-Results of the server that received it (this authserv-id, e.g. mx.example.org) verify it; "+
			"set email.trust_unauthenticated: true instead only if that server adds no Authentication-Results and accepts mail from nobody else")
	}
}

// maxDKIMKeyBytes bounds a DKIM key file (an RSA-4096 PEM is about 3 KiB).
const maxDKIMKeyBytes = 64 << 10

// checkDKIMKey reads and parses a DKIM private key file as the sender
// will, so that a key it cannot use is a configuration problem, found
// before serve starts.
func checkDKIMKey(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDKIMKeyBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxDKIMKeyBytes {
		return fmt.Errorf("%s: larger than %d bytes: not a private key", path, maxDKIMKeyBytes)
	}
	if _, err := gomail.PrivKeyFromPEM(b); err != nil {
		return fmt.Errorf("%s: not a PEM RSA or Ed25519 private key (PKCS#1 or PKCS#8): %v", path, err)
	}
	return nil
}
