package render

import (
	"errors"
	"fmt"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/templates"
)

// Sentinel errors.
var (
	// ErrNoEnvelope: Input.Envelope is nil.
	ErrNoEnvelope = errors.New("render: no envelope")
	// ErrEmpty: nothing in the envelope reaches the channel, so there is
	// nothing to send (e.g. only llm-context for an SMS).
	ErrEmpty = errors.New("render: nothing to deliver on this channel")
	// ErrUnknownNotice: Notice was asked for a kind it does not know.
	ErrUnknownNotice = errors.New("render: unknown notice kind")
)

// SMS policies when a message is over the cap.
const (
	SMSTruncate = "truncate"
	SMSSplit    = "split"
)

// Config configures a Renderer. The zero value works: embedded templates,
// no domain-data attachment, 10 MiB attachments, 1,600-character SMS cut
// with an ellipsis, UTC dates.
type Config struct {
	// Templates is the template set; nil means the embedded defaults.
	Templates *templates.Set
	// PublicURL is beachd's public base URL (links in messages).
	PublicURL string
	// AttachDomainData attaches domain-data as JSON to email when no surface
	// shows it.
	AttachDomainData bool
	// MaxAttachmentBytes caps one email attachment; a bigger artifact
	// becomes a link. Default 10 MiB.
	MaxAttachmentBytes int64
	// SMSMaxChars caps an SMS (GSM-7 septets or UCS-2 code units); default
	// and maximum 1,600.
	SMSMaxChars int
	// SMSPolicy is SMSTruncate (default) or SMSSplit.
	SMSPolicy string
	// TemplateLimits bound every template execution.
	TemplateLimits templates.Limits
	// MaxSurfaceBytes bounds a rendered A2UI surface (text and HTML each);
	// default 256 KiB.
	MaxSurfaceBytes int
	// NoEmailReplies: no reply intake reads answers to our mail (email.imap
	// is not configured). Approval mails then never ask for a reply — no
	// reply instructions, no [approval:…] subject tag, no token in the
	// Message-ID or Reply-To — and offer the confirmation link alone; the
	// footer says replies are not read.
	NoEmailReplies bool
	// Locale and TimeZone format dates and numbers (default "en", UTC).
	Locale   string
	TimeZone *time.Location
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch c.SMSPolicy {
	case "", SMSTruncate, SMSSplit:
	default:
		return fmt.Errorf("sms policy %q: must be truncate or split", c.SMSPolicy)
	}
	if c.SMSMaxChars < 0 || c.SMSMaxChars > 1600 {
		return fmt.Errorf("sms max chars %d: must be 1-1600", c.SMSMaxChars)
	}
	if c.SMSMaxChars > 0 && c.SMSMaxChars < 160 {
		return fmt.Errorf("sms max chars %d: at least 160, so that the approval instructions fit", c.SMSMaxChars)
	}
	if c.MaxAttachmentBytes < 0 {
		return errors.New("max attachment bytes: must not be negative")
	}
	return nil
}

// Renderer turns envelopes into per-channel renditions. It is immutable and
// safe for concurrent use; every method is a pure function of its input and
// the configuration.
type Renderer struct {
	cfg Config
	tpl *templates.Set
	reg *envelope.Registry // canonical registry, for inputs without one
}

// New returns a Renderer, filling the defaults of cfg.
func New(cfg Config) (*Renderer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxAttachmentBytes == 0 {
		cfg.MaxAttachmentBytes = 10 << 20
	}
	if cfg.SMSMaxChars == 0 {
		cfg.SMSMaxChars = 1600
	}
	if cfg.SMSPolicy == "" {
		cfg.SMSPolicy = SMSTruncate
	}
	if cfg.MaxSurfaceBytes <= 0 {
		cfg.MaxSurfaceBytes = 256 << 10
	}
	if cfg.Locale == "" {
		cfg.Locale = "en"
	}
	if cfg.TimeZone == nil {
		cfg.TimeZone = time.UTC
	}
	tpl := cfg.Templates
	if tpl == nil {
		var err error
		if tpl, err = templates.Default(); err != nil {
			return nil, fmt.Errorf("load default templates: %w", err)
		}
	}
	return &Renderer{cfg: cfg, tpl: tpl, reg: envelope.NewRegistry()}, nil
}

// surfaceResult is a rendered A2UI surface.
type surfaceResult struct {
	Text, HTML, Title string
	Texts, Warnings   []string
}
