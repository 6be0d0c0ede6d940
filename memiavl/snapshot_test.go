package memiavl_test

import (
	"bytes"
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

// reopen writes tr's saved version as a snapshot and opens it as a new tree.
func reopen(t *testing.T, tr *memiavl.Tree, dir string) *memiavl.Tree {
	t.Helper()
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	nt, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return nt
}

func sameContents(t *testing.T, a, b *memiavl.Tree) {
	t.Helper()
	if !bytes.Equal(a.RootHash(), b.RootHash()) {
		t.Fatalf("root hash %X, want %X", b.RootHash(), a.RootHash())
	}
	if a.Size() != b.Size() || a.Version() != b.Version() {
		t.Fatalf("size/version %d/%d, want %d/%d", b.Size(), b.Version(), a.Size(), a.Version())
	}
	for _, asc := range []bool{true, false} {
		ia, ib := a.Iterator(nil, nil, asc), b.Iterator(nil, nil, asc)
		n := 0
		for ; ia.Valid(); ia.Next() {
			if !ib.Valid() || !bytes.Equal(ia.Key(), ib.Key()) || !bytes.Equal(ia.Value(), ib.Value()) {
				t.Fatalf("asc=%v item %d differs", asc, n)
			}
			v, err := b.Get(ia.Key())
			if err != nil || !bytes.Equal(v, ia.Value()) || v == nil {
				t.Fatalf("Get(%X) = %X, %v; want %X", ia.Key(), v, err, ia.Value())
			}
			ib.Next()
			n++
		}
		if ib.Valid() || ib.Error() != nil || ia.Error() != nil {
			t.Fatalf("asc=%v: iterators end differently: %v %v", asc, ib.Error(), ia.Error())
		}
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 2, 3, 1000}
	if n := size(1_000_000, 200_000, 0); n > 0 {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := newWorkload(t, 0)
			for len(w.keys) < n {
				for i := 0; i < 1000 && len(w.keys) < n; i++ {
					w.set(w.gen.Key(), w.gen.Value(300))
				}
				w.save()
			}
			if n < 100000 {
				w.save()
			}
			dir := t.TempDir()
			st := reopen(t, w.ours, filepath.Join(dir, "a"))
			sameContents(t, w.ours, st)
			// go on mutating the snapshot tree: it must keep matching iavl
			w.ours = st
			for v := 0; v < 20; v++ {
				for i := 0; i < 50; i++ {
					w.step()
				}
				w.save()
			}
			if n <= 1000 {
				if err := w.ours.Check(); err != nil {
					t.Fatal(err)
				}
				w.compareGets(200)
			}
			// and a snapshot of a tree that mixes snapshot and memory nodes
			st2 := reopen(t, w.ours, filepath.Join(dir, "b"))
			sameContents(t, w.ours, st2)
		})
	}
}

func TestSnapshotIteratorRanges(t *testing.T) {
	w := newWorkload(t, 0)
	for v := 0; v < 10; v++ {
		for i := 0; i < 300; i++ {
			w.step()
		}
		w.save()
	}
	w.ours = reopen(t, w.ours, filepath.Join(t.TempDir(), "s"))
	// changes on top of the snapshot, some unsaved
	for v := 0; v < 3; v++ {
		for i := 0; i < 40; i++ {
			w.step()
		}
		w.save()
	}
	for i := 0; i < 20; i++ {
		w.step()
	}
	for i := 0; i < scale(2000, 300); i++ {
		var start, end []byte
		if w.r.Intn(4) != 0 {
			start = w.gen.Key()
		}
		if w.r.Intn(4) != 0 {
			end = w.gen.Key()
		}
		if len(w.keys) > 0 && w.r.Intn(3) == 0 {
			start, _ = w.pickKey()
		}
		asc := w.r.Intn(2) == 0
		a := collect(t, w.ours.Iterator(start, end, asc))
		b := collect(t, mustIter(t, w.ref, start, end, asc))
		if len(a) != len(b) {
			t.Fatalf("[%X,%X) asc=%v: %d items, iavl %d", start, end, asc, len(a), len(b))
		}
		for j := range a {
			if !bytes.Equal(a[j][0], b[j][0]) || !bytes.Equal(a[j][1], b[j][1]) {
				t.Fatalf("[%X,%X) asc=%v item %d differs", start, end, asc, j)
			}
		}
	}
}

