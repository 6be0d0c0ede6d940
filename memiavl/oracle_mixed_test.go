package memiavl_test

// Differential tests against cosmos/iavl over interleavings the other tests
// do not combine: copies taken and mutated between snapshot reloads,
// deferred hashing with proofs, trees partly in memory and partly on a
// snapshot, every gap between adjacent keys as iterator bounds and as
// non-existence proofs, and trees emptied and refilled.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"sort"
	"testing"

	"github.com/cosmos/iavl"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

type orOp struct {
	key, value []byte
	remove     bool
}

// orLine is one line of versions: a memiavl tree and the iavl tree built with
// the same operations, and the operations of each saved version.
type orLine struct {
	t       *testing.T
	name    string
	initial int64
	ours    *memiavl.Tree
	ref     *iavl.MutableTree
	present map[string][]byte
	pending []orOp
	log     [][]orOp // operations of each saved version, in order
}

func newOrLine(t *testing.T, name string, initial int64) *orLine {
	ours, err := memiavl.New(memiavl.Options{InitialVersion: initial})
	if err != nil {
		t.Fatal(err)
	}
	return &orLine{t: t, name: name, initial: initial, ours: ours, ref: newIAVL(t, initial), present: map[string][]byte{}}
}

// branch returns a new line whose memiavl tree is tr, a copy of this line at
// its version ver, and whose iavl tree is rebuilt by replaying the saved
// versions up to ver.
func (l *orLine) branch(name string, tr *memiavl.Tree, ver int64) *orLine {
	t := l.t
	ref := newIAVL(t, l.initial)
	present := map[string][]byte{}
	n := 0 // saved versions replayed
	for _, ops := range l.log {
		if ref.Version() == ver {
			break
		}
		n++
		for _, o := range ops {
			if o.remove {
				if _, _, err := ref.Remove(o.key); err != nil {
					t.Fatal(err)
				}
				delete(present, string(o.key))
			} else {
				if _, err := ref.Set(o.key, o.value); err != nil {
					t.Fatal(err)
				}
				present[string(o.key)] = o.value
			}
		}
		if _, _, err := ref.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	if ref.Version() != ver {
		t.Fatalf("%s: replay reached version %d, want %d", name, ref.Version(), ver)
	}
	return &orLine{t: t, name: name, initial: l.initial, ours: tr, ref: ref, present: present,
		log: append([][]orOp(nil), l.log[:n]...)}
}

func (l *orLine) set(k, v []byte) {
	t := l.t
	t.Helper()
	u1, err := l.ours.Set(k, v)
	if err != nil {
		t.Fatalf("%s: Set(%X): %v", l.name, k, err)
	}
	u2, err := l.ref.Set(k, v)
	if err != nil {
		t.Fatal(err)
	}
	if u1 != u2 {
		t.Fatalf("%s: Set(%X) updated %v, iavl %v", l.name, k, u1, u2)
	}
	l.present[string(k)] = v
	l.pending = append(l.pending, orOp{key: k, value: v})
}

func (l *orLine) remove(k []byte) {
	t := l.t
	t.Helper()
	r1, err := l.ours.Remove(k)
	if err != nil {
		t.Fatalf("%s: Remove(%X): %v", l.name, k, err)
	}
	_, r2, err := l.ref.Remove(k)
	if err != nil {
		t.Fatal(err)
	}
	if r1 != r2 {
		t.Fatalf("%s: Remove(%X) removed %v, iavl %v", l.name, k, r1, r2)
	}
	delete(l.present, string(k))
	l.pending = append(l.pending, orOp{key: k, remove: true})
}

// save saves a version of both trees, ours with deferred hashes if
// deferHash.
func (l *orLine) save(deferHash bool) {
	t := l.t
	t.Helper()
	var v1 int64
	var h1 []byte
	var err error
	if deferHash {
		v1, err = l.ours.SaveVersionDeferHash()
	} else {
		h1, v1, err = l.ours.SaveVersion()
	}
	if err != nil {
		t.Fatalf("%s: save: %v", l.name, err)
	}
	h2, v2, err := l.ref.SaveVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v2 || (!deferHash && !bytes.Equal(h1, h2)) {
		t.Fatalf("%s: saved version %d hash %X, iavl version %d hash %X", l.name, v1, h1, v2, h2)
	}
	l.log = append(l.log, l.pending)
	l.pending = nil
}

func (l *orLine) sortedKeys() [][]byte {
	ks := make([][]byte, 0, len(l.present))
	for k := range l.present {
		ks = append(ks, []byte(k))
	}
	sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i], ks[j]) < 0 })
	return ks
}

