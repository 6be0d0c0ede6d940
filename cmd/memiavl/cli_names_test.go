package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestCLIJSONNonUTF8StoreNames: a store name may be any 1..119 bytes, and
// stores "a\xffb" and "a\xfeb" are distinct. encoding/json replaces invalid
// UTF-8 with U+FFFD, so the JSON reports carry such a name's bytes in hex
// as well (dump and wal dump: "name_hex"; verify: "stores_hex"), and the
// two stores stay apart; the text reports print such names quoted.
func TestCLIJSONNonUTF8StoreNames(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a\xffb", "a\xfeb"}
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: names, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var css []wal.ChangeSet
	for i, n := range names {
		css = append(css, wal.ChangeSet{Name: n, Pairs: []wal.KVPair{{Key: []byte{byte(i)}, Value: []byte("v")}}})
	}
	mustOK(t, db.ApplyChangeSets(css))
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, db.Close())
	os.Remove(filepath.Join(dir, "LOCK"))

	// exact compares the names a report's hex fields give with names (in
	// any order)
	exact := func(what, out string, hexNames []string) {
		t.Helper()
		var got []string
		for _, h := range hexNames {
			b, err := hex.DecodeString(h)
			mustOK(t, err)
			got = append(got, string(b))
		}
		slices.Sort(got) // wal dump keeps the entry's order
		want := slices.Sorted(slices.Values(names))
		if !slices.Equal(got, want) {
			t.Errorf("%s: names %q, want %q\n%s", what, got, want, out)
		}
	}
	var d DumpResult
	out := mustCLI(t, "dump", "--json", dir)
	mustOK(t, json.Unmarshal([]byte(out), &d))
	var got []string
	for _, s := range d.Stores {
		got = append(got, s.NameHex)
	}
	exact("dump --json", out, got)

	var vj verifyJSON
	out = mustCLI(t, "verify", "--json", dir)
	mustOK(t, json.Unmarshal([]byte(out), &vj))
	exact("verify --json", out, vj.StoresHex)

	var e walEntryJSON
	out = mustCLI(t, "wal", "dump", "--json", dir)
	mustOK(t, json.Unmarshal([]byte(out), &e))
	got = nil
	for _, s := range e.Stores {
		got = append(got, s.NameHex)
	}
	exact("wal dump --json", out, got)

	for _, args := range [][]string{{"dump", dir}, {"wal", "dump", dir}} {
		out := mustCLI(t, args...)
		for _, n := range names {
			if !strings.Contains(out, strconv.Quote(n)) {
				t.Errorf("%v: store %q not printed quoted:\n%s", args, n, out)
			}
		}
	}
}

// TestCLITextStoreNames: the text reports of dump, wal dump and verify
// print a store name as it is, and quote one that holds a space or is not
// valid UTF-8, so that a list of names separated by spaces reads back.
func TestCLITextStoreNames(t *testing.T) {
	dir := t.TempDir()
	plain, quoted := "bank", []string{"a b", "c\xffd"}
	names := append([]string{plain}, quoted...)
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: names, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var css []wal.ChangeSet
	for _, n := range names {
		css = append(css, wal.ChangeSet{Name: n, Pairs: []wal.KVPair{{Key: []byte("k"), Value: []byte("v")}}})
	}
	mustOK(t, db.ApplyChangeSets(css))
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, db.Close())
	for _, args := range [][]string{{"dump", dir}, {"wal", "dump", dir}, {"verify", dir}} {
		out := mustCLI(t, args...)
		if strings.Contains(out, strconv.Quote(plain)) || !strings.Contains(out, plain) {
			t.Errorf("%v: store %q not printed as it is:\n%s", args, plain, out)
		}
		for _, n := range quoted {
			if !strings.Contains(out, strconv.Quote(n)) {
				t.Errorf("%v: store %q not printed quoted:\n%s", args, n, out)
			}
		}
	}
}
