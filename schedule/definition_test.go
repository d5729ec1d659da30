package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

func TestCheckNamesScheduleAndKey(t *testing.T) {
	good := def("brief", "0 8 * * *")
	cases := []struct {
		name string
		mod  func(d *Definition)
		key  string
		text string
	}{
		{"bad cron", func(d *Definition) { d.Cron = "0 25 * * *" }, "schedules[0].cron", `schedule "brief": invalid cron spec`},
		{"never fires", func(d *Definition) { d.Cron = "0 0 30 2 *" }, "schedules[0].cron", "never fires"},
		{"unknown zone key", func(d *Definition) { d.TimeZone = "Europe/Atlantis" }, "schedules[0].time_zone", `schedule "brief": unknown time zone "Europe/Atlantis"`},
		{"unknown zone prefix", func(d *Definition) { d.Cron = "CRON_TZ=Europe/Atlantis 0 8 * * *" }, "schedules[0].cron", "unknown time zone"},
		{"zone conflict", func(d *Definition) { d.Cron = "CRON_TZ=Europe/London 0 8 * * *"; d.TimeZone = "UTC" }, "schedules[0].cron", "set one of them"},
		{"unknown agent", func(d *Definition) { d.Agent = "hotel" }, "schedules[0].agent", `unknown agent "hotel"`},
		{"no agent", func(d *Definition) { d.Agent = "" }, "schedules[0].agent", "required"},
		{"no message", func(d *Definition) { d.Message = " " }, "schedules[0].message", "required"},
		{"no recipients", func(d *Definition) { d.To = nil }, "schedules[0].to", "at least one recipient"},
		{"bad channel", func(d *Definition) { d.To = []envelope.Recipient{{Channel: "fax", Address: "1"}} }, "schedules[0].to[0].channel", `unknown channel "fax"`},
		{"webhook without endpoint", func(d *Definition) { d.To = []envelope.Recipient{{Channel: "webhook"}} }, "schedules[0].to[0].endpoint", "required"},
		{"email without address", func(d *Definition) { d.To = []envelope.Recipient{{Channel: "email"}} }, "schedules[0].to[0].address", "required"},
		{"bad name", func(d *Definition) { d.Name = "Morning Brief" }, "schedules[0].name", "must be"},
		{"no name", func(d *Definition) { d.Name = "" }, "schedules[0].name", "required"},
		{"catch_up", func(d *Definition) { d.CatchUp = "all" }, "schedules[0].catch_up", "skip or run_once"},
		{"overlap", func(d *Definition) { d.Overlap = "allow" }, "schedules[0].overlap", "skip or queue"},
		{"retries", func(d *Definition) { d.Retries = 99 }, "schedules[0].retries", "between 0 and 10"},
		{"timeout", func(d *Definition) { d.Timeout = -time.Second }, "schedules[0].timeout", "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := good
			c.mod(&d)
			_, err := Check([]Definition{d}, CheckOptions{Agents: map[string]bool{"travel": true}, Now: utc("2026-01-01T00:00:00Z")})
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ConfigError", err)
			}
			for _, p := range ce.Problems {
				if p.Key == c.key && strings.Contains(p.Reason, c.text) {
					return
				}
			}
			t.Fatalf("problems = %+v, want %s: …%s…", ce.Problems, c.key, c.text)
		})
	}
}

func TestCheckDuplicatesAndCustomKeys(t *testing.T) {
	a, b := def("brief", "@daily"), def("brief", "@hourly")
	_, err := Check([]Definition{a, b}, CheckOptions{Key: func(i int) string { return "schedules." + []string{"x", "y"}[i] }})
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Key != "schedules.y.name" {
		t.Fatalf("err = %v", err)
	}
	specs, err := Check([]Definition{a}, CheckOptions{})
	if err != nil || len(specs) != 1 || specs[0] == nil {
		t.Fatalf("good definition: %v", err)
	}
}

// FuzzParseSpec: no spec or zone, however odd, panics or hangs the parser,
// and an accepted spec yields increasing slots.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"0 8 * * 1-5", "CRON_TZ=Europe/London 0 8 * * *", "TZ=America/New_York */15 2 * * *",
		"@daily", "@every 90m", "0 0 30 2 *", "TZ=", "CRON_TZ=", "CRON_TZ=UTC", "TZ=UTC\t@hourly", "@every", "@every -1s",
		"1-5/0 * * * *", "* * * * * * *", "0 0 29 2 *", "? ? ? ? ?", "L W * * *", "*/0 * * * *", "59 23 31 12 *"} {
		f.Add(s, "")
		f.Add(s, "Europe/London")
	}
	f.Add("0 8 * * *", "../../etc/passwd")
	f.Add("0 8 * * *", "Local")
	now := utc("2026-01-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, spec, zone string) {
		sp, err := ParseSpec(spec, zone, time.UTC, now)
		if err != nil {
			return
		}
		prev := now
		for range 3 {
			n := sp.Next(prev)
			if n.IsZero() {
				return
			}
			if !n.After(prev) {
				t.Fatalf("Next(%v) = %v is not after it (spec %q)", prev, n, spec)
			}
			prev = n
		}
	})
}

// FuzzCheck: definitions built from arbitrary strings are accepted or refused
// with problems that each name a key; never a panic.
func FuzzCheck(f *testing.F) {
	f.Add("brief", "0 8 * * *", "UTC", "travel", "hi", "email", "a@example.org", "skip", "queue")
	f.Add("", "", "", "", "", "", "", "", "")
	f.Add("x", "CRON_TZ=Europe/London @weekly", "Europe/Paris", "nope", "m", "webhook", "", "run_once", "skip")
	f.Fuzz(func(t *testing.T, name, cron, zone, agentName, msg, channel, addr, catchUp, overlap string) {
		d := Definition{Name: name, Cron: cron, TimeZone: zone, Agent: agentName, Message: msg,
			To: []envelope.Recipient{{Channel: channel, Address: addr, Endpoint: addr}}, CatchUp: catchUp, Overlap: overlap}
		specs, err := Check([]Definition{d}, CheckOptions{Agents: map[string]bool{"travel": true}, Now: utc("2026-01-01T00:00:00Z")})
		if err == nil {
			if len(specs) != 1 || specs[0] == nil {
				t.Fatal("accepted without a spec")
			}
			return
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("err = %v", err)
		}
		for _, p := range ce.Problems {
			if !strings.HasPrefix(p.Key, "schedules[0].") {
				t.Fatalf("problem without key: %+v", p)
			}
		}
	})
}