// orWrites counts snapshot writes: every other one is split.
var orWrites int

// orReopen writes the saved version of tr as a snapshot and returns the
// tree opened on it.

func orReopen(t *testing.T, tr *memiavl.Tree) *memiavl.Tree {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	orWrites++
	var opts []memiavl.WriteOption
	if orWrites%2 == 0 {
		opts = append(opts, memiavl.WithSplit())
	}
	if err := tr.WriteSnapshot(context.Background(), dir, opts...); err != nil {
		t.Fatal(err)
	}
	s, nt := openSnapshot(t, dir)
	t.Cleanup(func() { s.Close() })
	return nt
}

func orKey(r *rand.Rand) []byte {
	switch r.Intn(6) {
	case 0: // long keys sharing a prefix longer than 8 bytes
		k := bytes.Repeat([]byte{'p'}, 9+r.Intn(3))
		return append(k, []byte{0x00, 0x01, 0xff}[r.Intn(3)])
	case 1:
		return []byte{}
	default:
		k := make([]byte, r.Intn(10))
		for i := range k {
			k[i] = []byte{0x00, 0x01, 'a', 0xff}[r.Intn(4)]
		}
		return k
	}
}

func orValue(r *rand.Rand) []byte {
	v := make([]byte, 1+r.Intn(20))
	r.Read(v)
	return v
}

// probes returns keys present, absent between every pair of adjacent keys,
// and beyond both ends.
func orProbes(keys [][]byte) [][]byte {
	probes := [][]byte{nil, {}, {0}, {0, 0}, {0xff}, bytes.Repeat([]byte{0xff}, 20)}
	for _, k := range keys {
		probes = append(probes, k, append(bytes.Clone(k), 0), append(bytes.Clone(k), 0xff))
		if len(k) > 0 {
			probes = append(probes, k[:len(k)-1])
			d := bytes.Clone(k)
			if d[len(d)-1] > 0 {
				d[len(d)-1]--
				probes = append(probes, d)
			}
		}
	}
	return probes
}

// compareReads checks Get, Has and iteration with bounds at every probe
// against the iavl reader of the same state.
func compareReads(t *testing.T, what string, tr *memiavl.Tree, get func([]byte) ([]byte, error),
	iter func(start, end []byte, asc bool) [][2][]byte, keys [][]byte) {
	t.Helper()
	probes := orProbes(keys)
	for _, k := range probes {
		if k == nil {
			continue
		}
		a, err := tr.Get(k)
		if err != nil {
			t.Fatalf("%s: Get(%X): %v", what, k, err)
		}
		b, err := get(k)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) || (a == nil) != (b == nil) {
			t.Fatalf("%s: Get(%X) = %X, iavl %X", what, k, a, b)
		}
		z, err := tr.GetZeroCopy(k)
		if err != nil || !bytes.Equal(z, b) || (z == nil) != (b == nil) {
			t.Fatalf("%s: GetZeroCopy(%X) = %X, %v; iavl %X", what, k, z, err, b)
		}
		h, err := tr.Has(k)
		if err != nil || h != (b != nil) {
			t.Fatalf("%s: Has(%X) = %v, %v; iavl value %X", what, k, h, err, b)
		}
	}
	step := 1 + len(probes)/12
	for i := 0; i < len(probes); i += step {
		for j := 0; j < len(probes); j += step {
			for _, asc := range []bool{true, false} {
				start, end := probes[i], probes[(j+i/step)%len(probes)]
				it := tr.Iterator(start, end, asc)
				var got [][2][]byte
				for ; it.Valid(); it.Next() {
					got = append(got, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
				}
				if err := it.Error(); err != nil {
					t.Fatalf("%s: iterator: %v", what, err)
				}
				it.Close()
				want := iter(start, end, asc)
				if len(got) != len(want) {
					t.Fatalf("%s: [%X,%X) asc=%v: %d pairs, iavl %d", what, start, end, asc, len(got), len(want))
				}
				for n := range got {
					if !bytes.Equal(got[n][0], want[n][0]) || !bytes.Equal(got[n][1], want[n][1]) {
						t.Fatalf("%s: [%X,%X) asc=%v pair %d: %X=%X, iavl %X=%X", what, start, end, asc, n,
							got[n][0], got[n][1], want[n][0], want[n][1])
					}
				}
			}
		}
	}
}

