package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// An approval key file other users can read stops beachd with an error
// naming the file and the fix; a 0600 file is used, and a missing one is
// created 0600.
func TestApprovalKeyFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX file modes only")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "approval.key")
	k, err := approvalKey(path)
	if err != nil || len(k) < 32 {
		t.Fatalf("fresh key %q: %v", k, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("created with mode %04o", fi.Mode().Perm())
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := approvalKey(path)
		if !errors.Is(err, errKeyFileMode) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if k2, err := approvalKey(path); err != nil || k2 != k {
		t.Fatalf("0600 key: %q %v; want the stored key", k2, err)
	}
}
