package multitree_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// impBlock makes one block of random changes over stores.
func impBlock(r *rand.Rand, gen *testutil.KeyGen, stores []string, keys map[string][][]byte) []wal.ChangeSet {
	var css []wal.ChangeSet
	for _, name := range stores {
		if r.Intn(4) == 0 {
			continue
		}
		cs := wal.ChangeSet{Name: name}
		for i := 0; i < 1+r.Intn(20); i++ {
			ks := keys[name]
			if len(ks) > 0 && r.Intn(5) == 0 {
				j := r.Intn(len(ks))
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: ks[j]})
				ks[j] = ks[len(ks)-1]
				keys[name] = ks[:len(ks)-1]
				continue
			}
			k := gen.Key()
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: gen.Value(100)})
			keys[name] = append(keys[name], k)
		}
		css = append(css, cs)
	}
	return css
}

func impCommit(t *testing.T, db *multitree.DB, css []wal.ChangeSet) []byte {
	t.Helper()
	if err := db.ApplyChangeSets(css); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return info.Hash()
}

// impSources returns exporters of every store of v.
func impSources(v *multitree.View) map[string]multitree.NodeSource {
	out := map[string]multitree.NodeSource{}
	for _, name := range v.StoreNames() {
		out[name] = v.Tree(name).Export()
	}
	return out
}

