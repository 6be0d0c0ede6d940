package multitree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailedStageLeavesNoTmp: a snapshot write that fails on the
// trees' root hashes (a fault reading a store's root record: here the
// store's branches file was cut short under the mapping, as a failing
// disk or another process can do) must not leave its temporary snapshot
// directory behind. stageSnapshotDir creates "snapshot-<v>.tmp" before it
// checks the trees and returns the error without removing it; each later
// attempt at another version leaves one more, until the next writer Open.
func TestFailedStageLeavesNoTmp(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "c"},
		SnapshotInterval: -1, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	set := func(store string, n, step int) {
		t.Helper()
		for j := 0; j < n; j++ {
			if err := db.Set(store, []byte(fmt.Sprintf("k%03d", j)), []byte(fmt.Sprintf("v%d", step))); err != nil {
				t.Fatal(err)
			}
		}
	}
	set("a", 50, 0)
	set("c", 50, 0)
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	// store c does not change from here on: its root is the root record
	// of the current snapshot's branches file
	branches := filepath.Join(dir, snapshotDirName(db.SnapshotVersion()), treeDirName("c"), "branches")
	orig, err := os.ReadFile(branches)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := 1; i <= 8; i++ {
		set("a", 10, i)
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(branches, 0); err != nil {
			t.Fatal(err)
		}
		err := db.RewriteSnapshot(context.Background())
		// the same inode gets its bytes back: the mapping reads them again
		if werr := os.WriteFile(branches, orig, 0o644); werr != nil {
			t.Fatal(werr)
		}
		if err == nil {
			t.Fatalf("rewrite %d over a cut branches file succeeded", i)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("rewrite %d: %v", i, err)
		}
		if i == 1 {
			t.Logf("rewrite: %v", err)
		}
		failed++
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			left = append(left, e.Name())
		}
	}
	if len(left) > 0 {
		t.Errorf("%d failed snapshot writes left %d temporary snapshot directories: %v", failed, len(left), left)
	}
	// the database goes on
	set("a", 10, 100)
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
}
