// Package snapshot is the on-disk format of one IAVL tree: a streaming
// post-order Writer, and a Snapshot that serves the tree's nodes from
// memory-mapped files without allocating.
//
// The format is defined in format.go. A snapshot knows bytes, not tree
// algorithms: it stores nodes as fixed-size records addressed by index,
// leaves in key order and branches in post-order, and leaves searching,
// balancing and hashing policy to the tree that sits above it. Verify checks
// everything a tree needs from the bytes, hashes included.
package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"github.com/ledgerwatch/erigon-lib/mmap"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/internal/osfile"
	"github.com/seed-6dfbb450/memiavl/internal/prefetch"
)

// Ref refers to a node of a snapshot: a leaf or a branch, and its index. The
// zero Ref is branch 0.
type Ref uint64

const leafTag Ref = 1 << 63

// LeafRef returns the reference to leaf i.
func LeafRef(i uint64) Ref { return Ref(i) | leafTag }

// BranchRef returns the reference to branch i.
func BranchRef(i uint64) Ref { return Ref(i) &^ leafTag }

// IsLeaf reports whether r refers to a leaf.
func (r Ref) IsLeaf() bool { return r&leafTag != 0 }

// Index returns the index of the leaf or branch r refers to.
func (r Ref) Index() uint64 { return uint64(r &^ leafTag) }

// String formats r as "leaf N" or "branch N".
func (r Ref) String() string {
	if r.IsLeaf() {
		return fmt.Sprintf("leaf %d", r.Index())
	}
	return fmt.Sprintf("branch %d", r.Index())
}

// Snapshot is an open, memory-mapped snapshot of one tree.
//
// Byte slices returned by its accessors point into the mapping: they must not
// be modified and are valid only until Close. Accessors are safe for
// concurrent use; Close must not run concurrently with them.
//
// An index passed to an accessor must be in range (below LeafCount or
// BranchCount): an accessor that returns an error (LeafKV, LeafKey,
// LeafValue, BranchKey, Left, Right, Search) returns one wrapping
// ErrOutOfRange for an index out of range, and one wrapping ErrClosed
// when called after Close; the others panic like a slice index. An index
// obtained from this snapshot's own navigation (Root, Left, Right, and
// Search when it returns one below hi) is always in range: every value read
// from the files that is used as an index or offset is checked first, so a
// corrupted snapshot that passed Open yields ErrCorrupt errors, never a
// panic. Accessors that return no error (versions, hashes, heights, sizes,
// BranchKeyLeaf, BranchFirstLeaf) return the recorded fields unchecked;
// Verify is the complete check.
//
// The files must not change while they are mapped: a snapshot directory is
// immutable once written, and is deleted only after Close.
type Snapshot struct {
	dir         string
	format      uint32
	treeVersion int64
	leafCount   uint64
	branchCount uint64
	rootHash    [HashSize]byte
	files       [metaDataFileCount]fileInfo

	// The files' bytes, nil when a file is empty; maps are munmapped by
	// Close when mapped is set.
	leaves   []byte
	branches []byte
	kvs      []byte
	index    []byte
	lookup   []byte // nil for format version 1 and for the empty tree
	maps     [metaDataFileCount][]byte
	mapped   bool
	// ids are the files the maps were made from, for the checks that
	// reopen them by path (NewChecksumCheck)
	ids [metaDataFileCount]os.FileInfo
	// closed is set by Close before it unmaps, so that a read that
	// faults or finds the slices gone after it can tell (FaultFrom)
	closed atomic.Bool
}

// Open opens the snapshot in dir and maps its files read-only. It checks the
// meta file (magic, format version, checksum, counts) and the length of each
// data file against it, and reads nothing else: data checksums and the tree
// are checked by Verify.
func Open(dir string) (*Snapshot, error) { return OpenAs(dir, dir) }

