package memiavl_test

// Differential campaigns against cosmos/iavl v1.2 over many seeds and
// workload shapes: key and value size distributions (1-byte keys, keys of
// 0x00/0xff bytes, keys sharing prefixes around the 8-byte key prefix the
// tree compares first, empty values, values re-set to themselves, large
// values), delete-heavy versions that empty the tree and refill it, versions
// without changes, initial versions > 1, and the tree moved midway between
// memory, snapshots (plain and split writes), copies, imports of its own
// export, mapped writes and rebases. After each version every read API is
// compared with iavl's: root hash, size, height, Get/Has, GetWithIndex,
// GetByIndex, iterators over random bounds (start == end, start > end),
// ICS23 proofs byte for byte (and verified), export streams and Check.
//
// MEMIAVL_CAMPAIGN_SEEDS=n runs n seeds per shape (default: a few under -short);
// MEMIAVL_CAMPAIGN_SEED=s runs only seed s.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/cosmos/iavl"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

type campShape struct {
	name     string
	keyKind  int     // see campKey
	bigValue float64 // probability of a large value
	bigMax   int
	ops      int // operations of a normal version
	versions int
	long     bool // only without -short
}

var campShapes = []campShape{
	{name: "tiny", keyKind: 0, ops: 12, versions: 40},
	{name: "edge", keyKind: 1, ops: 20, versions: 40},
	{name: "prefix", keyKind: 2, ops: 30, versions: 30},
	{name: "random", keyKind: 3, ops: 60, versions: 25},
	{name: "mixed", keyKind: 4, ops: 40, versions: 35},
	{name: "large", keyKind: 3, ops: 3000, versions: 6, long: true},
	{name: "seq", keyKind: 5, ops: 400, versions: 10},
	{name: "tie", keyKind: 6, ops: 1500, versions: 8, long: true},
	{name: "huge", keyKind: 3, ops: 3, versions: 6, bigValue: 0.8, bigMax: 1 << 20, long: true},
	{name: "big", keyKind: 4, ops: 6, versions: 12, bigValue: 0.3, bigMax: 1 << 16},
}

// campSeq numbers the keys of the sequential shape.
var campSeq uint64

func campKey(r *rand.Rand, kind int) []byte {
	switch kind {
	case 5: // ascending (and sometimes descending) counters, as a chain appends
		campSeq++
		k := make([]byte, 9)
		k[0] = 's'
		n := campSeq
		if r.Intn(8) == 0 {
			n = ^n // from the other end
		}
		for i := 8; i > 0; i-- {
			k[i] = byte(n)
			n >>= 8
		}
		return k
	case 6: // one 8-byte prefix, random tails: every comparison ties on it
		k := []byte("qqqqqqqq")
		for n := 1 + r.Intn(3); n > 0; n-- {
			k = append(k, byte(r.Intn(256)))
		}
		return k
	}
	if kind == 4 {
		kind = r.Intn(4)
	}
	switch kind {
	case 0: // 1-byte keys, sometimes empty
		if r.Intn(40) == 0 {
			return []byte{}
		}
		return []byte{[]byte{0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff}[r.Intn(6)] + byte(r.Intn(2))}
	case 1: // 0x00 / 0xff bytes, length 0..11 (around the 8-byte prefix)
		k := make([]byte, r.Intn(12))
		for i := range k {
			k[i] = []byte{0x00, 0xff}[r.Intn(2)]
		}
		return k
	case 2: // shared prefixes of 7, 8, 9 and 33 bytes, then a short tail
		p := []int{7, 8, 9, 33}[r.Intn(4)]
		k := bytes.Repeat([]byte{'q'}, p)
		if r.Intn(3) == 0 {
			k[p-1] = 0x00
		}
		for n := r.Intn(4); n > 0; n-- {
			k = append(k, []byte{0x00, 0x01, 'q', 0xff}[r.Intn(4)])
		}
		return k
	default:
		k := make([]byte, 1+r.Intn(32))
		r.Read(k)
		return k
	}
}

