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

// TestWalkFilesLinks: the files under a path are counted once each, through
// a link that is the path itself or leads out of the tree (a log on another
// disk), not again through links back into it, and loops of links end.
func TestWalkFilesLinks(t *testing.T) {
	base := t.TempDir()
	write := func(p string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(base, "db")
	write(filepath.Join(db, "snapshot-1", "a"), 100)
	write(filepath.Join(db, "snapshot-1", "b"), 20)
	link("snapshot-1", filepath.Join(db, "current"))             // into the tree
	link(db, filepath.Join(db, "snapshot-1", "loop"))            // a loop
	write(filepath.Join(base, "other-disk", "wal", "seg"), 3000) // out of it
	write(filepath.Join(base, "other-disk", "wal", "sub", "x"), 4)
	link(filepath.Join(base, "other-disk", "wal"), filepath.Join(db, "wal"))
	link(filepath.Join(base, "other-disk", "wal", "sub"), filepath.Join(db, "sub")) // inside the linked log
	link(filepath.Join(base, "missing"), filepath.Join(db, "dangling"))
	dbLink := filepath.Join(base, "db-link")
	link(db, dbLink)

	const want = 100 + 20 + 3000 + 4
	for _, p := range []string{db, dbLink} {
		if got := ApparentSize(p); got != want {
			t.Errorf("ApparentSize(%s) = %d, want %d", p, got, want)
		}
	}
	if got := ApparentSize(filepath.Join(db, "wal")); got != 3004 {
		t.Errorf("ApparentSize of the linked log = %d, want 3004", got)
	}
	if got := ApparentSize(filepath.Join(db, "snapshot-1", "a")); got != 100 {
		t.Errorf("ApparentSize of a file = %d, want 100", got)
	}
	if got := ApparentSize(filepath.Join(base, "missing")); got != 0 {
		t.Errorf("ApparentSize of a missing path = %d", got)
	}
	if got := DiskUsage(dbLink); got < 4096 {
		t.Errorf("DiskUsage through a link = %d", got)
	}
}
