package multitree

import (
	"bytes"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestRecommitUpgradeVersionSetAfterApply: version 2 upgrades the stores and
// writes key k twice, x then y, through ApplyChangeSets (logged as given:
// k=x, k=y). Reopened at version 1, the same writes are given again, the
// second through Set, which gives the pending k=x the value y. A version
// with store upgrades must match its logged entry (its trees are not
// compared), and the two match once repeated Sets of a key are folded as
// Set folds them: the re-commit is accepted with the logged app hash, as
// it is for a log written before Set folded them.
func TestRecommitUpgradeVersionSetAfterApply(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	if err := db.Set("a", []byte("base"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: k, Value: []byte("x")}, {Key: k, Value: []byte("y")}}}}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	want := info.Hash()
	closeOK(t, db)

	db, err = Open(dir, Options{TargetVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ApplyUpgrades(wal.Upgrades{Added: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{{Key: k, Value: []byte("x")}}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Set("a", k, []byte("y")); err != nil {
		t.Fatal(err)
	}
	got, err := db.Commit()
	if err != nil {
		t.Fatalf("re-commit of version 2 with the same writes (k=x, then k=y by Set): %v", err)
	}
	if !bytes.Equal(got.Hash(), want) {
		t.Fatalf("re-commit: app hash %X, want %X", got.Hash(), want)
	}
}
