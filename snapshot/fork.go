package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
)

// Fork returns a writer for one subtree that w takes whole with Join, so
// that two goroutines can write the two halves of a tree: w writes the
// nodes before the subtree (say, its left sibling) while the forked writer
// writes the subtree. firstLeaf and firstBranch are the indices the
// subtree's first leaf and first branch get in the snapshot, which are the
// counts of leaves and branches w must have written when Join runs: for the
// right child of a root whose left child has L leaves, L and L-1.
//
// The forked writer takes AddLeaf, AddBranch and AddSubtree like w and
// checks the same things, writing into scratch files of w's temporary
// directory. Its leaf records and key hashes hold kvs offsets from the start
// of its own entries; Join moves them. It is not safe for concurrent use
// itself, but it and w may be used by different goroutines at once; they
// share w's limiter (see SetLimiter), which must then be safe for
// concurrent use. Finish and Fork of a forked writer fail: it ends with
// w.Join or with its own Abort, which removes its scratch files.
func (w *Writer) Fork(firstLeaf, firstBranch uint64) (*Writer, error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	switch {
	case w.parent != nil:
		return nil, w.fail(fmt.Errorf("%w: fork of a forked writer", ErrTreeShape))
	case firstLeaf < w.leafCount || firstBranch < w.branchCount || firstLeaf >= MaxLeaves:
		return nil, w.fail(fmt.Errorf("%w: fork at leaf %d and branch %d, with %d leaves and %d branches written",
			ErrTreeShape, firstLeaf, firstBranch, w.leafCount, w.branchCount))
	}
	w.forks++
	prefix := filepath.Join(w.tmp, fmt.Sprintf("fork-%d.", w.forks))
	p := &Writer{
		dir:         w.dir,
		version:     w.version,
		parent:      w,
		forkPrefix:  prefix,
		leafBase:    firstLeaf,
		branchBase:  firstBranch,
		leafCount:   firstLeaf,
		branchCount: firstBranch,
		stack:       make([]pending, 0, 64),
		lastKey:     make([]byte, 0, 64),
		pace:        w.pace,
	}
	// read back by Join
	if err := p.createDataFiles(prefix, os.O_RDWR, 0o600); err != nil {
		_ = p.Abort()
		return nil, w.fail(err)
	}
	var err error
	if p.hashes, err = newLookupBuilder(prefix + "hashes"); err != nil {
		_ = p.Abort()
		return nil, w.fail(err)
	}
	return p, nil
}

// hasLastKey reports whether w has written a leaf, whose key the next one
// must follow.
func (w *Writer) hasLastKey() bool { return w.leafCount > w.leafBase }

// Join appends the subtree that p, forked from w, has written: w must have
// written exactly the leaves and branches that come before it (those Fork
// was told), p exactly one complete subtree, and p's first key must follow
// w's last. The subtree is then pending in w as if w had written it itself,
// and the files are the same bytes as if it had. Join removes p's scratch
// files whatever happens; after a failed Join, w is failed.
func (w *Writer) Join(p *Writer) error {
	if err := w.usable(); err != nil {
		_ = p.Abort()
		return err
	}
	if err := w.join(p); err != nil {
		_ = p.Abort()
		return w.fail(err)
	}
	p.finished = true // joined: its Abort only removes its files
	return p.Abort()
}

func (w *Writer) join(p *Writer) error {
	switch {
	case p.parent != w:
		return fmt.Errorf("%w: join of a writer not forked from this one", ErrTreeShape)
	case p.err != nil:
		return fmt.Errorf("snapshot: forked writer: %w", p.err)
	case p.finished:
		return fmt.Errorf("snapshot: forked writer: %w", ErrClosed)
	case w.leafCount != p.leafBase || w.branchCount != p.branchBase:
		return fmt.Errorf("%w: join of a subtree from leaf %d and branch %d after %d leaves and %d branches",
			ErrTreeShape, p.leafBase, p.branchBase, w.leafCount, w.branchCount)
	case len(p.stack) != 1:
		return fmt.Errorf("%w: join of %d subtrees, want 1", ErrTreeShape, len(p.stack))
	case len(w.stack) >= maxPending:
		return fmt.Errorf("%w: more than %d subtrees without a parent", ErrTreeShape, maxPending)
	}
	for i := range p.files {
		if err := p.files[i].buf.Flush(); err != nil {
			return fmt.Errorf("snapshot: write forked %s: %w", dataFileNames[i], err)
		}
	}
	if err := p.hashes.buf.Flush(); err != nil {
		return fmt.Errorf("snapshot: write forked key hashes: %w", err)
	}
	if w.hasLastKey() {
		first, err := p.firstKey()
		if err != nil {
			return err
		}
		if bytes.Compare(first, w.lastKey) <= 0 {
			return fmt.Errorf("%w: leaf %d key %s after %s", ErrKeyOrder, w.leafCount, hexkey.Lower(first), hexkey.Lower(w.lastKey))
		}
	}
	delta := w.kvLen // p's kvs offsets start at 0
	buf := make([]byte, writeBufferSize)
	for i := range p.files {
		rec, at := 0, 0
		if i == metaFileIndexLeaves {
			rec, at = RecordSize, leafOffKVOff
		}
		if err := appendFile(w.files[i].buf, p.files[i].f, p.files[i].n, buf, rec, at, delta); err != nil {
			return fmt.Errorf("snapshot: join %s: %w", dataFileNames[i], err)
		}
	}
	leaves := p.leafCount - p.leafBase
	if err := appendFile(w.hashes.buf, p.hashes.f, leaves*lookupBuildRecord, buf, lookupBuildRecord, 8, delta); err != nil {
		return fmt.Errorf("snapshot: join key hashes: %w", err)
	}
	w.leafCount, w.branchCount = p.leafCount, p.branchCount
	w.kvLen += p.kvLen
	w.stack = append(w.stack, p.stack[0])
	w.lastKey = append(w.lastKey[:0], p.lastKey...)
	return nil
}

// firstKey reads the key of p's first leaf back from its kvs file.
func (p *Writer) firstKey() ([]byte, error) {
	f := p.files[metaFileIndexKVs].f
	var hdr [KVHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("snapshot: read forked %s: %w", FileKVs, err)
	}
	key := make([]byte, binary.LittleEndian.Uint32(hdr[:]))
	if _, err := f.ReadAt(key, KVHeaderSize); err != nil {
		return nil, fmt.Errorf("snapshot: read forked %s: %w", FileKVs, err)
	}
	return key, nil
}

// appendFile writes the first n bytes of src to dst, through buf. With rec
// > 0 the bytes are records of rec bytes, and delta is added to the
// little-endian uint64 at offset at of each.
func appendFile(dst io.Writer, src *os.File, n uint64, buf []byte, rec, at int, delta uint64) error {
	if rec > 0 {
		buf = buf[:len(buf)/rec*rec]
	}
	for off := uint64(0); off < n; {
		b := buf[:min(uint64(len(buf)), n-off)]
		if _, err := src.ReadAt(b, int64(off)); err != nil {
			return err
		}
		if rec > 0 && delta != 0 {
			for j := at; j+8 <= len(b); j += rec {
				binary.LittleEndian.PutUint64(b[j:], binary.LittleEndian.Uint64(b[j:])+delta)
			}
		}
		if _, err := dst.Write(b); err != nil {
			return err
		}
		off += uint64(len(b))
	}
	return nil
}
