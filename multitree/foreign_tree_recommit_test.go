package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestRecommitWithoutLoggedUpgradesConflicts: a logged version whose
// entry added a store, re-committed (writer at an older TargetVersion) with
// the same pair changes but without the upgrade, must fail with
// ErrConflict: the stores the re-commit gives differ from those the log
// replays, so accepting it would change the version's stores and app hash
// at the next open.
func TestRecommitWithoutLoggedUpgradesConflicts(t *testing.T) {
	dir := t.TempDir()
	db := upgOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	upgApply(t, db, nil, []upgPair{upgSet("a", "k", "v1")})
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	upgApply(t, db, nil, []upgPair{upgSet("a", "k2", "v2")})
	info2, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = upgOpen(t, dir, multitree.Options{TargetVersion: 1})
	// the same pairs, a delete of an absent key too (so the entries differ
	// byte for byte either way), but no store upgrade
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{
		{Key: []byte("k2"), Value: []byte("v2")},
		{Key: []byte("absent"), Delete: true},
	}}}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if !errors.Is(err, multitree.ErrConflict) {
		hash := []byte(nil)
		if info != nil {
			hash = info.Hash()
		}
		t.Fatalf("re-commit of version 2 without its logged upgrade: err %v (hash %X, logged %X), want ErrConflict", err, hash, info2.Hash())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// the logged version is intact
	db = upgOpen(t, dir, multitree.Options{})
	defer db.Close()
	if got := db.LastCommitInfo(); db.Version() != 2 || !bytes.Equal(got.Hash(), info2.Hash()) {
		t.Fatalf("after the refused re-commit: version %d hash %X, want 2 %X", db.Version(), got.Hash(), info2.Hash())
	}
}

// TestOpenRefusesTreeOfAnotherSnapshot: a snapshot directory whose
// store directory holds a sound snapshot of the right version but another
// tree than the one its metadata records (the store's directory copied in
// from another database's snapshot of the same version) must not open:
// the app hash would silently become the other database's.
func TestOpenRefusesTreeOfAnotherSnapshot(t *testing.T) {
	mk := func(val string) string {
		dir := t.TempDir()
		db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for v := 1; v <= 2; v++ {
			if err := db.Set("a", []byte(fmt.Sprintf("k%d", v)), []byte(val)); err != nil {
				t.Fatal(err)
			}
			if err := db.Set("b", []byte("k"), []byte(fmt.Sprint(v))); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.RewriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if db.SnapshotVersion() != 2 {
			t.Fatalf("snapshot version %d, want 2", db.SnapshotVersion())
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	mine, other := mk("mine"), mk("other")
	snap := fmt.Sprintf("snapshot-%020d", 2)
	dst := filepath.Join(mine, snap, "s-a")
	if _, err := os.Stat(dst); err != nil {
		t.Fatalf("layout changed: %v", err)
	}
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(other, snap, "s-a"))); err != nil {
		t.Fatal(err)
	}
	for _, check := range []multitree.OpenCheck{multitree.OpenCheckSync, multitree.OpenCheckNone} {
		db, err := multitree.Open(mine, multitree.Options{OpenCheck: check})
		if err == nil {
			db.Close()
			t.Fatalf("OpenCheck %v: opened a snapshot whose store %q is another database's tree", check, "a")
		}
		if !errors.Is(err, multitree.ErrCorrupt) {
			t.Fatalf("OpenCheck %v: %v, want ErrCorrupt", check, err)
		}
	}
}