// campPair drives a memiavl tree and an iavl tree with the same changes.
type campPair struct {
	t       *testing.T
	r       *rand.Rand
	shape   campShape
	initial int64
	ours    *memiavl.Tree
	ref     *iavl.MutableTree
	model   map[string][]byte
	where   string // what moved ours last (for messages)
	dir     string
	n       int // snapshot dirs made

	excl     bool // ours is in exclusive mode (SetExclusive)
	deferred bool // ours saved with deferred hashes since the last full check
	// a pending mapped write of an earlier version, for a later Rebase
	pendMap  *memiavl.NodeMap
	pendDir  string
	pendFrom *snapshot.Snapshot
	cur      *snapshot.Snapshot // the snapshot ours reads, closed when ours moves off it
	old      []*memiavl.Tree    // copies of earlier versions, compared with iavl's
}

// leave closes the snapshot ours read before it moved to next: a node
// still pointing into it then faults.
func (p *campPair) leave(next *snapshot.Snapshot) {
	if p.cur != nil && p.cur != next {
		kept := p.old[:0]
		for _, c := range p.old {
			if c.Snapshot() != p.cur {
				kept = append(kept, c)
			}
		}
		p.old = kept
		p.cur.Close()
	}
	p.cur = next
}

// writeOpts returns random write options, with small split thresholds
// so that split writes happen on small trees.
func (p *campPair) writeOpts() []memiavl.WriteOption {
	var opts []memiavl.WriteOption
	if p.r.Intn(2) == 0 {
		opts = append(opts, memiavl.WithSplit())
		p.t.Cleanup(memiavl.SetSplitMin(int64(2 + p.r.Intn(30))))
	}
	if p.r.Intn(2) == 0 {
		p.t.Cleanup(memiavl.SetBulkCopy(p.r.Intn(4) != 0, uint64(1+p.r.Intn(16))))
	}
	return opts
}

func (p *campPair) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("[shape %s, initial %d, version %d, %s] %s", p.shape.name, p.initial, p.ref.Version(), p.where,
		fmt.Sprintf(format, args...))
}

func (p *campPair) value(k []byte) []byte {
	r := p.r
	if old, ok := p.model[string(k)]; ok && r.Intn(6) == 0 {
		return bytes.Clone(old) // re-set to the same value
	}
	if p.shape.bigValue > 0 && r.Float64() < p.shape.bigValue {
		v := make([]byte, 1+r.Intn(p.shape.bigMax))
		r.Read(v)
		return v
	}
	if r.Intn(4) == 0 {
		return []byte{}
	}
	v := make([]byte, 1+r.Intn(24))
	r.Read(v)
	return v
}

func (p *campPair) set(k, v []byte) {
	p.t.Helper()
	u1, err := p.ours.Set(k, v)
	if err != nil {
		p.fatalf("Set(%X): %v", k, err)
	}
	u2, err := p.ref.Set(k, v)
	if err != nil {
		p.t.Fatal(err)
	}
	if u1 != u2 {
		p.fatalf("Set(%X) updated %v, iavl %v", k, u1, u2)
	}
	p.model[string(k)] = v
}

func (p *campPair) remove(k []byte) {
	p.t.Helper()
	r1, err := p.ours.Remove(k)
	if err != nil {
		p.fatalf("Remove(%X): %v", k, err)
	}
	_, r2, err := p.ref.Remove(k)
	if err != nil {
		p.t.Fatal(err)
	}
	if r1 != r2 {
		p.fatalf("Remove(%X) removed %v, iavl %v", k, r1, r2)
	}
	delete(p.model, string(k))
}

func (p *campPair) presentKey() []byte {
	if len(p.model) == 0 {
		return nil
	}
	// map order is random but not seeded: pick through the sorted keys
	ks := p.sorted()
	return ks[p.r.Intn(len(ks))]
}

func (p *campPair) sorted() [][]byte {
	ks := make([][]byte, 0, len(p.model))
	for k := range p.model {
		ks = append(ks, []byte(k))
	}
	sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i], ks[j]) < 0 })
	return ks
}

