package schedule

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// Catch-up policies: what a schedule does with slots that passed while
// beachd was down (or the clock jumped forward).
const (
	CatchUpSkip    = "skip"     // record the latest missed slot as missed; wait for the next one
	CatchUpRunOnce = "run_once" // run once for the latest missed slot, however many were missed
)

// Overlap policies: what a schedule does with a slot that comes while its
// previous run is still going.
const (
	OverlapSkip  = "skip"  // record the slot as skipped
	OverlapQueue = "queue" // run it when the previous run ends (at most one waits; more are skipped)
)

// Defaults of a Definition's zero values.
const (
	DefaultTimeout    = 5 * time.Minute
	DefaultRetryDelay = time.Minute
	MaxRetries        = 10
	maxMessageBytes   = 64 << 10
	maxRecipients     = 100
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Definition is one configured schedule (the `schedules:` entries of the
// configuration file).
type Definition struct {
	Name string
	// Cron is the spec: 5 fields (minute first), 6 (seconds first), a
	// descriptor (@daily, @every 90m), optionally prefixed by CRON_TZ=Zone.
	Cron string
	// TimeZone is an IANA zone; "" means the spec's prefix, else the
	// scheduler's default zone. Both set and different is an error.
	TimeZone string
	// Agent is the configured agent the message is sent to.
	Agent string
	// Message is the text that starts the turn.
	Message string
	// Session, when set, is the A2A contextId every run uses; otherwise each
	// run starts a new context.
	Session string
	// To are the recipients of the result.
	To []envelope.Recipient
	// Disabled schedules are listed and can be run by hand, never by the clock.
	Disabled bool
	// Timeout bounds one attempt (start the turn, wait for it to settle);
	// zero means DefaultTimeout.
	Timeout time.Duration
	// CatchUp is CatchUpSkip (default) or CatchUpRunOnce.
	CatchUp string
	// Overlap is OverlapSkip (default) or OverlapQueue.
	Overlap string
	// Retries is how many more attempts a failed run gets (0..MaxRetries).
	Retries int
	// RetryDelay is the wait between attempts; zero means DefaultRetryDelay.
	RetryDelay time.Duration
	// ErrorNotice: when a run fails for good, deliver an envelope with an
	// `error` part to the recipients.
	ErrorNotice bool
}

func (d Definition) withDefaults() Definition {
	if d.Timeout <= 0 {
		d.Timeout = DefaultTimeout
	}
	if d.RetryDelay <= 0 {
		d.RetryDelay = DefaultRetryDelay
	}
	if d.CatchUp == "" {
		d.CatchUp = CatchUpSkip
	}
	if d.Overlap == "" {
		d.Overlap = OverlapSkip
	}
	return d
}

// CheckOptions are what definitions are checked against.
type CheckOptions struct {
	// Agents are the configured agent names; nil skips the check.
	Agents map[string]bool
	// DefaultZone is the zone of specs that name none; nil means time.Local.
	DefaultZone *time.Location
	// Now is the instant "never fires" is measured from.
	Now time.Time
	// Key returns the configuration key of definition i; default
	// "schedules[i]".
	Key func(i int) string
}

// Check validates defs and parses their specs. It returns the parsed specs
// (by index) and a *ConfigError listing every problem, each naming the
// schedule and the key.
func Check(defs []Definition, opt CheckOptions) ([]*Spec, error) {
	if opt.Key == nil {
		opt.Key = func(i int) string { return fmt.Sprintf("schedules[%d]", i) }
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	var probs []Problem
	specs := make([]*Spec, len(defs))
	seen := map[string]bool{}
	for i, d := range defs {
		var err error
		add := func(key, format string, args ...any) {
			who := fmt.Sprintf("schedule %q: ", d.Name)
			if d.Name == "" {
				who = ""
			}
			probs = append(probs, Problem{Key: opt.Key(i) + "." + key, Reason: who + fmt.Sprintf(format, args...)})
		}
		switch {
		case d.Name == "":
			add("name", "required")
		case !nameRE.MatchString(d.Name):
			add("name", "must be 1-64 of a-z, 0-9, '.', '_', '-' and start with a letter or digit")
		case seen[d.Name]:
			add("name", "duplicate schedule name")
		}
		seen[d.Name] = true
		var sp *Spec
		if _, zerr := loadZoneOrEmpty(d.TimeZone); zerr != nil {
			add("time_zone", "%v", zerr)
		} else if sp, err = ParseSpec(d.Cron, d.TimeZone, opt.DefaultZone, opt.Now); err != nil {
			add("cron", "%v", err)
		}
		specs[i] = sp
		switch {
		case strings.TrimSpace(d.Agent) == "":
			add("agent", "required")
		case opt.Agents != nil && !opt.Agents[d.Agent]:
			add("agent", "unknown agent %q (not in agents:)", d.Agent)
		}
		switch {
		case strings.TrimSpace(d.Message) == "":
			add("message", "required: the text that starts the turn")
		case len(d.Message) > maxMessageBytes:
			add("message", "longer than %d bytes", maxMessageBytes)
		}
		if len(d.To) == 0 {
			add("to", "at least one recipient is required")
		}
		if len(d.To) > maxRecipients {
			add("to", "at most %d recipients", maxRecipients)
		}
		for j, r := range d.To {
			rk := fmt.Sprintf("to[%d]", j)
			spec, err := envelope.LookupChannel(r.Channel)
			switch {
			case err != nil:
				add(rk+".channel", "%v", err)
			case spec.Address == envelope.AddressEndpoint && strings.TrimSpace(r.Endpoint) == "":
				add(rk+".endpoint", "required for a %s recipient", r.Channel)
			case spec.Address != envelope.AddressEndpoint && strings.TrimSpace(r.Address) == "":
				add(rk+".address", "required for a %s recipient", r.Channel)
			}
		}
		if d.Timeout < 0 {
			add("timeout", "cannot be negative")
		}
		if d.RetryDelay < 0 {
			add("retry_delay", "cannot be negative")
		}
		if d.Retries < 0 || d.Retries > MaxRetries {
			add("retries", "must be between 0 and %d", MaxRetries)
		}
		switch d.CatchUp {
		case "", CatchUpSkip, CatchUpRunOnce:
		default:
			add("catch_up", "must be skip or run_once, got %q", d.CatchUp)
		}
		switch d.Overlap {
		case "", OverlapSkip, OverlapQueue:
		default:
			add("overlap", "must be skip or queue, got %q", d.Overlap)
		}
	}
	if len(probs) > 0 {
		return nil, &ConfigError{Problems: probs}
	}
	return specs, nil
}

func loadZoneOrEmpty(zone string) (*time.Location, error) {
	if zone == "" {
		return nil, nil
	}
	return loadZone(zone)
}