// impSameData compares the stores of two views pair by pair.
func impSameData(t *testing.T, a, b *multitree.View) {
	t.Helper()
	if fmt.Sprint(a.StoreNames()) != fmt.Sprint(b.StoreNames()) {
		t.Fatalf("stores %v and %v", a.StoreNames(), b.StoreNames())
	}
	for _, name := range a.StoreNames() {
		ta, tb := a.Tree(name), b.Tree(name)
		ia, ib := ta.Iterator(nil, nil, true), tb.Iterator(nil, nil, true)
		for ; ia.Valid(); ia.Next() {
			if !ib.Valid() || !bytes.Equal(ia.Key(), ib.Key()) || !bytes.Equal(ia.Value(), ib.Value()) {
				t.Fatalf("store %s differs at %X", name, ia.Key())
			}
			ib.Next()
		}
		if ib.Valid() {
			t.Fatalf("store %s has an extra key %X", name, ib.Key())
		}
		if err := tb.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

func impOpen(t *testing.T, dir string, opts multitree.Options) *multitree.DB {
	t.Helper()
	db, err := multitree.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestImportContinuesLikeTheSource(t *testing.T) {
	r := testutil.Rand(t)
	gen := testutil.NewKeyGen(r)
	stores := []string{"acc", "bank", "empty", "staking", "weird/name"}
	src := impOpen(t, filepath.Join(t.TempDir(), "src"), multitree.Options{
		CreateIfMissing: true, InitialStores: stores, InitialVersion: 5, SnapshotInterval: 7,
	})
	defer src.Close()
	keys := map[string][][]byte{}
	active := []string{"acc", "bank", "staking", "weird/name"}
	for i := 0; i < 30; i++ {
		impCommit(t, src, impBlock(r, gen, active, keys))
	}
	view, err := src.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()

	dir := filepath.Join(t.TempDir(), "dst")
	info, err := multitree.Import(dir, view.Version(), impSources(view), multitree.ImportOptions{InitialVersion: 5, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != view.Version() || !bytes.Equal(info.Hash(), view.CommitInfo().Hash()) {
		t.Fatalf("imported version %d hash %X, source %d %X", info.Version, info.Hash(), view.Version(), view.CommitInfo().Hash())
	}
	dst := impOpen(t, dir, multitree.Options{})
	if !bytes.Equal(dst.LastCommitInfo().Hash(), view.CommitInfo().Hash()) {
		t.Fatal("opened import has another app hash")
	}
	dv, err := dst.View()
	if err != nil {
		t.Fatal(err)
	}
	impSameData(t, view, dv)
	dv.Release()

	// both go on with the same blocks and keep the same hashes: the node
	// versions came through the import
	for i := 0; i < 10; i++ {
		css := impBlock(r, gen, active, keys)
		h1 := impCommit(t, src, css)
		h2 := impCommit(t, dst, css)
		if !bytes.Equal(h1, h2) {
			t.Fatalf("block %d after the import: hash %X, source %X", i, h2, h1)
		}
	}
	want := dst.LastCommitInfo().Hash()
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = impOpen(t, dir, multitree.Options{})
	defer dst.Close()
	if !bytes.Equal(dst.LastCommitInfo().Hash(), want) || dst.Version() != src.Version() {
		t.Fatalf("reopened at %d with another hash", dst.Version())
	}
}

func TestImportEmptyAtVersionZero(t *testing.T) {
	dir := t.TempDir()
	info, err := multitree.Import(dir, 0, nil, multitree.ImportOptions{InitialVersion: 10, Stores: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.StoreInfos) != 2 {
		t.Fatalf("store infos %v", info.StoreInfos)
	}
	db := impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if err := db.Set("a", []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	ci, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if ci.Version != 10 {
		t.Fatalf("first commit after import at 0 is version %d, want the initial version 10", ci.Version)
	}
}

// badSource yields a few valid leaves and then a node out of order.
type badSource struct{ i int }

func (s *badSource) Next() (*memiavl.ExportNode, error) {
	s.i++
	switch s.i {
	case 1:
		return &memiavl.ExportNode{Key: []byte("b"), Value: []byte{}, Version: 1}, nil
	case 2:
		return &memiavl.ExportNode{Key: []byte("a"), Value: []byte{}, Version: 1}, nil
	}
	return nil, memiavl.ErrExportDone
}

type errSource struct{}

func (errSource) Next() (*memiavl.ExportNode, error) { return nil, errors.New("stream broke") }

// TestFailedImportRemovesParentsItMade: a failed import into a directory
// whose parents it had to create removes them too, and nothing it did not
// make.
func TestFailedImportRemovesParentsItMade(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b", "db")
	if _, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"a": errSource{}}, multitree.ImportOptions{}); err == nil {
		t.Fatal("import succeeded")
	}
	if _, err := os.Stat(filepath.Join(base, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed import left the parents it made: %v", err)
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("a failed import removed a directory it did not make: %v", err)
	}
}

func TestImportFailuresLeaveNoDatabase(t *testing.T) {
	one := func() memiavl.ExportNode {
		return memiavl.ExportNode{Key: []byte("k"), Value: []byte("v"), Version: 1}
	}
	cases := map[string]func() map[string]multitree.NodeSource{
		"bad order":  func() map[string]multitree.NodeSource { return map[string]multitree.NodeSource{"a": &badSource{}} },
		"read error": func() map[string]multitree.NodeSource { return map[string]multitree.NodeSource{"a": errSource{}} },
		"panicking source": func() map[string]multitree.NodeSource {
			n := one()
			return map[string]multitree.NodeSource{"a": &sliceSource{nodes: []*memiavl.ExportNode{&n}}, "b": panicSource{}}
		},
		"one bad of two": func() map[string]multitree.NodeSource {
			n := one()
			return map[string]multitree.NodeSource{"a": &sliceSource{nodes: []*memiavl.ExportNode{&n}}, "b": &badSource{}}
		},
	}
	for name, srcs := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			_, err := multitree.Import(dir, 3, srcs(), multitree.ImportOptions{})
			if err == nil {
				t.Fatal("import succeeded")
			}
			t.Log(err)
			if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
				t.Fatalf("Open after a failed import: %v", err)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "LOCK" {
					t.Fatalf("failed import left %s", e.Name())
				}
			}
			// and a retry into the same directory works
			n := one()
			if _, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"a": &sliceSource{nodes: []*memiavl.ExportNode{&n}}}, multitree.ImportOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type panicSource struct{}

func (panicSource) Next() (*memiavl.ExportNode, error) { panic("source broke") }

type sliceSource struct {
	nodes []*memiavl.ExportNode
	i     int
}

func (s *sliceSource) Next() (*memiavl.ExportNode, error) {
	if s.i >= len(s.nodes) {
		return nil, memiavl.ErrExportDone
	}
	s.i++
	return s.nodes[s.i-1], nil
}

func leafSource(key, value string, version int64) multitree.NodeSource {
	return &sliceSource{nodes: []*memiavl.ExportNode{{Key: []byte(key), Value: []byte(value), Version: version}}}
}

func TestImportStoresOption(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	_, err := multitree.Import(dir, 4, map[string]multitree.NodeSource{"x": leafSource("k", "v", 4)},
		multitree.ImportOptions{Stores: []string{"a", "b"}})
	if !errors.Is(err, multitree.ErrUnknownStore) {
		t.Fatalf("unlisted store: %v", err)
	}
	info, err := multitree.Import(dir, 4, map[string]multitree.NodeSource{"b": leafSource("k", "v", 4)},
		multitree.ImportOptions{Stores: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	db := impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if fmt.Sprint(db.StoreNames()) != "[a b]" || !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) {
		t.Fatalf("stores %v", db.StoreNames())
	}
	if v, _ := db.Get("b", []byte("k")); string(v) != "v" {
		t.Fatalf("imported value %q", v)
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	if db.Version() != 5 {
		t.Fatalf("version after import at 4 and a commit: %d", db.Version())
	}
}

// TestImportReplace replaces a database by import, with the directories
// exchanged in one step and, as on a file system that refuses that, by
// two renames.
func TestImportReplace(t *testing.T) {
	t.Run("exchange", testImportReplace)
	t.Run("two renames", func(t *testing.T) {
		multitree.RefuseExchange(t)
		testImportReplace(t)
	})
}

func testImportReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	src := func(value string) map[string]multitree.NodeSource {
		return map[string]multitree.NodeSource{"s": leafSource("k", value, 7)}
	}
	// an existing, empty database
	db := impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}})
	if _, err := multitree.Import(dir, 7, src("1"), multitree.ImportOptions{Replace: true}); !errors.Is(err, multitree.ErrLocked) {
		t.Fatalf("replacing an open database: %v", err)
	}
	db.Close()
	if _, err := multitree.Import(dir, 7, src("1"), multitree.ImportOptions{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("import over a database without Replace: %v", err)
	}
	holds := func(want string) {
		t.Helper()
		db := impOpen(t, dir, multitree.Options{ReadOnly: true})
		defer db.Close()
		if v, _ := db.Get("s", []byte("k")); string(v) != want || db.Version() != 7 {
			t.Fatalf("value %q at version %d, want %q at 7", v, db.Version(), want)
		}
	}
	if _, err := multitree.Import(dir, 7, src("1"), multitree.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	holds("1")
	// the same version again: re-created
	if _, err := multitree.Import(dir, 7, src("2"), multitree.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	holds("2")
	for _, leftover := range []string{".import.tmp", ".replaced.tmp"} {
		if _, err := os.Lstat(dir + leftover); !os.IsNotExist(err) {
			t.Fatalf("%s left after an import: %v", leftover, err)
		}
	}
	// a failing import leaves the existing database as it was
	if _, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": &badSource{}}, multitree.ImportOptions{Replace: true}); err == nil {
		t.Fatal("bad import succeeded")
	}
	db = impOpen(t, dir, multitree.Options{})
	if v, _ := db.Get("s", []byte("k")); string(v) != "2" || db.Version() != 7 {
		t.Fatalf("value %q at version %d", v, db.Version())
	}
	if _, err := db.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// another version: refused
	if _, err := multitree.Import(dir, 7, src("3"), multitree.ImportOptions{Replace: true}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("replacing version 8 with an import at 7: %v", err)
	}
	if _, err := os.Stat(dir + ".import.tmp"); !os.IsNotExist(err) {
		t.Fatalf("staging directory left: %v", err)
	}
	db = impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if db.Version() != 8 {
		t.Fatalf("version %d", db.Version())
	}
}

// An import that replaces a database swaps it in by two renames: the old
// database aside to dir.replaced.tmp, the staged one from dir.import.tmp to
// dir. Interrupted between the two, dir holds no database; the next
// writable Open, or import, finishes the swap, and readers meanwhile read
// the database it moves in.
func TestInterruptedSwapIsFinished(t *testing.T) {
	src := map[string]multitree.NodeSource{"s": leafSource("k", "new", 7)}
	// dir aside, the staged database whole, nothing at dir
	interrupted := func(t *testing.T, stagedWhole bool) string {
		dir := filepath.Join(t.TempDir(), "db")
		impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}}).Close()
		if stagedWhole {
			if _, err := multitree.Import(dir+".import.tmp", 7, src, multitree.ImportOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if err := os.MkdirAll(filepath.Join(dir+".import.tmp", "snapshot-00000000000000000007.tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir, dir+".replaced.tmp"); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := func(t *testing.T, dir string) {
		t.Helper()
		if _, err := os.Stat(dir + ".replaced.tmp"); !os.IsNotExist(err) {
			t.Fatalf("the replaced database is left: %v", err)
		}
	}
	t.Run("open", func(t *testing.T) {
		dir := interrupted(t, true)
		if v, err := multitree.LatestVersion(dir); err != nil || v != 7 {
			t.Fatalf("LatestVersion %d %v, want the imported 7", v, err)
		}
		// a read-only open reads the database the writable open moves
		// in, and changes nothing
		ro, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only open: %v", err)
		}
		if v, _ := ro.Get("s", []byte("k")); string(v) != "new" || ro.Version() != 7 {
			t.Fatalf("read-only open: value %q at version %d, want the imported one", v, ro.Version())
		}
		ro.Close()
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Fatalf("the read-only open changed %s: %v", dir, err)
		}
		db := impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}})
		defer db.Close()
		if v, _ := db.Get("s", []byte("k")); string(v) != "new" || db.Version() != 7 {
			t.Fatalf("value %q at version %d, want the imported one", v, db.Version())
		}
		gone(t, dir)
	})
	t.Run("import", func(t *testing.T) {
		dir := interrupted(t, true)
		// the finished swap leaves the imported database at 7, which a
		// new import at 7 replaces
		if _, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "again", 7)},
			multitree.ImportOptions{Replace: true}); err != nil {
			t.Fatal(err)
		}
		gone(t, dir)
		db := impOpen(t, dir, multitree.Options{})
		defer db.Close()
		if v, _ := db.Get("s", []byte("k")); string(v) != "again" {
			t.Fatalf("value %q", v)
		}
	})
	t.Run("staged database not whole", func(t *testing.T) {
		// not left by an import, which moves the old database aside only
		// once the new one is whole: the old one is moved back
		dir := interrupted(t, false)
		if v, err := multitree.LatestVersion(dir); err != nil || v != 0 {
			t.Fatalf("LatestVersion %d %v, want the replaced database's 0", v, err)
		}
		db := impOpen(t, dir, multitree.Options{})
		defer db.Close()
		if db.Version() != 0 || fmt.Sprint(db.StoreNames()) != "[s]" {
			t.Fatalf("version %d, stores %v: not the replaced database", db.Version(), db.StoreNames())
		}
		gone(t, dir)
	})
}

