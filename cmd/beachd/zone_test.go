package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A schedule without a zone runs in the machine's zone, shown by its IANA
// name: never "Local".
func TestMachineZone(t *testing.T) {
	zoneinfo := "/usr/share/zoneinfo/Europe/London"
	if _, err := os.Stat(zoneinfo); err != nil {
		t.Skipf("no zoneinfo database at %s: %v", zoneinfo, err)
	}
	dir := t.TempDir()
	linked := filepath.Join(dir, "linked")
	if err := os.Symlink(zoneinfo, linked); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "etc", "localtime")
	data, _ := os.ReadFile(zoneinfo)
	writeFile(t, copied, string(data))
	writeFile(t, filepath.Join(dir, "etc", "timezone"), "Asia/Tokyo\n")
	bare := filepath.Join(dir, "bare", "localtime")
	writeFile(t, bare, string(data))
	noTZ := func(string) (string, bool) { return "", false }
	tz := func(v string) func(string) (string, bool) { return func(string) (string, bool) { return v, true } }
	for name, tt := range map[string]struct {
		env       func(string) (string, bool)
		localtime string
		want      string
	}{
		"TZ name":                         {tz("America/New_York"), linked, "America/New_York"},
		"TZ with colon":                   {tz(":Europe/Paris"), linked, "Europe/Paris"},
		"TZ path":                         {tz("/usr/share/zoneinfo/Asia/Tokyo"), linked, "Asia/Tokyo"},
		"TZ empty is UTC":                 {tz(""), linked, "UTC"},
		"TZ unknown is UTC":               {tz("Mars/Base"), linked, "UTC"},
		"localtime link":                  {noTZ, linked, "Europe/London"},
		"copied localtime, /etc/timezone": {noTZ, copied, "Asia/Tokyo"},
		"copied localtime alone":          {noTZ, bare, bare},
		"no localtime is UTC":             {noTZ, filepath.Join(dir, "none"), "UTC"},
	} {
		got := machineZone(tt.env, tt.localtime).String()
		if got != tt.want {
			t.Errorf("%s: %q, want %q", name, got, tt.want)
		}
		if got == "Local" {
			t.Errorf("%s: Local", name)
		}
	}
}
