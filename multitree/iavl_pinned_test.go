package multitree_test

// Replays of cosmos/iavl v1.2.2's versioned-tree tests (tree_test.go
// TestVersionedEmptyTree, TestVersionedTree, TestVersionedTreeSaveAndLoad,
// TestVersionedTreeProofs, mutable_tree_test.go TestMutableTree_GetVersioned)
// and of export_test.go TestExporter's node stream, through the database.

import (
	"bytes"
	"context"
	"encoding/hex"
	"path/filepath"
	"testing"

	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

const pinnedIavlEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func pinnedStoreHash(t *testing.T, db *multitree.DB, v int64, store string) []byte {
	t.Helper()
	view, err := db.ViewAt(v)
	if err != nil {
		t.Fatalf("ViewAt(%d): %v", v, err)
	}
	defer view.Release()
	return view.Tree(store).RootHash()
}

func pinnedCommitHash(t *testing.T, db *multitree.DB, store string) ([]byte, int64) {
	t.Helper()
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, si := range info.StoreInfos {
		if si.Name == store {
			return si.CommitId.Hash, info.Version
		}
	}
	t.Fatalf("store %s not in commit info", store)
	return nil, 0
}

func TestIavlPinnedVersionedDB(t *testing.T) {
	dir := t.TempDir()
	open := func() *multitree.DB {
		db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"},
			SnapshotInterval: -1, SnapshotKeepRecent: 100})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	set := func(k, v string) {
		t.Helper()
		if err := db.Set("s", []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	del := func(k string) {
		t.Helper()
		if err := db.Delete("s", []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	// TestVersionedEmptyTree: empty versions hash to sha256("")
	for want := int64(1); want <= 2; want++ {
		h, v := pinnedCommitHash(t, db, "s")
		if v != want || hex.EncodeToString(h) != pinnedIavlEmpty {
			t.Fatalf("empty commit: v%d %x", v, h)
		}
	}
	// TestVersionedTreeProofs (shifted by two versions)
	set("k1", "v1")
	set("k2", "v1")
	set("k3", "v1")
	root1, _ := pinnedCommitHash(t, db, "s") // 3
	set("k2", "v2")
	set("k4", "v2")
	root2, _ := pinnedCommitHash(t, db, "s") // 4
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	del("k2")
	root3, _ := pinnedCommitHash(t, db, "s") // 5
	root4, v := pinnedCommitHash(t, db, "s") // 6, unchanged
	if v != 6 || !bytes.Equal(root3, root4) {
		t.Fatalf("unchanged version: v%d %x, previous %x", v, root4, root3)
	}
	if bytes.Equal(root1, root2) || bytes.Equal(root2, root3) {
		t.Fatal("roots repeat")
	}

	type proofCase struct {
		v       int64
		key     string
		value   string // "" for a non-membership proof
		root    []byte
		present bool
	}
	cases := []proofCase{
		{3, "k2", "v1", root1, true},
		{3, "k4", "", root1, false},
		{4, "k2", "v2", root2, true},
		{4, "k1", "v1", root2, true},
		{5, "k2", "", root3, false},
		{1, "k1", "", nil, false}, // empty version: GetVersioned gives nil
	}
	check := func(t *testing.T, db *multitree.DB) {
		for _, c := range cases {
			view, err := db.ViewAt(c.v)
			if err != nil {
				t.Fatalf("ViewAt(%d): %v", c.v, err)
			}
			tr := view.Tree("s")
			if c.root != nil && !bytes.Equal(tr.RootHash(), c.root) {
				t.Errorf("v%d root %x, committed %x", c.v, tr.RootHash(), c.root)
			}
			got, err := view.Get("s", []byte(c.key))
			if err != nil || (c.present && string(got) != c.value) || (!c.present && got != nil) {
				t.Errorf("v%d Get(%s) = %q, %v", c.v, c.key, got, err)
			}
			if c.root == nil {
				view.Release()
				continue
			}
			if c.present {
				p, err := tr.GetMembershipProof([]byte(c.key))
				if err != nil || string(p.GetExist().Value) != c.value ||
					!ics23.VerifyMembership(ics23.IavlSpec, c.root, p, []byte(c.key), []byte(c.value)) {
					t.Errorf("v%d membership %s: %v", c.v, c.key, err)
				}
			} else {
				p, err := tr.GetNonMembershipProof([]byte(c.key))
				if err != nil || string(p.GetNonexist().Key) != c.key ||
					!ics23.VerifyNonMembership(ics23.IavlSpec, c.root, p, []byte(c.key)) {
					t.Errorf("v%d non-membership %s: %v", c.v, c.key, err)
				}
			}
			view.Release()
		}
	}
	t.Run("live", func(t *testing.T) { check(t, db) })
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// TestVersionedTreeSaveAndLoad: a reopen gives the same version, hash
	// and size
	db = open()
	defer func() { db.Close() }()
	if db.Version() != 6 {
		t.Fatalf("reopened at %d", db.Version())
	}
	if h := pinnedStoreHash(t, db, 6, "s"); !bytes.Equal(h, root4) {
		t.Fatalf("reopened hash %x, before %x", h, root4)
	}
	t.Run("reopened", func(t *testing.T) { check(t, db) })
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	if n := view.Tree("s").Size(); n != 3 {
		t.Fatalf("size %d", n)
	}
	view.Release()
}

type pinnedSource struct {
	nodes []*memiavl.ExportNode
}

func (s *pinnedSource) Next() (*memiavl.ExportNode, error) {
	if len(s.nodes) == 0 {
		return nil, memiavl.ErrExportDone
	}
	n := s.nodes[0]
	s.nodes = s.nodes[1:]
	return n, nil
}

// iavl export_test.go TestExporter's node stream and import_test.go
// TestImporter_Commit_Empty (an empty import at version 3), imported as a
// database: the view at 3 exports the same stream, and the next commit is 4.
func TestIavlPinnedImportDB(t *testing.T) {
	leaf := func(k string, v byte, ver int64) *memiavl.ExportNode {
		return &memiavl.ExportNode{Key: []byte(k), Value: []byte{v}, Version: ver}
	}
	inner := func(k string, ver int64, h int8) *memiavl.ExportNode {
		return &memiavl.ExportNode{Key: []byte(k), Version: ver, Height: h}
	}
	stream := []*memiavl.ExportNode{
		leaf("a", 1, 1), leaf("abc", 6, 3), inner("abc", 3, 1), leaf("b", 2, 3), leaf("c", 3, 3),
		inner("c", 3, 1), inner("b", 3, 2), leaf("d", 4, 2), leaf("e", 5, 3), inner("e", 3, 1), inner("d", 3, 3),
	}
	dir := filepath.Join(t.TempDir(), "db")
	info, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{
		"s":     &pinnedSource{nodes: append([]*memiavl.ExportNode(nil), stream...)},
		"empty": &pinnedSource{},
	}, multitree.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 3 {
		t.Fatalf("imported version %d", info.Version)
	}
	db, err := multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	if h := view.Tree("empty").RootHash(); hex.EncodeToString(h) != pinnedIavlEmpty {
		t.Fatalf("empty store %x", h)
	}
	e := view.Tree("s").Export()
	for i := 0; ; i++ {
		n, err := e.Next()
		if err == memiavl.ErrExportDone {
			if i != len(stream) {
				t.Fatalf("exported %d nodes", i)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		w := stream[i]
		if !bytes.Equal(n.Key, w.Key) || !bytes.Equal(n.Value, w.Value) || n.Version != w.Version || n.Height != w.Height {
			t.Fatalf("node %d: %+v, iavl %+v", i, n, w)
		}
	}
	view.Release()
	if _, v := pinnedCommitHash(t, db, "s"); v != 4 {
		t.Fatalf("next version %d", v)
	}
}