func TestImportCleansLeftovers(t *testing.T) {
	dir := t.TempDir()
	// what an interrupted import leaves: a snapshot without current, a log
	// (and the import's marker, written below)
	for _, d := range []string{"snapshot-00000000000000000003", "snapshot-00000000000000000003.tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d, "junk"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	segment := filepath.Join(dir, "wal", "00000000000000000001.wal")
	if err := os.WriteFile(segment, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	// files that are not the database's, with names like its
	for _, f := range []string{"user-file", "notes.tmp", "snapshot-3"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a log directory holding something else is refused, and nothing goes
	user := filepath.Join(dir, "wal", "keep.txt")
	if err := os.WriteFile(user, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"s": leafSource("k", "v", 2)}, multitree.ImportOptions{}); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("import beside a wal directory that is not a log: %v", err)
	}
	for _, p := range []string{user, segment, filepath.Join(dir, "notes.tmp"), filepath.Join(dir, "snapshot-00000000000000000003", "junk")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the refused import removed %s", p)
		}
	}
	if err := os.Remove(user); err != nil {
		t.Fatal(err)
	}
	// without the marker an import writes before anything else, they are
	// what a database that lost its current pointer holds: refused, and
	// left as they are
	if _, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"s": leafSource("k", "v", 2)}, multitree.ImportOptions{}); !errors.Is(err, multitree.ErrCorrupt) {
		t.Fatalf("import over snapshots and a log without current or the import marker: %v, want ErrCorrupt", err)
	}
	for _, p := range []string{segment, filepath.Join(dir, "snapshot-00000000000000000003", "junk")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the refused import removed %s", p)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "import"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := multitree.Import(dir, 3, map[string]multitree.NodeSource{"s": leafSource("k", "v", 2)}, multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"user-file", "notes.tmp", "snapshot-3"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s, a file that is not the database's, was removed", f)
		}
	}
	if _, err := os.Stat(segment); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the leftover log segment was kept: %v", err)
	}
	db := impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if v, err := db.Get("s", []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("imported value %q, %v", v, err)
	}
}