// OpenAs opens the snapshot whose files are in dir as Open does, and names
// it named: Dir returns named, and the errors of reads through the mapping
// and the checks that reopen the files by path (Verify, NewChecksumCheck)
// use it. It is for a snapshot written under a temporary name and mapped
// before it is renamed to named; the mapping outlives the rename.
func OpenAs(dir, named string) (*Snapshot, error) {
	m, err := readMeta(filepath.Join(dir, FileMeta))
	if err != nil {
		return nil, err
	}
	s := newSnapshot(filepath.Clean(named), &m)
	s.mapped = true
	for i, name := range dataFileNames[:dataFiles(m.formatVersion)] {
		b, id, err := mapFile(filepath.Join(dir, name), m.files[i].length)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.maps[i], s.ids[i] = b, id
	}
	s.setViews()
	registerKVs(s)
	return s, nil
}

func newSnapshot(dir string, m *meta) *Snapshot {
	return &Snapshot{
		dir:         dir,
		format:      m.formatVersion,
		treeVersion: m.treeVersion,
		leafCount:   m.leafCount,
		branchCount: m.branchCount,
		rootHash:    m.rootHash,
		files:       m.files,
	}
}

func (s *Snapshot) setViews() {
	s.leaves = s.maps[metaFileIndexLeaves]
	s.branches = s.maps[metaFileIndexBranch]
	s.kvs = s.maps[metaFileIndexKVs]
	if s.kvs == nil {
		// an empty file, not mapped (format 1 of a single leaf whose key
		// and value are empty): the key and value read from it are
		// empty, not nil, which would read as absent
		s.kvs = []byte{}
	}
	s.index = s.maps[metaFileIndexIndex]
	s.lookup = s.maps[metaFileIndexLookup]
}

// openRegular opens the file at path for reading, refusing anything but a
// regular file (a FIFO would block the open or the read, and a device read
// as the file's bytes) with an error wrapping ErrCorrupt.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, fi, err := osfile.OpenRegular(path)
	if errors.Is(err, osfile.ErrNotRegular) {
		return nil, nil, corruptAt(path, 0, "not a regular file (%s)", fi.Mode().Type())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	return f, fi, nil
}

// readMeta reads and checks the meta file at path.
func readMeta(path string) (meta, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return meta{}, err
	}
	defer f.Close()
	// Read one byte more than a meta file holds to detect a longer file.
	var buf [MetaSize + 1]byte
	n, err := io.ReadFull(f, buf[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return meta{}, fmt.Errorf("snapshot: read %s: %w", path, err)
	}
	return parseMeta(path, buf[:n])
}

// parseMeta decodes and checks the bytes of the meta file at path.
func parseMeta(path string, buf []byte) (meta, error) {
	n := len(buf)
	if n < metaOffFormat+4 {
		return meta{}, corruptAt(path, uint64(n), "meta file of %d bytes", n)
	}
	if magic := binary.LittleEndian.Uint64(buf[metaOffMagic:]); magic != MetaMagic {
		return meta{}, corruptAt(path, metaOffMagic, "magic %#016x, want %#016x", magic, MetaMagic)
	}
	if v := binary.LittleEndian.Uint32(buf[metaOffFormat:]); v != FormatVersion && v != FormatVersionNoLookup {
		return meta{}, fmt.Errorf("%w: %s: format version %d, this build reads %d and %d",
			ErrFormatVersion, path, v, FormatVersionNoLookup, FormatVersion)
	}
	if n > MetaSize {
		return meta{}, corruptAt(path, MetaSize, "meta file longer than %d bytes", MetaSize)
	}
	if n < MetaSize {
		return meta{}, corruptAt(path, uint64(n), "meta file of %d bytes, want %d", n, MetaSize)
	}
	b := (*[MetaSize]byte)(buf[:MetaSize])
	want := binary.LittleEndian.Uint32(b[metaOffCRC:])
	if got := crc32.Checksum(b[:metaOffCRC], crcTable); got != want {
		return meta{}, checksumError(path, want, got)
	}
	if err := checkMetaFields(path, b); err != nil {
		return meta{}, err
	}
	return decodeMetaFields(b), nil
}

