package config

import (
	"fmt"
	"os"
	"time"

	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/templates"
)

// RenderConfig is the `render:` section: how envelopes become messages.
// Every key is optional.
//
//	render:
//	  templates_dir: ./templates   # override any embedded template
//	  locale: en                   # dates and numbers in surfaces
//	  time_zone: Europe/London     # expiry times and surface dates (default UTC)
//	  sms: { max_chars: 1600, policy: truncate }   # or split
//	  email: { attach_domain_data: false, max_attachment_bytes: 10485760 }
//	  template_limits: { max_output_bytes: 1048576, timeout: 2s }
type RenderConfig struct {
	TemplatesDir   string               `yaml:"templates_dir"`
	Locale         string               `yaml:"locale"`
	TimeZone       string               `yaml:"time_zone"`
	SMS            RenderSMSConfig      `yaml:"sms"`
	Email          RenderEmailConfig    `yaml:"email"`
	TemplateLimits RenderTemplateLimits `yaml:"template_limits"`
}

// RenderSMSConfig bounds SMS bodies.
type RenderSMSConfig struct {
	MaxChars int    `yaml:"max_chars"` // 160-1600, default 1600
	Policy   string `yaml:"policy"`    // truncate (default) or split
}

// RenderEmailConfig tunes email renditions.
type RenderEmailConfig struct {
	AttachDomainData   bool  `yaml:"attach_domain_data"`   // attach domain-data as JSON when no surface shows it
	MaxAttachmentBytes int64 `yaml:"max_attachment_bytes"` // default 10 MiB; bigger artifacts become links
}

// RenderTemplateLimits bound each template execution.
type RenderTemplateLimits struct {
	MaxOutputBytes int           `yaml:"max_output_bytes"` // default 1 MiB
	Timeout        time.Duration `yaml:"timeout"`          // default 2s
}

func (c *RenderConfig) validate(v *validator) {
	switch c.SMS.Policy {
	case "", render.SMSTruncate, render.SMSSplit:
	default:
		v.errorf("render.sms.policy", "must be truncate or split, got %q", c.SMS.Policy)
	}
	if c.SMS.MaxChars != 0 && (c.SMS.MaxChars < 160 || c.SMS.MaxChars > 1600) {
		v.errorf("render.sms.max_chars", "must be between 160 and 1600, got %d", c.SMS.MaxChars)
	}
	if c.Email.MaxAttachmentBytes < 0 {
		v.errorf("render.email.max_attachment_bytes", "must not be negative")
	}
	if c.TemplateLimits.MaxOutputBytes < 0 {
		v.errorf("render.template_limits.max_output_bytes", "must not be negative")
	}
	if c.TemplateLimits.Timeout < 0 {
		v.errorf("render.template_limits.timeout", "must not be negative")
	}
	if c.TimeZone != "" {
		if _, err := time.LoadLocation(c.TimeZone); err != nil {
			v.errorf("render.time_zone", "unknown time zone %q", c.TimeZone)
		}
	}
	if c.TemplatesDir != "" {
		if st, err := os.Stat(c.TemplatesDir); err != nil {
			v.errorf("render.templates_dir", "%v", err)
		} else if !st.IsDir() {
			v.errorf("render.templates_dir", "%s is not a directory", c.TemplatesDir)
		}
	}
}

// check loads the template override directory, so that `beachd config
// check` reports a broken template with its file and line.
func (c *RenderConfig) check() error {
	if _, err := templates.Load(c.TemplatesDir); err != nil {
		return fmt.Errorf("render.templates_dir: %w", err)
	}
	return nil
}

// RendererConfig builds the renderer's configuration, loading the templates.
func (c *RenderConfig) RendererConfig(publicURL string) (render.Config, error) {
	set, err := templates.Load(c.TemplatesDir)
	if err != nil {
		return render.Config{}, fmt.Errorf("render.templates_dir: %w", err)
	}
	tz := time.UTC
	if c.TimeZone != "" {
		if tz, err = time.LoadLocation(c.TimeZone); err != nil {
			return render.Config{}, fmt.Errorf("render.time_zone: %w", err)
		}
	}
	return render.Config{
		Templates:          set,
		PublicURL:          publicURL,
		AttachDomainData:   c.Email.AttachDomainData,
		MaxAttachmentBytes: c.Email.MaxAttachmentBytes,
		SMSMaxChars:        c.SMS.MaxChars,
		SMSPolicy:          c.SMS.Policy,
		TemplateLimits:     templates.Limits{MaxBytes: c.TemplateLimits.MaxOutputBytes, Timeout: c.TemplateLimits.Timeout},
		Locale:             c.Locale,
		TimeZone:           tz,
	}, nil
}
