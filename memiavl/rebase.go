package memiavl

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// NodeMap records where a mapped snapshot write (WriteSnapshotMapped) put
// the nodes of the written version, so that Rebase can move a later version
// of the same tree onto the new snapshot without rebuilding it.
//
// A written in-memory node records its new index in the node itself. The
// nodes the written tree read from its own snapshot are mapped by runs: such
// a subtree is written in one piece, its leaves and its branches keeping
// their order, so one leaf run and one branch run map all of its nodes.
type NodeMap struct {
	version  int64              // the written version
	from     *snapshot.Snapshot // the snapshot the written tree read from
	leaves   []run              // ordered by old index, disjoint
	branches []run
	bad      string // why the map cannot be used, "" if it can
}

// run maps n consecutive nodes of the old snapshot, from index old, to
// consecutive nodes of the new one, from index new.
type run struct{ old, new, n uint64 }

// WriteSnapshotMapped writes the tree's last saved version as a snapshot
// like WriteSnapshot and returns the map of the written nodes for Rebase.
// It records each written in-memory node's new index in the node, so at
// most one mapped write may run at a time over trees that share nodes (a
// database's background rewrite); reads and mutations of the tree and of
// its copies may go on meanwhile.
func (t *Tree) WriteSnapshotMapped(ctx context.Context, dir string, opts ...WriteOption) (*NodeMap, error) {
	m := &NodeMap{version: t.version, from: t.pers.s}
	if err := t.writeSnapshot(ctx, dir, m, opts); err != nil {
		return nil, err
	}
	return m, nil
}

// Version returns the version the map's snapshot holds.
func (m *NodeMap) Version() int64 { return m.version }

// addRun maps the subtree r of the written tree's snapshot p, about to be
// written from leaf index leaf and branch index branch on.
func (m *NodeMap) addRun(p persisted, r pref, leaf, branch uint64) error {
	if r.IsLeaf() {
		m.leaves = m.appendRun(m.leaves, run{old: r.Index(), new: leaf, n: 1})
		return nil
	}
	i := r.Index()
	lo, hi := p.leafRange(r)
	size := hi - lo
	if size < 2 || size-2 > i {
		return fmt.Errorf("%w: branch %d of %s has %d leaves", ErrCorrupt, i, p.s.Dir(), size)
	}
	m.leaves = m.appendRun(m.leaves, run{old: lo, new: leaf, n: size})
	// a subtree's size-1 branches end with its root in post-order
	m.branches = m.appendRun(m.branches, run{old: i - (size - 2), new: branch, n: size - 1})
	return nil
}

// appendRun appends r to runs, merging it with the last run when both
// continue it.
func (m *NodeMap) appendRun(runs []run, r run) []run {
	if len(runs) == 0 {
		return append(runs, r)
	}
	last := &runs[len(runs)-1]
	switch {
	case r.old < last.old+last.n:
		if m.bad == "" {
			m.bad = fmt.Sprintf("snapshot subtrees out of order at index %d", r.old)
		}
	case r.old == last.old+last.n && r.new == last.new+last.n:
		last.n += r.n
		return runs
	}
	return append(runs, r)
}

// merge appends the runs of o, the map of a forked write of the subtree
// written right after the ones m maps (see writeSplit).
func (m *NodeMap) merge(o *NodeMap) {
	for _, r := range o.leaves {
		m.leaves = m.appendRun(m.leaves, r)
	}
	for _, r := range o.branches {
		m.branches = m.appendRun(m.branches, r)
	}
	if m.bad == "" {
		m.bad = o.bad
	}
}

// setIndex records that in-memory node n was written at index i.
func (m *NodeMap) setIndex(n *node, i uint64) {
	if i >= math.MaxUint32 {
		if m.bad == "" {
			m.bad = fmt.Sprintf("node index %d too large to record", i)
		}
		return
	}
	n.snap = uint32(i + 1)
}