// version makes one version's changes.
func (p *campPair) version() {
	r := p.r
	switch m := r.Intn(10); {
	case m == 0: // drain: remove every key, maybe refill a few
		for _, k := range p.sorted() {
			p.remove(k)
			if r.Intn(8) == 0 {
				p.midCheck()
			}
		}
		for n := r.Intn(3); n > 0; n-- {
			k := campKey(r, p.shape.keyKind)
			p.set(k, p.value(k))
		}
	case m <= 2: // few changes, maybe none
		for n := r.Intn(3); n > 0; n-- {
			if k := p.presentKey(); k != nil && r.Intn(2) == 0 {
				p.set(k, p.value(k))
			} else {
				k := campKey(r, p.shape.keyKind)
				p.set(k, p.value(k))
			}
		}
	case m == 3: // delete-heavy
		for n := r.Intn(2 * p.shape.ops); n > 0; n-- {
			if k := p.presentKey(); k != nil && r.Intn(5) != 0 {
				p.remove(k)
			} else {
				p.remove(campKey(r, p.shape.keyKind))
			}
		}
	default:
		for n := r.Intn(p.shape.ops + 1); n > 0; n-- {
			switch x := r.Intn(10); {
			case x < 5:
				k := campKey(r, p.shape.keyKind)
				p.set(k, p.value(k))
			case x < 7:
				if k := p.presentKey(); k != nil {
					p.set(k, p.value(k))
				}
			case x < 9:
				if k := p.presentKey(); k != nil {
					p.remove(k)
				}
			default:
				p.remove(campKey(r, p.shape.keyKind))
			}
			if r.Intn(30) == 0 {
				p.midCheck()
			}
		}
	}
}

// midCheck compares the working trees before a save.
func (p *campPair) midCheck() {
	p.t.Helper()
	if got, want := p.ours.RootHash(), p.ref.WorkingHash(); !bytes.Equal(got, want) {
		p.fatalf("working hash %X, iavl %X", got, want)
	}
	if p.ours.Size() != p.ref.Size() {
		p.fatalf("working size %d, iavl %d", p.ours.Size(), p.ref.Size())
	}
	p.compareReads(p.ours, 8)
	// iavl's proofs over unsaved nodes carry version+1, the working
	// version once a version is saved (see proof.go)
	if p.ref.Version() > 0 || p.initial <= 1 {
		p.compareProofs(p.ours, p.ours.RootHash(), 4)
	}
}

func (p *campPair) save() {
	p.t.Helper()
	if p.r.Intn(8) == 0 {
		v, err := p.ours.SaveVersionDeferHash()
		if err != nil {
			p.fatalf("SaveVersionDeferHash: %v", err)
		}
		_, v2, err := p.ref.SaveVersion()
		if err != nil {
			p.t.Fatal(err)
		}
		if v != v2 {
			p.fatalf("deferred save: version %d, iavl %d", v, v2)
		}
		p.deferred = true
		return
	}
	h, v, err := p.ours.SaveVersion()
	if err != nil {
		p.fatalf("SaveVersion: %v", err)
	}
	h2, v2, err := p.ref.SaveVersion()
	if err != nil {
		p.t.Fatal(err)
	}
	if v != v2 || !bytes.Equal(h, h2) {
		p.fatalf("saved version %d hash %X, iavl version %d hash %X (deferred before: %v)", v, h, v2, h2, p.deferred)
	}
	p.deferred = false
}

func (p *campPair) newDir() string {
	p.n++
	return filepath.Join(p.dir, strconv.Itoa(p.n))
}

func (p *campPair) open(dir string) (*snapshot.Snapshot, *memiavl.Tree) {
	p.t.Helper()
	s, err := snapshot.Open(dir)
	if err != nil {
		p.fatalf("open %s: %v", dir, err)
	}
	p.t.Cleanup(func() { s.Close() })
	if err := s.Verify(); err != nil {
		p.fatalf("verify %s: %v", dir, err)
	}
	tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{InitialVersion: p.initial})
	if err != nil {
		p.t.Fatal(err)
	}
	return s, tr
}

