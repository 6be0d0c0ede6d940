package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRewriteDamagedKey: RewriteSnapshot over a current snapshot whose kvs
// file has a damaged key byte (a checksum mismatch that puts a key out of
// order) fails with ErrCorrupt, as its doc promises for damage in the
// files the write copies from, and not with the bulk copy's bare
// snapshot.ErrKeyOrder, which is the writer's refusal of a caller's keys.
func TestRewriteDamagedKey(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"bank"}, SnapshotInterval: -1, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ {
		if err := db.Set("bank", []byte(fmt.Sprintf("key-%05d", i)), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	patchStoreKVs(t, dir, 1, "bank", "key-00300", "key-00299")
	db, err = Open(dir, Options{SnapshotInterval: -1, OpenCheck: OpenCheckNone})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Set("bank", []byte("key-99999"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	err = db.RewriteSnapshot(context.Background())
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("RewriteSnapshot over a damaged key of the current snapshot: %v, want ErrCorrupt", err)
	}
	if verr := db.VerifySnapshot(); !errors.Is(verr, ErrCorrupt) {
		t.Errorf("VerifySnapshot: %v, want ErrCorrupt", verr)
	}
}

// patchStoreKVs overwrites the first occurrence of old in the kvs file of
// store's snapshot of version v in dir with repl (of old's length), leaving
// the file's checksum stale.
func patchStoreKVs(t *testing.T, dir string, v int64, store, old, repl string) {
	t.Helper()
	path := filepath.Join(dir, snapshotDirName(v), treeDirName(store), "kvs")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(old))
	if i < 0 || len(repl) != len(old) {
		t.Fatalf("%q not in %s, or %q not of its length", old, path, repl)
	}
	copy(b[i:], repl)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
