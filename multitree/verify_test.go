package multitree

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1, SnapshotKeepRecent: 1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 8)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 3, 5)
	h := db.LastCommitInfo().Hash()
	db.Close()

	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Version != 13 || !bytes.Equal(rep.AppHash, h) || len(rep.Stores) != 3 {
		t.Fatalf("report %+v", rep)
	}

	// a flipped byte in a tree's data file fails verification
	kvs := filepath.Join(dir, snapshotDirName(8), treeDirName("bank"), "kvs")
	orig, err := os.ReadFile(kvs)
	if err != nil {
		t.Fatal(err)
	}
	c := bytes.Clone(orig)
	c[len(c)/2] ^= 1
	os.WriteFile(kvs, c, 0o644)
	if _, err := Verify(dir); err == nil {
		t.Fatal("corrupt kvs passed verification")
	}
	os.WriteFile(kvs, orig, 0o644)

	// a flipped byte inside the log fails verification
	segs, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if len(segs) == 0 {
		t.Fatal("no log segments")
	}
	seg := segs[0]
	orig, _ = os.ReadFile(seg)
	c = bytes.Clone(orig)
	c[len(c)/3] ^= 1
	os.WriteFile(seg, c, 0o644)
	if _, err := Verify(dir); err == nil {
		t.Fatal("corrupt log passed verification")
	}
	os.WriteFile(seg, orig, 0o644)
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// TestVerifySnapshot: the snapshot a database works from passes, a flipped
// byte in it fails with ErrCorrupt while the database stays usable, and a
// closed database refuses.
func TestVerifySnapshot(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 8)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 9, 3)
	if err := db.VerifySnapshot(); err != nil {
		t.Fatal(err)
	}
	kvs := filepath.Join(dir, snapshotDirName(8), treeDirName("bank"), "kvs")
	orig, err := os.ReadFile(kvs)
	if err != nil {
		t.Fatal(err)
	}
	c := bytes.Clone(orig)
	c[len(c)/2] ^= 1
	// written in place: the mapping shows the change
	if err := os.WriteFile(kvs, c, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := db.VerifySnapshot(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), snapshotDirName(8)) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	if err := os.WriteFile(kvs, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := db.VerifySnapshot(); err != nil {
		t.Fatalf("after repair: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.VerifySnapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
