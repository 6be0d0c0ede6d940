package multitree

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestLoweredInitialVersionRecorded: a database created with an initial
// version whose SetInitialVersion lowered it to 1 (or 0) before the first
// commit began at version 1; reopened from snapshot 0, which records the
// creation's initial version, it must record 1 in the snapshots it writes
// later, not the creation's.
func TestLoweredInitialVersionRecorded(t *testing.T) {
	for _, lowered := range []int64{0, 1} {
		dir := t.TempDir()
		db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: 50, SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetInitialVersion(lowered); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if err := db.Set("a", []byte{byte(i)}, []byte("v")); err != nil {
				t.Fatal(err)
			}
			info, err := db.Commit()
			if err != nil {
				t.Fatal(err)
			}
			if info.Version != int64(i+1) {
				t.Fatalf("commit %d: version %d", i, info.Version)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if db, err = Open(dir, Options{SnapshotInterval: -1}); err != nil {
			t.Fatal(err)
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, snapshotDirName(3), metadataFileName)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decodeMetadata(path, b)
		if err != nil {
			t.Fatal(err)
		}
		if m.InitialVersion > 1 {
			t.Errorf("SetInitialVersion(%d) before the first commit: snapshot 3 records initial version %d, want 1 (the log's first version)", lowered, m.InitialVersion)
		}
	}
}