// lookup maps index i through runs.
func lookupRun(runs []run, i uint64) (uint64, bool) {
	lo, hi := 0, len(runs)
	for lo < hi { // first run with old > i
		mid := int(uint(lo+hi) >> 1)
		if runs[mid].old > i {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == 0 {
		return 0, false
	}
	r := runs[lo-1]
	if i-r.old >= r.n {
		return 0, false
	}
	return r.new + (i - r.old), true
}

// Rebaser moves later versions of a tree onto the snapshot a mapped write
// produced (WriteSnapshotMapped), as a database's background rewrite does
// with the versions committed while it wrote.
//
// In a rebased tree, the nodes of versions up to the written one are
// references into the new snapshot. The later leaves are shared with the
// tree rebased (they refer to no node), unless their key or value lies in
// the old snapshot: those are copied with copies of the bytes. The later
// branches are copied, sharing their keys, except keys that lie in the old
// snapshot, which are taken from the new snapshot or the rebased leaves.
// Rebasing again at a later version copies only the nodes created since the
// previous Rebase and reuses the earlier copies, so a sequence of rebases
// costs one copy per node changed since the written version, whatever the
// size of the tree.
//
// Every node a rebase reuses or maps is checked against the node it stands
// for by hash, so a map or a tree that does not fit gives ErrRebase, never a
// wrong tree. After an error the Rebaser fails every later call.
//
// A Rebaser records in each node it copies where the copy is, like the
// mapped write does: it must be the only one rebasing trees that share
// nodes, one call at a time, while those trees and their copies may go on
// being read and changed.
type Rebaser struct {
	base    *Tree
	m       *NodeMap
	copies  copyList // the copies made, in order; a copied node's snap is its index + 1
	version int64    // the version rebased last, m's at first
	err     error    // sticky
}

// NewRebaser returns a Rebaser onto base, the tree NewFromSnapshot opened on
// the snapshot written with map m.
func NewRebaser(base *Tree, m *NodeMap) (*Rebaser, error) {
	switch {
	case m == nil || base == nil:
		return nil, fmt.Errorf("%w: no map or base", ErrRebase)
	case m.bad != "":
		return nil, fmt.Errorf("%w: %s", ErrRebase, m.bad)
	case base.pers.s == nil || base.version != m.version:
		return nil, fmt.Errorf("%w: base is not the mapped snapshot of version %d", ErrRebase, m.version)
	}
	return &Rebaser{base: base, m: m, version: m.version}, nil
}

// Version returns the version of the last rebased tree, the written version
// before the first Rebase.
func (rb *Rebaser) Version() int64 { return rb.version }

// Follows reports whether Rebase can take t: a later version of the tree
// whose snapshot the map was made from. A tree that replaced that one (a
// store deleted and added again, or another store renamed to its name) is
// not, unless neither had a snapshot (a store added since the last one):
// then Rebase takes the replacement, whose nodes are all later than the
// written version and are copied.
func (rb *Rebaser) Follows(t *Tree) bool {
	return t != nil && t.pers.s == rb.m.from && t.version >= rb.version
}

// Rebase returns a tree at t's last saved version on the new snapshot. t is
// a copy of the written tree at the version last rebased or later, still on
// the snapshot the write read from; it is only read. The result shares with
// it only leaves later than the written version, none of which holds bytes
// of the old snapshot. When t records the keys changed since the written
// version (StartNextTouches at the version written, with the written
// tree's root hash: the snapshot is of t's own line of versions), the
// result's point reads of the other keys go straight to the new snapshot;
// otherwise they descend.
func (rb *Rebaser) Rebase(ctx context.Context, t *Tree) (_ *Tree, err error) {
	if rb.err != nil {
		return nil, rb.err
	}
	if t == nil {
		return nil, fmt.Errorf("%w: nil tree", ErrRebase)
	}
	defer func() {
		if err != nil {
			rb.err = err
		}
	}()
	if t.version < rb.version || t.pers.s != rb.m.from {
		return nil, fmt.Errorf("%w: tree at version %d is not a later version of the one rebased at %d", ErrRebase, t.version, rb.version)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s, rb.base.pers.s)
	g := grafter{rb: rb, t: t, ctx: ctx}
	root := g.graft(t.saved)
	if !root.isNil() && !bytes.Equal(rb.base.hashOf(root), t.hashOf(t.saved)) {
		return nil, fmt.Errorf("%w: root hash changed", ErrRebase)
	}
	rb.version = t.version
	nt := &Tree{pers: rb.base.pers, root: root, saved: root, version: t.version, initial: t.initial}
	if n := t.next; n != nil && n.from == rb.m.version {
		baseHash := nodehash.Empty()
		if !rb.base.root.isNil() {
			baseHash = rb.base.hashOf(rb.base.root)
		}
		if bytes.Equal(n.fromHash, baseHash) {
			// the new snapshot holds t's own version from: every
			// key that differs from it is in the set
			nt.touched = n
		}
	}
	return nt, nil
}

// grafter is one Rebase call.
type grafter struct {
	rb    *Rebaser
	t     *Tree
	ctx   context.Context
	count int
}

func (g *grafter) fail(format string, args ...any) {
	panic(corruptError{fmt.Errorf("%w: "+format, append([]any{ErrRebase}, args...)...)})
}

// graft returns r's subtree on the new snapshot.
func (g *grafter) graft(r ref) ref {
	if r.isNil() {
		return nilRef
	}
	g.count++
	if g.count%4096 == 0 {
		if err := g.ctx.Err(); err != nil {
			panic(corruptError{fmt.Errorf("rebase cancelled: %w", err)})
		}
	}
	rb := g.rb
	n := r.n
	if n == nil {
		np, ok := rb.m.moved(r.p)
		if !ok {
			g.fail("%s of the old snapshot was not written", r.p)
		}
		return g.mapped(np, g.t.pers.hash(r.p))
	}
	if !n.hashed {
		g.fail("node of version %d is not hashed", n.version)
	}
	switch {
	case n.version <= rb.m.version: // written
		if n.snap == 0 {
			g.fail("node of version %d was not written", n.version)
		}
		return g.mapped(writtenRef(n), n.hash[:])
	case n.height == 0 && !g.holdsOld(n):
		// a later leaf has no references to move: shared, never copied
		return memRef(n)
	case n.version <= rb.version: // copied by an earlier Rebase
		if n.snap == 0 || uint64(n.snap) > rb.copies.n {
			g.fail("node of version %d was not rebased", n.version)
		}
		c := rb.copies.at(uint64(n.snap - 1))
		if c.version != n.version || c.hash != n.hash {
			g.fail("node of version %d differs from its copy", n.version)
		}
		return memRef(c)
	}
	c := &node{height: n.height, hashed: true, pfx: n.pfx, k: n.k,
		version: n.version, size: n.size, hash: n.hash}
	old := g.t.pers.s
	if n.height == 0 {
		// its key or value lies in the old snapshot
		c.k = string(n.key()) // copies
		c.setValue(string(n.value()))
	} else {
		g.prefetchBelow(n, prefetchDepth)
		c.left = g.graft(n.left)
		c.right = g.graft(n.right)
		if old != nil && old.Holds(n.key()) {
			k := g.minKey(c.right)
			if !bytes.Equal(k, n.key()) {
				g.fail("branch key %s is not the smallest key of its right subtree", hexkey.Upper(n.key()))
			}
			c.k = bstr(k)
		}
	}
	// recorded once complete: a later Rebase reuses it whole
	if rb.copies.n >= math.MaxUint32 {
		g.fail("too many copies")
	}
	rb.copies.add(c)
	n.snap = uint32(rb.copies.n)
	return memRef(c)
}

// prefetchBelow prefetches what graft reads next below the in-memory
// branch n, which it copies: the lines of the in-memory nodes depth levels
// down, below nodes it copies too; and for the children one level above
// those, whose nodes an earlier call prefetched, the records that graft
// reads for them: the new snapshot's record of a written node, the old and
// the new snapshot's records of a node of the old snapshot, and the key and
// value of a leaf it may copy. The function prefetchBelow (snapshot.go)
// says why this pays.
func (g *grafter) prefetchBelow(n *node, depth int) {
	rb := g.rb
	for _, c := range [2]ref{n.left, n.right} {
		if depth > 1 {
			if depth == 2 {
				g.prefetchChild(c)
			}
			if c.n != nil && c.n.height > 0 && c.n.version > rb.version {
				g.prefetchBelow(c.n, depth-1)
			}
			continue
		}
		if c.n != nil {
			prefetchNode(c.n)
		}
	}
}

// prefetchChild prefetches the records graft reads for r when depth is 2
// in prefetchBelow: only the level its node has had time to arrive.
func (g *grafter) prefetchChild(r ref) {
	rb := g.rb
	switch n := r.n; {
	case n == nil:
		if r.isNil() {
			return
		}
		g.t.pers.s.Prefetch(r.p)
		if np, ok := rb.m.moved(r.p); ok {
			rb.base.pers.s.Prefetch(np)
		}
	case n.version <= rb.m.version:
		if n.snap != 0 {
			rb.base.pers.s.Prefetch(writtenRef(n))
		}
	case n.height == 0 && n.version > rb.version:
		prefetchLeafData(n)
	}
}

// moved returns the reference in the written snapshot of node p of the
// snapshot the write read from, and false if the write did not copy it.
func (m *NodeMap) moved(p pref) (pref, bool) {
	if p.IsLeaf() {
		i, ok := lookupRun(m.leaves, p.Index())
		return snapshot.LeafRef(i), ok
	}
	i, ok := lookupRun(m.branches, p.Index())
	return snapshot.BranchRef(i), ok
}

// writtenRef returns the reference in the written snapshot of the
// in-memory node n, which the write recorded (n.snap is not 0).
func writtenRef(n *node) pref {
	if n.height == 0 {
		return snapshot.LeafRef(uint64(n.snap - 1))
	}
	return snapshot.BranchRef(uint64(n.snap - 1))
}

// copyList is a Rebaser's copies, in chunks: appending never moves the
// copies made before, as growing one slice of hundreds of thousands of
// pointers would at each doubling.
type copyList struct {
	chunks [][]*node
	n      uint64
}

const copyChunk = 4096

func (l *copyList) add(c *node) {
	if l.n%copyChunk == 0 {
		l.chunks = append(l.chunks, make([]*node, 0, copyChunk))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, c)
	l.n++
}

func (l *copyList) at(i uint64) *node { return l.chunks[i/copyChunk][i%copyChunk] }

// holdsOld reports whether a leaf's key or value lies in the old snapshot's
// mapping.
func (g *grafter) holdsOld(n *node) bool {
	old := g.t.pers.s
	return old != nil && (old.Holds(n.key()) || old.Holds(n.value()))
}

// mapped returns the reference to the new snapshot's node np after checking
// that it is in range and has hash h.
func (g *grafter) mapped(np pref, h []byte) ref {
	base := g.rb.base
	s := base.pers.s
	if np.IsLeaf() && np.Index() >= s.LeafCount() || !np.IsLeaf() && np.Index() >= s.BranchCount() {
		g.fail("%s beyond the new snapshot", np)
	}
	if !bytes.Equal(base.pers.hash(np), h) {
		g.fail("%s of the new snapshot has another hash", np)
	}
	return ref{p: np}
}

// minKey returns the smallest key under r in the rebased tree.
func (g *grafter) minKey(r ref) []byte {
	for r.n != nil {
		if r.n.height == 0 {
			return r.n.key()
		}
		r = r.n.left
	}
	lo, _ := g.rb.base.pers.leafRange(r.p)
	return g.rb.base.pers.key(snapshot.LeafRef(lo))
}
