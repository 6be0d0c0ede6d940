package sysstat

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

func TestDiskUsageAndRSS(t *testing.T) {
	dir := t.TempDir()
	// random bytes, synced: a file system that compresses would store
	// zeros in fewer blocks, and one may allocate blocks at writeback
	data := make([]byte, 1<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := DiskUsage(dir); n < 1<<20 {
		t.Fatalf("disk usage %d, want at least 1 MiB", n)
	}
	if DiskUsage(filepath.Join(dir, "missing")) != 0 {
		t.Fatal("missing path has a disk usage")
	}
	if PeakRSS() <= 0 {
		t.Fatal("no peak RSS")
	}
	if ProcStatus("NoSuchField:") != 0 {
		t.Fatal("unknown field read")
	}
}
