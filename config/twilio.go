package config

import (
	"net/url"
	"regexp"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/cool-ai/beachd/templates"
)

// TwilioConfig is the `twilio:` section: SMS and WhatsApp through Twilio.
//
//	twilio:
//	  account_sid: "${TWILIO_ACCOUNT_SID}"
//	  auth_token: "${TWILIO_AUTH_TOKEN}"
//	  api_base_url: https://api.twilio.com   # default; a regional edge or a test double
//	  sms_from: "+15550001111"
//	  whatsapp_from: "whatsapp:+15550002222"
//	  messaging_service_sid: MG…             # instead of the From numbers
//	  rate_per_second: 1                     # per sender, default 1
//	  burst: 1                               # default 1
//	  timeout: 15s                           # one HTTP call, default 15s
//	  lifetime: 6h                           # retries give up after, default 6h
//	  whatsapp_templates:                    # used outside the 24-hour window
//	    approval: { content_sid: HX…, variables: { "1": "{{(index .Approvals 0).Summary}}" } }
//	    result:   { content_sid: HX…, variables: { "1": "{{.Text}}" } }
//	  whatsapp:
//	    window_template: HX…                 # sent when a conversation's 24-hour window is closed (inbound.go)
//
// The inbound webhook (messages and status callbacks) is public_url +
// /v1/inbound/twilio; configure exactly that URL at Twilio. Without
// credentials, `beachd dev` records SMS and WhatsApp messages instead of
// sending them; `beachd serve` refuses.
type TwilioConfig struct {
	AccountSID          string                `yaml:"account_sid"`
	AuthToken           string                `yaml:"auth_token"`
	APIBaseURL          string                `yaml:"api_base_url"`
	SMSFrom             string                `yaml:"sms_from"`
	WhatsAppFrom        string                `yaml:"whatsapp_from"`
	MessagingServiceSID string                `yaml:"messaging_service_sid"`
	RatePerSecond       float64               `yaml:"rate_per_second"`
	Burst               int                   `yaml:"burst"`
	WhatsAppTemplates   TwilioTemplatesConfig `yaml:"whatsapp_templates"`
	Timeout             time.Duration         `yaml:"timeout"`
	Lifetime            time.Duration         `yaml:"lifetime"`
	WhatsApp            TwilioWhatsAppConfig  `yaml:"whatsapp"`
}

// TwilioWhatsAppConfig is `twilio.whatsapp`.
type TwilioWhatsAppConfig struct {
	// WindowTemplate is the content SID (HX…) of the template sent instead
	// of an agent's answer when the person's last message is more than 24
	// hours old (WhatsApp's window is closed); the answer waits until they
	// write again.
	WindowTemplate string `yaml:"window_template"`
	// QuickReplies: a WhatsApp approval without an approval template goes
	// out with Approve/Deny buttons, from quick-reply content beachd
	// creates once through Twilio's Content API (default true); false
	// sends the text with a code instead.
	QuickReplies *bool `yaml:"quick_replies"`
}

// TwilioTemplatesConfig names the WhatsApp content templates.
type TwilioTemplatesConfig struct {
	Approval *TwilioTemplateConfig `yaml:"approval"`
	Result   *TwilioTemplateConfig `yaml:"result"`
}

// TwilioTemplateConfig is one content template: its SID and its variables,
// each a text/template over the renderer's View.
type TwilioTemplateConfig struct {
	ContentSID string            `yaml:"content_sid"`
	Variables  map[string]string `yaml:"variables"`
}

var (
	twilioAccountSID = regexp.MustCompile(`^AC[0-9a-fA-F]{32}$`)
	twilioServiceSID = regexp.MustCompile(`^MG[0-9a-fA-F]{32}$`)
	twilioContentSID = regexp.MustCompile(`^HX[0-9a-fA-F]{32}$`)
	twilioToken      = regexp.MustCompile(`^[A-Za-z0-9]+$`)
	e164Number       = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
)

// HasCredentials reports whether the section can reach Twilio.
func (c *TwilioConfig) HasCredentials() bool { return c.AccountSID != "" && c.AuthToken != "" }

func (c *TwilioConfig) validate(v *validator) {
	switch {
	case c.AccountSID == "" && c.AuthToken == "":
		// Allowed: `beachd dev` records instead of sending; serve refuses.
	case c.AccountSID == "":
		v.errorf("twilio.account_sid", "required with auth_token")
	case c.AuthToken == "":
		v.errorf("twilio.auth_token", "required with account_sid")
	}
	if c.AccountSID != "" && !twilioAccountSID.MatchString(c.AccountSID) {
		v.errorf("twilio.account_sid", "must be AC followed by 32 hex digits")
	}
	if c.AuthToken != "" && !twilioToken.MatchString(c.AuthToken) {
		v.errorf("twilio.auth_token", "must be letters and digits only")
	}
	if c.APIBaseURL != "" {
		u, err := url.Parse(c.APIBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf("twilio.api_base_url", "must be an absolute http(s) URL")
		}
	}
	if c.SMSFrom != "" && !e164Number.MatchString(c.SMSFrom) {
		v.errorf("twilio.sms_from", "must be an E.164 number such as +15550001111")
	}
	if c.WhatsAppFrom != "" && !e164Number.MatchString(strings.TrimPrefix(c.WhatsAppFrom, "whatsapp:")) {
		v.errorf("twilio.whatsapp_from", "must be whatsapp:+E.164, such as whatsapp:+15550002222")
	}
	if c.MessagingServiceSID != "" && !twilioServiceSID.MatchString(c.MessagingServiceSID) {
		v.errorf("twilio.messaging_service_sid", "must be MG followed by 32 hex digits")
	}
	if c.SMSFrom == "" && c.WhatsAppFrom == "" && c.MessagingServiceSID == "" {
		v.errorf("twilio", "set sms_from, whatsapp_from or messaging_service_sid")
	}
	if c.RatePerSecond < 0 || c.RatePerSecond > 1000 {
		v.errorf("twilio.rate_per_second", "must be between 0 (default 1) and 1000")
	}
	if c.Burst < 0 || c.Burst > 10000 {
		v.errorf("twilio.burst", "must be between 0 (default 1) and 10000")
	}
	if c.Timeout < 0 || c.Timeout > 2*time.Minute {
		v.errorf("twilio.timeout", "must be between 0 (default 15s) and 2m")
	}
	if c.Lifetime < 0 {
		v.errorf("twilio.lifetime", "must not be negative")
	}
	if t := c.WhatsApp.WindowTemplate; t != "" && !twilioContentSID.MatchString(t) {
		v.errorf("twilio.whatsapp.window_template", "must be a content SID, HX followed by 32 hex digits (HX0123456789abcdef0123456789abcdef), got %q", t)
	}
	for name, t := range map[string]*TwilioTemplateConfig{"approval": c.WhatsAppTemplates.Approval, "result": c.WhatsAppTemplates.Result} {
		if t == nil {
			continue
		}
		key := "twilio.whatsapp_templates." + name
		if !twilioContentSID.MatchString(t.ContentSID) {
			v.errorf(key+".content_sid", "must be HX followed by 32 hex digits")
		}
		for k, val := range t.Variables {
			if _, err := texttemplate.New(k).Funcs(templates.Funcs()).Parse(val); err != nil {
				v.errorf(key+".variables."+k, "%v", err)
			}
		}
	}
}
