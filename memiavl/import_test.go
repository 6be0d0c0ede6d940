package memiavl_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

func leaf(key string, version int64) *memiavl.ExportNode {
	return &memiavl.ExportNode{Key: []byte(key), Value: []byte("v" + key), Version: version}
}

func inner(key string, height int8, version int64) *memiavl.ExportNode {
	return &memiavl.ExportNode{Key: []byte(key), Version: version, Height: height}
}

// validStream is the post-order of the tree ((a b) (c d)) e at version 3,
// as iavl builds it from inserting a..e in order.
func validStream(t *testing.T) []*memiavl.ExportNode {
	t.Helper()
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		if _, err := tr.Set([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, _, err := tr.SaveVersion(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return exportAll(t, tr.Export())
}

func cloneNodes(nodes []*memiavl.ExportNode) []*memiavl.ExportNode {
	out := make([]*memiavl.ExportNode, len(nodes))
	for i, n := range nodes {
		c := *n
		out[i] = &c
	}
	return out
}

func TestImportRejectsMalformedStreams(t *testing.T) {
	base := validStream(t)
	if len(base) != 9 {
		t.Fatalf("valid stream has %d nodes", len(base))
	}
	firstInner := -1
	for i, n := range base {
		if n.Height > 0 {
			firstInner = i
			break
		}
	}
	type tc struct {
		name    string
		version int64
		nodes   func() []*memiavl.ExportNode
	}
	mod := func(f func(ns []*memiavl.ExportNode) []*memiavl.ExportNode) func() []*memiavl.ExportNode {
		return func() []*memiavl.ExportNode { return f(cloneNodes(base)) }
	}
	cases := []tc{
		{"nil node", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { return append(ns[:2:2], nil) })},
		{"version above import", 2, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { return ns })},
		{"version zero", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { ns[0].Version = 0; return ns })},
		{"nil key", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { ns[0].Key = nil; return ns })},
		{"nil leaf value", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { ns[0].Value = nil; return ns })},
		{"inner value", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode {
			ns[firstInner].Value = []byte("x")
			return ns
		})},
		{"inner empty value", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode {
			ns[firstInner].Value = []byte{} // iavl refuses any non-nil value
			return ns
		})},
		{"keys out of order", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode {
			ns[0].Key, ns[1].Key = ns[1].Key, ns[0].Key
			return ns
		})},
		{"duplicate key", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { ns[1].Key = ns[0].Key; return ns })},
		{"wrong inner key", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode {
			ns[firstInner].Key = []byte("zz")
			return ns
		})},
		{"wrong height", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { ns[firstInner].Height = 2; return ns })},
		{"negative height", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { ns[firstInner].Height = -1; return ns })},
		{"missing root", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { return ns[:len(ns)-1] })},
		{"extra leaf", 3, mod(func(ns []*memiavl.ExportNode) []*memiavl.ExportNode { return append(ns, leaf("z", 1)) })},
		{"inner first", 3, func() []*memiavl.ExportNode { return []*memiavl.ExportNode{inner("a", 1, 1)} }},
		{"inner over one leaf", 3, func() []*memiavl.ExportNode {
			return []*memiavl.ExportNode{leaf("a", 1), inner("a", 1, 1)}
		}},
		{"child newer than parent", 3, func() []*memiavl.ExportNode {
			return []*memiavl.ExportNode{leaf("a", 2), leaf("b", 1), inner("b", 1, 1)}
		}},
		{"unbalanced", 3, func() []*memiavl.ExportNode {
			return []*memiavl.ExportNode{
				leaf("a", 1), leaf("b", 1), inner("b", 1, 1), leaf("c", 1), inner("c", 2, 1),
				leaf("d", 1), inner("d", 3, 1),
			}
		}},
		{"too many pending leaves", 3, func() []*memiavl.ExportNode {
			var ns []*memiavl.ExportNode
			for i := 0; i < 200; i++ {
				ns = append(ns, &memiavl.ExportNode{Key: binary.BigEndian.AppendUint32(nil, uint32(i)), Value: []byte{}, Version: 1})
			}
			return ns
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tree")
			im, err := memiavl.NewImporter(dir, c.version)
			if err != nil {
				t.Fatal(err)
			}
			var first error
			for _, n := range c.nodes() {
				if err := im.Add(n); err != nil {
					first = err
					break
				}
			}
			if first == nil {
				first = im.Commit()
			}
			if !errors.Is(first, memiavl.ErrImport) {
				t.Fatalf("got %v, want an error wrapping ErrImport", first)
			}
			// sticky
			if err := im.Commit(); err == nil {
				t.Fatal("Commit after an error succeeded")
			}
			if err := im.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("failed import left %s: %v", dir, err)
			}
			ents, _ := os.ReadDir(filepath.Dir(dir))
			if len(ents) != 0 {
				t.Fatalf("failed import left %d entries", len(ents))
			}
		})
	}
}

