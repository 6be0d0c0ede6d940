package memiavl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestIteratorChangedThenCutKVs: an iterator positioned on a snapshot leaf, whose
// tree then changes (a Set that succeeds) and whose kvs file is then cut
// short under the mapping, must end its iteration with an ErrCorrupt
// naming the file, as it does without the change. The caller reads no key
// or value: only Next reads the mapping, also the current key (a slice of
// the mapping) that it copies to find its place in the changed tree, under
// the fault guard. Runs in a child process.
func TestIteratorChangedThenCutKVs(t *testing.T) {
	if !inChild(t) {
		return
	}
	dir, _, st := mappedTree(t, keysTree(t, 3000, "v"))
	path := filepath.Join(dir, snapshot.FileKVs)
	it := st.Iterator(nil, nil, true)
	defer it.Close()
	if !it.Valid() {
		t.Fatal("empty iteration")
	}
	if _, err := st.Set([]byte("zzz"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for it.Valid() {
		it.Next()
	}
	if err := it.Error(); !errors.Is(err, memiavl.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Iterator: %v, want ErrCorrupt naming %s", err, path)
	}
}
