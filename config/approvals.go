package config

import (
	"strings"
	"time"

	"github.com/cool-ai/beachd/approvals"
)

// ApprovalsConfig is the `approvals:` section.
//
//	approvals:
//	  default_expiry: 24h        # for requests without expiresAt
//	  secret: "${BEACHD_APPROVAL_SECRET}"  # HMAC key of every token, ≥32 bytes;
//	                             # empty: generated once into data_dir/approval.key (0600)
//	  sms_code_digits: 6         # 4-10
//	  max_wrong_codes: 5         # wrong SMS/WhatsApp codes from a number per hour lock its open approvals' codes for a day
//	  injection_lifetime: 24h    # a failing injection is dead-lettered after this
//	  email_links: true          # false: no confirmation link in mail, only replies decide (THREATS #3)
//	  words:                     # decision words beside the English ones
//	    granted: [ja, oui, sí]
//	    denied: [nein, non]
//	  policies: [ … ]            # rules, quorum, reminders and escalation (policies.go)
type ApprovalsConfig struct {
	DefaultExpiry     time.Duration `yaml:"default_expiry"`
	Secret            string        `yaml:"secret"`
	SMSCodeDigits     int           `yaml:"sms_code_digits"`
	MaxWrongCodes     int           `yaml:"max_wrong_codes"`
	InjectionLifetime time.Duration `yaml:"injection_lifetime"`
	// EmailLinks: nil (unset) means true.
	EmailLinks *bool         `yaml:"email_links"`
	Words      DecisionWords `yaml:"words"`
	// Policies, in order: the first whose match fits an approval request
	// governs it (docs/policies.md); none: everyone on the delivery is
	// asked, the first answer wins.
	Policies []PolicyConfig `yaml:"policies"`
}

// DecisionWords is `approvals.words:`.
type DecisionWords struct {
	Granted []string `yaml:"granted"`
	Denied  []string `yaml:"denied"`
}

// ParseWords builds the decision words; validate has checked them.
func (c *ApprovalsConfig) ParseWords() (*approvals.Words, error) {
	return approvals.NewWords(c.Words.Granted, c.Words.Denied)
}

func (c *ApprovalsConfig) validate(v *validator) {
	if c.DefaultExpiry < 0 {
		v.errorf("approvals.default_expiry", "cannot be negative")
	} else if c.DefaultExpiry > 0 && c.DefaultExpiry < time.Minute {
		v.errorf("approvals.default_expiry", "at least 1m, got %s", c.DefaultExpiry)
	}
	if c.Secret != "" && len(c.Secret) < 32 {
		v.errorf("approvals.secret", "must be at least 32 bytes (or empty: generated into data_dir/approval.key)")
	}
	if c.SMSCodeDigits != 0 && (c.SMSCodeDigits < 4 || c.SMSCodeDigits > 10) {
		v.errorf("approvals.sms_code_digits", "must be 4-10, got %d", c.SMSCodeDigits)
	}
	if c.MaxWrongCodes < 0 || c.MaxWrongCodes > 100 {
		v.errorf("approvals.max_wrong_codes", "must be 1-100 (0: default 5), got %d", c.MaxWrongCodes)
	}
	if c.InjectionLifetime < 0 {
		v.errorf("approvals.injection_lifetime", "cannot be negative")
	}
	if _, err := c.ParseWords(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			path, msg, _ := strings.Cut(strings.TrimPrefix(line, "approvals: "), ": ")
			v.errorf("approvals."+path, "%s", msg)
		}
	}
}
