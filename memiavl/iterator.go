package memiavl

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/seed-6dfbb450/memiavl/internal/pages"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// Iterator walks the keys of a tree within [start, end) in ascending or
// descending order. It follows the dbm.Iterator contract: check Valid before
// Key and Value, call Next to advance and Close when done.
//
// Keys and values of snapshot leaves are slices into the memory map: they must
// not be modified and are valid while the tree's snapshot is open. A change
// of the tree while the iterator is open (a Set or Remove, which may change
// nodes in place) makes the next Next find its place again: it moves to the
// key after the current one (before it, descending) in the changed tree, so
// changes outside the keys still to come do not disturb the iteration, and
// changes among them are seen. Iterate a Copy to read a version unchanged
// while writing.
type Iterator struct {
	t         *Tree
	start     []byte
	end       []byte
	ascending bool
	// lo and hi bound the keys still to come: start and end, until a
	// change of the tree narrows them to after (before) the current key
	lo, hi []byte
	mut    uint64 // t.mutations when the stack was built
	stack  []ref
	key    []byte
	value  []byte
	valid  bool
	err    error

	// a run of snapshot leaves being scanned sequentially: [next, stop)
	// ascending or (stop, next] descending.
	scanning bool
	next     uint64
	stop     uint64

	// leaves of the scan read ahead, in iteration order: batch[bi:bn] come
	// next. Next serves them without the fault guard that each read of a
	// mapping needs (see recoverCorrupt), whose cost per item would
	// otherwise be a fifth of a scan's.
	batch  [scanBatch]struct{ k, v []byte }
	bi, bn int
	// touched gathers the bytes the scan reads of the keys and values it
	// hands out, page the page (address / pages.Stride) of the last read
	// (see touch)
	touched byte
	page    uintptr

	// held is released by Close (see Hold)
	held Releaser
}

// Releaser is a resource an iterator holds while it is open (see
// Iterator.Hold).
type Releaser interface{ Release() }

// Hold makes the iterator hold r, typically a reference that keeps the
// tree's snapshot open, until the iterator is closed: the first Close calls
// r.Release. An iterator that is never closed releases r after the garbage
// collector finds it unreachable (a finalizer), so a forgotten Close delays
// the release instead of leaking it. At most one resource is held; holding
// another releases the first.
func (it *Iterator) Hold(r Releaser) {
	it.releaseHeld()
	it.held = r
	if r != nil {
		runtime.SetFinalizer(it, (*Iterator).releaseHeld)
	}
}

// releaseHeld releases the resource the iterator holds, once.
func (it *Iterator) releaseHeld() {
	if r := it.held; r != nil {
		it.held = nil
		runtime.SetFinalizer(it, nil)
		r.Release()
	}
}

// touch reads the pages of the leaf's key and value, which the caller
// reads after the scan's fault guard (see touchKV). A scan's leaves have
// their keys and values one after the other in the kvs file, many to a
// page: a leaf whose key and value lie in the page the last read ended in
// is not read again.
func (it *Iterator) touch(k, v []byte) {
	if len(k) > 0 && len(v) > 0 {
		kp := uintptr(unsafe.Pointer(unsafe.SliceData(k)))
		vp := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
		last := (vp + uintptr(len(v)) - 1) / pages.Stride
		if vp >= kp+uintptr(len(k)) && kp/pages.Stride == last && last == it.page {
			return
		}
		it.page = last
	}
	it.touched ^= touchKV(k, v)
}

// scanBatch is how many snapshot leaves a scan reads ahead at a time.
const scanBatch = 16

// Iterator returns an iterator over [start, end); a nil bound is open.
func (t *Tree) Iterator(start, end []byte, ascending bool) *Iterator {
	it := &Iterator{t: t, start: start, end: end, lo: start, hi: end, ascending: ascending,
		stack: make([]ref, 0, 32), mut: t.mutations}
	if !t.root.isNil() {
		it.stack = append(it.stack, t.root)
	}
	it.Next()
	return it
}

// Domain returns the bounds the iterator was created with.
func (it *Iterator) Domain() ([]byte, []byte) { return it.start, it.end }