// checkMetaFields checks the fields of a meta file whose checksum matched.
func checkMetaFields(path string, b *[MetaSize]byte) error {
	m := decodeMetaFields(b)
	if binary.LittleEndian.Uint32(b[metaOffReserved0:]) != 0 {
		return corruptAt(path, metaOffReserved0, "reserved field is not zero")
	}
	for i := range m.files {
		off := metaOffFiles + i*metaFileEntrySize + 12
		if binary.LittleEndian.Uint32(b[off:]) != 0 {
			return corruptAt(path, uint64(off), "reserved field is not zero")
		}
	}
	if !bytes.Equal(b[metaOffReservedTail:metaOffCRC], make([]byte, metaReservedTailSize)) {
		return corruptAt(path, metaOffReservedTail, "reserved field is not zero")
	}
	if m.treeVersion < 0 {
		return corruptAt(path, metaOffTreeVersion, "negative tree version %d", m.treeVersion)
	}
	if m.leafCount > MaxLeaves {
		return corruptAt(path, metaOffLeafCount, "leaf count %d exceeds %d", m.leafCount, uint64(MaxLeaves))
	}
	wantBranches := uint64(0)
	if m.leafCount > 0 {
		wantBranches = m.leafCount - 1
	}
	if m.branchCount != wantBranches {
		return corruptAt(path, metaOffBranchCount, "branch count %d with %d leaves", m.branchCount, m.leafCount)
	}
	if m.leafCount == 0 && !bytes.Equal(m.rootHash[:], nodehash.Empty()) {
		return corruptAt(path, metaOffRootHash, "empty tree with root hash %x", m.rootHash)
	}
	if l := m.files[metaFileIndexLeaves].length; l != m.leafCount*RecordSize {
		return corruptAt(path, metaOffFiles+metaFileIndexLeaves*metaFileEntrySize,
			"%s length %d for %d leaves", FileLeaves, l, m.leafCount)
	}
	if l := m.files[metaFileIndexBranch].length; l != m.branchCount*RecordSize {
		return corruptAt(path, metaOffFiles+metaFileIndexBranch*metaFileEntrySize,
			"%s length %d for %d branches", FileBranches, l, m.branchCount)
	}
	if l := m.files[metaFileIndexKVs].length; l > math.MaxInt {
		return corruptAt(path, metaOffFiles+metaFileIndexKVs*metaFileEntrySize, "%s length %d", FileKVs, l)
	}
	if l := m.files[metaFileIndexIndex].length; l != indexLen(m.leafCount) {
		return corruptAt(path, metaOffFiles+metaFileIndexIndex*metaFileEntrySize,
			"%s length %d for %d leaves", FileIndex, l, m.leafCount)
	}
	wantLookup := lookupLen(m.leafCount)
	if m.formatVersion == FormatVersionNoLookup {
		wantLookup = 0 // and the checksum below must be zero too
	}
	if l := m.files[metaFileIndexLookup]; l.length != wantLookup || (wantLookup == 0 && l.crc != 0) {
		return corruptAt(path, metaOffFiles+metaFileIndexLookup*metaFileEntrySize,
			"%s length %d, crc %#08x for %d leaves in format version %d", FileLookup, l.length, l.crc, m.leafCount, m.formatVersion)
	}
	return nil
}

// mapFile maps the file at path read-only after checking that it is size
// bytes long. An empty file maps to nil.
func mapFile(path string, size uint64) ([]byte, os.FileInfo, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	// The mapping outlives the descriptor.
	defer f.Close()
	if err := checkLength(path, uint64(fi.Size()), size); err != nil {
		return nil, nil, err
	}
	if size == 0 {
		return nil, fi, nil
	}
	b, _, err := mmap.Mmap(f, int(size))
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: mmap %s: %w", path, err)
	}
	// mmap.Mmap advises random access, which also turns off the kernel's
	// fault-around: every first touch of a 4 KiB page then costs a fault of
	// its own, even with the file in the page cache. Normal advice maps the
	// cached neighbours of a faulting page together, which is what lookups
	// and scans over a warm snapshot want.
	_ = unix.Madvise(b, unix.MADV_NORMAL)
	return b, fi, nil
}

// checkLength checks that the file at path is as long as meta records.
func checkLength(path string, got, want uint64) error {
	if got != want {
		// The offset is where the file and meta part ways.
		return corruptAt(path, min(got, want), "file of %d bytes, meta records %d", got, want)
	}
	return nil
}

// Closed reports whether Close was called: the slices accessors returned
// are then invalid.
func (s *Snapshot) Closed() bool { return s.closed.Load() }