func TestImportValidTinyTrees(t *testing.T) {
	streams := map[string][]*memiavl.ExportNode{
		"empty":  nil,
		"leaf":   {leaf("a", 1)},
		"two":    {leaf("a", 1), leaf("b", 1), inner("b", 1, 1)},
		"three":  {leaf("a", 1), leaf("b", 2), leaf("c", 2), inner("c", 1, 2), inner("b", 2, 2)},
		"base":   validStream(t),
		"emptyk": {&memiavl.ExportNode{Key: []byte{}, Value: []byte{}, Version: 1}, leaf("b", 1), inner("b", 1, 1)},
	}
	for name, nodes := range streams {
		t.Run(name, func(t *testing.T) {
			tr := importTree(t, filepath.Join(t.TempDir(), "t"), 3, nodes)
			if err := tr.Check(); err != nil {
				t.Fatal(err)
			}
			if tr.Version() != 3 {
				t.Fatalf("version %d", tr.Version())
			}
			sameNodes(t, exportAll(t, tr.Export()), nodes)
			// the imported tree goes on like any tree: its next version is 4
			if _, err := tr.Set([]byte("new"), []byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, v, err := tr.SaveVersion(); err != nil || v != 4 {
				t.Fatalf("SaveVersion: %d %v", v, err)
			}
		})
	}
}

func TestImporterLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	if _, err := memiavl.NewImporter(dir, -1); err == nil {
		t.Fatal("negative version accepted")
	}
	im, err := memiavl.NewImporter(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if im.RootHash() != nil {
		t.Fatal("root hash before Commit")
	}
	if err := im.Add(leaf("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := im.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := im.Add(leaf("b", 1)); !errors.Is(err, memiavl.ErrImport) {
		t.Fatalf("Add after Commit: %v", err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("committed snapshot removed by Close: %v", err)
	}
	if _, err := memiavl.NewImporter(dir, 1); err == nil {
		t.Fatal("import over an existing directory accepted")
	}
}

// FuzzImport feeds arbitrary node streams to the importer: it must return an
// error or build a tree that passes Check, never panic.
func FuzzImport(f *testing.F) {
	f.Add([]byte{0, 'a', 1, 0, 'b', 1, 1, 'b', 1})
	f.Add([]byte{0, 'a', 1, 1, 'a', 1})
	f.Add([]byte{0, 'a', 2, 0, 'b', 1, 0, 'c', 1, 1, 'c', 1, 2, 'b', 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "t")
		im, err := memiavl.NewImporter(dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		// each node is 3 bytes: height, one key byte, version
		var nodes []*memiavl.ExportNode
		for len(data) >= 3 {
			n := &memiavl.ExportNode{Height: int8(data[0] % 4), Key: []byte{data[1]}, Version: int64(data[2] % 5)}
			if n.Height == 0 {
				n.Value = []byte{data[1]}
			}
			nodes = append(nodes, n)
			data = data[3:]
		}
		for _, n := range nodes {
			if err := im.Add(n); err != nil {
				return
			}
		}
		if err := im.Commit(); err != nil {
			return
		}
		tr := importTree(t, filepath.Join(t.TempDir(), "again"), 3, nodes)
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tr.RootHash(), im.RootHash()) {
			t.Fatal("root hash differs")
		}
	})
}

// TestLastVersion: version math.MaxInt64 is the last a tree can have. A
// tree saved at it passes Check and refuses the next SaveVersion (deferred
// hashes or not) and any change with ErrVersion, and an import at it is refused, as no version could be
// committed after it.
func TestLastVersion(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{InitialVersion: math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, v, err := tr.SaveVersion(); err != nil || v != math.MaxInt64 {
		t.Fatalf("SaveVersion: %d, %v", v, err)
	}
	if err := tr.Check(); err != nil {
		t.Fatalf("Check at the last version: %v", err)
	}
	if _, v, err := tr.SaveVersion(); !errors.Is(err, memiavl.ErrVersion) {
		t.Fatalf("SaveVersion after the last version: %d, %v; want ErrVersion", v, err)
	}
	if v, err := tr.SaveVersionDeferHash(); !errors.Is(err, memiavl.ErrVersion) {
		t.Fatalf("SaveVersionDeferHash after the last version: %d, %v; want ErrVersion", v, err)
	}
	if _, err := tr.Set([]byte("k"), []byte("w")); !errors.Is(err, memiavl.ErrVersion) {
		t.Fatalf("Set after the last version: %v; want ErrVersion", err)
	}
	if _, err := tr.Remove([]byte("k")); !errors.Is(err, memiavl.ErrVersion) {
		t.Fatalf("Remove after the last version: %v; want ErrVersion", err)
	}
	if tr.Version() != math.MaxInt64 {
		t.Fatalf("version %d after the refused save", tr.Version())
	}
	if got, err := tr.Get([]byte("k")); err != nil || string(got) != "v" {
		t.Fatalf("Get after the refused save: %q, %v", got, err)
	}
	dir := filepath.Join(t.TempDir(), "snap")
	if _, err := memiavl.NewImporter(dir, math.MaxInt64); !errors.Is(err, memiavl.ErrVersion) {
		t.Fatalf("NewImporter at the last version: %v; want ErrVersion", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused import left %s: %v", dir, err)
	}
	im, err := memiavl.NewImporter(dir, math.MaxInt64-1)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if err := im.Add(leaf("k", 1)); err != nil {
		t.Fatal(err)
	}
	if err := im.Commit(); err != nil {
		t.Fatal(err)
	}
}
