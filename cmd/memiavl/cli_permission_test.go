package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCLIUnsearchableDatabaseDir: on a database directory the user may
// not search (no x permission: another user's database, a mode changed by
// mistake) verify, dump, export, rewrite-snapshot and wal dump exit 1 with
// "permission denied", not with a claim that the database is missing.
// Run as root, the commands run as the user nobody (root bypasses the
// permission).
func TestCLIUnsearchableDatabaseDir(t *testing.T) {
	bin := buildBinary(t)
	// a directory every user can traverse, unlike t.TempDir's
	top, err := os.MkdirTemp("", "memiavl-cli-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(top, func(p string, _ os.FileInfo, _ error) error { os.Chmod(p, 0o755); return nil })
		os.RemoveAll(top)
	})
	mustOK(t, os.Chmod(top, 0o755))
	dir := filepath.Join(top, "db")
	makeDB(t, dir, 0.01, 5)
	os.Remove(filepath.Join(dir, "LOCK"))
	filepath.Walk(dir, func(p string, fi os.FileInfo, _ error) error {
		if fi.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
	mustOK(t, os.Chmod(dir, 0o644)) // readable, not searchable
	out := filepath.Join(top, "out")
	mustOK(t, os.Mkdir(out, 0o777))
	mustOK(t, os.Chmod(out, 0o777))

	for _, args := range [][]string{
		{"verify", dir},
		{"dump", dir},
		{"wal", "dump", dir},
		{"export", dir, filepath.Join(out, "s.bin")},
		{"rewrite-snapshot", "--progress", "none", dir},
	} {
		cmd := exec.Command(bin, args...)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(cmd.Run())
		if code == -1 {
			t.Skipf("cannot run the binary as another user: %s", stderr.String())
		}
		if code != exitFailure || !strings.Contains(stderr.String(), "permission denied") {
			t.Errorf("memiavl %v on a directory without search permission: exit %d, want %d and \"permission denied\"\nstderr %q",
				args, code, exitFailure, stderr.String())
		}
	}
}