// Close unmaps the files. Slices returned by accessors are invalid
// afterwards. Close may be called more than once.
func (s *Snapshot) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.mapped {
		unregisterKVs(s)
	}
	var errs []error
	for i, b := range s.maps {
		if b != nil && s.mapped {
			if err := mmap.Munmap(b, nil); err != nil {
				errs = append(errs, fmt.Errorf("snapshot: munmap %s: %w", s.path(i), err))
			}
		}
		s.maps[i] = nil
	}
	s.leaves, s.branches, s.kvs, s.index, s.lookup = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

func (s *Snapshot) path(file int) string { return filepath.Join(s.dir, dataFileNames[file]) }

// Dir returns the directory the snapshot was opened from.
func (s *Snapshot) Dir() string { return s.dir }

// FormatVersion returns the format version of the files.
func (s *Snapshot) FormatVersion() uint32 { return s.format }

// Version returns the version of the tree.
func (s *Snapshot) Version() int64 { return s.treeVersion }

// RootHash returns the root hash recorded in meta (sha256("") for the empty
// tree). The slice is a copy.
func (s *Snapshot) RootHash() []byte {
	h := s.rootHash
	return h[:]
}

// LeafCount returns the number of leaves.
func (s *Snapshot) LeafCount() uint64 { return s.leafCount }

// BranchCount returns the number of branches.
func (s *Snapshot) BranchCount() uint64 { return s.branchCount }

// Holds reports whether b lies inside the snapshot's mapped key/value data:
// whether it is a key or value returned by an accessor and becomes invalid
// at Close. Empty slices are never held.
func (s *Snapshot) Holds(b []byte) bool {
	if len(b) == 0 || len(s.kvs) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s.kvs)))
	return p >= lo && p-lo < uintptr(len(s.kvs))
}

// Root returns the root node, and false for the empty tree.
func (s *Snapshot) Root() (Ref, bool) {
	switch {
	case s.branchCount > 0:
		return BranchRef(s.branchCount - 1), true
	case s.leafCount == 1:
		return LeafRef(0), true
	default:
		return 0, false
	}
}

func (s *Snapshot) leafRec(i uint64) []byte {
	return s.leaves[i*RecordSize : i*RecordSize+RecordSize : i*RecordSize+RecordSize]
}

func (s *Snapshot) branchRec(i uint64) []byte {
	return s.branches[i*RecordSize : i*RecordSize+RecordSize : i*RecordSize+RecordSize]
}

// indexError returns the error of an accessor given index i of a leaf or
// branch (what) that the files do not hold: ErrClosed after Close, else
// ErrOutOfRange.
//
//go:noinline
func (s *Snapshot) indexError(what string, i, n uint64) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: read of %s %d of the snapshot in %s after Close", ErrClosed, what, i, s.dir)
	}
	return fmt.Errorf("%w: %s %d of %d", ErrOutOfRange, what, i, n)
}

// LeafKV returns the key and value of leaf i.
func (s *Snapshot) LeafKV(i uint64) (key, value []byte, err error) {
	if i >= uint64(len(s.leaves))/RecordSize {
		return nil, nil, s.indexError("leaf", i, s.leafCount)
	}
	rec := s.leafRec(i)
	off := binary.LittleEndian.Uint64(rec[leafOffKVOff:])
	kl := uint64(binary.LittleEndian.Uint32(rec[leafOffKeyLen:]))
	vl := uint64(binary.LittleEndian.Uint32(rec[leafOffValLen:]))
	n := uint64(len(s.kvs))
	if off > n || kl+vl > n-off {
		return nil, nil, s.kvRangeError(i)
	}
	k := s.kvs[off : off+kl : off+kl]
	v := s.kvs[off+kl : off+kl+vl : off+kl+vl]
	return k, v, nil
}

// LeafKey returns the key of leaf i.
func (s *Snapshot) LeafKey(i uint64) ([]byte, error) {
	if i >= uint64(len(s.leaves))/RecordSize {
		return nil, s.indexError("leaf", i, s.leafCount)
	}
	rec := s.leafRec(i)
	off := binary.LittleEndian.Uint64(rec[leafOffKVOff:])
	kl := uint64(binary.LittleEndian.Uint32(rec[leafOffKeyLen:]))
	if n := uint64(len(s.kvs)); off > n || kl > n-off {
		return nil, s.kvRangeError(i)
	}
	return s.kvs[off : off+kl : off+kl], nil
}

