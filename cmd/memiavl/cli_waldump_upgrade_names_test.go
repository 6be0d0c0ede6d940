package main

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCLIWALDumpUpgradeNames: the names of a version's store upgrades are
// printed as change sets' names are: quoted in wal dump's text report when
// not plain, and with their hex in its JSON report when not valid UTF-8
// (two names that differ only in invalid bytes stay apart).
func TestCLIWALDumpUpgradeNames(t *testing.T) {
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"base"}, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, db.ApplyChangeSets([]wal.ChangeSet{{Name: "base", Pairs: []wal.KVPair{{Key: []byte("k"), Value: []byte("v")}}}}))
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	added := []string{"a\xffb", "a\xfeb", "two words"}
	mustOK(t, db.ApplyUpgrades(wal.Upgrades{Added: added}))
	mustOK(t, db.ApplyChangeSets([]wal.ChangeSet{{Name: "base", Pairs: []wal.KVPair{{Key: []byte("k"), Value: []byte("w")}}}}))
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	// a rename's names are quoted whatever they hold ("->" included)
	mustOK(t, db.ApplyUpgrades(wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "two words", NewName: "x->y"}}}))
	mustOK(t, db.ApplyChangeSets([]wal.ChangeSet{{Name: "base", Pairs: []wal.KVPair{{Key: []byte("k"), Value: []byte("z")}}}}))
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, db.Close())
	os.Remove(filepath.Join(dir, "LOCK"))

	text := mustCLI(t, "wal", "dump", dir)
	for _, n := range added {
		if !strings.Contains(text, strconv.Quote(n)) {
			t.Errorf("wal dump: upgraded store %q not printed quoted:\n%s", n, text)
		}
	}
	if want := `renamed ["two words"->"x->y"]`; !strings.Contains(text, want) {
		t.Errorf("wal dump: rename not printed as %s:\n%s", want, text)
	}
	js := mustCLI(t, "wal", "dump", "--json", dir)
	for _, n := range added[:2] {
		if !strings.Contains(js, hex.EncodeToString([]byte(n))) {
			t.Errorf("wal dump --json: the name %q of an added store cannot be told from the report (no hex of it):\n%s", n, js)
		}
	}
}
