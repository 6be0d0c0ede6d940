package memiavl

import (
	"errors"
	"fmt"

	"github.com/seed-6dfbb450/memiavl/internal/pages"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// pref refers to a node of the tree's snapshot.
type pref = snapshot.Ref

const prefNone = ^pref(0)

// persisted gives the tree access to the nodes of its snapshot. Every method
// that reads an index or offset from the map checks it; a bad one panics with
// a corruptError, which the exported method that started the operation turns
// into an error.
type persisted struct {
	s *snapshot.Snapshot
}

func (p persisted) check(err error) {
	if err != nil {
		panic(corruptError{readError(err)})
	}
}

// readError returns the error of a tree operation for err from a read of
// its snapshot: a read after the snapshot's release (snapshot.ErrClosed) as
// it is, anything else as damage (ErrCorrupt).
func readError(err error) error {
	if errors.Is(err, snapshot.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// get looks key up among the snapshot leaves under r. Point reads do not walk
// the branches: the leaves under a node are a contiguous range of the
// snapshot's sorted leaves, so the key is under r exactly when the snapshot
// holds it at an index in that range. Snapshot.Lookup finds the index and
// the value through the lookup table (one table slot and the key's bytes),
// or by binary search in a snapshot without one (format version 1).
func (p persisted) get(r pref, key []byte) ([]byte, error) {
	i, v, err := p.lookup(key, snapshot.KeyHash(key))
	if v == nil || err != nil {
		return nil, err
	}
	if lo, hi := p.leafRange(r); i < lo || i >= hi {
		return nil, nil
	}
	return v, nil
}

// getHashed looks key, of hash h (snapshot.KeyHash), up in the whole
// snapshot, and returns its value and whether it was found.
func (p persisted) getHashed(key []byte, h uint64) ([]byte, bool, error) {
	_, v, err := p.lookup(key, h)
	return v, v != nil, err
}

// lookup returns the leaf index and value of key, of hash h, in the whole
// snapshot; the value is nil when the snapshot does not hold the key.
func (p persisted) lookup(key []byte, h uint64) (uint64, []byte, error) {
	i, v, found, err := p.s.LookupHashed(key, h)
	if err != nil {
		return 0, nil, readError(err)
	}
	if !found {
		return 0, nil, nil
	}
	return i, v, nil
}

func (p persisted) isLeaf(r pref) bool { return r.IsLeaf() }

func (p persisted) height(r pref) uint8 {
	if r.IsLeaf() {
		return 0
	}
	return p.s.BranchHeight(r.Index())
}

func (p persisted) size(r pref) int64 {
	if r.IsLeaf() {
		return 1
	}
	i := r.Index()
	n := p.s.BranchSize(i)
	if i == p.s.BranchCount()-1 && uint64(n) != p.s.LeafCount() {
		panic(corruptf("root branch %d of %s has size %d, the snapshot %d leaves", i, p.s.Dir(), n, p.s.LeafCount()))
	}
	return n
}

func (p persisted) version(r pref) int64 {
	if r.IsLeaf() {
		return p.s.LeafVersion(r.Index())
	}
	return p.s.BranchVersion(r.Index())
}

func (p persisted) key(r pref) []byte {
	var k []byte
	var err error
	if r.IsLeaf() {
		k, err = p.s.LeafKey(r.Index())
	} else {
		k, err = p.s.BranchKey(r.Index())
	}
	p.check(err)
	return k
}

func (p persisted) value(r pref) []byte {
	v, err := p.s.LeafValue(r.Index())
	p.check(err)
	return v
}

func (p persisted) left(r pref) pref {
	c, err := p.s.Left(r.Index())
	p.check(err)
	return c
}

func (p persisted) right(r pref) pref {
	c, err := p.s.Right(r.Index())
	p.check(err)
	return c
}

func (p persisted) hash(r pref) []byte {
	if r.IsLeaf() {
		return p.s.LeafHash(r.Index())
	}
	return p.s.BranchHash(r.Index())
}

// mutableBranch returns an in-memory copy of branch r at version v.
func (p persisted) mutableBranch(r pref, v int64) *node {
	k := p.key(r)
	h, size := p.height(r), p.size(r)
	if h == 0 || size < 2 {
		// an in-memory node of height 0 is a leaf: a branch recorded so
		// would be taken for one once copied (a Set that updates a leaf
		// below it keeps the copy's height)
		panic(corruptf("branch %d of %s has height %d and %d leaves", r.Index(), p.s.Dir(), h, size))
	}
	return &node{
		pfx:     keyPrefix(k),
		k:       bstr(k),
		left:    ref{p: p.left(r)},
		right:   ref{p: p.right(r)},
		version: v,
		size:    size,
		height:  h,
	}
}

// leafRange returns the indexes [lo, hi) of the leaves under r.
func (p persisted) leafRange(r pref) (uint64, uint64) {
	if r.IsLeaf() {
		return r.Index(), r.Index() + 1
	}
	i := r.Index()
	first := p.s.BranchFirstLeaf(i)
	size := uint64(p.s.BranchSize(i))
	if first+size > p.s.LeafCount() || first+size < first {
		panic(corruptf("branch %d of %s covers leaves [%d,%d) beyond %d", i, p.s.Dir(), first, first+size, p.s.LeafCount()))
	}
	if i == p.s.BranchCount()-1 && (first != 0 || size != p.s.LeafCount()) {
		panic(corruptf("root branch %d of %s covers leaves [%d,%d), not all %d", i, p.s.Dir(), first, first+size, p.s.LeafCount()))
	}
	return first, first + size
}

// searchLeaf returns the index of the first leaf in [lo, hi) whose key is >= key.
func (p persisted) searchLeaf(key []byte, lo, hi uint64) uint64 {
	i, _, err := p.s.Search(key, lo, hi)
	p.check(err)
	return i
}

func (p persisted) leafKV(i uint64) ([]byte, []byte) {
	k, v, err := p.s.LeafKV(i)
	p.check(err)
	return k, v
}

// touchKV reads the pages of a key and a value of the snapshot that are
// handed out as slices of the map (by iterators, exports, GetZeroCopy) and
// read by the caller after the operation's fault guard has ended: a page
// the file no longer has, or that the disk cannot return, is then an
// ErrCorrupt of the operation instead of a fault in the caller, which
// would end the process.
func touchKV(k, v []byte) byte { return pages.Touch(k, v) }

// corruptError carries a corruption found deep inside a tree operation up to
// the exported method, which returns it as an error.
type corruptError struct{ err error }

func corruptf(format string, args ...any) corruptError {
	return corruptError{fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)}
}

// recoverCorrupt turns a corruptError panic into *err, and a memory fault
// inside the mappings of ss (see below) into an ErrCorrupt naming the file;
// other panics go on. It must be deferred itself (defer recoverCorrupt(&err,
// ...)): recover works only when the deferred function calls it, so a
// deferred closure that calls recoverCorrupt recovers nothing; such a
// closure calls recover and corruptFrom instead.
//
// Reads of a snapshot go through its mappings, and a read of a page that
// the file no longer has (cut short under the mapping) or that the disk
// cannot return faults. The entry points that read snapshots defer
// debug.SetPanicOnFault(debug.SetPanicOnFault(true)) before
// recoverCorrupt, which makes such a fault a panic of the goroutine
// instead of the end of the process, and recoverCorrupt makes it an
// error when its address lies inside a mapping of the tree's snapshots.
func recoverCorrupt(err *error, ss ...*snapshot.Snapshot) {
	if r := recover(); r != nil {
		*err = corruptFrom(r, ss...)
	}
}

// corruptFrom returns the error a recovered corruptError carries, or the
// ErrCorrupt of a memory fault inside a mapping of ss, and panics again
// with any other value.
func corruptFrom(r any, ss ...*snapshot.Snapshot) error {
	if ce, ok := r.(corruptError); ok {
		return ce.err
	}
	if e, ok := snapshot.FaultFrom(r, ss...); ok {
		if errors.Is(e, snapshot.ErrClosed) {
			return e // a read after the snapshot's release, not damage
		}
		return fmt.Errorf("%w: %w", ErrCorrupt, e)
	}
	panic(r)
}
