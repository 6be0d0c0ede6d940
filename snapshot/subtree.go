package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime/debug"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
)

// AddSubtree appends the subtree r of snapshot s, exactly as AddLeaf and
// AddBranch would append its nodes in post-order, but in bulk: the
// key-value entries of its leaves are one contiguous range of s's kvs,
// copied with one write, and its leaf and branch records are re-encoded
// with their leaf indices and kvs offsets moved, without walking the tree.
// The files written are the same bytes as the node-by-node path gives.
//
// Only the fields that make the tree are checked, as the node-by-node path
// checks them: node versions against the writer's version and each
// branch's against its children's (not older), keys strictly increasing,
// the entries contiguous and matching the records' lengths, and the
// branches forming one binary tree over the leaves with consistent
// heights. Hashes are copied as recorded; Verify recomputes them. A subtree
// of s that fails a check gives an error wrapping ErrCorrupt (and
// ErrKeyOrder for keys out of order within s; ErrKeyOrder alone, as AddLeaf,
// for a first key not after the writer's last) and fails the writer, never
// a panic.
//
// s must be of the current format version (ErrFormatVersion otherwise) and
// stay open during the call. r must be a reference into s; the writer does
// not keep s.
//
// A memory fault reading s's mappings (a file cut short under them, a
// failed disk read) fails the writer with an error naming the file, as
// FaultError describes, instead of ending the process.
func (w *Writer) AddSubtree(s *Snapshot, r Ref) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			e, ok := FaultFrom(p, s)
			if !ok {
				panic(p)
			}
			err = w.fail(e)
		}
	}()
	return w.addSubtree(s, r)
}

func (w *Writer) addSubtree(s *Snapshot, r Ref) error {
	if err := w.usable(); err != nil {
		return err
	}
	if s == nil {
		return w.fail(fmt.Errorf("%w: bulk copy from a nil snapshot", ErrInvalidNode))
	}
	if s.closed.Load() {
		return w.fail(ErrClosed)
	}
	if s.format != FormatVersion {
		return w.fail(fmt.Errorf("%w: bulk copy from format version %d", ErrFormatVersion, s.format))
	}
	if len(w.stack) >= maxPending {
		return w.fail(fmt.Errorf("%w: more than %d subtrees without a parent", ErrTreeShape, maxPending))
	}
	var lo, hi, b0, b1 uint64 // leaves [lo, hi), branches [b0, b1)
	if r.IsLeaf() {
		if r.Index() >= s.leafCount {
			return w.fail(fmt.Errorf("%w: %s beyond %d leaves", ErrInvalidNode, r, s.leafCount))
		}
		lo, hi = r.Index(), r.Index()+1
	} else {
		i := r.Index()
		if i >= s.branchCount {
			return w.fail(fmt.Errorf("%w: %s beyond %d branches", ErrInvalidNode, r, s.branchCount))
		}
		f, _, e, err := s.branchLayout(i)
		if err != nil {
			return w.fail(err)
		}
		if e-f-2 > i {
			return w.fail(s.branchError(i, branchOffSize, "%d leaves under branch %d", e-f, i))
		}
		lo, hi, b0, b1 = f, e, i-(e-f-2), i+1
	}
	size := hi - lo
	if w.leafCount+size > MaxLeaves {
		return w.fail(fmt.Errorf("%w: more than %d leaves", ErrInvalidNode, uint64(MaxLeaves)))
	}
	if err := w.beforeFork(size, b1-b0); err != nil {
		return w.fail(err)
	}
	// The branches first: they only read records, so a bad tree fails the
	// writer before it has written anything of the subtree.
	height, err := w.checkSubtreeShape(s, lo, hi, b0, b1)
	if err != nil {
		return w.fail(err)
	}
	first := w.leafCount
	if err := w.copyLeaves(s, lo, hi); err != nil {
		return w.fail(err)
	}
	leafShift := first - lo // modulo 2^64: adding it moves an index
	for j := b0; j < b1; j++ {
		src := s.branchRec(j)
		version := int64(binary.LittleEndian.Uint64(src[branchOffVersion:]))
		if version < 1 || version > w.version {
			return w.fail(s.branchError(j, branchOffVersion, "version %d outside [1, %d]", version, w.version))
		}
		putBranch(&w.rec, src[branchOffHash:branchOffHash+HashSize], version, uint40At(src, branchOffSize),
			uint40At(src, branchOffFirstLeaf)+leafShift, uint40At(src, branchOffKeyLeaf)+leafShift, src[branchOffHeight])
		if _, err := w.files[metaFileIndexBranch].buf.Write(w.rec[:]); err != nil {
			return w.fail(fmt.Errorf("snapshot: write %s: %w", FileBranches, err))
		}
	}
	p := pending{first: first, size: size, height: height}
	if r.IsLeaf() {
		copy(p.hash[:], s.LeafHash(lo))
		p.version = s.LeafVersion(lo)
	} else {
		copy(p.hash[:], s.BranchHash(b1-1))
		p.version = s.BranchVersion(b1 - 1)
	}
	w.stack = append(w.stack, p)
	w.branchCount += b1 - b0
	return nil
}