func iavlPairs(t *testing.T, it interface {
	Valid() bool
	Next()
	Key() []byte
	Value() []byte
	Close() error
}, err error) [][2][]byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out [][2][]byte
	for ; it.Valid(); it.Next() {
		out = append(out, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	it.Close()
	return out
}

// checkWorking compares the working tree of the line with iavl's.
func (l *orLine) checkWorking(what string) {
	t := l.t
	t.Helper()
	if a, b := l.ours.RootHash(), l.ref.WorkingHash(); !bytes.Equal(a, b) {
		t.Fatalf("%s %s: working hash %X, iavl %X", l.name, what, a, b)
	}
	if got := l.ours.Size(); got != int64(len(l.present)) {
		t.Fatalf("%s %s: size %d, want %d", l.name, what, got, len(l.present))
	}
	compareReads(t, l.name+" "+what, l.ours, l.ref.Get, func(s, e []byte, asc bool) [][2][]byte {
		it, err := l.ref.Iterator(s, e, asc)
		return iavlPairs(t, it, err)
	}, l.sortedKeys())
	if err := l.ours.Check(); err != nil {
		t.Fatalf("%s %s: %v", l.name, what, err)
	}
}

// checkSaved compares tr, a tree of the line's saved version ver, with
// iavl's version ver: reads, and proofs of every probe byte for byte.
func (l *orLine) checkSaved(what string, tr *memiavl.Tree, ver int64, keys [][]byte) {
	t := l.t
	t.Helper()
	imm, err := l.ref.GetImmutable(ver)
	if err != nil {
		t.Fatal(err)
	}
	root := tr.RootHash()
	if !bytes.Equal(root, imm.Hash()) || tr.Version() != ver {
		t.Fatalf("%s %s: version %d root %X, iavl version %d root %X", l.name, what, tr.Version(), root, ver, imm.Hash())
	}
	compareReads(t, l.name+" "+what, tr, imm.Get, func(s, e []byte, asc bool) [][2][]byte {
		it, err := imm.Iterator(s, e, asc)
		return iavlPairs(t, it, err)
	}, keys)
	orCompareProofs(t, l.name+" "+what, tr, imm, root, orProbes(keys))
}

func orCompareProofs(t *testing.T, what string, tr *memiavl.Tree, imm *iavl.ImmutableTree, root []byte, probes [][]byte) {
	t.Helper()
	for _, k := range probes {
		if k == nil {
			continue
		}
		v, err := imm.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		var ours, want *ics23.CommitmentProof
		if v != nil {
			if ours, err = tr.GetMembershipProof(k); err != nil {
				t.Fatalf("%s: membership proof of %X: %v", what, k, err)
			}
			if want, err = imm.GetMembershipProof(k); err != nil {
				t.Fatal(err)
			}
			// (ics23's IavlSpec bounds the length of an inner prefix, so
			// proofs over nodes of versions near 2^63 verify for neither)
			ok := ics23.VerifyMembership(ics23.IavlSpec, root, ours, k, v)
			if okRef := ics23.VerifyMembership(ics23.IavlSpec, root, want, k, v); ok != okRef || (ok != (len(v) > 0 && len(k) > 0) && tr.Version() < 1<<50) {
				t.Fatalf("%s: existence proof of %X verifies %v, iavl's %v", what, k, ok, okRef)
			}
		} else {
			if ours, err = tr.GetNonMembershipProof(k); err != nil {
				t.Fatalf("%s: non-membership proof of %X: %v", what, k, err)
			}
			if want, err = imm.GetNonMembershipProof(k); err != nil {
				t.Fatal(err)
			}
			ne := ours.GetNonexist()
			verifiable := (ne.Left != nil || ne.Right != nil) &&
				(ne.Left == nil || len(ne.Left.Value) > 0 && len(ne.Left.Key) > 0) &&
				(ne.Right == nil || len(ne.Right.Value) > 0 && len(ne.Right.Key) > 0)
			ok := ics23.VerifyNonMembership(ics23.IavlSpec, root, ours, k)
			if okRef := ics23.VerifyNonMembership(ics23.IavlSpec, root, want, k); ok != okRef || (ok != verifiable && tr.Version() < 1<<50) {
				t.Fatalf("%s: non-existence proof of %X verifies %v, iavl's %v, want %v", what, k, ok, okRef, verifiable)
			}
		}
		a, b := marshalProof(t, ours), marshalProof(t, want)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: proof of %X (present %v) differs from iavl's:\n ours %X\n iavl %X", what, k, v != nil, a, b)
		}
	}
}

