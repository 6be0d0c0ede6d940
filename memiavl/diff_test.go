package memiavl_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"path/filepath"
	"strconv"
	"testing"

	"cosmossdk.io/log"
	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
)

var fullRun = flag.Bool("memiavl.full", false, "run the randomized tests at their largest size, even with -short (as MEMIAVL_FULL=1)")

// scale returns full unless the run is -short without -memiavl.full or
// MEMIAVL_FULL=1.
func scale(full, short int) int { return size(full, full, short) }

// size returns the size of a test that has three: full with -memiavl.full
// or MEMIAVL_FULL=1 (testutil.Full), short under -short, plain otherwise.
func size(full, plain, short int) int { return testutil.Size(*fullRun, full, plain, short) }

func newIAVL(t testing.TB, initial int64) *iavl.MutableTree {
	var opts []iavl.Option
	if initial > 0 {
		opts = append(opts, iavl.InitialVersionOption(uint64(initial)))
	}
	return iavl.NewMutableTree(iavldb.NewMemDB(), 0, true, log.NewNopLogger(), opts...)
}

// workload drives both trees with the same random operations.
type workload struct {
	t    *testing.T
	r    *rand.Rand
	gen  *testutil.KeyGen
	ours *memiavl.Tree
	ref  *iavl.MutableTree
	keys [][]byte // keys present in both trees (may hold duplicates after re-insert; checked on use)
	gone [][]byte // the last keys removed (up to maxGone), for compareGets
	ops  int
}

const maxGone = 512

func newWorkload(t *testing.T, initial int64) *workload {
	r := testutil.Rand(t)
	ours, err := memiavl.New(memiavl.Options{InitialVersion: initial})
	if err != nil {
		t.Fatal(err)
	}
	return &workload{t: t, r: r, gen: testutil.NewKeyGen(r), ours: ours, ref: newIAVL(t, initial)}
}

func (w *workload) set(k, v []byte) {
	u1, err := w.ours.Set(k, v)
	if err != nil {
		w.t.Fatalf("op %d: Set: %v", w.ops, err)
	}
	u2, err := w.ref.Set(k, v)
	if err != nil {
		w.t.Fatalf("op %d: iavl Set: %v", w.ops, err)
	}
	if u1 != u2 {
		w.t.Fatalf("op %d: Set(%X) updated=%v, iavl says %v", w.ops, k, u1, u2)
	}
	if !u1 {
		w.keys = append(w.keys, k)
	}
}

func (w *workload) remove(k []byte) {
	r1, err := w.ours.Remove(k)
	if err != nil {
		w.t.Fatalf("op %d: Remove: %v", w.ops, err)
	}
	_, r2, err := w.ref.Remove(k)
	if err != nil {
		w.t.Fatalf("op %d: iavl Remove: %v", w.ops, err)
	}
	if r1 != r2 {
		w.t.Fatalf("op %d: Remove(%X) removed=%v, iavl says %v", w.ops, k, r1, r2)
	}
	if r1 {
		if len(w.gone) == maxGone {
			w.gone = w.gone[1:]
		}
		w.gone = append(w.gone, k)
	}
}

func (w *workload) pickKey() ([]byte, int) {
	i := w.r.Intn(len(w.keys))
	return w.keys[i], i
}

// step performs one random operation.
func (w *workload) step() {
	w.ops++
	p := w.r.Intn(100)
	switch {
	case len(w.keys) == 0 || p < 45: // insert (usually a new key)
		w.set(w.gen.Key(), w.gen.Value(64))
	case p < 65: // update a present key
		k, _ := w.pickKey()
		w.set(k, w.gen.Value(64))
	case p < 70: // set the same value again
		k, _ := w.pickKey()
		v, _ := w.ref.Get(k)
		if v == nil {
			v = []byte{}
		}
		w.set(k, bytes.Clone(v))
	case p < 92: // remove a present key
		k, i := w.pickKey()
		w.remove(k)
		w.keys[i] = w.keys[len(w.keys)-1]
		w.keys = w.keys[:len(w.keys)-1]
	default: // remove an absent key
		w.remove(w.gen.Key())
	}
}

