package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
// checks the same things. Its leaf and branch records, of fixed size, go
// straight to their places in w's files; its kvs entries, index entries and
// key hashes, whose places depend on what w writes before them, go to
// scratch files of w's temporary directory, which Join appends. Its leaf
// records and key hashes hold kvs offsets from the start of its own
// entries; Join moves them. It is not safe for concurrent use
// itself, but it and w may be used by different goroutines at once; they
// share w's limiter (see SetLimiter), which must then be safe for
// concurrent use, and the forked writer's waits end with the context
// given to w's SetLimiter until its own SetLimiter binds them to another
// (its goroutine's, whose cancellation should end them). The limiter sees
// each byte of the snapshot's files once: the forked writer's records as
// it writes them, the bytes of its scratch files as Join copies them into
// w's files. Finish and Fork of a forked writer fail: it ends with
// w.Join or with its own Abort, which removes its scratch files.
//
// One fork may be open at a time: until it ends, Fork fails, and so do
// w's writes of records at or past the fork's first leaf or branch, which
// are the fork's places, and w's Finish; each of these failures fails w.
// After an aborted fork w may write those records itself (or fork again):
// Finish cuts the files back to w's own records.
func (w *Writer) Fork(firstLeaf, firstBranch uint64) (*Writer, error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	switch {
	case w.parent != nil:
		return nil, w.fail(fmt.Errorf("%w: fork of a forked writer", ErrTreeShape))
	case firstLeaf < w.leafCount || firstBranch < w.branchCount || firstLeaf >= MaxLeaves || firstBranch >= max(firstLeaf, 1):
		// a subtree from leaf L has at most L-1 branches before it
		return nil, w.fail(fmt.Errorf("%w: fork at leaf %d and branch %d, with %d leaves and %d branches written",
			ErrTreeShape, firstLeaf, firstBranch, w.leafCount, w.branchCount))
	case w.openForks.Load() != 0:
		return nil, w.fail(fmt.Errorf("%w: fork while another fork is open", ErrTreeShape))
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
	w.forkLeaf, w.forkBranch = firstLeaf, firstBranch
	w.openForks.Add(1) // until p's Abort, which Join calls
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
// files whatever happens; after a failed Join, w is failed. A p that is not
// w's fork (nil, w itself, another writer or another writer's fork) is
// refused and left as it is.
func (w *Writer) Join(p *Writer) error {
	if p == nil || p == w || p.parent != w {
		if err := w.usable(); err != nil {
			return err
		}
		return w.fail(fmt.Errorf("%w: join of a writer not forked from this one", ErrTreeShape))
	}
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
		if p.files[i].placed {
			if err := w.adopt(i, &p.files[i], buf, delta); err != nil {
				return fmt.Errorf("snapshot: join %s: %w", dataFileNames[i], err)
			}
			continue
		}
		if err := appendFile(w.files[i].buf, p.files[i].f, p.files[i].n, buf, 0, 0, 0); err != nil {
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

// adopt takes into w's data file i the records that the fork's file src
// placed right after w's own: it moves the kvs offsets of leaf records by
// delta, in place, and adds the records to the file's length and checksum.
// w's next records go after them.
func (w *Writer) adopt(i int, src *dataFile, buf []byte, delta uint64) error {
	dst := &w.files[i]
	// w's buffered records go before src's, at the file's own position
	if err := dst.buf.Flush(); err != nil {
		return err
	}
	if dst.n != src.base {
		return fmt.Errorf("%w: %d bytes written before records placed from %d", ErrTreeShape, dst.n, src.base)
	}
	crc := src.crc
	if i == metaFileIndexLeaves && delta != 0 {
		buf = buf[:len(buf)/RecordSize*RecordSize]
		crc = 0
		for off := uint64(0); off < src.n; {
			b := buf[:min(uint64(len(buf)), src.n-off)]
			if _, err := src.f.ReadAt(b, int64(src.base+off)); err != nil {
				return err
			}
			for j := leafOffKVOff; j+8 <= len(b); j += RecordSize {
				binary.LittleEndian.PutUint64(b[j:], binary.LittleEndian.Uint64(b[j:])+delta)
			}
			if _, err := src.f.WriteAt(b, int64(src.base+off)); err != nil {
				return err
			}
			crc = crc32.Update(crc, crcTable, b)
			off += uint64(len(b))
		}
	}
	dst.crc = crcCombine(dst.crc, crc, src.n)
	dst.n += src.n
	_, err := dst.f.Seek(int64(dst.n), io.SeekStart)
	return err
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
