package main

import (
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestWALDumpJSONPairs: in `wal dump --json --pairs`, a set carries its
// value even when it is empty, and a delete carries "delete" and no value.
func TestWALDumpJSONPairs(t *testing.T) {
	dir := makeEmptyDB(t)
	commitBankPairs(t, dir,
		wal.KVPair{Key: []byte("d"), Delete: true},
		wal.KVPair{Key: []byte("e"), Value: []byte{}},
		wal.KVPair{Key: []byte("k"), Value: []byte("v")},
	)
	out := mustCLI(t, "wal", "dump", "--json", "--pairs", dir)
	want := `"pairs":[{"delete":true,"key":"64"},{"key":"65","value":""},{"key":"6b","value":"76"}]`
	if !strings.Contains(out, want) {
		t.Errorf("wal dump --json --pairs:\n%s\nwant it to hold %s", out, want)
	}
}

// TestWALDumpTextEmptyPairs: the text dump shows an empty key or value as
// "" (printed as nothing, "set  = " read as a malformed line).
func TestWALDumpTextEmptyPairs(t *testing.T) {
	dir := makeEmptyDB(t)
	commitBankPairs(t, dir,
		wal.KVPair{Key: []byte{}, Value: []byte("v")},
		wal.KVPair{Key: []byte("d"), Delete: true},
		wal.KVPair{Key: []byte("e"), Value: []byte{}},
	)
	out := mustCLI(t, "wal", "dump", "--pairs", dir)
	for _, want := range []string{"    set \"\" = 76\n", "    del 64\n", "    set 65 = \"\"\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("wal dump --pairs:\n%s\nwant it to hold %q", out, want)
		}
	}
}

// commitBankPairs commits one version of the database in dir with pairs
// written to its bank store.
func commitBankPairs(t *testing.T, dir string, pairs ...wal.KVPair) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = db.ApplyChangeSets([]wal.ChangeSet{{Name: "bank", Pairs: pairs}})
	if err == nil {
		_, err = db.Commit()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}