func (w *workload) save() { saveBoth(w.t, fmt.Sprintf("after op %d", w.ops), w.ours, w.ref) }

// saveBoth saves a version of ours and of ref, which must get the same
// version number and root hash.
func saveBoth(t testing.TB, what string, ours *memiavl.Tree, ref *iavl.MutableTree) {
	t.Helper()
	h1, v1, err := ours.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	h2, v2, err := ref.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v2 || !bytes.Equal(h1, h2) {
		t.Fatalf("%s: version %d hash %X, iavl version %d hash %X", what, v1, h1, v2, h2)
	}
}

func (w *workload) compareGets(n int) {
	for i := 0; i < n+len(w.gone); i++ {
		var k []byte
		switch {
		case i >= n: // removed keys, present in an older version
			k = w.gone[i-n]
		case len(w.keys) > 0 && i%2 == 0:
			k, _ = w.pickKey()
		default:
			k = w.gen.Key()
		}
		a, err := w.ours.Get(k)
		if err != nil {
			w.t.Fatal(err)
		}
		b, err := w.ref.Get(k)
		if err != nil {
			w.t.Fatal(err)
		}
		if !bytes.Equal(a, b) || (a == nil) != (b == nil) {
			w.t.Fatalf("Get(%X) = %X, iavl %X", k, a, b)
		}
	}
}

func runDifferential(t *testing.T, initial int64) {
	versions := scale(1200, 150)
	opsPerVersion := 180
	w := newWorkload(t, initial)
	// (the full run goes on past its versions until it has done 200,000
	// operations; its 1,200 versions average 213,000)
	for v := 0; v < versions || (!testing.Short() && w.ops < 200000); v++ {
		n := w.r.Intn(2 * opsPerVersion)
		if v%97 == 13 {
			n = 0 // an empty version
		}
		for i := 0; i < n; i++ {
			w.step()
		}
		if v%50 == 0 {
			if h1, h2 := w.ours.RootHash(), w.ref.WorkingHash(); !bytes.Equal(h1, h2) {
				t.Fatalf("working hash %X, iavl %X", h1, h2)
			}
		}
		w.save()
		if v%25 == 0 {
			w.compareGets(50)
			if err := w.ours.Check(); err != nil {
				t.Fatalf("version %d: %v", w.ours.Version(), err)
			}
		}
		// Occasionally drain most of the tree to exercise removals down to
		// tiny trees, then keep growing.
		if v%400 == 199 {
			for len(w.keys) > 3 {
				k, i := w.pickKey()
				w.remove(k)
				w.keys[i] = w.keys[len(w.keys)-1]
				w.keys = w.keys[:len(w.keys)-1]
			}
			w.save()
		}
	}
	if got, want := w.ours.Size(), w.ref.Size(); got != want {
		t.Fatalf("size %d, iavl %d", got, want)
	}
	if err := w.ours.Check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations over %d versions, final size %d", w.ops, w.ours.Version(), w.ours.Size())
}

func TestDifferentialAgainstIAVL(t *testing.T) { runDifferential(t, 0) }

func TestDifferentialInitialVersion(t *testing.T) { runDifferential(t, 100) }