func TestImportCheckHook(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	var seen []string
	_, err := multitree.Import(dir, 2, map[string]multitree.NodeSource{"s": leafSource("k", "v", 1)}, multitree.ImportOptions{
		Stores: []string{"s", "t"},
		Check: func(info *storetypes.CommitInfo) error {
			for _, si := range info.StoreInfos {
				seen = append(seen, si.Name)
			}
			return errors.New("hashes do not match")
		},
	})
	if err == nil || fmt.Sprint(seen) != "[s t]" {
		t.Fatalf("Check saw %v, import returned %v", seen, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a rejected import left the directory it created: %v", err)
	}
	if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("a rejected import left a database: %v", err)
	}
}

// balancedStream returns the post-order export of a balanced tree of n
// leaves at version 1.
func balancedStream(n int) []*memiavl.ExportNode {
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }
	var out []*memiavl.ExportNode
	var build func(lo, hi int) int8
	build = func(lo, hi int) int8 {
		if hi-lo == 1 {
			out = append(out, &memiavl.ExportNode{Key: key(lo), Value: []byte("value"), Version: 1})
			return 0
		}
		mid := (lo + hi) / 2
		h := max(build(lo, mid), build(mid, hi)) + 1
		out = append(out, &memiavl.ExportNode{Key: key(mid), Height: h, Version: 1})
		return h
	}
	build(0, n)
	return out
}

