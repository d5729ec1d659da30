package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScale10k is the small version of `beachd-bench -scale 1000000`: a
// store bulk-loaded with 10,000 queued deliveries, the daemon started on
// it, delivering from the backlog, restarted, and the claim rate.
func TestScale10k(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(filepath.Join(wd, "..", "..")); err != nil { // buildBeachd builds ./cmd/beachd
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	res, err := scaleRun(10000, "", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.StartupMs <= 0 || res.RSSAtReadyMiB <= 0 || res.ClaimPerSec <= 0 || res.DrainedPerSec <= 0 {
		t.Errorf("missing figures: %+v", res)
	}
	if res.InvariantsCheck != "ok" {
		t.Errorf("invariants after the run: %s", res.InvariantsCheck)
	}
	t.Logf("10,000 queued: start-up %.0f ms, RSS at ready %.1f MiB, peak %.1f MiB, delivered %.0f/s from the backlog, %.0f claims/s",
		res.StartupMs, res.RSSAtReadyMiB, res.PeakRSSMiB, res.DrainedPerSec, res.ClaimPerSec)
}

// TestPlotAndMarkdown: the soak plot is a readable PNG and the table has
// the figures.
func TestPlotAndMarkdown(t *testing.T) {
	res := &soakResult{Duration: "30s", Rate: 1000, Accepted: 3, Delivered: 3}
	for i := 0; i < 3; i++ {
		res.Samples = append(res.Samples, soakSample{AtSec: float64(10 * (i + 1)), RSSMiB: 40 + float64(i), E2EP50ms: 5, E2EP99ms: 20 + float64(i), IngestP99ms: 3})
	}
	path := filepath.Join(t.TempDir(), "soak.png")
	if err := plotSoak(path, res); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1000 || b.Dy() != 640 {
		t.Errorf("plot is %v", b)
	}
	md := markdown(&report{Machine: "m", Soak: res, Postfix: &postfixResult{N: 10, AcceptRatio: 2.5, DeliverRatio: 3}})
	for _, want := range []string{"| Machine | m |", "Soak", "**2.50×**", "**3.00×**"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