// move gives ours another form after a full check: reloaded from a
// snapshot, a copy, an import of its own export, or rebased.
func (p *campPair) move() {
	p.t.Helper()
	ctx := context.Background()
	r := p.r
	switch m := r.Intn(12); {
	case m < 2:
		dir := p.newDir()
		if err := p.ours.WriteSnapshot(ctx, dir, p.writeOpts()...); err != nil {
			p.fatalf("WriteSnapshot: %v", err)
		}
		var s *snapshot.Snapshot
		s, p.ours = p.open(dir)
		p.leave(s)
		p.where = "reloaded from snapshot"
		p.pendMap = nil
	case m < 4:
		p.ours = p.ours.Copy()
		p.where = "copy"
	case m == 4:
		nodes := exportAll(p.t, p.ours.Export())
		dir := p.newDir()
		im, err := memiavl.NewImporter(dir, p.ours.Version())
		if err != nil {
			p.t.Fatal(err)
		}
		for i, n := range nodes {
			if err := im.Add(n); err != nil {
				p.fatalf("import node %d: %v", i, err)
			}
		}
		if err := im.Commit(); err != nil {
			p.fatalf("import commit: %v", err)
		}
		want := p.ours.RootHash()
		var s *snapshot.Snapshot
		s, p.ours = p.open(dir)
		p.leave(s)
		if !bytes.Equal(p.ours.RootHash(), want) || !bytes.Equal(im.RootHash(), want) {
			p.fatalf("imported root %X / %X, want %X", p.ours.RootHash(), im.RootHash(), want)
		}
		p.where = "imported"
		p.pendMap = nil
	case m < 7 && p.pendMap == nil:
		written := p.ours.Copy()
		if r.Intn(3) != 0 {
			p.ours.StartNextTouches()
		}
		dir := p.newDir()
		m, err := written.WriteSnapshotMapped(ctx, dir, p.writeOpts()...)
		if err != nil {
			p.fatalf("WriteSnapshotMapped: %v", err)
		}
		p.pendMap, p.pendDir, p.pendFrom = m, dir, p.ours.Snapshot()
	case p.pendMap != nil && p.ours.Snapshot() == p.pendFrom:
		s, base := p.open(p.pendDir)
		rb, err := memiavl.NewRebaser(base, p.pendMap)
		if err != nil {
			p.fatalf("NewRebaser: %v", err)
		}
		nt, err := rb.Rebase(ctx, p.ours.Copy())
		if err != nil {
			p.fatalf("Rebase onto version %d: %v", p.pendMap.Version(), err)
		}
		p.ours = nt
		p.leave(s)
		p.where = fmt.Sprintf("rebased onto version %d", p.pendMap.Version())
		p.pendMap = nil
	}
}

// probes returns keys to read: present ones, their neighbours, random ones.
func (p *campPair) probes(n int) [][]byte {
	r := p.r
	var out [][]byte
	for i := 0; i < n; i++ {
		switch x := r.Intn(6); {
		case x < 2:
			if k := p.presentKey(); k != nil {
				out = append(out, k)
				continue
			}
			fallthrough
		case x == 2:
			out = append(out, campKey(r, p.shape.keyKind))
		case x == 3:
			if k := p.presentKey(); k != nil {
				out = append(out, append(bytes.Clone(k), 0x00))
			}
		case x == 4:
			if k := p.presentKey(); len(k) > 0 {
				out = append(out, k[:len(k)-1])
			}
		default:
			out = append(out, []byte{}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}[:r.Intn(2)*9])
		}
	}
	return out
}

