package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIJSONListsAreArrays: the list fields of the --json reports of
// dump and verify are JSON arrays also when empty ([] for a database
// without stores), so that a script can iterate them (jq '.stores[]'
// fails on null), as wal dump --json's "stores" always is.
func TestCLIJSONListsAreArrays(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, db.Close())

	for _, args := range [][]string{{"dump", "--json", dir}, {"verify", "--json", dir}} {
		out := mustCLI(t, args...)
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("memiavl %v: not JSON: %v\n%s", args, err, out)
		}
		for _, k := range []string{"stores", "snapshots"} {
			var list []json.RawMessage
			if raw, ok := m[k]; !ok || string(raw) == "null" || json.Unmarshal(raw, &list) != nil {
				t.Errorf("memiavl %v: %q is %s, want a JSON array ([] when empty)", args, k, raw)
			}
		}
	}
}
