package multitree_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

func kv(k, v string) wal.KVPair { return wal.KVPair{Key: []byte(k), Value: []byte(v)} }

// TestRecommitInAnotherStoreOrder re-commits a logged version whose stores
// arrive in another order (as the SDK's cachemulti writes them, in map
// order): it is the same version. Another order within a store is not.
func TestRecommitInAnotherStoreOrder(t *testing.T) {
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	v1 := []wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{kv("k1", "1")}}, {Name: "b", Pairs: []wal.KVPair{kv("k2", "2")}}}
	v2 := []wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{kv("k3", "3"), kv("k4", "4")}}, {Name: "b", Pairs: []wal.KVPair{kv("k5", "5")}}}
	var hashes [][]byte
	for _, css := range [][]wal.ChangeSet{v1, v2} {
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, info.Hash())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	reopen := func() *multitree.DB {
		db, err := multitree.Open(dir, multitree.Options{TargetVersion: 1})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db = reopen()
	swapped := []wal.ChangeSet{v2[1], v2[0]}
	if err := db.ApplyChangeSets(swapped); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatalf("re-commit with the stores swapped: %v", err)
	}
	if !bytes.Equal(info.Hash(), hashes[1]) {
		t.Fatal("re-committed version has another hash")
	}
	db.Close()

	db = reopen()
	defer db.Close()
	reordered := []wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{kv("k4", "4"), kv("k3", "3")}}, v2[1]}
	if err := db.ApplyChangeSets(reordered); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); !errors.Is(err, multitree.ErrConflict) {
		t.Fatalf("re-commit with another order within a store: %v", err)
	}
}

func TestLatestVersionAndPin(t *testing.T) {
	dir := t.TempDir()
	if v, err := multitree.LatestVersion(dir); err != nil || v != 0 {
		t.Fatalf("empty dir: %d %v", v, err)
	}
	// (keep-recent 10: version 2 stays readable whenever the background
	// rewrites of versions 3 and 6 switch)
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: 3, SnapshotKeepRecent: 10, ViewCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 7; i++ {
		if err := db.Set("a", []byte{byte(i)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := multitree.LatestVersion(dir); err != nil || v != 7 {
		t.Fatalf("LatestVersion %d %v, want 7", v, err)
	}
	old, err := db.ViewAt(2)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Pin() {
		t.Fatal("Pin of a held view failed")
	}
	old.Release()
	// still pinned: the rebuilt version's snapshots stay mapped
	if got, err := old.Get("a", []byte{1}); err != nil || string(got) != "v" {
		t.Fatalf("read under a pin: %q %v", got, err)
	}
	old.Unpin()
	if old.Pin() {
		t.Fatal("Pin succeeded after the last reference was dropped")
	}

	// An Unpin without a Pin panics and does not take another holder's
	// reference: the view below stays readable.
	v, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Unpin without a Pin did not panic")
			}
		}()
		v.Unpin()
	}()
	v.Release()
	if !v.Pin() {
		t.Fatal("the database's own reference was taken by an unpaired Unpin")
	}
	if got, err := v.Get("a", []byte{1}); err != nil || string(got) != "v" {
		t.Fatalf("read under a pin: %q %v", got, err)
	}
	v.Unpin()
}