// compareReads compares point reads, index reads and iterators of tr with
// iavl's working tree.
func (p *campPair) compareReads(tr *memiavl.Tree, n int) {
	p.t.Helper()
	r := p.r
	probes := append(p.probes(n), nil)
	for _, k := range probes {
		got, err := tr.Get(k)
		if err != nil {
			p.fatalf("Get(%X): %v", k, err)
		}
		want, err := p.ref.Get(k)
		if err != nil {
			p.t.Fatal(err)
		}
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			p.fatalf("Get(%X) = %X (nil %v), iavl %X (nil %v)", k, got, got == nil, want, want == nil)
		}
		has, err := tr.Has(k)
		if err != nil || has != (want != nil) {
			p.fatalf("Has(%X) = %v, %v; iavl value %X", k, has, err, want)
		}
		zc, err := tr.GetZeroCopy(k)
		if err != nil || !bytes.Equal(zc, want) || (zc == nil) != (want == nil) {
			p.fatalf("GetZeroCopy(%X) = %X, %v; iavl %X", k, zc, err, want)
		}
		gi, gv, err := tr.GetWithIndex(k)
		if err != nil {
			p.fatalf("GetWithIndex(%X): %v", k, err)
		}
		wi, wv, err := p.ref.GetWithIndex(k)
		if err != nil {
			p.t.Fatal(err)
		}
		if gi != wi || !bytes.Equal(gv, wv) || (gv == nil) != (wv == nil) {
			p.fatalf("GetWithIndex(%X) = %d %X, iavl %d %X", k, gi, gv, wi, wv)
		}
	}
	size := p.ref.Size()
	for _, i := range []int64{-1, 0, size - 1, size, size + 1, r.Int63n(size + 1)} {
		gk, gv, err := tr.GetByIndex(i)
		if err != nil {
			p.fatalf("GetByIndex(%d): %v", i, err)
		}
		wk, wv, err := p.ref.GetByIndex(i)
		if err != nil {
			p.t.Fatal(err)
		}
		if !bytes.Equal(gk, wk) || !bytes.Equal(gv, wv) || (gk == nil) != (wk == nil) {
			p.fatalf("GetByIndex(%d) = %X %X, iavl %X %X", i, gk, gv, wk, wv)
		}
	}
	for i := 0; i < 3; i++ {
		var start, end []byte
		if r.Intn(4) != 0 {
			start = probes[r.Intn(len(probes))]
		}
		switch r.Intn(4) {
		case 0:
		case 1:
			end = start // start == end (nil, nil is the whole tree)
		default:
			end = probes[r.Intn(len(probes))]
		}
		for _, asc := range []bool{true, false} {
			p.compareIter(tr, start, end, asc)
		}
	}
}

func (p *campPair) compareIter(tr *memiavl.Tree, start, end []byte, asc bool) {
	p.t.Helper()
	rit, err := p.ref.Iterator(start, end, asc)
	if err != nil {
		p.t.Fatal(err)
	}
	defer rit.Close()
	it := tr.Iterator(start, end, asc)
	defer it.Close()
	n := 0
	for ; rit.Valid(); rit.Next() {
		if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
			p.fatalf("Iterator(%X, %X, %v) pair %d: ours valid %v %X, iavl %X", start, end, asc, n, it.Valid(), it.Key(), rit.Key())
		}
		it.Next()
		n++
	}
	if it.Valid() || it.Error() != nil {
		p.fatalf("Iterator(%X, %X, %v): extra pair %X or error %v after %d", start, end, asc, it.Key(), it.Error(), n)
	}
}

