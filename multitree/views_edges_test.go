package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestViewAcrossRollback: views of the latest and of a historical
// version, taken before Close and held across a reopen that rolls back
// past them (removing their snapshot directories) and commits other
// versions in their place, keep reading their own versions; the new
// database's views of the same version numbers read the new content; the
// releases after both Closes are harmless.
func TestViewAcrossRollback(t *testing.T) {
	dir := t.TempDir()
	opts := multitree.Options{SnapshotInterval: 3, SnapshotKeepRecent: 10}
	copts := opts
	copts.CreateIfMissing, copts.InitialStores = true, []string{"a"}
	db := upgOpen(t, dir, copts)
	hashes := map[int64][]byte{}
	for v := 1; v <= 10; v++ {
		upgApply(t, db, nil, []upgPair{upgSet("a", fmt.Sprint("k", v%4), fmt.Sprint("old", v))})
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[info.Version] = info.Hash()
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	latest, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	hist, err := db.ViewAt(7)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ViewAt(8); !errors.Is(err, multitree.ErrClosed) {
		t.Fatalf("ViewAt after Close: %v", err)
	}
	ropts := opts
	ropts.TargetVersion, ropts.Rollback = 4, true
	db2 := upgOpen(t, dir, ropts)
	defer db2.Close()
	for v := 5; v <= 12; v++ {
		upgApply(t, db2, nil, []upgPair{upgSet("a", fmt.Sprint("k", v%4), fmt.Sprint("new", v))})
		if _, err := db2.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db2.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(vw *multitree.View, v int64, prefix string) {
		t.Helper()
		got, err := vw.Get("a", []byte(fmt.Sprint("k", v%4)))
		if err != nil || string(got) != fmt.Sprint(prefix, v) {
			t.Fatalf("view of %d: %q %v, want %s%d", v, got, err, prefix, v)
		}
		tr := vw.Tree("a")
		n := 0
		for it := tr.Iterator(nil, nil, true); it.Valid(); it.Next() {
			n++
		}
		if n != 4 {
			t.Fatalf("view of %d iterates %d keys", v, n)
		}
	}
	check(latest, 10, "old")
	check(hist, 7, "old")
	if !bytes.Equal(latest.CommitInfo().Hash(), hashes[10]) || !bytes.Equal(hist.CommitInfo().Hash(), hashes[7]) {
		t.Fatal("held views changed hash")
	}
	nv, err := db2.ViewAt(7)
	if err != nil {
		t.Fatal(err)
	}
	check(nv, 7, "new")
	if bytes.Equal(nv.CommitInfo().Hash(), hashes[7]) {
		t.Fatal("version 7 after the rollback has the old hash")
	}
	nv.Release()
	latest.Release()
	hist.Release()
	latest.Release()
	if _, err := hist.Get("a", []byte("k1")); !errors.Is(err, multitree.ErrReleased) {
		t.Fatalf("read after release: %v", err)
	}
}

// TestViewAtEdges: ViewAt of the first version (initial version
// above 1) is served while its snapshot 0 is kept, and once it is pruned
// fails with ErrVersion (not ErrBeforeFirstVersion: it was committed);
// versions before the first fail with ErrBeforeFirstVersion; future
// versions and negative ones with ErrVersion; 0 is the latest.
func TestViewAtEdges(t *testing.T) {
	dir := t.TempDir()
	db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, InitialVersion: 10, SnapshotInterval: -1, SnapshotKeepRecent: 0})
	defer func() { db.Close() }() // the one reopened below
	hashes := map[int64][]byte{}
	for v := 0; v < 5; v++ {
		upgApply(t, db, nil, []upgPair{upgSet("a", fmt.Sprint("k", v), "v")})
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[info.Version] = info.Hash()
	}
	vw, err := db.ViewAt(10)
	if err != nil || vw.Version() != 10 || !bytes.Equal(vw.CommitInfo().Hash(), hashes[10]) {
		t.Fatalf("ViewAt(10): %v", err)
	}
	vw.Release()
	if _, err := db.ViewAt(9); !errors.Is(err, multitree.ErrBeforeFirstVersion) {
		t.Fatalf("ViewAt(9): %v", err)
	}
	if _, err := db.ViewAt(15); !errors.Is(err, multitree.ErrVersion) {
		t.Fatalf("ViewAt(15): %v", err)
	}
	if vw, err := db.ViewAt(0); err != nil || vw.Version() != 14 {
		t.Fatalf("ViewAt(0): %v", err)
	} else {
		vw.Release()
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	// the prune of snapshot 0 runs in the background: Close joins it
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = upgOpen(t, dir, multitree.Options{SnapshotKeepRecent: 0})
	for _, v := range []int64{10, 12, 13} {
		if _, err := db.ViewAt(v); !errors.Is(err, multitree.ErrVersion) || errors.Is(err, multitree.ErrBeforeFirstVersion) {
			t.Fatalf("ViewAt(%d) after the prune: %v", v, err)
		}
	}
	if _, err := db.ViewAt(9); !errors.Is(err, multitree.ErrBeforeFirstVersion) {
		t.Fatalf("ViewAt(9) after the prune: %v", err)
	}
	if vw, err := db.ViewAt(14); err != nil || !bytes.Equal(vw.CommitInfo().Hash(), hashes[14]) {
		t.Fatalf("ViewAt(14): %v", err)
	} else {
		vw.Release()
	}
}
