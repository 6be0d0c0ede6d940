package memiavl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// TestCopiesReadTheirVersion: point reads give every copy its own version's
// values while the tree goes on changing the same keys, on a snapshot too
// (where the copies share the tree's filter of changed keys), and a copy
// that is changed itself reads its own changes, not the tree's.
func TestCopiesReadTheirVersion(t *testing.T) {
	for _, onSnapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", onSnapshot), func(t *testing.T) {
			r := rand.New(rand.NewSource(int64(len(t.Name()))))
			keys := make([][]byte, 400)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("k%05d", i))
			}
			tr, err := memiavl.New(memiavl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			state := map[string]string{}
			for i := 0; i < len(keys); i += 2 {
				v := fmt.Sprintf("v0-%d", i)
				if _, err := tr.Set(keys[i], []byte(v)); err != nil {
					t.Fatal(err)
				}
				state[string(keys[i])] = v
			}
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
			if onSnapshot {
				tr = reopen(t, tr, filepath.Join(t.TempDir(), "s"))
			}
			type held struct {
				tree  *memiavl.Tree
				state map[string]string
			}
			var copies []held
			check := func(what string, tr *memiavl.Tree, want map[string]string) {
				t.Helper()
				for _, k := range keys {
					got, err := tr.Get(k)
					if err != nil {
						t.Fatal(err)
					}
					w, ok := want[string(k)]
					if ok != (got != nil) || string(got) != w {
						t.Fatalf("%s: Get(%s) = %q, want %q (present %v)", what, k, got, w, ok)
					}
				}
			}
			for v := 2; v <= 40; v++ {
				// a few keys change every version, again and again
				for j := 0; j < 30; j++ {
					k := keys[r.Intn(len(keys)/4)] // a hot quarter
					if r.Intn(4) == 0 {
						if _, err := tr.Remove(k); err != nil {
							t.Fatal(err)
						}
						delete(state, string(k))
					} else {
						val := fmt.Sprintf("v%d-%d", v, j)
						if _, err := tr.Set(k, []byte(val)); err != nil {
							t.Fatal(err)
						}
						state[string(k)] = val
					}
				}
				check(fmt.Sprintf("working version %d", v), tr, state)
				if _, _, err := tr.SaveVersion(); err != nil {
					t.Fatal(err)
				}
				copies = append(copies, held{tr.Copy(), maps.Clone(state)})
				for i, c := range copies {
					check(fmt.Sprintf("copy %d at version %d", i, v), c.tree, c.state)
				}
			}
			// a copy changed on its own reads its changes, of keys the
			// tree changed just before too
			c := copies[len(copies)-3]
			for _, k := range keys[:len(keys)/4] {
				if r.Intn(2) == 0 {
					if _, err := c.tree.Remove(k); err != nil {
						t.Fatal(err)
					}
					delete(c.state, string(k))
				} else {
					if _, err := c.tree.Set(k, []byte("copy")); err != nil {
						t.Fatal(err)
					}
					c.state[string(k)] = "copy"
				}
			}
			check("changed copy", c.tree, c.state)
			if _, _, err := c.tree.SaveVersion(); err != nil {
				t.Fatal(err)
			}
			check("changed copy, saved", c.tree, c.state)
			check("tree beside the changed copy", tr, state)
		})
	}
}

// TestExclusiveUnsavedRefused: in exclusive mode (SetExclusive, as a replay
// uses it) a change updates the nodes of the last saved version in place,
// so until the next save the tree cannot give that version out: Copy
// panics, Export and snapshot writes fail with ErrExclusive, rather than
// handing out unsaved content under the saved version (shared with a tree
// that goes on changing it). Right after a save all of them work.
func TestExclusiveUnsavedRefused(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(value string) {
		t.Helper()
		for i := 0; i < 8; i++ {
			if _, err := tr.Set([]byte(fmt.Sprintf("k%d", i)), []byte(value)); err != nil {
				t.Fatal(err)
			}
		}
	}
	set("v1")
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr.SetExclusive(1)
	set("v2")
	h2, _, err := tr.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Set([]byte("k3"), []byte("unsaved")); err != nil {
		t.Fatal(err)
	}
	if got := outcomeOf(func() { tr.Copy() }); !strings.Contains(got, memiavl.ErrExclusive.Error()) {
		t.Errorf("Copy with unsaved exclusive changes: %s", got)
	}
	if _, err := tr.Export().Next(); !errors.Is(err, memiavl.ErrExclusive) {
		t.Errorf("Export with unsaved exclusive changes: %v", err)
	}
	if err := tr.WriteSnapshot(context.Background(), filepath.Join(t.TempDir(), "s")); !errors.Is(err, memiavl.ErrExclusive) {
		t.Errorf("WriteSnapshot with unsaved exclusive changes: %v", err)
	}
	h3, _, err := tr.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(h2, h3) {
		t.Fatal("version 3 has version 2's hash")
	}
	c := tr.Copy()
	if v, _ := c.Get([]byte("k3")); string(v) != "unsaved" || !bytes.Equal(c.RootHash(), h3) {
		t.Errorf("copy after the save: k3=%q, hash %X, want %X", v, c.RootHash(), h3)
	}
}

// outcomeOf runs f and returns its panic as text, "ok" without one.
func outcomeOf(f func()) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprint(r)
		}
	}()
	f()
	return "ok"
}