func TestSnapshotZeroCopyGetAllocs(t *testing.T) {
	r := testutil.Rand(t)
	g := testutil.NewKeyGen(r)
	tr, _ := memiavl.New(memiavl.Options{})
	var keys [][]byte
	for i := 0; i < 5000; i++ {
		k := g.Key()
		keys = append(keys, k)
		tr.Set(k, g.Value(100))
	}
	tr.SaveVersion()
	st := reopen(t, tr, filepath.Join(t.TempDir(), "s"))
	absent := make([][]byte, 100)
	for j := range absent {
		absent[j] = g.Key()
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		st.GetZeroCopy(keys[i%len(keys)])
		st.GetZeroCopy(absent[i%len(absent)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("GetZeroCopy allocates %.1f times per call", allocs)
	}
}

// TestSnapshotGetAfterChanges reads every key ever written after deleting and
// overwriting keys of a tree opened from a snapshot: the snapshot's lookup
// table still holds the deleted and old keys, and must answer only for the
// persisted subtrees that the tree still points to.
func TestSnapshotGetAfterChanges(t *testing.T) {
	r := testutil.Rand(t)
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	var keys [][]byte
	for i := 0; i < 3000; i++ {
		k := []byte(fmt.Sprintf("key-%06d", r.Intn(1_000_000)))
		if _, ok := want[string(k)]; ok {
			continue
		}
		v := []byte(fmt.Sprint("value-", i))
		if _, err := tr.Set(k, v); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = v
		keys = append(keys, k)
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr = reopen(t, tr, filepath.Join(t.TempDir(), "snap"))
	for _, k := range keys {
		switch r.Intn(4) {
		case 0:
			if _, err := tr.Remove(k); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = nil
		case 1:
			v := []byte(fmt.Sprint("new-", r.Int()))
			if _, err := tr.Set(k, v); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = v
		}
	}
	for round := 0; round < 2; round++ {
		for _, k := range keys {
			v, err := tr.Get(k)
			if err != nil || !bytes.Equal(v, want[string(k)]) || (v == nil) != (want[string(k)] == nil) {
				t.Fatalf("round %d: Get(%s) = %q, %v; want %q", round, k, v, err, want[string(k)])
			}
			if zc, err := tr.GetZeroCopy(k); err != nil || !bytes.Equal(zc, v) {
				t.Fatalf("round %d: GetZeroCopy(%s) = %q, %v; want %q", round, k, zc, err, v)
			}
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotFormatV1 serves reads from a snapshot of format version 1,
// which has no lookup table, and goes on from it.
func TestSnapshotFormatV1(t *testing.T) {
	s, err := snapshot.Open(filepath.Join("..", "snapshot", "testdata", "golden-v1"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.HasLookup() {
		t.Fatal("format version 1 snapshot has a lookup table")
	}
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"alpha", "value-a"}, {"bravo", "value-b"}, {"charlie", "value-c"}, {"delta", ""}, {"echo", "value-e"}, {"b", ""}, {"zulu", ""}} {
		v, err := tr.Get([]byte(kv[0]))
		present := kv[0] != "b" && kv[0] != "zulu"
		if err != nil || string(v) != kv[1] || (v != nil) != present {
			t.Fatalf("Get(%s) = %q, %v", kv[0], v, err)
		}
	}
	if _, err := tr.Set([]byte("foxtrot"), []byte("value-f")); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Remove([]byte("alpha")); err != nil {
		t.Fatal(err)
	}
	if v, err := tr.Get([]byte("foxtrot")); err != nil || string(v) != "value-f" {
		t.Fatalf("Get(foxtrot) = %q, %v", v, err)
	}
	if v, err := tr.Get([]byte("alpha")); err != nil || v != nil {
		t.Fatalf("Get(alpha) after Remove = %q, %v", v, err)
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	// a rewrite of a tree on a format version 1 snapshot writes version 2,
	// its unchanged subtrees node by node (they have no entry headers)
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	nt := reopen(t, tr, filepath.Join(t.TempDir(), "v2"))
	if !nt.Snapshot().HasLookup() || nt.Snapshot().FormatVersion() != snapshot.FormatVersion {
		t.Fatalf("rewritten as format version %d", nt.Snapshot().FormatVersion())
	}
	sameContents(t, tr, nt)
}

// TestSnapshotBulkCopy writes trees whose nodes are partly in memory and
// partly in their snapshot with unchanged subtrees copied in bulk and node
// by node, each also split over two goroutines (WithSplit), and split with
// a runner (WithSplitRunner) that drops the right half's task (the write
// runs it itself) or runs it twice on another goroutine: the files must be
// the same bytes and verify, and the maps of the written nodes must be the
// same.
func TestSnapshotBulkCopy(t *testing.T) {
	r := testutil.Rand(t)
	dir := t.TempDir()
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	for i := 0; i < 3000; i++ {
		if _, err := tr.Set(key(i), bytes.Repeat([]byte{byte(i)}, r.Intn(40))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr = reopen(t, tr, filepath.Join(dir, "base"))
	for round, changes := range []int{0, 1, 5, 40, 400} {
		for c := 0; c < changes; c++ {
			k := key(r.Intn(3500))
			if r.Intn(4) == 0 {
				if _, err := tr.Remove(k); err != nil {
					t.Fatal(err)
				}
			} else if _, err := tr.Set(k, []byte(fmt.Sprint(round, c))); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
		modes := []struct {
			bulk   bool
			max    uint64
			split  int64 // 0: no split
			runner int   // 0: WithSplit, 1: a runner that drops the task, 2: one that runs it twice
		}{{false, 0, 0, 0}, {true, 1 << 16, 0, 0}, {true, 1 + uint64(r.Intn(200)), 0, 0},
			{false, 0, 2, 0}, {true, 1 << 16, 2, 0}, {true, 1 << 16, 3001, 0}, {true, 1 + uint64(r.Intn(200)), 2, 0},
			{true, 1 << 16, 2, 1}, {false, 0, 2, 2}, {true, 1 + uint64(r.Intn(200)), 2, 2}}
		files := make([]map[string][]byte, len(modes))
		maps := make([]string, len(modes))
		for i, mode := range modes {
			restore := memiavl.SetBulkCopy(mode.bulk, mode.max)
			out := filepath.Join(dir, fmt.Sprintf("r%d-%d", round, i))
			var opts []memiavl.WriteOption
			switch {
			case mode.split == 0:
			case mode.runner == 1:
				opts = append(opts, memiavl.WithSplitRunner(func(func()) {}))
			case mode.runner == 2:
				opts = append(opts, memiavl.WithSplitRunner(func(task func()) {
					go func() { task(); task() }()
				}))
			default:
				opts = append(opts, memiavl.WithSplit())
			}
			restoreSplit := memiavl.SetSplitMin(max(mode.split, 1))
			c := tr.Copy()
			m, err := c.WriteSnapshotMapped(context.Background(), out, opts...)
			restore()
			restoreSplit()
			if err != nil {
				t.Fatal(err)
			}
			maps[i] = memiavl.MapSummary(m, c)
			files[i] = readDir(t, out)
			s, err := snapshot.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Verify(); err != nil {
				t.Fatalf("round %d, bulk %v max %d: %v", round, mode.bulk, mode.max, err)
			}
			s.Close()
		}
		for i := 1; i < len(files); i++ {
			for name, b := range files[0] {
				if !bytes.Equal(files[i][name], b) {
					t.Fatalf("round %d: %s differs between the node-by-node write and write %d", round, name, i)
				}
			}
			if len(files[i]) != len(files[0]) {
				t.Fatalf("round %d: write %d has %d files, want %d", round, i, len(files[i]), len(files[0]))
			}
			if maps[i] != maps[0] {
				t.Fatalf("round %d: the map of write %d differs", round, i)
			}
		}
	}
}

// readDir returns the contents of the files in dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	if len(out) == 0 {
		t.Fatalf("no files in %s", dir)
	}
	return out
}

// changedSnapshotTree returns a tree of n keys read from its snapshot,
// written to src, with every step-th key changed since and saved.
func changedSnapshotTree(t *testing.T, src string, n, step int) *memiavl.Tree {
	t.Helper()
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("key-%05d", i)), []byte(fmt.Sprint("value-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr = reopen(t, tr, src)
	for i := 0; i < n; i += step {
		if _, err := tr.Set([]byte(fmt.Sprintf("key-%05d", i)), []byte("changed")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestWriteSnapshotChecksSource: a write from a tree whose snapshot has a
// damaged byte, in a part the write copies, fails with ErrCorrupt and leaves
// nothing at the target; the intact snapshot writes, and a cancelled write
// reports the cancellation, not damage.
func TestWriteSnapshotChecksSource(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	tr := changedSnapshotTree(t, src, 2000, 2000)

	// a value byte near the end of kvs, in a subtree copied unchanged
	kvs := filepath.Join(src, snapshot.FileKVs)
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	restore := testutil.DamageByte(t, kvs, fi.Size()-2)
	dst := filepath.Join(t.TempDir(), "dst")
	err = tr.WriteSnapshot(context.Background(), dst)
	if !errors.Is(err, memiavl.ErrCorrupt) || !errors.Is(err, snapshot.ErrChecksum) {
		t.Fatalf("write from a damaged snapshot: %v", err)
	}
	if _, serr := os.Stat(dst); !os.IsNotExist(serr) {
		t.Fatalf("the failed write left %s: %v", dst, serr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tr.WriteSnapshot(ctx, dst); !errors.Is(err, context.Canceled) || errors.Is(err, memiavl.ErrCorrupt) {
		t.Fatalf("cancelled write: %v", err)
	}
	restore()
	sameContents(t, tr, reopen(t, tr, dst))
}

// TestSplitWriteFailures: a split write that is cancelled, or that meets
// damage in the part of the old snapshot its forked half copies, fails like
// an unsplit one and leaves nothing behind: split on a goroutine of its own
// (WithSplit), with a runner that never runs the right half's task, and
// with one that runs it only after the write has returned (a no-op then).
func TestSplitWriteFailures(t *testing.T) {
	defer memiavl.SetSplitMin(2)()
	src := filepath.Join(t.TempDir(), "src")
	tr := changedSnapshotTree(t, src, 3000, 97)
	var late []func() // the tasks of the late runner
	defer func() {
		for _, task := range late {
			task() // after every write: does nothing
		}
	}()
	for name, split := range map[string]memiavl.WriteOption{
		"goroutine": memiavl.WithSplit(),
		"dropped":   memiavl.WithSplitRunner(func(func()) {}),
		"late":      memiavl.WithSplitRunner(func(task func()) { late = append(late, task) }),
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			noneLeft := func(what string) {
				t.Helper()
				entries, err := os.ReadDir(parent)
				if err != nil {
					t.Fatal(err)
				}
				if len(entries) != 0 {
					t.Fatalf("%s: left %d entries, the first %s", what, len(entries), entries[0].Name())
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := tr.Copy().WriteSnapshot(ctx, filepath.Join(parent, "cancelled"), split); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled split write: %v", err)
			}
			noneLeft("cancelled split write")

			// the last leaf record: in the right half, which the forked
			// writer copies
			leaves := filepath.Join(src, snapshot.FileLeaves)
			fi, err := os.Stat(leaves)
			if err != nil {
				t.Fatal(err)
			}
			restore := testutil.DamageByte(t, leaves, fi.Size()-snapshot.RecordSize+40)
			err = tr.Copy().WriteSnapshot(context.Background(), filepath.Join(parent, "damaged"), split)
			if !errors.Is(err, memiavl.ErrCorrupt) {
				t.Fatalf("split write from a damaged snapshot: %v", err)
			}
			noneLeft("split write from a damaged snapshot")
			restore()

			dst := filepath.Join(parent, "ok")
			if err := tr.Copy().WriteSnapshot(context.Background(), dst, split); err != nil {
				t.Fatal(err)
			}
			s, err := snapshot.Open(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Verify(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.RootHash(), tr.RootHash()) {
				t.Fatal("split write's root hash differs")
			}
		})
	}
}