// LeafValue returns the value of leaf i.
func (s *Snapshot) LeafValue(i uint64) ([]byte, error) {
	_, v, err := s.LeafKV(i)
	return v, err
}

//go:noinline
func (s *Snapshot) kvRangeError(i uint64) error {
	rec := s.leafRec(i)
	return corruptAt(s.path(metaFileIndexLeaves), i*RecordSize+leafOffKVOff,
		"leaf %d: key and value at %d, lengths %d and %d, outside %s of %d bytes", i,
		binary.LittleEndian.Uint64(rec[leafOffKVOff:]), binary.LittleEndian.Uint32(rec[leafOffKeyLen:]),
		binary.LittleEndian.Uint32(rec[leafOffValLen:]), FileKVs, len(s.kvs))
}

// LeafVersion returns the version of leaf i.
func (s *Snapshot) LeafVersion(i uint64) int64 {
	return int64(binary.LittleEndian.Uint64(s.leafRec(i)[leafOffVersion:]))
}

// LeafHash returns the node hash of leaf i.
func (s *Snapshot) LeafHash(i uint64) []byte {
	return s.leafRec(i)[leafOffHash : leafOffHash+HashSize : leafOffHash+HashSize]
}

// Prefetch asks the processor for node r's record without waiting for it,
// ahead of a read of its fields; it does nothing for a node out of range
// or a nil snapshot.
func (s *Snapshot) Prefetch(r Ref) {
	if s == nil {
		return
	}
	recs := s.branches
	if r.IsLeaf() {
		recs = s.leaves
	}
	if i := r.Index(); i < uint64(len(recs))/RecordSize {
		prefetch.Line(unsafe.Pointer(&recs[i*RecordSize]))
	}
}

// BranchHeight returns the height of branch i.
func (s *Snapshot) BranchHeight(i uint64) uint8 { return s.branchRec(i)[branchOffHeight] }

// BranchSize returns the number of leaves under branch i.
func (s *Snapshot) BranchSize(i uint64) int64 {
	return int64(uint40At(s.branchRec(i), branchOffSize))
}

// BranchVersion returns the version of branch i.
func (s *Snapshot) BranchVersion(i uint64) int64 {
	return int64(binary.LittleEndian.Uint64(s.branchRec(i)[branchOffVersion:]))
}

// BranchHash returns the node hash of branch i.
func (s *Snapshot) BranchHash(i uint64) []byte {
	return s.branchRec(i)[branchOffHash : branchOffHash+HashSize : branchOffHash+HashSize]
}

// BranchKeyLeaf returns the index of the leaf whose key is the key of branch
// i, as recorded: unchecked (BranchKey and Right check it).
func (s *Snapshot) BranchKeyLeaf(i uint64) uint64 { return uint40At(s.branchRec(i), branchOffKeyLeaf) }

// BranchFirstLeaf returns the index of the leftmost leaf under branch i, as
// recorded: unchecked (Left checks it).
func (s *Snapshot) BranchFirstLeaf(i uint64) uint64 {
	return uint40At(s.branchRec(i), branchOffFirstLeaf)
}

// BranchKey returns the key of branch i: the smallest key of its right
// subtree.
func (s *Snapshot) BranchKey(i uint64) ([]byte, error) {
	if i >= uint64(len(s.branches))/RecordSize {
		return nil, s.indexError("branch", i, s.branchCount)
	}
	k := s.BranchKeyLeaf(i)
	if k >= s.leafCount {
		return nil, s.branchError(i, branchOffKeyLeaf, "key leaf %d of %d leaves", k, s.leafCount)
	}
	return s.LeafKey(k)
}