// checkSubtreeShape checks that branches [b0, b1) of s are, in post-order,
// one binary tree over leaves [lo, hi) whose heights are one more than the
// taller child's, differing by at most one between children, and returns
// its height. It reads the branch records only.
func (w *Writer) checkSubtreeShape(s *Snapshot, lo, hi, b0, b1 uint64) (uint8, error) {
	stack := w.shape[:0]
	defer func() { w.shape = stack[:0] }()
	// child pops the subtree over leaves [cf, ce) if it is on top of the
	// stack; a single leaf is not on the stack
	child := func(cf, ce uint64) (uint8, int64, bool) {
		if ce-cf == 1 {
			return 0, s.LeafVersion(cf), true
		}
		n := len(stack)
		if n == 0 || stack[n-1].first != cf || stack[n-1].first+stack[n-1].size != ce {
			return 0, 0, false
		}
		h, v := stack[n-1].height, stack[n-1].version
		stack = stack[:n-1]
		return h, v, true
	}
	for j := b0; j < b1; j++ {
		f, k, e, err := s.branchLayout(j)
		if err != nil {
			return 0, err
		}
		hr, vr, okR := child(k, e)
		hl, vl, okL := child(f, k)
		if !okR || !okL || f < lo || e > hi {
			return 0, s.branchError(j, branchOffSize, "leaves [%d, %d) split at %d are not the post-order of a subtree over [%d, %d)", f, e, k, lo, hi)
		}
		h := s.BranchHeight(j)
		if int(h) != int(max(hl, hr))+1 || hl > hr+1 || hr > hl+1 {
			return 0, s.branchError(j, branchOffHeight, "height %d with children of heights %d and %d", h, hl, hr)
		}
		v := s.BranchVersion(j)
		if c := max(vl, vr); v < c {
			// copy-on-write saves a node with or after its children
			return 0, s.branchError(j, branchOffVersion, "version %d older than its child's %d", v, c)
		}
		if len(stack) >= maxPending {
			return 0, s.branchError(j, branchOffSize, "more than %d subtrees without a parent", maxPending)
		}
		stack = append(stack, pending{first: f, size: e - f, version: v, height: h})
	}
	switch {
	case b0 == b1 && hi-lo == 1:
		return 0, nil
	case len(stack) == 1 && stack[0].first == lo && stack[0].size == hi-lo:
		return stack[0].height, nil
	}
	return 0, s.branchError(b1-1, branchOffSize, "branches %d..%d are not one tree over leaves [%d, %d)", b0, b1-1, lo, hi)
}