// Valid reports whether the iterator is positioned at a key: not once
// the snapshot it reads is closed (see Released), which stops the
// iteration with an error wrapping snapshot.ErrClosed (a loop that ends
// on Valid finds it in Error: not a complete iteration).
func (it *Iterator) Valid() bool {
	if it.valid && it.Released() {
		it.stopReleased()
	}
	return it.valid
}

// stopReleased stops an iteration whose snapshot was closed under it.
func (it *Iterator) stopReleased() {
	if it.err == nil {
		it.err = fmt.Errorf("memiavl: iterator: %w", snapshot.ErrClosed)
	}
	it.valid, it.key, it.value = false, nil, nil
}

// Key returns the current key, nil once the iterator is not valid.
func (it *Iterator) Key() []byte {
	if it.Released() {
		return nil
	}
	return it.key
}

// Value returns the current value, nil once the iterator is not valid.
func (it *Iterator) Value() []byte {
	if it.Released() {
		return nil
	}
	return it.value
}

// CopyKey returns a copy of the current key, nil once the iterator is not
// valid. The copy is made under the fault guard: Key is a slice of the
// mapped snapshot for a persisted leaf, and an iterator kept past the life
// of its tree's snapshot (which it does not keep open) can have that
// snapshot closed by another goroutine between Released and the copy.
// The error then wraps snapshot.ErrClosed (ErrCorrupt for a fault reading
// a damaged file).
func (it *Iterator) CopyKey() ([]byte, error) {
	return it.copyGuarded(it.Key())
}

// CopyValue is CopyKey for the current value; an empty value is copied as
// an empty, non-nil slice.
func (it *Iterator) CopyValue() ([]byte, error) {
	return it.copyGuarded(it.Value())
}

func (it *Iterator) copyGuarded(b []byte) (c []byte, err error) {
	if b == nil {
		if it.Released() {
			return nil, fmt.Errorf("memiavl: iterator: %w", snapshot.ErrClosed)
		}
		return nil, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("memiavl: iterator: %w", corruptFrom(r, it.t.pers.s))
		}
	}()
	c = append(make([]byte, 0, len(b)), b...)
	if it.Released() {
		// closed during the copy: its range may have been mapped again
		// by then, and the copy read another file's bytes without a fault
		// (Close sets the flag before it unmaps)
		return nil, fmt.Errorf("memiavl: iterator: %w", snapshot.ErrClosed)
	}
	return c, nil
}

// Released reports whether the snapshot the iterator reads was closed
// under it (an iterator used past the life of its tree's snapshot, which
// it does not keep open): its key and value would be slices of an unmapped
// region. Next then stops the iteration with an error wrapping
// snapshot.ErrClosed.
func (it *Iterator) Released() bool {
	s := it.t.pers.s
	return s != nil && s.Closed()
}

// Error returns the error that stopped the iteration, if any.
func (it *Iterator) Error() error { return it.err }

// Close releases the iterator and what it holds (see Hold).
func (it *Iterator) Close() error {
	it.valid, it.key, it.value = false, nil, nil
	it.stack = nil
	it.scanning = false
	it.bi, it.bn = 0, 0
	it.releaseHeld()
	return nil
}

func (it *Iterator) inRange(key []byte) bool {
	return (it.lo == nil || bytes.Compare(key, it.lo) >= 0) &&
		(it.hi == nil || bytes.Compare(key, it.hi) < 0)
}

// reseek rebuilds the iteration from the root of the changed tree, over
// the keys after the current one (before it, descending). The current key
// may be a slice of the mapping: it is copied under the fault guard.
func (it *Iterator) reseek() {
	it.mut = it.t.mutations
	if !it.valid {
		return // ended: nothing comes
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			it.err = corruptFrom(r, it.t.pers.s)
			it.valid, it.key, it.value = false, nil, nil
		}
	}()
	k := make([]byte, len(it.key)+1) // ascending: key+0x00, the least key after it
	copy(k, it.key)
	if it.ascending {
		it.lo = k
	} else {
		it.hi = k[:len(it.key)]
	}
	it.scanning = false
	it.bi, it.bn = 0, 0
	it.stack = it.stack[:0]
	if !it.t.root.isNil() {
		it.stack = append(it.stack, it.t.root)
	}
}

