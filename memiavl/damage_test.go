package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// TestDamagedSnapshotReads flips random bytes of a snapshot's record and
// kvs files (which Open does not read) and reads the whole tree through
// every reading API: no call may panic, and every error wraps ErrCorrupt
// (or ErrKeyNotFound, for a proof of a key whose bytes are damaged).
// Checksums would find the damage (snapshot.Verify); these reads do not
// check them, and must still fail cleanly where the damage breaks the
// tree's structure.
func TestDamagedSnapshotReads(t *testing.T) {
	const n = 600
	dir := filepath.Join(t.TempDir(), "snap")
	if err := keysTree(t, n, "").WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	r := testutil.Rand(t)
	files := []string{snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileKVs, snapshot.FileIndex, snapshot.FileLookup}
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for i := 0; i < rounds; i++ {
		path := filepath.Join(dir, files[r.Intn(len(files))])
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		off := r.Int63n(fi.Size())
		restore := testutil.DamageByte(t, path, off)
		readAll(t, dir, fmt.Sprintf("%s at %d", filepath.Base(path), off), n)
		restore()
	}
}

// readAll opens the snapshot in dir and reads it every way a tree allows,
// failing the test on a panic or an error that does not wrap ErrCorrupt.
func readAll(t *testing.T, dir, what string, n int) {
	t.Helper()
	s, err := snapshot.Open(dir)
	if err != nil {
		return
	}
	defer s.Close()
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		return
	}
	ok := func(op string, err error) {
		t.Helper()
		// a damaged key is not found, which a read cannot tell from a
		// missing one
		if err != nil && !errors.Is(err, memiavl.ErrCorrupt) && !errors.Is(err, memiavl.ErrKeyNotFound) {
			t.Fatalf("%s: %s: %v, want nil, ErrCorrupt or ErrKeyNotFound", what, op, err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: panic: %v", what, p)
		}
	}()
	for i := 0; i < n; i += 7 {
		key := []byte(fmt.Sprintf("key-%05d", i))
		_, err := tr.Get(key)
		ok("Get", err)
		_, err = tr.Has(key)
		ok("Has", err)
		_, err = tr.GetMembershipProof(key)
		ok("GetMembershipProof", err)
		_, err = tr.GetNonMembershipProof(append(key, 'x'))
		ok("GetNonMembershipProof", err)
	}
	for _, bounds := range [][2][]byte{{nil, nil}, {[]byte("key-00100"), []byte("key-00400x")}} {
		for _, asc := range []bool{true, false} {
			it := tr.Iterator(bounds[0], bounds[1], asc)
			for ; it.Valid(); it.Next() {
				_, _ = it.Key(), it.Value()
			}
			ok("Iterator", it.Error())
			_ = it.Close()
		}
	}
	e := tr.Export()
	for {
		_, err := e.Next()
		if errors.Is(err, memiavl.ErrExportDone) {
			break
		}
		if err != nil {
			ok("Export", err)
			break
		}
	}
	e.Close()
	ok("Check", tr.Check())
	// changes on top of the damaged snapshot, then reads across both
	c := tr.Copy()
	for i := 0; i < n; i += 11 {
		_, err = c.Set([]byte(fmt.Sprintf("key-%05dx", i)), []byte("new"))
		ok("Set", err)
		_, err = c.Remove([]byte(fmt.Sprintf("key-%05d", i+3)))
		ok("Remove", err)
	}
	_, _, err = c.SaveVersion()
	ok("SaveVersion", err)
	for _, asc := range []bool{true, false} {
		it := c.Iterator(nil, nil, asc)
		for ; it.Valid(); it.Next() {
			_, _ = it.Key(), it.Value()
		}
		ok("Iterator after changes", it.Error())
		_ = it.Close()
	}
	for i := 0; i < n; i += 5 {
		_, err := c.Get([]byte(fmt.Sprintf("key-%05d", i)))
		ok("Get after changes", err)
	}
	ok("Check after changes", c.Check())
}

// TestDamagedSnapshotReadsV1 damages every byte of a format version 1
// snapshot in turn (no lookup table: point reads binary-search the
// leaves) and reads it every way.
func TestDamagedSnapshotReadsV1(t *testing.T) {
	src := filepath.Join("..", "snapshot", "testdata", "golden-v1")
	dir := filepath.Join(t.TempDir(), "v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	damageEveryByte(t, dir, "v1 ", 10, snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileKVs, snapshot.FileIndex)
}

// TestDamagedSnapshotReadsEveryByte damages every byte of a small format
// version 2 snapshot in turn and reads it every way.
func TestDamagedSnapshotReadsEveryByte(t *testing.T) {
	const n = 40
	dir := filepath.Join(t.TempDir(), "snap")
	if err := keysTree(t, n, "").WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	damageEveryByte(t, dir, "", n, snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileKVs, snapshot.FileIndex, snapshot.FileLookup)
}

// damageEveryByte damages each byte of the named files of the snapshot in
// dir in turn and reads the snapshot every way (readAll, over n keys).
func damageEveryByte(t *testing.T, dir, label string, n int, files ...string) {
	t.Helper()
	for _, name := range files {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < fi.Size(); off++ {
			restore := testutil.DamageByte(t, path, off)
			readAll(t, dir, fmt.Sprintf("%s%s at %d", label, name, off), n)
			restore()
		}
	}
}

// keysTree returns a saved tree of n keys "key-%05d" whose values are
// "value-%d" followed by pad.
func keysTree(t *testing.T, n int, pad string) *memiavl.Tree {
	t.Helper()
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("key-%05d", i)), []byte(fmt.Sprintf("value-%d", i)+pad)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	return tr
}
