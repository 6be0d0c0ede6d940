package memiavl_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// faultChildEnv names the test a child process runs (see inChild).
const faultChildEnv = "MEMIAVL_FAULT_CHILD"

// inChild runs the calling test in a child process (the test binary run
// again) and fails when the child fails or dies, as a fault outside a
// guard ends the process; in the child it returns true, and the caller
// runs the test's body.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(faultChildEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), faultChildEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		s := string(out)
		if len(s) > 2000 {
			s = s[:2000] + "\n..."
		}
		t.Fatalf("child %s: %v\n%s", t.Name(), err, s)
	}
	return false
}

// bigValues is a snapshot of two keys whose values span 16 pages each,
// with its kvs file then cut to its first page under the mapping: the
// first key is readable, its value is not.
func bigValues(t *testing.T) (string, *memiavl.Tree) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := tr.Set([]byte(k), bytes.Repeat([]byte(k), 64<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir, _, st := mappedTree(t, tr)
	path := filepath.Join(dir, snapshot.FileKVs)
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	return path, st
}

// TestHandedOutSlicesRead: keys and values handed out as slices of the
// mapping (by Get's copy, GetZeroCopy, iterators, exports) are read by
// their caller after the operation's fault guard has ended. Their pages
// are read under the guard, so that a kvs file cut short under the mapping
// is an ErrCorrupt of the operation, not a fault in the caller that ends
// the process. Each case runs in a child process.
func TestHandedOutSlicesRead(t *testing.T) {
	want := func(t *testing.T, op string, err error, path string) {
		t.Helper()
		if !errors.Is(err, memiavl.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: %v, want ErrCorrupt naming %s", op, err, path)
		}
	}
	cutKVs := func(t *testing.T) (string, *memiavl.Tree) {
		dir, _, st := mappedTree(t, keysTree(t, 3000, "v"))
		path := filepath.Join(dir, snapshot.FileKVs)
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		return path, st
	}
	for name, get := range map[string]func(*memiavl.Tree, []byte) ([]byte, error){
		"Get":         (*memiavl.Tree).Get,
		"GetZeroCopy": (*memiavl.Tree).GetZeroCopy,
	} {
		t.Run(name, func(t *testing.T) {
			if !inChild(t) {
				return
			}
			path, st := bigValues(t)
			v, err := get(st, []byte("a"))
			if err == nil {
				_ = bytes.Clone(v)
			}
			want(t, name, err, path)
		})
	}
	t.Run("IteratorValue", func(t *testing.T) {
		if !inChild(t) {
			return
		}
		path, st := bigValues(t)
		it := st.Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			_ = bytes.Clone(it.Value())
		}
		want(t, "Iterator", it.Error(), path)
	})
	t.Run("IteratorKey", func(t *testing.T) {
		if !inChild(t) {
			return
		}
		path, st := cutKVs(t)
		it := st.Iterator(nil, nil, false)
		for ; it.Valid(); it.Next() {
			_ = bytes.Clone(it.Key())
		}
		want(t, "Iterator", it.Error(), path)
	})
	t.Run("Export", func(t *testing.T) {
		if !inChild(t) {
			return
		}
		path, st := cutKVs(t)
		e := st.Export()
		defer e.Close()
		var err error
		for {
			var n *memiavl.ExportNode
			if n, err = e.Next(); err != nil {
				break
			}
			_, _ = bytes.Clone(n.Key), bytes.Clone(n.Value)
		}
		want(t, "Export", err, path)
	})
}