// Next advances the iterator.
func (it *Iterator) Next() {
	if it.err == nil && it.Released() {
		it.stopReleased()
	}
	if it.err != nil {
		it.valid, it.key, it.value = false, nil, nil
		return
	}
	if it.mut != it.t.mutations {
		if it.reseek(); it.err != nil {
			return
		}
	}
	if it.bi < it.bn {
		kv := &it.batch[it.bi]
		it.bi++
		it.key, it.value, it.valid = kv.k, kv.v, true
		return
	}
	it.advance()
}

// advance is Next past the read-ahead leaves: it reads the tree, under
// the fault guard.
func (it *Iterator) advance() {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			it.err = corruptFrom(r, it.t.pers.s)
			it.valid, it.key, it.value = false, nil, nil
		}
	}()
	it.valid, it.key, it.value = false, nil, nil
	if it.scanning && it.scanNext() {
		return
	}
	t := it.t
	for len(it.stack) > 0 {
		r := it.stack[len(it.stack)-1]
		it.stack = it.stack[:len(it.stack)-1]
		if r.n == nil {
			if it.startScan(r.p) && it.scanNext() {
				return
			}
			continue
		}
		n := r.n
		if n.height == 0 {
			if it.inRange(n.key()) {
				it.key, it.value, it.valid = n.key(), n.value(), true
				return
			}
			continue
		}
		// The left subtree holds keys < n.key(), the right one keys >= n.key().
		goLeft := it.lo == nil || bytes.Compare(it.lo, n.key()) < 0
		goRight := it.hi == nil || bytes.Compare(n.key(), it.hi) < 0
		if it.ascending {
			if goRight {
				it.stack = append(it.stack, n.right)
			}
			if goLeft {
				it.stack = append(it.stack, n.left)
			}
		} else {
			if goLeft {
				it.stack = append(it.stack, n.left)
			}
			if goRight {
				it.stack = append(it.stack, n.right)
			}
		}
	}
	_ = t
}

// startScan positions a sequential scan over the snapshot leaves under p that
// fall in [start, end). It reports whether the run is non-empty.
func (it *Iterator) startScan(p pref) bool {
	lo, hi := it.t.pers.leafRange(p)
	if it.lo != nil {
		lo = it.t.pers.searchLeaf(it.lo, lo, hi)
	}
	if it.hi != nil {
		hi = it.t.pers.searchLeaf(it.hi, lo, hi)
	}
	if lo >= hi {
		return false
	}
	it.scanning = true
	if it.ascending {
		it.next, it.stop = lo, hi
	} else {
		// descending: next counts down from hi-1 to lo; store as hi and lo.
		it.next, it.stop = hi, lo
	}
	return true
}

// scanNext moves to the next leaf of the scan and reads up to scanBatch-1
// more ahead; it reports false when the scan is done. A read that fails
// panics (see recoverCorrupt) only when it is the leaf moved to: a failure
// further ahead ends the batch there, and the leaf is read again, and
// fails, when the iteration reaches it.
func (it *Iterator) scanNext() bool {
	if !it.scanStep(&it.key, &it.value) {
		it.scanning = false
		return false
	}
	it.valid = true
	it.bi, it.bn = 0, 0
	it.readAhead()
	return true
}

// scanStep reads the scan's next leaf into *k and *v and advances the scan;
// it reports false at the end of the run.
func (it *Iterator) scanStep(k, v *[]byte) bool {
	if it.ascending {
		if it.next >= it.stop {
			return false
		}
		*k, *v = it.t.pers.leafKV(it.next)
		it.touch(*k, *v)
		it.next++
		return true
	}
	if it.next <= it.stop {
		return false
	}
	*k, *v = it.t.pers.leafKV(it.next - 1)
	it.touch(*k, *v)
	it.next--
	return true
}

// readAhead fills the batch with the scan's next leaves, stopping early at
// a leaf whose read fails, which it leaves unread: scanStep advances the
// scan only past a leaf it has read.
func (it *Iterator) readAhead() {
	defer func() {
		if r := recover(); r != nil {
			_ = corruptFrom(r, it.t.pers.s) // panics again for anything else
		}
	}()
	for it.bn < scanBatch-1 {
		kv := &it.batch[it.bn]
		if !it.scanStep(&kv.k, &kv.v) {
			return
		}
		it.bn++
	}
}