func (l *orLine) randomOps(r *rand.Rand, n int) {
	for i := 0; i < n; i++ {
		switch p := r.Intn(10); {
		case p < 3 && len(l.present) > 0:
			ks := l.sortedKeys()
			l.remove(ks[r.Intn(len(ks))])
		case p == 3:
			l.remove(orKey(r)) // mostly absent
		default:
			l.set(orKey(r), orValue(r))
		}
	}
}

// TestOracleInterleavings drives a tree through random changes, saves
// with and without deferred hashes, snapshot reloads (of the tree and of
// copies while the tree has unsaved changes), copies that are checked
// later against iavl's version and copies that are mutated as lines of
// their own, emptying and refilling, with reads, bounded iteration and
// proofs at every gap checked against iavl at each step.
func TestOracleInterleavings(t *testing.T) {
	orMul := int64(size(3, 2, 1)) // scales steps, operations per step and seeds
	for _, initial := range []int64{0, 1 << 32, 1 << 40} {
		for seed := int64(1); seed <= edgeSeeds(3)*orMul; seed++ {
			t.Run(fmt.Sprintf("initial=%d/seed=%d", initial, seed), func(t *testing.T) {
				r := rand.New(rand.NewSource(seed*7919 + initial))
				defer memiavl.SetSplitMin(int64(1 + seed%5))()
				defer memiavl.SetBulkCopy(true, uint64(1+seed%7))()
				main := newOrLine(t, "main", initial)
				type held struct {
					line *orLine
					tr   *memiavl.Tree
					ver  int64
					keys [][]byte
				}
				var copies []held
				lines := []*orLine{main}
				for step := 0; step < 40*int(orMul); step++ {
					l := lines[r.Intn(len(lines))]
					l.randomOps(r, r.Intn(25*int(orMul)))
					switch r.Intn(12) {
					case 0: // empty the tree, save, refill
						for _, k := range l.sortedKeys() {
							l.remove(k)
						}
						l.checkWorking("emptied")
						l.save(false)
						l.randomOps(r, 5)
					case 1: // down to a single leaf, then remove it
						ks := l.sortedKeys()
						for len(ks) > 1 {
							l.remove(ks[0])
							ks = ks[1:]
						}
						l.save(false)
						if len(ks) == 1 {
							l.remove(ks[0])
						}
						l.checkWorking("single leaf removed")
					}
					l.checkWorking(fmt.Sprintf("step %d", step))
					deferred := r.Intn(3) == 0
					l.save(deferred)
					if deferred {
						// proofs over nodes whose hashes are deferred
						imm, err := l.ref.GetImmutable(l.ref.Version())
						if err != nil {
							t.Fatal(err)
						}
						probes := orProbes(l.sortedKeys())
						orCompareProofs(t, l.name+" deferred", l.ours, imm, imm.Hash(), probes)
						if !bytes.Equal(l.ours.RootHash(), imm.Hash()) {
							t.Fatalf("%s: deferred root %X, iavl %X", l.name, l.ours.RootHash(), imm.Hash())
						}
						if r.Intn(2) == 0 {
							l.randomOps(r, r.Intn(10))
							l.save(false)
						}
					}
					switch r.Intn(6) {
					case 0: // reload the line's tree from a snapshot
						l.ours = orReopen(t, l.ours)
					case 1: // a copy, read later
						copies = append(copies, held{line: l, tr: l.ours.Copy(), ver: l.ours.Version(), keys: l.sortedKeys()})
					case 2: // a snapshot of a copy while the tree has unsaved changes
						c := l.ours.Copy()
						ver, keys := l.ours.Version(), l.sortedKeys()
						l.randomOps(r, 1+r.Intn(10))
						copies = append(copies, held{line: l, tr: orReopen(t, c), ver: ver, keys: keys})
						l.checkWorking("after a copy's snapshot")
					case 3: // a copy becomes a line of its own
						if len(lines) < 4 {
							c := l.ours.Copy()
							if r.Intn(2) == 0 {
								c = orReopen(t, c)
							}
							nl := l.branch(fmt.Sprintf("%s/%d", l.name, step), c, l.ours.Version())
							lines = append(lines, nl)
							l.randomOps(r, r.Intn(10))
						}
					}
					l.checkSaved(fmt.Sprintf("copy at step %d", step), l.ours.Copy(), l.ours.Version(), l.sortedKeys())
				}
				for i, c := range copies {
					c.line.checkSaved(fmt.Sprintf("held copy %d", i), c.tr, c.ver, c.keys)
				}
			})
		}
	}
}