// compareProofs compares proofs of tr (whose hash is root) with iavl's
// working tree's, byte for byte, and verifies them.
func (p *campPair) compareProofs(tr *memiavl.Tree, root []byte, n int) {
	p.t.Helper()
	for _, k := range p.probes(n) {
		want, err := p.ref.Get(k)
		if err != nil {
			p.t.Fatal(err)
		}
		var ours, theirs *ics23.CommitmentProof
		if want != nil {
			if ours, err = tr.GetMembershipProof(k); err != nil {
				p.fatalf("GetMembershipProof(%X): %v", k, err)
			}
			if theirs, err = p.ref.GetMembershipProof(k); err != nil {
				p.t.Fatal(err)
			}
			if len(k) > 0 && len(want) > 0 && !ics23.VerifyMembership(ics23.IavlSpec, root, ours, k, want) {
				p.fatalf("existence proof of %X does not verify", k)
			}
			if _, err := tr.GetNonMembershipProof(k); !errors.Is(err, memiavl.ErrKeyFound) {
				p.fatalf("non-membership proof of present %X: %v", k, err)
			}
		} else {
			if ours, err = tr.GetNonMembershipProof(k); err != nil {
				p.fatalf("GetNonMembershipProof(%X): %v", k, err)
			}
			if theirs, err = p.ref.GetNonMembershipProof(k); err != nil {
				p.t.Fatal(err)
			}
			ne := ours.GetNonexist()
			// ics23 cannot verify a leaf with an empty key or value,
			// nor an empty tree's proof; iavl's fail the same way
			verifiable := len(k) > 0 && (ne.Left != nil || ne.Right != nil) &&
				(ne.Left == nil || len(ne.Left.Value) > 0 && len(ne.Left.Key) > 0) &&
				(ne.Right == nil || len(ne.Right.Value) > 0)
			if verifiable && !ics23.VerifyNonMembership(ics23.IavlSpec, root, ours, k) {
				p.fatalf("non-existence proof of %X does not verify", k)
			}
			if _, err := tr.GetMembershipProof(k); !errors.Is(err, memiavl.ErrKeyNotFound) {
				p.fatalf("membership proof of absent %X: %v", k, err)
			}
		}
		a, b := marshalProof(p.t, ours), marshalProof(p.t, theirs)
		if !bytes.Equal(a, b) {
			p.fatalf("proof of %X (present %v) differs:\n ours %X\n iavl %X", k, want != nil, a, b)
		}
	}
}

// check compares the saved version with iavl's.
func (p *campPair) check(full bool) {
	p.t.Helper()
	if p.ours.Version() != p.ref.Version() {
		p.fatalf("version %d, iavl %d", p.ours.Version(), p.ref.Version())
	}
	if p.deferred {
		// the tree is not to be shared until hashed: reads only
		p.compareReads(p.ours, 6)
		return
	}
	root := p.ours.RootHash()
	if want := p.ref.Hash(); !bytes.Equal(root, want) {
		p.fatalf("root hash %X, iavl %X", root, want)
	}
	if p.ours.Size() != p.ref.Size() || int(p.ours.Height()) != int(p.ref.Height()) {
		p.fatalf("size %d height %d, iavl %d %d", p.ours.Size(), p.ours.Height(), p.ref.Size(), p.ref.Height())
	}
	p.compareReads(p.ours, 12)
	p.compareOld()
	if p.r.Intn(3) == 0 {
		if len(p.old) == 4 {
			p.old = p.old[1:]
		}
		p.old = append(p.old, p.ours.Copy())
		p.excl = false // a Copy ends it
	}
	if p.excl {
		// a Copy would end the exclusive mode: prove on the tree itself
		p.compareProofs(p.ours, root, 8)
		return
	}
	p.compareProofs(p.ours.Copy(), root, 8)
	if full {
		if err := p.ours.Check(); err != nil {
			p.fatalf("Check: %v", err)
		}
		got := exportAll(p.t, p.ours.Export())
		want := exportIAVL(p.t, p.ref, p.ref.Version())
		if len(got) != len(want) {
			p.fatalf("export: %d nodes, iavl %d", len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
				g.Version != w.Version || g.Height != w.Height {
				p.fatalf("export node %d: %+v, iavl %+v", i, g, w)
			}
		}
	}
}

// compareOld compares the copies of earlier versions with iavl's
// immutable trees of those versions.
func (p *campPair) compareOld() {
	p.t.Helper()
	for _, c := range p.old {
		imm, err := p.ref.GetImmutable(c.Version())
		if err != nil {
			p.t.Fatal(err)
		}
		if got, want := c.RootHash(), imm.Hash(); !bytes.Equal(got, want) {
			p.fatalf("copy of version %d: root %X, iavl %X", c.Version(), got, want)
		}
		for _, asc := range []bool{true, false} {
			it := c.Iterator(nil, nil, asc)
			rit, err := imm.Iterator(nil, nil, asc)
			if err != nil {
				p.t.Fatal(err)
			}
			n := 0
			for ; rit.Valid(); rit.Next() {
				if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
					p.fatalf("copy of version %d: pair %d differs (iavl %X)", c.Version(), n, rit.Key())
				}
				it.Next()
				n++
			}
			if it.Valid() || it.Error() != nil {
				p.fatalf("copy of version %d: extra pair or error %v", c.Version(), it.Error())
			}
			rit.Close()
		}
		for _, k := range p.probes(4) {
			got, err := c.Get(k)
			if err != nil {
				p.fatalf("copy Get: %v", err)
			}
			want, err := imm.Get(k)
			if err != nil {
				p.t.Fatal(err)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				p.fatalf("copy of version %d: Get(%X) = %X, iavl %X", c.Version(), k, got, want)
			}
			var a, b *ics23.CommitmentProof
			if want != nil {
				a, err = c.GetMembershipProof(k)
				if err == nil {
					b, err = imm.GetMembershipProof(k)
				}
			} else {
				a, err = c.GetNonMembershipProof(k)
				if err == nil {
					b, err = imm.GetNonMembershipProof(k)
				}
			}
			if err != nil {
				p.fatalf("copy of version %d: proof of %X: %v", c.Version(), k, err)
			}
			if x, y := marshalProof(p.t, a), marshalProof(p.t, b); !bytes.Equal(x, y) {
				p.fatalf("copy of version %d: proof of %X differs:\n ours %X\n iavl %X", c.Version(), k, x, y)
			}
		}
	}
}