// branchLayout reads and checks the leaf range of branch i: first leaf f,
// key leaf k and end e = f + size, with f < k < e <= LeafCount.
func (s *Snapshot) branchLayout(i uint64) (f, k, e uint64, err error) {
	if i >= uint64(len(s.branches))/RecordSize {
		return 0, 0, 0, s.indexError("branch", i, s.branchCount)
	}
	rec := s.branchRec(i)
	size := uint40At(rec, branchOffSize)
	f = uint40At(rec, branchOffFirstLeaf)
	k = uint40At(rec, branchOffKeyLeaf)
	e = f + size // no overflow: both are below 2^40
	if f >= k || k >= e || e > s.leafCount {
		return 0, 0, 0, s.layoutError(i)
	}
	return f, k, e, nil
}

//go:noinline
func (s *Snapshot) layoutError(i uint64) error {
	rec := s.branchRec(i)
	return s.branchError(i, branchOffSize, "size %d, first leaf %d, key leaf %d with %d leaves",
		uint40At(rec, branchOffSize), uint40At(rec, branchOffFirstLeaf), uint40At(rec, branchOffKeyLeaf), s.leafCount)
}

func (s *Snapshot) branchError(i uint64, field int, format string, args ...any) error {
	return corruptAt(s.path(metaFileIndexBranch), i*RecordSize+uint64(field), "branch %d: %s", i, fmt.Sprintf(format, args...))
}

// Right returns the right child of branch i.
func (s *Snapshot) Right(i uint64) (Ref, error) {
	_, k, e, err := s.branchLayout(i)
	if err != nil {
		return 0, err
	}
	if e-k == 1 {
		return LeafRef(k), nil
	}
	if i == 0 {
		return 0, s.branchError(i, branchOffSize, "right subtree of %d leaves before any branch", e-k)
	}
	return s.child(i, i-1, k, e)
}

// Left returns the left child of branch i.
func (s *Snapshot) Left(i uint64) (Ref, error) {
	f, k, e, err := s.branchLayout(i)
	if err != nil {
		return 0, err
	}
	if k-f == 1 {
		return LeafRef(f), nil
	}
	rightSize := e - k
	if i < rightSize {
		return 0, s.branchError(i, branchOffSize, "left subtree of %d leaves before branch 0", k-f)
	}
	return s.child(i, i-rightSize, f, k)
}

// child returns branch c, the child of branch i over leaves [f, e), after
// checking that c's record covers those leaves (the readers of a subtree,
// a scan of its leaves or GetByIndex, take its range from its own record)
// and is lower than i: a path down the tree is then at most 255 branches
// long, where positions alone allow one branch per leaf, and the tree's
// recursive walks would overflow the stack.
func (s *Snapshot) child(i, c, f, e uint64) (Ref, error) {
	rec := s.branchRec(c)
	if cf, cs := uint40At(rec, branchOffFirstLeaf), uint40At(rec, branchOffSize); cf != f || cs != e-f {
		return 0, s.branchError(c, branchOffSize, "first leaf %d, size %d; its parent, branch %d, gives it leaves [%d, %d)", cf, cs, i, f, e)
	}
	if h, ph := rec[branchOffHeight], s.branchRec(i)[branchOffHeight]; h >= ph {
		return 0, s.branchError(c, branchOffHeight, "height %d, its parent, branch %d, of height %d", h, i, ph)
	}
	return BranchRef(c), nil
}

// narrow shrinks [lo, hi) to the leaves whose prefixes can equal p, using
// the index: a leaf before the last run that starts below p has a smaller
// prefix, and a leaf from the first run that starts above p on has a larger
// one. Prefixes only order keys, so the result is a superset of the leaves
// equal to or just above the key.
func (s *Snapshot) narrow(p uint64, lo, hi uint64) (uint64, uint64) {
	bLo, bHi := lo/IndexStride, (hi-1)/IndexStride+1
	if bHi*IndexEntrySize > uint64(len(s.index)) {
		return lo, hi // checked by Open; never narrow past the map
	}
	entry := func(b uint64) uint64 {
		return binary.BigEndian.Uint64(s.index[b*IndexEntrySize:])
	}
	// j: first run in [bLo, bHi) whose first prefix is >= p
	a, z := bLo, bHi
	for a < z {
		m := a + (z-a)/2
		if entry(m) < p {
			a = m + 1
		} else {
			z = m
		}
	}
	j := a
	// k: first run in [j, bHi) whose first prefix is > p
	z = bHi
	for a < z {
		m := a + (z-a)/2
		if entry(m) <= p {
			a = m + 1
		} else {
			z = m
		}
	}
	k := a
	if j > bLo {
		lo = max(lo, (j-1)*IndexStride)
	}
	if k < bHi {
		// (not below lo: only a damaged entry puts k*IndexStride there,
		// which Search then finds out)
		hi = max(lo, min(hi, k*IndexStride))
	}
	return lo, hi
}