// TestImporterCloseBesideAdd closes a database importer from one goroutine
// while another feeds a store importer: Close must wait for the running
// Add, the feeder's next call must fail with ErrImport, and nothing of the
// import may remain.
func TestImporterCloseBesideAdd(t *testing.T) {
	nodes := balancedStream(1 << 17)
	dir := filepath.Join(t.TempDir(), "db")
	im, err := multitree.NewImporter(dir, 1, multitree.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	si, err := im.AddStore("a")
	if err != nil {
		t.Fatal(err)
	}
	fed := make(chan error, 1)
	go func() {
		for _, n := range nodes {
			if err := si.Add(n); err != nil {
				fed <- err
				return
			}
		}
		fed <- si.Commit()
	}()
	for si.Size() < 1000 {
		runtime.Gosched()
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-fed; !errors.Is(err, memiavl.ErrImport) {
		t.Fatalf("the feeder ended with %v, want ErrImport", err)
	}
	if si.RootHash() != nil {
		t.Error("a closed store importer has a root hash")
	}
	if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
		t.Fatalf("Open after a closed import: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the closed import left %s: %v", dir, err)
	}
}

// TestWriterRemovesStagedImport: a replacing import killed before its swap
// leaves its staging directory (about the size of the database) beside the
// database; the next writer's open removes it, a read-only one does not.
func TestWriterRemovesStagedImport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"s"}})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(dir+".import.tmp", "snapshot-00000000000000000007.tmp", "s-s")
	if err := os.MkdirAll(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staged, "leaves"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := impOpen(t, dir, multitree.Options{ReadOnly: true})
	ro.Close()
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("a read-only open changed the staging directory: %v", err)
	}
	db = impOpen(t, dir, multitree.Options{})
	defer db.Close()
	if _, err := os.Lstat(dir + ".import.tmp"); !os.IsNotExist(err) {
		t.Fatalf("the writer's open left the staging directory: %v", err)
	}
}

