package stress

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// tinyFS mounts a tmpfs of size bytes (root only) and returns its path. It
// skips (fails under CI) when it cannot.
func tinyFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		why = "mount tmpfs: " + err.Error() + ": " + string(out)
	}
	if why != "" {
		msg := "FULL-DISK SCENARIO NOT RUN: it needs a tiny tmpfs for the data dir (" + why + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestFullDisk: the data dir's filesystem fills up while beachd ingests
// and delivers. Ingests fail cleanly (an error, nothing half-stored),
// attempts whose outcome cannot be recorded stay leased; once space is
// freed and beachd restarts, every acknowledged delivery reaches its
// peer (duplicates only for those whose outcome was lost), and the file
// passes bbolt's check and the outbox invariants.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite")
	}
	dir := tinyFS(t, "2m")
	var v verdict
	var refused int
	before, after := noLeak(t, func() {
		r := newRig(t, rigOptions{DBPath: filepath.Join(dir, "beachd.db")})
		// Some traffic first, with the webhook and SMTP peers down so jobs
		// are due again while the disk is full.
		r.proxies["web"].Stop()
		r.proxies["smtp"].Stop()
		if _, err := r.ingest("pre", 8); err != nil {
			t.Fatal(err)
		}
		filler := filepath.Join(dir, "filler")
		fill(t, filler)
		// Ingest until the store refuses (a commit may still fit in free
		// pages of the file).
		var ingestErr error
		for i := 0; i < 200 && ingestErr == nil; i++ {
			_, ingestErr = r.ingest("full", 1)
		}
		if ingestErr == nil {
			t.Fatal("the store accepted 200 envelopes on a full disk")
		}
		if !errors.Is(ingestErr, syscall.ENOSPC) {
			t.Logf("ingest on a full disk failed with %v (not ENOSPC)", ingestErr)
		}
		for i := 0; i < 5; i++ {
			if _, err := r.ingest("full-again", 1); err != nil {
				refused++
			}
		}
		refused++ // the first refusal
		// The peers come back while the disk is full: sends happen but
		// their outcomes cannot all be recorded.
		r.proxies["web"].Start()
		r.proxies["smtp"].Start()
		// Jobs whose failed attempt could not be recorded stay leased and
		// are not tried again before the restart, so sends may or may not
		// happen now: poll a little, do not require them.
		sentWhileFull := false
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !sentWhileFull; time.Sleep(20 * time.Millisecond) {
			sentWhileFull = r.webSink.Stats().Unique > 0 || r.smtp.Stats().Total > 0
		}
		t.Logf("sends reached a peer while the disk was full: %v", sentWhileFull)
		// Free the space and restart beachd on the same file.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		r.shut()
		r.open()
		r.disp.Notify()
		r.settle(60 * time.Second)
		v = r.check(allSent)
		r.close()
		// bbolt check on the closed file.
		bdb, err := bolt.Open(filepath.Join(dir, "beachd.db"), 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer bdb.Close()
		if err := bdb.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}); err != nil {
			t.Errorf("bbolt check: %v", err)
		}
	})
	t.Logf("refused ingests while full: %d", refused)
	writeFaultResult(t, faultResult{Scenario: "full_disk", Verdict: v, Before: before, After: after})
}
