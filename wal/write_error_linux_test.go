//go:build linux

package wal

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestWriteErrorNamesSegment: a failed write to a segment names the
// segment. A segment is created under a temporary name and renamed once its
// header is durable, and the *os.File keeps the temporary name, so the
// operating system's error (an *fs.PathError from the file) names
// "<segment>.wal.tmp", a file that no longer exists, beside the right name
// that the log's own prefix gives: an operator looking for the full or
// failing file is sent to one that is not there.
func TestWriteErrorNamesSegment(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := Entry{Version: 1, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: make([]byte, 1<<20)}}}}}
	err = l.Append(e)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append of 1 MiB to a 256 KiB file system: %v", err)
	}
	if strings.Contains(err.Error(), tmpExt) {
		t.Errorf("the error names the segment's temporary name, gone since its rename: %v", err)
	}
}