// TestImportThroughLinks: an import that replaces a database reached
// through a symbolic link (the link itself, or "." in a working directory
// entered through it) replaces the directory the link names and keeps the
// link; nothing is left beside either.
func TestImportThroughLinks(t *testing.T) {
	src := func(value string) map[string]multitree.NodeSource {
		return map[string]multitree.NodeSource{"s": leafSource("k", value, 7)}
	}
	parent := t.TempDir()
	real := filepath.Join(parent, "real")
	links := t.TempDir()
	link := filepath.Join(links, "link")
	if _, err := multitree.Import(real, 7, src("0"), multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	check := func(how, want string) {
		t.Helper()
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("%s: the link is no longer one: %v", how, err)
		}
		db := impOpen(t, real, multitree.Options{ReadOnly: true})
		defer db.Close()
		if v, _ := db.Get("s", []byte("k")); string(v) != want {
			t.Fatalf("%s: the linked directory holds %q, want %q", how, v, want)
		}
		for _, d := range []string{parent, links} {
			if ents, err := os.ReadDir(d); err != nil || len(ents) != 1 {
				t.Fatalf("%s: %s holds %v (%v)", how, d, ents, err)
			}
		}
	}
	if _, err := multitree.Import(link, 7, src("1"), multitree.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	check("through the link", "1")

	defer testutil.Chdir(t, link)()
	t.Setenv("PWD", link) // as a shell that entered it sets it: os.Getwd returns it
	if _, err := multitree.Import(".", 7, src("2"), multitree.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	check("into . entered through the link", "2")
}

// TestImportedVersionIsFirst checks that the versions before an import's
// were never committed in the imported database (ErrBeforeFirstVersion, as
// before a database's initial version), also once the import's snapshot
// is pruned, while a version that was committed and pruned is only
// ErrVersion.
func TestImportedVersionIsFirst(t *testing.T) {
	r := testutil.Rand(t)
	gen := testutil.NewKeyGen(r)
	stores := []string{"acc", "bank"}
	srcDir := filepath.Join(t.TempDir(), "src")
	src := impOpen(t, srcDir, multitree.Options{
		CreateIfMissing: true, InitialStores: stores, InitialVersion: 3, SnapshotInterval: -1,
	})
	defer func() { src.Close() }()
	keys := map[string][][]byte{}
	for i := 0; i < 8; i++ {
		impCommit(t, src, impBlock(r, gen, stores, keys))
	}
	view, err := src.View()
	if err != nil {
		t.Fatal(err)
	}
	h := view.Version() // 10
	dir := filepath.Join(t.TempDir(), "dst")
	_, err = multitree.Import(dir, h, impSources(view), multitree.ImportOptions{InitialVersion: 3})
	view.Release()
	if err != nil {
		t.Fatal(err)
	}
	before := func(db *multitree.DB, v int64, first bool) {
		t.Helper()
		_, err := db.ViewAt(v)
		if !errors.Is(err, multitree.ErrVersion) || errors.Is(err, multitree.ErrBeforeFirstVersion) != first {
			t.Fatalf("view of %d: %v (want ErrBeforeFirstVersion: %v)", v, err, first)
		}
		_, err = multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v})
		if !errors.Is(err, multitree.ErrVersion) || errors.Is(err, multitree.ErrBeforeFirstVersion) != first {
			t.Fatalf("read-only open at %d: %v (want ErrBeforeFirstVersion: %v)", v, err, first)
		}
	}
	opts := multitree.Options{SnapshotInterval: -1}
	dst := impOpen(t, dir, opts)
	before(dst, h-1, true)
	before(dst, 1, true)
	for i := 0; i < 4; i++ {
		impCommit(t, dst, impBlock(r, gen, stores, keys))
	}
	if err := dst.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil { // waits for the prune of snapshot h
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("snapshot-%020d", h))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("snapshot %d kept: %v", h, err)
	}
	dst = impOpen(t, dir, opts)
	defer dst.Close()
	before(dst, h-1, true)
	before(dst, h, false) // committed here, and pruned
	before(dst, h+1, false)
	if _, err := dst.ViewAt(h + 4); err != nil {
		t.Fatal(err)
	}

	// a database created at its initial version, whose snapshot 0 is
	// pruned, tells its own versions from those before its first
	if err := src.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil { // waits for the prune of snapshot 0
		t.Fatal(err)
	}
	src = impOpen(t, srcDir, multitree.Options{SnapshotInterval: -1})
	if _, err := src.ViewAt(2); !errors.Is(err, multitree.ErrBeforeFirstVersion) {
		t.Fatalf("view of 2: %v", err)
	}
	if _, err := src.ViewAt(4); !errors.Is(err, multitree.ErrVersion) || errors.Is(err, multitree.ErrBeforeFirstVersion) {
		t.Fatalf("view of 4: %v", err)
	}
}

