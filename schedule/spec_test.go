package schedule

import (
	"strings"
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestParseSpec(t *testing.T) {
	now := utc("2026-01-10T12:00:00Z")
	cases := []struct {
		name, spec, zone string
		from             string // next slot after this instant…
		want             string // …is this one (UTC)
		err              string // or this error
	}{
		{name: "5 fields in UTC", spec: "0 8 * * 1-5", zone: "UTC", from: "2026-01-10T12:00:00Z", want: "2026-01-12T08:00:00Z"},
		{name: "6 fields, seconds first", spec: "30 0 8 * * *", zone: "UTC", from: "2026-01-10T12:00:00Z", want: "2026-01-11T08:00:30Z"},
		{name: "CRON_TZ prefix", spec: "CRON_TZ=Europe/London 0 8 * * *", from: "2026-07-01T12:00:00Z", want: "2026-07-02T07:00:00Z"},
		{name: "TZ prefix", spec: "TZ=America/New_York 0 8 * * *", from: "2026-01-10T12:00:00Z", want: "2026-01-10T13:00:00Z"},
		{name: "time_zone key", spec: "0 8 * * *", zone: "America/New_York", from: "2026-01-10T12:00:00Z", want: "2026-01-10T13:00:00Z"},
		{name: "prefix and same key", spec: "CRON_TZ=Europe/London 0 8 * * *", zone: "Europe/London", from: "2026-01-10T12:00:00Z", want: "2026-01-11T08:00:00Z"},
		{name: "descriptor", spec: "@daily", zone: "Europe/London", from: "2026-07-01T12:00:00Z", want: "2026-07-01T23:00:00Z"},
		{name: "every", spec: "@every 90m", from: "2026-01-10T12:00:00Z", want: "2026-01-10T13:30:00Z"},
		{name: "prefix and other key", spec: "CRON_TZ=Europe/London 0 8 * * *", zone: "Europe/Paris", err: "time_zone is"},
		{name: "unknown zone in prefix", spec: "CRON_TZ=Mars/Olympus 0 8 * * *", err: "unknown time zone"},
		{name: "unknown zone key", spec: "0 8 * * *", zone: "Nowhere/Land", err: "unknown time zone"},
		{name: "prefix without spec", spec: "CRON_TZ=UTC", err: "no schedule"},
		{name: "empty prefix zone", spec: "TZ= 0 8 * * *", err: "empty time zone"},
		{name: "never fires", spec: "0 0 30 2 *", zone: "UTC", err: "never fires"},
		{name: "31 April never fires", spec: "0 0 31 4 *", zone: "UTC", err: "never fires"},
		{name: "bad field", spec: "61 * * * *", zone: "UTC", err: "invalid cron spec"},
		{name: "too few fields", spec: "* * *", zone: "UTC", err: "invalid cron spec"},
		{name: "too many fields", spec: "0 0 0 * * * *", zone: "UTC", err: "invalid cron spec"},
		{name: "empty", spec: "  ", err: "empty cron spec"},
		{name: "unknown descriptor", spec: "@fortnightly", err: "invalid cron spec"},
		{name: "every too short", spec: "@every 10ms", err: "shorter than one second"},
		{name: "every garbage", spec: "@every soon", err: "invalid cron spec"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp, err := ParseSpec(c.spec, c.zone, time.UTC, now)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got := sp.Next(utc(c.from)); !got.Equal(utc(c.want)) {
				t.Fatalf("Next(%s) = %s, want %s", c.from, got.Format(time.RFC3339), c.want)
			}
		})
	}
}

// slotsBetween lists the slots in (from, to].
func slotsBetween(sp *Spec, from, to time.Time) []string {
	var out []string
	for t := sp.Next(from); !t.IsZero() && !t.After(to); t = sp.Next(t) {
		out = append(out, t.Format(time.RFC3339))
	}
	return out
}

// TestDST pins beachd's DST rules (doc.go) in zones that have both a gap and
// a repeated hour.
func TestDST(t *testing.T) {
	cases := []struct {
		name, spec string
		from, to   string
		want       []string
	}{
		// New York, 8 March 2026: 02:00 EST → 03:00 EDT (07:00Z).
		{"NY gap: daily 02:30 fires at 03:00 EDT", "CRON_TZ=America/New_York 30 2 * * *",
			"2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NY gap: four slots in the gap fire once", "CRON_TZ=America/New_York */15 2 * * *",
			"2026-03-08T06:00:00Z", "2026-03-08T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z"}},
		{"NY gap: hourly follows elapsed time", "CRON_TZ=America/New_York 0 * * * *",
			"2026-03-08T05:30:00Z", "2026-03-08T08:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"NY gap: a spec for 03:00 is not doubled", "CRON_TZ=America/New_York 0 2,3 * * *",
			"2026-03-08T05:00:00Z", "2026-03-08T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z"}},
		// New York, 1 November 2026: 02:00 EDT → 01:00 EST (06:00Z); 01:xx twice.
		{"NY repeat: daily 01:30 fires once", "CRON_TZ=America/New_York 30 1 * * *",
			"2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY repeat: every minute of hour 1 fires once per wall minute", "CRON_TZ=America/New_York 0,59 1 * * *",
			"2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:59:00Z"}},
		{"NY repeat: hourly fires in both passes", "CRON_TZ=America/New_York 0 * * * *",
			"2026-11-01T04:30:00Z", "2026-11-01T07:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		// London, 29 March 2026: 01:00 GMT → 02:00 BST; 25 October: 01:xx twice.
		{"London gap: daily 01:30 fires at 02:00 BST", "CRON_TZ=Europe/London 30 1 * * *",
			"2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"London repeat: daily 01:30 fires once", "CRON_TZ=Europe/London 30 1 * * *",
			"2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"London: 6-field spec in the gap", "CRON_TZ=Europe/London 15 30 1 * * *",
			"2026-03-28T12:00:00Z", "2026-03-29T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp, err := ParseSpec(c.spec, "", time.UTC, utc(c.from))
			if err != nil {
				t.Fatal(err)
			}
			got := slotsBetween(sp, utc(c.from), utc(c.to))
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("slots = %v\nwant    %v", got, c.want)
			}
		})
	}
}

func TestLatest(t *testing.T) {
	sp, err := ParseSpec("0 8 * * *", "UTC", nil, utc("2026-01-01T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sp.Latest(utc("2026-01-01T00:00:00Z"), utc("2026-01-05T09:00:00Z")); !got.Equal(utc("2026-01-05T08:00:00Z")) {
		t.Fatalf("latest = %v", got)
	}
	if got := sp.Latest(utc("2026-01-05T08:00:00Z"), utc("2026-01-05T09:00:00Z")); !got.IsZero() {
		t.Fatalf("latest after the cursor = %v, want none", got)
	}
	// A dense spec over a long downtime stays cheap and exact.
	every, err := ParseSpec("* * * * * *", "UTC", nil, utc("2026-01-01T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := every.Latest(utc("2025-01-01T00:00:00Z"), utc("2026-01-05T09:00:00.5Z")); !got.Equal(utc("2026-01-05T09:00:00Z")) {
		t.Fatalf("latest every second = %v", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Latest took %v", d)
	}
}