func collect(t *testing.T, it interface {
	Valid() bool
	Next()
	Key() []byte
	Value() []byte
	Close() error
}) [][2][]byte {
	t.Helper()
	var out [][2][]byte
	for ; it.Valid(); it.Next() {
		out = append(out, [2][]byte{it.Key(), it.Value()})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIteratorRangesAgainstIAVL(t *testing.T) {
	w := newWorkload(t, 0)
	for v := 0; v < 20; v++ {
		for i := 0; i < 150; i++ {
			w.step()
		}
		w.save()
	}
	// also leave unsaved changes: iterators see the working tree
	for i := 0; i < 100; i++ {
		w.step()
	}
	for i := 0; i < scale(2000, 400); i++ {
		var start, end []byte
		switch w.r.Intn(5) {
		case 0:
		case 1:
			start = w.gen.Key()
		case 2:
			end = w.gen.Key()
		default:
			start, end = w.gen.Key(), w.gen.Key()
			if len(w.keys) > 0 && w.r.Intn(2) == 0 {
				start, _ = w.pickKey()
			}
			if bytes.Compare(start, end) > 0 && w.r.Intn(4) != 0 {
				start, end = end, start
			}
		}
		asc := w.r.Intn(2) == 0
		it1 := w.ours.Iterator(start, end, asc)
		it2, err := w.ref.Iterator(start, end, asc)
		if err != nil {
			t.Fatal(err)
		}
		a, b := collect(t, it1), collect(t, it2)
		if len(a) != len(b) {
			t.Fatalf("range [%X,%X) asc=%v: %d items, iavl %d", start, end, asc, len(a), len(b))
		}
		for j := range a {
			if !bytes.Equal(a[j][0], b[j][0]) || !bytes.Equal(a[j][1], b[j][1]) {
				t.Fatalf("range [%X,%X) asc=%v item %d: %X=%X, iavl %X=%X", start, end, asc, j, a[j][0], a[j][1], b[j][0], b[j][1])
			}
		}
	}
}

func TestCopyKeepsVersion(t *testing.T) {
	w := newWorkload(t, 0)
	for v := 0; v < 30; v++ {
		for i := 0; i < 100; i++ {
			w.step()
		}
		w.save()
	}
	snap := w.ours.Copy()
	wantHash := snap.RootHash()
	wantVersion := snap.Version()
	want := collect(t, snap.Iterator(nil, nil, true))
	wantRef := collect(t, mustIter(t, w.ref, nil, nil, true))
	if len(want) != len(wantRef) {
		t.Fatalf("copy has %d items, iavl %d", len(want), len(wantRef))
	}
	// 1,000 more versions of changes to the original, with unsaved changes in
	// between reads of the copy.
	for v := 0; v < scale(1000, 200); v++ {
		for i := 0; i < 20; i++ {
			w.step()
		}
		if v%100 == 0 {
			if !bytes.Equal(snap.RootHash(), wantHash) {
				t.Fatalf("copy's hash changed at original version %d", w.ours.Version())
			}
		}
		w.save()
	}
	if got := snap.Version(); got != wantVersion {
		t.Fatalf("copy version %d, want %d", got, wantVersion)
	}
	if got := snap.RootHash(); !bytes.Equal(got, wantHash) {
		t.Fatalf("copy hash %X, want %X", got, wantHash)
	}
	got := collect(t, snap.Iterator(nil, nil, true))
	if len(got) != len(want) {
		t.Fatalf("copy iterates %d items, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i][0], want[i][0]) || !bytes.Equal(got[i][1], want[i][1]) {
			t.Fatalf("copy item %d changed", i)
		}
	}
	if err := snap.Check(); err != nil {
		t.Fatal(err)
	}
	if err := w.ours.Check(); err != nil {
		t.Fatal(err)
	}
	// the copy can itself be mutated without touching the original
	origHash := w.ours.RootHash()
	for i := 0; i < 200; i++ {
		if _, err := snap.Set(w.gen.Key(), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := snap.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.ours.RootHash(), origHash) {
		t.Fatal("mutating a copy changed the original")
	}
	if err := snap.Check(); err != nil {
		t.Fatal(err)
	}
}

func mustIter(t *testing.T, tr *iavl.MutableTree, start, end []byte, asc bool) interface {
	Valid() bool
	Next()
	Key() []byte
	Value() []byte
	Close() error
} {
	it, err := tr.Iterator(start, end, asc)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func TestBadInput(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Set(nil, []byte("v")); err != memiavl.ErrNilKey {
		t.Fatalf("Set(nil key) = %v", err)
	}
	if _, err := tr.Set([]byte("k"), nil); err == nil {
		t.Fatal("Set(nil value) succeeded")
	}
	if _, err := tr.Remove(nil); err != memiavl.ErrNilKey {
		t.Fatalf("Remove(nil) = %v", err)
	}
	if !tr.IsEmpty() {
		t.Fatal("bad input changed the tree")
	}
	if _, err := memiavl.New(memiavl.Options{InitialVersion: -1}); err == nil {
		t.Fatal("negative initial version accepted")
	}
	// empty key and empty value are valid, as in iavl
	ref := newIAVL(t, 0)
	for _, kv := range [][2][]byte{{{}, {}}, {{0}, {}}, {{}, {1}}} {
		if _, err := tr.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	h1, _, _ := tr.SaveVersion()
	h2, _, _ := ref.SaveVersion()
	if !bytes.Equal(h1, h2) {
		t.Fatalf("hash %X, iavl %X", h1, h2)
	}
	if v, _ := tr.Get([]byte{}); !bytes.Equal(v, []byte{1}) {
		t.Fatalf("Get(empty key) = %X", v)
	}
	if err := tr.SetInitialVersion(5); err == nil {
		t.Fatal("SetInitialVersion after save succeeded")
	}
}

func TestEmptyTree(t *testing.T) {
	tr, _ := memiavl.New(memiavl.Options{InitialVersion: 7})
	ref := newIAVL(t, 7)
	for i := 0; i < 3; i++ {
		h1, v1, err := tr.SaveVersion()
		if err != nil {
			t.Fatal(err)
		}
		h2, v2, _ := ref.SaveVersion()
		if v1 != v2 || !bytes.Equal(h1, h2) {
			t.Fatalf("empty save: %d %X, iavl %d %X", v1, h1, v2, h2)
		}
	}
	if it := tr.Iterator(nil, nil, true); it.Valid() {
		t.Fatal("empty tree iterator is valid")
	}
	if v, err := tr.Get([]byte("a")); v != nil || err != nil {
		t.Fatal("Get on empty tree")
	}
}

// TestDeferredHashing saves most versions with deferred hashes (as log
// replay does) and checks the hashes of the versions that are hashed.
func TestDeferredHashing(t *testing.T) {
	w := newWorkload(t, 0)
	for v := 0; v < scale(400, 100); v++ {
		n := w.r.Intn(200)
		for i := 0; i < n; i++ {
			w.step()
		}
		if w.r.Intn(5) == 0 {
			w.save()
			continue
		}
		if _, err := w.ours.SaveVersionDeferHash(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.ref.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	w.save()
	if err := w.ours.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestLargeBatches saves versions of thousands of changes, whose hashing
// splits the tree across goroutines, and compares every root hash with
// iavl's.
func TestLargeBatches(t *testing.T) {
	w := newWorkload(t, 0)
	for v := 0; v < scale(12, 4); v++ {
		n := 500 + w.r.Intn(3000)
		for i := 0; i < n; i++ {
			w.step()
		}
		w.save()
	}
	if err := w.ours.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestExclusiveMutation: with SetExclusive, later versions update the
// tree's own nodes in place; hashes stay iavl's, a Copy ends it (the copy
// keeps its contents while the tree goes on), and an update of a present
// key allocates nothing.
func TestExclusiveMutation(t *testing.T) {
	w := newWorkload(t, 0)
	for v := 0; v < 3; v++ {
		for i := 0; i < 300; i++ {
			w.step()
		}
		w.save()
	}
	w.ours.SetExclusive(w.ours.Version())
	var frozen *memiavl.Tree
	var frozenHash []byte
	for v := 0; v < scale(60, 20); v++ {
		for i := 0; i < 200; i++ {
			w.step()
		}
		if v%3 == 0 {
			if _, err := w.ours.SaveVersionDeferHash(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := w.ref.SaveVersion(); err != nil {
				t.Fatal(err)
			}
		} else {
			w.save()
		}
		switch v {
		case 10:
			frozen = w.ours.Copy()
			frozenHash = frozen.RootHash()
		case 20:
			w.ours.SetExclusive(w.ours.Version())
		}
	}
	w.save()
	w.compareGets(200)
	if err := w.ours.Check(); err != nil {
		t.Fatal(err)
	}
	if frozen != nil {
		if !bytes.Equal(frozen.RootHash(), frozenHash) {
			t.Fatal("a copy changed after the tree it was taken from went on")
		}
		if err := frozen.Check(); err != nil {
			t.Fatal(err)
		}
	}

	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte("key-" + strconv.Itoa(10000+i))
		if _, err := tr.Set(keys[i], []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr.SetExclusive(0)
	value := []byte("updated")
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := tr.Set(keys[i%len(keys)], value); err != nil {
			t.Fatal(err)
		}
		i += 37
		if _, err := tr.SaveVersionDeferHash(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("an update of an exclusive tree allocates %v times", allocs)
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestInitialVersionAfterChanges: an initial version set after changes to
// the unsaved tree applies to them, as in iavl, whose new nodes take their
// version when saved.
func TestInitialVersionAfterChanges(t *testing.T) {
	for _, initial := range []int64{0, 1, 2, 50} {
		tr, _ := memiavl.New(memiavl.Options{InitialVersion: 7})
		ref := newIAVL(t, 7)
		r := rand.New(rand.NewSource(initial))
		set := func() {
			for i := 0; i < 300; i++ {
				k, v := []byte(strconv.Itoa(r.Intn(500))), []byte(strconv.Itoa(i))
				if _, err := tr.Set(k, v); err != nil {
					t.Fatal(err)
				}
				if _, err := ref.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		set()
		tr.RootHash() // hashes at the old working version, to be cleared
		if err := tr.SetInitialVersion(initial); err != nil {
			t.Fatal(err)
		}
		ref.SetInitialVersion(uint64(initial))
		if w, rw := tr.WorkingVersion(), ref.WorkingVersion(); w != rw {
			t.Fatalf("initial %d: working version %d, iavl %d", initial, w, rw)
		}
		set() // changes after it mutate the restamped nodes in place
		if h, rh := tr.RootHash(), ref.WorkingHash(); !bytes.Equal(h, rh) {
			t.Fatalf("initial %d: working hash %X, iavl %X", initial, h, rh)
		}
		saveBoth(t, fmt.Sprintf("initial %d", initial), tr, ref)
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIteratorPastEnd: an iterator that has run out, or was closed, has no
// current pair (Key and Value return nil, as iavl's do), over in-memory
// nodes and over a snapshot's leaves.
func TestIteratorPastEnd(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if _, err := tr.Set([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "snap")
	if err := tr.WriteSnapshot(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	_, onSnap := openSnapshot(t, dir)
	if _, err := onSnap.Set([]byte("k150"), []byte("changed")); err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*memiavl.Tree{"memory": tr, "snapshot": onSnap} {
		for _, asc := range []bool{true, false} {
			for _, r := range [][2][]byte{{nil, nil}, {[]byte("k100"), []byte("k200")}, {[]byte("k2"), []byte("k1")}} {
				it := x.Iterator(r[0], r[1], asc)
				n := 0
				for ; it.Valid(); it.Next() {
					n++
				}
				if it.Key() != nil || it.Value() != nil || it.Error() != nil {
					t.Fatalf("%s asc=%v %q after %d pairs: key %q value %q err %v", name, asc, r, n, it.Key(), it.Value(), it.Error())
				}
				it.Close()
			}
			it := x.Iterator(nil, nil, asc)
			it.Next()
			if !it.Valid() || it.Key() == nil {
				t.Fatalf("%s: no second pair", name)
			}
			it.Close()
			if it.Valid() || it.Key() != nil || it.Value() != nil {
				t.Fatalf("%s asc=%v: closed iterator valid=%v key %q value %q", name, asc, it.Valid(), it.Key(), it.Value())
			}
		}
	}
}
