package config

import (
	"fmt"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
)

// ScheduleConfig is one entry of `schedules:` (docs/configuration.md, schedule/doc.go).
type ScheduleConfig struct {
	Name string `yaml:"name"`
	// Cron: 5 fields, 6 (seconds first) or a descriptor (@daily, @every 1h),
	// optionally prefixed by CRON_TZ=Zone.
	Cron string `yaml:"cron"`
	// TimeZone: an IANA zone; default the spec's CRON_TZ=, else the local zone.
	TimeZone string `yaml:"time_zone"`
	Agent    string `yaml:"agent"`
	// Message is the text that starts the turn.
	Message string `yaml:"message"`
	// Session: an A2A contextId every run uses; default a new one per run.
	Session string               `yaml:"session"`
	To      []envelope.Recipient `yaml:"to"`
	// Enabled: default true; a disabled schedule can still be run by hand.
	Enabled *bool `yaml:"enabled"`
	// Timeout bounds one attempt; default 5m.
	Timeout time.Duration `yaml:"timeout"`
	// CatchUp after downtime: skip (default) or run_once.
	CatchUp string `yaml:"catch_up"`
	// Overlap while the previous run goes on: skip (default) or queue.
	Overlap string `yaml:"overlap"`
	// Retries of a failed run (0-10); RetryDelay between them, default 1m.
	Retries    int           `yaml:"retries"`
	RetryDelay time.Duration `yaml:"retry_delay"`
	// ErrorNotice: deliver an `error` envelope when a run fails for good.
	ErrorNotice bool `yaml:"error_notice"`
}

// Definition is the schedule package's view of the entry.
func (s *ScheduleConfig) Definition() schedule.Definition {
	return schedule.Definition{Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone, Agent: s.Agent, Message: s.Message,
		Session: s.Session, To: s.To, Disabled: s.Enabled != nil && !*s.Enabled, Timeout: s.Timeout,
		CatchUp: s.CatchUp, Overlap: s.Overlap, Retries: s.Retries, RetryDelay: s.RetryDelay, ErrorNotice: s.ErrorNotice}
}

// validate checks entry i (the duplicate-name check is the caller's).
func (s *ScheduleConfig) validate(v *validator, i int, c *Config) {
	key := fmt.Sprintf("schedules[%d]", i)
	agents := map[string]bool{}
	for name := range c.Agents {
		agents[name] = true
	}
	_, err := schedule.Check([]schedule.Definition{s.Definition()}, schedule.CheckOptions{
		Agents: agents, Now: time.Now(), Key: func(int) string { return key }})
	badZone := false
	if ce, ok := err.(*schedule.ConfigError); ok {
		for _, p := range ce.Problems {
			v.errorf(p.Key, "%s", p.Reason)
			badZone = badZone || p.Key == key+".time_zone"
		}
	} else if err != nil {
		v.errorf(key, "%v", err)
	}
	if badZone && s.Cron != "" {
		// Check does not parse the spec without a zone to read it in; its
		// problems are reported now, not once the zone is fixed.
		if _, err := schedule.ParseSpec(s.Cron, "", time.UTC, time.Now()); err != nil {
			v.errorf(key+".cron", "schedule %q: %v", s.Name, err)
		}
	}
	if ac, ok := c.Agents[s.Agent]; ok && ac.A2AURL == "" {
		v.errorf(key+".agent", "schedule %q: agent %q has no a2a_url; schedules start turns over A2A", s.Name, s.Agent)
	}
	for j, r := range s.To {
		rk := fmt.Sprintf("%s.to[%d]", key, j)
		spec, ok := envelope.Channel(r.Channel)
		switch {
		case !ok:
			// schedule.Check reports it.
		case spec.Address == envelope.AddressEndpoint && r.Endpoint != "":
			if _, ok := c.Webhooks.Endpoints[r.Endpoint]; !ok {
				v.errorf(rk+".endpoint", "schedule %q: unknown webhook endpoint %q (not in webhooks.endpoints)", s.Name, r.Endpoint)
			}
		case spec.Address == envelope.AddressEndpoint || r.Address == "":
			// schedule.Check reports it.
		default:
			// Checked as a delivery request's recipient is, so that a run
			// is not refused at every slot.
			if _, err := spec.Normalize(r.Address); err != nil {
				v.errorf(rk+".address", "schedule %q: %v", s.Name, err)
			}
		}
	}
}

// DevScheduleName is the sample schedule of `beachd dev`.
const DevScheduleName = "daily-brief"

// DevSchedule is `beachd dev`'s sample schedule: every day at 08:00 (the
// machine's zone) it asks agent for "Today's tasks" and delivers the
// answer to the dev webhook sink endpoint and the dev mailbox. Nothing
// leaves the machine; `beachd schedules run daily-brief` fires it now.
func DevSchedule(agent, endpoint, mailbox string) ScheduleConfig {
	return ScheduleConfig{Name: DevScheduleName, Cron: "0 8 * * *", Agent: agent, Message: "Today's tasks",
		To: []envelope.Recipient{{Channel: envelope.ChannelWebhook, Endpoint: endpoint}, {Channel: envelope.ChannelEmail, Address: mailbox}}}
}
