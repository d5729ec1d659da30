package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// localtimePath is where the machine's zone is configured when TZ is unset.
const localtimePath = "/etc/localtime"

// machineZone is the zone Go's time.Local stands for, loaded under its IANA
// name ("Europe/London"), so that what shows a schedule's zone never says
// "Local". It follows Go's rules: TZ when set ("" is UTC, ":Zone" and a
// path into a zoneinfo directory are read as their name), else
// /etc/localtime, whose name is its link target's path under zoneinfo/,
// else /etc/timezone beside it (Debian). A copied /etc/localtime with no
// name anywhere is loaded under its path; without one, UTC (as Go does).
func machineZone(lookupEnv func(string) (string, bool), localtime string) *time.Location {
	if tz, ok := lookupEnv("TZ"); ok {
		tz = strings.TrimPrefix(tz, ":")
		if tz == "" {
			return time.UTC
		}
		if loc, err := time.LoadLocation(zoneName(tz)); err == nil {
			return loc
		}
		return time.UTC // Go falls back to UTC on a TZ it cannot load
	}
	if target, err := filepath.EvalSymlinks(localtime); err == nil && target != localtime {
		if loc, err := time.LoadLocation(zoneName(target)); err == nil {
			return loc
		}
	}
	data, err := os.ReadFile(localtime)
	if errors.Is(err, fs.ErrNotExist) {
		return time.UTC
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(localtime), "timezone")); err == nil {
		if loc, err := time.LoadLocation(strings.TrimSpace(string(b))); err == nil {
			return loc
		}
	}
	if err == nil {
		if loc, err := time.LoadLocationFromTZData(localtime, data); err == nil {
			return loc
		}
	}
	return time.UTC
}

// zoneName is the IANA name in a zoneinfo path
// ("/usr/share/zoneinfo/Europe/London" → "Europe/London"); other names as
// they are.
func zoneName(s string) string {
	if i := strings.LastIndex(s, "zoneinfo/"); i >= 0 {
		return s[i+len("zoneinfo/"):]
	}
	return s
}
