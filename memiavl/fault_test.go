package memiavl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// mappedTree writes tr's snapshot into a new directory and returns the
// directory, the snapshot (which the test's cleanup closes) and a tree on
// it.
func mappedTree(t *testing.T, tr *memiavl.Tree) (string, *snapshot.Snapshot, *memiavl.Tree) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	st, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, s, st
}

// TestMappedFileCutShort cuts each data file of an open snapshot to zero
// bytes under its mapping, so that reads of it fault (SIGBUS), which would
// end the process: every reading API must instead return an error that
// wraps ErrCorrupt and names the file.
func TestMappedFileCutShort(t *testing.T) {
	const n = 3000
	tr := keysTree(t, n, strings.Repeat("v", 40))
	for _, name := range []string{snapshot.FileKVs, snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileLookup} {
		t.Run(name, func(t *testing.T) {
			dir, s, st := mappedTree(t, tr)
			// a change on top, so that the write below walks both
			if _, err := st.Set([]byte("key-01000x"), []byte("new")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.SaveVersion(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name)
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			faulted := false
			check := func(op string, err error) {
				t.Helper()
				if err == nil {
					return // this call did not reach the file
				}
				if !errors.Is(err, memiavl.ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Fatalf("%s: %v, want ErrCorrupt naming %s", op, err, path)
				}
				faulted = true
			}
			for i := 0; i < n; i += 97 {
				_, err := st.Get([]byte(fmt.Sprintf("key-%05d", i)))
				check("Get", err)
			}
			it := st.Iterator(nil, nil, true)
			for ; it.Valid(); it.Next() {
			}
			check("Iterator", it.Error())
			e := st.Export()
			for {
				_, err := e.Next()
				if errors.Is(err, memiavl.ErrExportDone) {
					break
				}
				if err != nil {
					check("Export", err)
					break
				}
			}
			e.Close()
			_, err := st.GetMembershipProof([]byte("key-02000"))
			check("GetMembershipProof", err)
			check("Check", st.Check())
			err = st.Copy().WriteSnapshot(context.Background(), filepath.Join(t.TempDir(), "out"))
			check("WriteSnapshot", err)
			if !faulted {
				t.Fatalf("no read reached the cut %s", name)
			}
			if err := s.Verify(); !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestMappedRootCutShort: the size, height and hash of a tree whose root is
// in the snapshot are read from the mapping. With the branches file cut
// short under it, the Checked accessors return an error that wraps
// ErrCorrupt and names the file, and Size, Height and RootHash panic with
// that error, a panic a caller can recover, not the fault that would end
// the process.
func TestMappedRootCutShort(t *testing.T) {
	dir, _, st := mappedTree(t, keysTree(t, 3000, "v"))
	path := filepath.Join(dir, snapshot.FileBranches)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var err error
	want := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, memiavl.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: %v, want ErrCorrupt naming %s", op, err, path)
		}
	}
	_, err = st.SizeChecked()
	want("SizeChecked", err)
	_, err = st.HeightChecked()
	want("HeightChecked", err)
	_, err = st.RootHashChecked()
	want("RootHashChecked", err)
	panics := func(op string, f func()) {
		t.Helper()
		var p any
		func() {
			defer func() { p = recover() }()
			f()
		}()
		err, _ := p.(error)
		want(op+" panic", err)
	}
	panics("Size", func() { st.Size() })
	panics("Height", func() { st.Height() })
	panics("RootHash", func() { st.RootHash() })
}
