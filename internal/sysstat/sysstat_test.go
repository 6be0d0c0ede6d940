package sysstat

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDiskUsageAndRSS(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 1<<20), 0o644); err != nil {
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
