package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts 5 fields (minute first) or 6 (seconds first), descriptors
// (@daily, @every 90m) and a CRON_TZ= or TZ= prefix.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// neverHorizon is how far ahead a spec must fire at least once.
const neverHorizon = 5 * 366 * 24 * time.Hour

// Spec is a parsed cron spec: the schedule's slots, with beachd's DST rules
// on top of robfig/cron's (see doc.go).
type Spec struct {
	// Text is the spec as configured.
	Text string
	// Location is the zone the spec is read in (nil for @every).
	Location *time.Location
	sched    cron.Schedule
	spec     *cron.SpecSchedule // nil for @every
	// wallClock: the spec names particular hours, so it follows the wall
	// clock through DST changes (a gap slot fires once after the gap, a
	// repeated hour fires once). A spec matching every hour follows elapsed
	// time instead.
	wallClock bool
}

// ParseSpec parses a cron spec read in zone (an IANA name; "" means the
// spec's own CRON_TZ=/TZ= prefix, else def). A prefix and a different zone
// are an error. A spec with no slot within five years of now is an error.
func ParseSpec(text, zone string, def *time.Location, now time.Time) (*Spec, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, errors.New("empty cron spec")
	}
	if def == nil {
		def = time.Local
	}
	body, prefixZone, hasPrefix, err := splitZone(text)
	if err != nil {
		return nil, err
	}
	if body == "" {
		return nil, errors.New("cron spec has a time zone but no schedule")
	}
	var loc *time.Location
	switch {
	case hasPrefix && zone != "" && prefixZone != zone:
		return nil, fmt.Errorf("spec says time zone %q but time_zone is %q; set one of them", prefixZone, zone)
	case hasPrefix:
		zone = prefixZone
	}
	if zone != "" {
		if loc, err = loadZone(zone); err != nil {
			return nil, err
		}
	} else {
		loc = def
	}
	sched, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	sp := &Spec{Text: text, sched: sched}
	if ss, ok := sched.(*cron.SpecSchedule); ok {
		ss.Location = loc
		sp.spec = ss
		sp.Location = loc
		sp.wallClock = ss.Hour&(1<<24-1) != 1<<24-1
	}
	if sp.Next(now).IsZero() {
		return nil, fmt.Errorf("spec %q never fires (no slot within 5 years)", text)
	}
	return sp, nil
}

func loadZone(zone string) (*time.Location, error) {
	if strings.ContainsAny(zone, " \t\n\x00") || zone == "Local" {
		return nil, fmt.Errorf("unknown time zone %q", zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", zone)
	}
	return loc, nil
}

// splitZone takes a CRON_TZ= or TZ= prefix off text. robfig/cron parses the
// prefix too, but panics on a prefix without a following space; we do it
// ourselves and hand it only the body.
func splitZone(text string) (body, zone string, ok bool, err error) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if !strings.HasPrefix(text, p) {
			continue
		}
		rest := text[len(p):]
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			zone, body = rest, ""
		} else {
			zone, body = rest[:i], strings.TrimSpace(rest[i:])
		}
		if zone == "" {
			return "", "", false, fmt.Errorf("empty time zone in %s prefix", strings.TrimSuffix(p, "="))
		}
		return body, zone, true, nil
	}
	return text, "", false, nil
}

func parseBody(body string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid cron spec %q", body)
		}
	}()
	if strings.HasPrefix(body, "@every") {
		d, derr := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(body, "@every")))
		if derr == nil && d < time.Second {
			return nil, fmt.Errorf("@every interval %s is shorter than one second", d)
		}
	}
	s, err = parser.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("invalid cron spec %q: %w", body, err)
	}
	return s, nil
}

// Next returns the first slot strictly after t, or the zero time when there
// is none within five years.
func (s *Spec) Next(t time.Time) time.Time {
	if s.spec == nil {
		return s.sched.Next(t).UTC()
	}
	loc := s.Location
	t = t.In(loc)
	for range 1000 {
		n := s.spec.Next(t)
		if n.IsZero() {
			return time.Time{}
		}
		if !s.wallClock {
			return n.UTC()
		}
		if g := s.gapSlot(t, n); !g.IsZero() {
			return g.UTC()
		}
		if repeatedWallTime(n, loc) {
			// The second occurrence of a wall time in a repeated hour: the
			// first one was this slot already.
			t = n
			continue
		}
		return n.UTC()
	}
	return time.Time{}
}

// gapSlot looks for a DST gap in (t, n) in which the spec would have matched
// a wall-clock time that does not exist. Such slots (however many) are
// replaced by one slot at the first instant after the gap. robfig/cron
// itself skips them.
func (s *Spec) gapSlot(t, n time.Time) time.Time {
	cur := t
	for range 16 {
		_, end := cur.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}
		}
		_, offBefore := cur.Zone()
		_, offAfter := end.Zone()
		if gap := time.Duration(offAfter-offBefore) * time.Second; gap > 0 {
			c := *s.spec
			c.Location = time.FixedZone("before", offBefore)
			if m := c.Next(end.Add(-time.Second)); !m.IsZero() && m.Before(end.Add(gap)) {
				return end
			}
		}
		cur = end
	}
	return time.Time{}
}

// repeatedWallTime reports whether t's wall-clock reading in loc already
// occurred earlier (the second pass through a repeated hour).
func repeatedWallTime(t time.Time, loc *time.Location) bool {
	t = t.In(loc)
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := t.Add(-d).In(loc)
		if e.Year() == t.Year() && e.YearDay() == t.YearDay() && e.Hour() == t.Hour() &&
			e.Minute() == t.Minute() && e.Second() == t.Second() {
			return true
		}
	}
	return false
}

// windows are the look-back spans tried, shortest first, when searching for
// the latest slot at or before an instant.
var windows = []time.Duration{2 * time.Minute, 2 * time.Hour, 50 * time.Hour, 40 * 24 * time.Hour, 400 * 24 * time.Hour, neverHorizon}

// maxSteps bounds the slots walked in one window.
const maxSteps = 1_000_000

// Latest returns the latest slot in (after, now], or the zero time when there
// is none. It walks from the nearest window that contains a slot, so that a
// long downtime with a dense spec costs little.
func (s *Spec) Latest(after, now time.Time) time.Time {
	if !now.After(after) {
		return time.Time{}
	}
	first := s.Next(after)
	if first.IsZero() || first.After(now) {
		return time.Time{}
	}
	for _, w := range windows {
		from := now.Add(-w)
		if !from.After(after) {
			from = after
		}
		n := s.Next(from)
		if n.IsZero() || n.After(now) {
			if from.Equal(after) {
				break
			}
			continue
		}
		latest := n
		for range maxSteps {
			n = s.Next(latest)
			if n.IsZero() || n.After(now) {
				return latest
			}
			latest = n
		}
		return latest
	}
	return first
}