func campRun(t *testing.T, shape campShape, seed int64, initial int64) {
	r := rand.New(rand.NewSource(seed))
	campSeq = 0
	ours, err := memiavl.New(memiavl.Options{InitialVersion: initial})
	if err != nil {
		t.Fatal(err)
	}
	p := &campPair{t: t, r: r, shape: shape, initial: initial, ours: ours, ref: newIAVL(t, initial),
		model: map[string][]byte{}, where: "in memory", dir: t.TempDir()}
	for v := 0; v < shape.versions; v++ {
		p.version()
		if r.Intn(3) == 0 {
			p.midCheck()
		}
		p.save()
		p.check(v%4 == 3 || v == shape.versions-1)
		if p.deferred && r.Intn(3) == 0 {
			// a snapshot of a version whose hashes were deferred: the
			// write hashes what it writes
			dir := p.newDir()
			if err := p.ours.WriteSnapshot(context.Background(), dir, p.writeOpts()...); err != nil {
				p.fatalf("WriteSnapshot after deferred saves: %v", err)
			}
			var s *snapshot.Snapshot
			s, p.ours = p.open(dir)
			p.leave(s)
			p.pendMap = nil
			p.where = "reloaded from a snapshot of a deferred version"
			p.deferred, p.excl = false, false
			p.check(true)
			continue
		}
		if p.excl && r.Intn(3) == 0 {
			p.ours.ClearExclusive()
			p.excl = false
		}
		if !p.deferred && !p.excl {
			if r.Intn(6) == 0 {
				// nobody reads the versions saved from now on
				p.ours.SetExclusive(p.ours.Version())
				p.excl = true
				continue
			}
			p.move()
		}
	}
}

func campSeeds(short, long int) int {
	if s := os.Getenv("MEMIAVL_CAMPAIGN_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err == nil {
			return n
		}
	}
	if testing.Short() {
		return short
	}
	return long
}

func TestIAVLCampaign(t *testing.T) {
	n := campSeeds(2, 6)
	only := int64(-1)
	if s := os.Getenv("MEMIAVL_CAMPAIGN_SEED"); s != "" {
		only, _ = strconv.ParseInt(s, 10, 64)
	}
	initials := []int64{0, 1, 2, 1000, 1 << 40}
	for _, shape := range campShapes {
		if shape.long && testing.Short() {
			continue
		}
		for i := 0; i < n; i++ {
			seed := int64(i)*7919 + int64(len(shape.name))
			if only >= 0 {
				if i > 0 {
					break
				}
				seed = only
			}
			initial := initials[int(seed)%len(initials)]
			t.Run(fmt.Sprintf("%s/seed=%d/initial=%d", shape.name, seed, initial), func(t *testing.T) {
				campRun(t, shape, seed, initial)
			})
		}
	}
}
