package memiavl_test

// Fixed vectors that cosmos/iavl v1.2 pins in its own tests, replayed on this
// tree: the root hashes of its TestTreeHash workload and the node stream of
// its TestExporter tree. The workload is generated exactly as iavl's test
// generates it (same seed, same order of draws), so the expected values are
// iavl's constants, not values computed here.

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// iavlTreeHashVersions are the root hashes cosmos/iavl's TestTreeHash
// (tree_test.go, v1.2.2) expects after each of its four versions.
var iavlTreeHashVersions = []string{
	"58ec30fa27f338057e5964ed9ec3367e59b2b54bec4c194f10fde7fed16c2a1c",
	"91ad3ace227372f0064b2d63e8493ce8f4bdcbd16c7a8e4f4d54029c9db9570c",
	"92c25dce822c5968c228cfe7e686129ea281f79273d4a8fcf6f9130a47aa5421",
	"e44d170925554f42e00263155c19574837a38e3efed8910daccc7fa12f560fa0",
}

// runIAVLTreeHashWorkload applies iavl's TestTreeHash workload (4,096 random
// creates, updates and deletes of 16-byte keys and values per version, seed
// 49872768940) to the tree that tree returns before each version, and calls
// saved with each version's root hash. Each operation must report what it
// reports in iavl (removed, updated).
func runIAVLTreeHashWorkload(t *testing.T, versions int, tree func(v int) *memiavl.Tree, saved func(v int, hash []byte)) {
	t.Helper()
	const (
		keySize     = 16
		valueSize   = 16
		versionOps  = 4096
		updateRatio = 0.4
		deleteRatio = 0.2
	)
	r := rand.New(rand.NewSource(49872768940))
	keys := make([][]byte, 0, versionOps)
	for i := 0; i < versions; i++ {
		tr := tree(i)
		for j := 0; j < versionOps; j++ {
			key := make([]byte, keySize)
			value := make([]byte, valueSize)
			switch {
			case len(keys) > 0 && r.Float64() <= deleteRatio:
				index := r.Intn(len(keys))
				key = keys[index]
				keys = append(keys[:index], keys[index+1:]...)
				removed, err := tr.Remove(key)
				if err != nil || !removed {
					t.Fatalf("version %d op %d: Remove = %v, %v; want true", i+1, j, removed, err)
				}
			case len(keys) > 0 && r.Float64() <= updateRatio:
				key = keys[r.Intn(len(keys))]
				r.Read(value)
				updated, err := tr.Set(key, value)
				if err != nil || !updated {
					t.Fatalf("version %d op %d: Set of a present key = %v, %v; want true", i+1, j, updated, err)
				}
			default:
				r.Read(key)
				r.Read(value)
				updated, err := tr.Set(key, value)
				if err != nil || updated {
					// iavl's workload never draws a present key here
					t.Fatalf("version %d op %d: Set of a new key = %v, %v; want false", i+1, j, updated, err)
				}
				keys = append(keys, key)
			}
		}
		hash, version, err := tr.SaveVersion()
		if err != nil {
			t.Fatal(err)
		}
		if version != int64(i+1) {
			t.Fatalf("saved version %d, want %d", version, i+1)
		}
		saved(i, hash)
	}
}

// TestIAVLTreeHashVectors: iavl's pinned root hashes, in memory and with the
// tree written to a snapshot and reopened before every version, so that the
// second half of the run changes nodes read from the files.
func TestIAVLTreeHashVectors(t *testing.T) {
	check := func(t *testing.T, v int, hash []byte) {
		if got := hex.EncodeToString(hash); got != iavlTreeHashVersions[v] {
			t.Fatalf("version %d: root %s, iavl pins %s", v+1, got, iavlTreeHashVersions[v])
		}
	}
	t.Run("memory", func(t *testing.T) {
		tr, err := memiavl.New(memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		runIAVLTreeHashWorkload(t, len(iavlTreeHashVersions), func(int) *memiavl.Tree { return tr },
			func(v int, hash []byte) {
				check(t, v, hash)
				if err := tr.Check(); err != nil {
					t.Fatalf("version %d: %v", v+1, err)
				}
			})
	})
	t.Run("snapshots", func(t *testing.T) {
		tr, err := memiavl.New(memiavl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		runIAVLTreeHashWorkload(t, len(iavlTreeHashVersions),
			func(v int) *memiavl.Tree {
				if v == 0 {
					return tr
				}
				dir := filepath.Join(t.TempDir(), "snap")
				if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
					t.Fatal(err)
				}
				_, tr = openSnapshot(t, dir)
				return tr
			},
			func(v int, hash []byte) {
				check(t, v, hash)
				if err := tr.Check(); err != nil {
					t.Fatalf("version %d: %v", v+1, err)
				}
			})
		// the last version, read back from its own snapshot
		dir := filepath.Join(t.TempDir(), "last")
		if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		_, reopened := openSnapshot(t, dir)
		check(t, len(iavlTreeHashVersions)-1, reopened.RootHash())
	})
}

// TestIAVLExporterVector: iavl's TestExporter tree (three versions of sets
// and removes of one-letter keys) exports exactly the node stream iavl's test
// expects, from memory and from a snapshot.
func TestIAVLExporterVector(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(k string, v byte) {
		if _, err := tr.Set([]byte(k), []byte{v}); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(k string) {
		if removed, err := tr.Remove([]byte(k)); err != nil || !removed {
			t.Fatalf("Remove(%q) = %v, %v", k, removed, err)
		}
	}
	save := func() {
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	set("x", 255)
	set("z", 255)
	set("a", 1)
	set("b", 2)
	set("c", 3)
	save()
	remove("x")
	remove("b")
	set("c", 255)
	set("d", 4)
	save()
	set("b", 2)
	set("c", 3)
	set("e", 5)
	remove("z")
	set("abc", 6)
	save()

	leaf := func(k string, v byte, version int64) *memiavl.ExportNode {
		return &memiavl.ExportNode{Key: []byte(k), Value: []byte{v}, Version: version, Height: 0}
	}
	inner := func(k string, version int64, height int8) *memiavl.ExportNode {
		return &memiavl.ExportNode{Key: []byte(k), Version: version, Height: height}
	}
	// iavl's export_test.go, TestExporter
	want := []*memiavl.ExportNode{
		leaf("a", 1, 1),
		leaf("abc", 6, 3),
		inner("abc", 3, 1),
		leaf("b", 2, 3),
		leaf("c", 3, 3),
		inner("c", 3, 1),
		inner("b", 3, 2),
		leaf("d", 4, 2),
		leaf("e", 5, 3),
		inner("e", 3, 1),
		inner("d", 3, 3),
	}
	same := func(t *testing.T, got []*memiavl.ExportNode) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("exported %d nodes, iavl %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Key, w.Key) || g.Version != w.Version || g.Height != w.Height ||
				(w.Value == nil) != (g.Value == nil) || !bytes.Equal(g.Value, w.Value) {
				t.Fatalf("node %d: %+v, iavl %+v", i, *g, *w)
			}
		}
	}
	t.Run("memory", func(t *testing.T) { same(t, exportAll(t, tr.Export())) })
	t.Run("snapshot", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "snap")
		if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		_, reopened := openSnapshot(t, dir)
		nodes := exportAll(t, reopened.Export())
		same(t, nodes)
		// and the stream imports back into the same tree
		imported := importTree(t, filepath.Join(t.TempDir(), "imported"), 3, nodes)
		if !bytes.Equal(imported.RootHash(), tr.RootHash()) {
			t.Fatalf("imported root %X, exported %X", imported.RootHash(), tr.RootHash())
		}
	})
}