// cancelAfter is a NodeSource of a balanced tree that cancels its context
// once it has handed out n nodes.
type cancelAfter struct {
	sliceSource
	n      int
	cancel context.CancelFunc
}

func (s *cancelAfter) Next() (*memiavl.ExportNode, error) {
	if s.i == s.n {
		s.cancel()
	}
	return s.sliceSource.Next()
}

// TestImportContextStops: an import whose context is done stops between
// nodes, fails with the context's error and leaves what a failed import
// leaves: no database (and not the directory it created), or the database
// it was to replace as it was; the same import with a live context then
// succeeds. A context done before the call creates nothing.
func TestImportContextStops(t *testing.T) {
	const leaves = 5000
	stream := balancedStream(leaves)
	full := func() map[string]multitree.NodeSource {
		return map[string]multitree.NodeSource{"a": &sliceSource{nodes: stream}, "b": leafSource("k", "v", 1)}
	}
	stopping := func(ctx context.Context) (context.Context, map[string]multitree.NodeSource) {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, map[string]multitree.NodeSource{
			"a": &cancelAfter{sliceSource: sliceSource{nodes: stream}, n: leaves, cancel: cancel},
			"b": leafSource("k", "v", 1),
		}
	}

	t.Run("new directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new", "db")
		ctx, srcs := stopping(context.Background())
		if _, err := multitree.ImportContext(ctx, dir, 3, srcs, multitree.ImportOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped import: %v, want context.Canceled", err)
		}
		if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a stopped import left the directories it made: %v", err)
		}
		info, err := multitree.ImportContext(context.Background(), dir, 3, full(), multitree.ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		db := impOpen(t, dir, multitree.Options{ReadOnly: true})
		defer db.Close()
		if !bytes.Equal(db.LastCommitInfo().Hash(), info.Hash()) || db.Version() != 3 {
			t.Fatalf("after the retry: version %d", db.Version())
		}
		if v, _ := db.Get("a", []byte(fmt.Sprintf("key%08d", leaves-1))); string(v) != "value" {
			t.Fatalf("last key: %q", v)
		}
	})

	t.Run("replacing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		impOpen(t, dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}}).Close()
		ctx, srcs := stopping(context.Background())
		if _, err := multitree.ImportContext(ctx, dir, 3, srcs, multitree.ImportOptions{Replace: true}); !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped import: %v, want context.Canceled", err)
		}
		if _, err := os.Lstat(dir + ".import.tmp"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("staging directory left: %v", err)
		}
		db := impOpen(t, dir, multitree.Options{})
		if db.Version() != 0 || !slices.Equal(db.StoreNames(), []string{"a", "b"}) {
			t.Fatalf("the replaced database changed: version %d, stores %v", db.Version(), db.StoreNames())
		}
		db.Close()
	})

	t.Run("done before", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := multitree.ImportContext(ctx, dir, 3, full(), multitree.ImportOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("import with a done context: %v", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("an import with a done context created its directory: %v", err)
		}
	})
}