// copyLeaves appends leaves [lo, hi) of s: their records, index entries
// and key hashes one by one, their key-value entries with one write.
func (w *Writer) copyLeaves(s *Snapshot, lo, hi uint64) error {
	start := binary.LittleEndian.Uint64(s.leafRec(lo)[leafOffKVOff:]) - KVHeaderSize // underflow fails below
	pos := start                                                                     // where leaf j's entry must start in s
	kvs := uint64(len(s.kvs))
	shift := w.kvLen - start // modulo 2^64: adding it moves an offset
	prev := w.lastKey
	if !w.hasLastKey() {
		prev = nil
	}
	for j := lo; j < hi; j++ {
		rec := s.leafRec(j)
		base := j * RecordSize
		version := int64(binary.LittleEndian.Uint64(rec[leafOffVersion:]))
		if version < 1 || version > w.version {
			return corruptAt(s.path(metaFileIndexLeaves), base+leafOffVersion, "leaf %d: version %d outside [1, %d]", j, version, w.version)
		}
		off := binary.LittleEndian.Uint64(rec[leafOffKVOff:])
		kl := binary.LittleEndian.Uint32(rec[leafOffKeyLen:])
		vl := binary.LittleEndian.Uint32(rec[leafOffValLen:])
		if off != pos+KVHeaderSize || pos > kvs || KVHeaderSize+uint64(kl)+uint64(vl) > kvs-pos {
			return corruptAt(s.path(metaFileIndexLeaves), base+leafOffKVOff, "leaf %d: entry at %s offset %d of %d+%d bytes, want it at %d within %d bytes",
				j, FileKVs, off, kl, vl, pos+KVHeaderSize, kvs)
		}
		hdr := s.kvs[pos : pos+KVHeaderSize]
		if binary.LittleEndian.Uint32(hdr) != kl || binary.LittleEndian.Uint32(hdr[4:]) != vl {
			return corruptAt(s.path(metaFileIndexKVs), pos, "leaf %d: entry header %x, record lengths %d and %d", j, hdr, kl, vl)
		}
		key := s.kvs[off : off+uint64(kl)]
		if j > lo && bytes.Compare(key, prev) <= 0 {
			// out of order within s: damage of the source, whose
			// leaves a snapshot stores in key order
			return fmt.Errorf("%w: %w", ErrKeyOrder, corruptAt(s.path(metaFileIndexKVs), off,
				"leaf %d key %s after leaf %d key %s", j, hexkey.Lower(key), j-1, hexkey.Lower(prev)))
		}
		if j == lo && w.hasLastKey() && bytes.Compare(key, prev) <= 0 {
			return fmt.Errorf("%w: %s: leaf %d key %s after %s", ErrKeyOrder, s.path(metaFileIndexLeaves), j, hexkey.Lower(key), hexkey.Lower(prev))
		}
		prev = key
		newOff := off + shift
		putLeaf(&w.rec, rec[leafOffHash:leafOffHash+HashSize], version, newOff, kl, vl, key)
		if _, err := w.files[metaFileIndexLeaves].buf.Write(w.rec[:]); err != nil {
			return fmt.Errorf("snapshot: write %s: %w", FileLeaves, err)
		}
		if w.leafCount%IndexStride == 0 {
			if _, err := w.files[metaFileIndexIndex].buf.Write(w.rec[leafOffPrefix : leafOffPrefix+IndexEntrySize]); err != nil {
				return fmt.Errorf("snapshot: write %s: %w", FileIndex, err)
			}
		}
		if err := w.hashes.add(key, newOff); err != nil {
			return fmt.Errorf("snapshot: write key hashes: %w", err)
		}
		w.leafCount++
		pos = off + uint64(kl) + uint64(vl)
	}
	if _, err := w.files[metaFileIndexKVs].buf.Write(s.kvs[start:pos]); err != nil {
		return fmt.Errorf("snapshot: write %s: %w", FileKVs, err)
	}
	w.kvLen += pos - start
	w.lastKey = append(w.lastKey[:0], prev...)
	return nil
}
