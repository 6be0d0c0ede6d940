package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestImportFullDisk: an import that runs out of disk space fails with the
// write's error and leaves no database; the stream file, which is valid, is
// not called invalid (compat.ErrSnapshotStream is for a stream's content).
// It needs a small tmpfs, so it runs only where the test may mount one.
func TestImportFullDisk(t *testing.T) {
	src := t.TempDir()
	makeDB(t, src, 0.05, 10)
	stream := filepath.Join(t.TempDir(), "stream.bin")
	mustCLI(t, "export", src, stream)

	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })

	dir := filepath.Join(mnt, "db")
	code, out, errs := cli(t, "import", "--height", "10", stream, dir)
	if code != exitFailure {
		t.Fatalf("import onto a full disk: exit %d, want %d\n%s%s", code, exitFailure, out, errs)
	}
	if !strings.Contains(errs, "no space left on device") {
		t.Fatalf("import onto a full disk did not fail for lack of space:\n%s", errs)
	}
	if strings.Contains(errs, "invalid state-sync snapshot stream") {
		t.Errorf("a full disk is reported as an invalid stream:\n%s", errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "current")); err == nil {
		t.Errorf("the failed import left a database")
	}
	// with room, the same file imports
	mustCLI(t, "import", "--height", "10", stream, filepath.Join(t.TempDir(), "db"))
}