// Search looks for key among leaves [lo, hi). It returns the index of the
// first leaf whose key is >= key (hi if none) and whether that key equals
// key. It compares the 8-byte key prefixes first and reads full keys only
// when they tie. It does not allocate.
func (s *Snapshot) Search(key []byte, lo, hi uint64) (idx uint64, found bool, err error) {
	// a closed snapshot has no leaves: only an empty range is left to
	// refuse (with ErrClosed)
	if lo > hi || hi > uint64(len(s.leaves))/RecordSize || hi == 0 && s.closed.Load() {
		return 0, false, s.searchRangeError(lo, hi)
	}
	p := keyPrefix(key)
	lo0, hi0 := lo, hi
	if hi-lo > 2*IndexStride {
		lo, hi = s.narrow(p, lo, hi)
	}
	nlo, nhi := lo, hi
	var eq uint64 // index of the last leaf seen equal to key
	sawEq := false
	for lo < hi {
		mid := lo + (hi-lo)/2
		mp := binary.BigEndian.Uint64(s.leaves[mid*RecordSize+leafOffPrefix:])
		c := 1
		switch {
		case mp < p:
			c = -1
		case mp == p: // (the prefixes decide most comparisons inline)
			var err error
			if c, err = s.compareLeaf(mid, key, p); err != nil {
				return 0, false, err
			}
		}
		if c < 0 {
			lo = mid + 1
		} else {
			if c == 0 {
				eq, sawEq = mid, true
			}
			hi = mid
		}
	}
	// The search compared the leaves on both sides of the result, but
	// for a result at an end of the range the index narrowed it to: the
	// leaf beyond that end, which a damaged index entry may have cut
	// off, is compared too (rarely: the result is seldom at an end).
	if lo == nlo && nlo > lo0 {
		if c, err := s.compareLeaf(nlo-1, key, p); err != nil {
			return 0, false, err
		} else if c >= 0 {
			return 0, false, s.indexFileError(nlo, "narrowed a search for %s to leaves [%d, %d), but leaf %d is not below it", hexkey.Lower(key), nlo, nhi, nlo-1)
		}
	}
	if lo == nhi && nhi < hi0 {
		if c, err := s.compareLeaf(nhi, key, p); err != nil {
			return 0, false, err
		} else if c < 0 {
			return 0, false, s.indexFileError(nhi, "narrowed a search for %s to leaves [%d, %d), but leaf %d is below it", hexkey.Lower(key), nlo, nhi, nhi)
		} else if c == 0 {
			eq, sawEq = nhi, true
		}
	}
	return lo, sawEq && eq == lo, nil
}

// compareLeaf compares the key of leaf i with key, whose prefix is p.
func (s *Snapshot) compareLeaf(i uint64, key []byte, p uint64) (int, error) {
	switch mp := binary.BigEndian.Uint64(s.leaves[i*RecordSize+leafOffPrefix:]); {
	case mp < p:
		return -1, nil
	case mp > p:
		return 1, nil
	}
	k, err := s.LeafKey(i)
	if err != nil {
		return 0, err
	}
	return bytes.Compare(k, key), nil
}

// indexFileError reports damage of the index file's entries around leaf
// i's.
//
//go:noinline
func (s *Snapshot) indexFileError(i uint64, format string, args ...any) error {
	b := min(i/IndexStride, uint64(len(s.index))/IndexEntrySize)
	return corruptAt(s.path(metaFileIndexIndex), b*IndexEntrySize, "%s", fmt.Sprintf(format, args...))
}

//go:noinline
func (s *Snapshot) searchRangeError(lo, hi uint64) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: search in the snapshot in %s after Close", ErrClosed, s.dir)
	}
	return fmt.Errorf("%w: search in leaves [%d, %d) of %d", ErrOutOfRange, lo, hi, s.leafCount)
}