// TestOracleInitialVersionLimits: trees whose first version is at the
// int32 and uint32 boundaries or above 2^53 hash, prove, export and reload
// like iavl's.
func TestOracleInitialVersionLimits(t *testing.T) {
	for _, initial := range []int64{math.MaxUint32 - 1, math.MaxUint32, math.MaxUint32 + 1, 1<<31 - 1, 1 << 31, 1<<53 + 1} {
		t.Run(fmt.Sprint(initial), func(t *testing.T) {
			r := rand.New(rand.NewSource(initial))
			l := newOrLine(t, "limit", initial)
			for v := 0; v < 3; v++ {
				l.randomOps(r, 20+r.Intn(20))
				l.checkWorking(fmt.Sprint("version ", v))
				l.save(v == 1)
				if v == 1 {
					l.ours = orReopen(t, l.ours)
				}
				l.checkSaved("saved", l.ours.Copy(), l.ours.Version(), l.sortedKeys())
				ours := exportAll(t, l.ours.Export())
				theirs := exportIAVL(t, l.ref, l.ours.Version())
				sameNodes(t, ours, theirs)
			}
		})
	}
}

// TestOracleEmptySnapshots: trees opened on the snapshot of an empty saved
// version, and of a tree never saved (version 0, then given its initial
// version), take changes like iavl's trees.
func TestOracleEmptySnapshots(t *testing.T) {
	for _, initial := range []int64{0, 5} {
		l := newOrLine(t, "empty", initial)
		l.save(false)
		l.ours = orReopen(t, l.ours)
		l.checkSaved("empty snapshot", l.ours, l.ours.Version(), nil)
		r := rand.New(rand.NewSource(1))
		l.randomOps(r, 30)
		l.checkWorking("on empty snapshot")
		l.save(false)
		l.checkSaved("on empty snapshot", l.ours.Copy(), l.ours.Version(), l.sortedKeys())
		l2 := newOrLine(t, "unsaved", initial)
		l2.ours = orReopen(t, l2.ours)
		if err := l2.ours.SetInitialVersion(initial); err != nil {
			t.Fatal(err)
		}
		l2.randomOps(r, 30)
		l2.checkWorking("on version 0 snapshot")
		l2.save(false)
		l2.checkSaved("on version 0 snapshot", l2.ours.Copy(), l2.ours.Version(), l2.sortedKeys())
	}
}

// TestOracleNilKeyReads: iavl compares keys as byte strings, so a read of a
// nil key finds the empty key. Get, GetZeroCopy and Has of nil report the
// empty key absent although the tree holds it (and iterates it), in memory
// and on a snapshot.
func TestOracleNilKeyReads(t *testing.T) {
	tr, err := memiavl.New(memiavl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := newIAVL(t, 0)
	for _, k := range [][]byte{{}, {1}, {2}} {
		if _, err := tr.Set(k, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Set(k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	saveBoth(t, "three keys", tr, ref)
	want, err := ref.Get(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantHas, err := ref.Has(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*memiavl.Tree{"memory": tr, "snapshot": orReopen(t, tr)} {
		got, err := x.Get(nil)
		if err != nil || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s: Get(nil) = %q, %v; iavl %q (the empty key's value)", name, got, err, want)
		}
		got, err = x.GetZeroCopy(nil)
		if err != nil || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s: GetZeroCopy(nil) = %q, %v; iavl %q", name, got, err, want)
		}
		has, err := x.Has(nil)
		if err != nil || has != wantHas {
			t.Errorf("%s: Has(nil) = %v, %v; iavl %v", name, has, err, wantHas)
		}
	}
}
