package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"

	"github.com/ledgerwatch/erigon-lib/mmap"
	"golang.org/x/sys/unix"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// Verify checks the whole snapshot in one sequential pass over each file:
//
//   - the CRC32C of every data file against meta;
//   - leaves: keys strictly increasing, key and value ranges inside kvs and
//     contiguous (kvs holds nothing else), entry headers equal to the
//     records' lengths (format version 2), key prefixes equal to the keys,
//     versions in [1, tree version], every hash recomputed;
//   - branches: in post-order they form one binary tree over all leaves
//     (sizes, first leaves and key leaves consistent with the children that
//     Left and Right return), heights are one more than the taller child,
//     children's heights differ by at most one, reserved bytes are zero,
//     versions in [1, tree version] and not older than the children's,
//     every hash recomputed from the children's hashes;
//   - the root hash in meta equals the root's hash;
//   - lookup: every slot empty or naming a leaf, one entry per leaf, and
//     each leaf's entry reachable by probing from its key's home slot.
//
// Errors wrap ErrCorrupt (and ErrChecksum for checksum mismatches) and name
// the file and byte offset of the first problem found.
func (s *Snapshot) Verify() (err error) {
	if s.closed.Load() {
		return ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverFault(&err)
	for _, b := range s.maps {
		if b != nil {
			_ = mmap.MadviseSequential(b)
		}
	}
	defer func() {
		for _, b := range s.maps {
			if b != nil {
				_ = unix.Madvise(b, unix.MADV_NORMAL) // as mapped by Open
			}
		}
	}()

	if err := s.VerifyChecksums(context.Background()); err != nil {
		return err
	}
	if err := s.verifyLeaves(); err != nil {
		return err
	}
	if err := s.verifyBranches(); err != nil {
		return err
	}
	return s.verifyLookup()
}

// checksumChunk is how many bytes a checksum check reads at a time, and
// between checks of its context.
const checksumChunk = 64 << 10

// VerifyChecksums checks the CRC32C of the named data files (FileLeaves,
// FileBranches, FileKVs, FileIndex, FileLookup; none names them all)
// against meta, the first part of Verify. It is NewChecksumCheck and its
// Run: the files are read with read(2), not through the mapping, so the
// check brings no page into the process's memory and leaves the mapping
// alone for the reads that may go on meanwhile. A file that its path no
// longer names (a writer pruned the snapshot, or replaced it with another
// of the same version, since it was mapped) is checked through the
// mapping, which is what reads serve: the snapshot must stay open until
// the call returns, as for any read. It returns ctx's error if ctx ends
// first. Errors wrap ErrCorrupt and ErrChecksum and name the file.
func (s *Snapshot) VerifyChecksums(ctx context.Context, files ...string) (err error) {
	return s.VerifyChecksumsPaced(ctx, nil, files...)
}

// VerifyChecksumsPaced is VerifyChecksums with a wait for l before each
// read, as ChecksumCheck.SetLimiter makes Run do; a nil l does not pace.
// It opens the files when called and closes them before it returns.
func (s *Snapshot) VerifyChecksumsPaced(ctx context.Context, l Limiter, files ...string) (err error) {
	c, err := s.newChecksumCheck(true, files...)
	if err != nil {
		return err
	}
	if l != nil {
		c.SetLimiter(l)
	}
	// a file read through the mapping may fault (a read error of its
	// disk): an error, as Verify's reads give
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.recoverFault(&err)
	return c.Run(ctx)
}

// ChecksumCheck is a check of the checksums of a snapshot's data files
// that holds them open, so that it can run after the snapshot is closed
// or its directory removed (see NewChecksumCheck).
type ChecksumCheck struct {
	files   []checkedFile
	limiter Limiter
	done    bool // Run or Close closed the files
}

// SetLimiter makes Run wait for l before each read from the files, as
// Writer.SetLimiter does before each write; nil removes it. A check of
// files held in memory does not wait.
func (c *ChecksumCheck) SetLimiter(l Limiter) { c.limiter = l }

type checkedFile struct {
	path string
	f    *os.File // nil: read mem instead
	mem  []byte
	info fileInfo
}

// NewChecksumCheck opens the named data files (none names them all) for a
// check of their checksums against meta, which Run does. Run or Close
// must follow, to close them; a check runs once. A name that is not one
// of the data files (FileLeaves, FileBranches, FileKVs, FileIndex,
// FileLookup) is an error; a file the snapshot's format does not have (the
// lookup table of format version 1) is skipped.
func (s *Snapshot) NewChecksumCheck(files ...string) (*ChecksumCheck, error) {
	return s.newChecksumCheck(false, files...)
}

// newChecksumCheck is NewChecksumCheck; viaMapping lets it check through
// the mapping a file its path no longer names, for a check that runs while
// the snapshot stays open (VerifyChecksums).
func (s *Snapshot) newChecksumCheck(viaMapping bool, files ...string) (*ChecksumCheck, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	for _, name := range files {
		if !slices.Contains(dataFileNames[:], name) {
			return nil, fmt.Errorf("snapshot: checksum check of %q, which is not a data file (%v)", name, dataFileNames)
		}
	}
	c := &ChecksumCheck{}
	for i := range dataFileNames[:dataFiles(s.format)] {
		if len(files) > 0 && !slices.Contains(files, dataFileNames[i]) {
			continue
		}
		cf := checkedFile{path: s.path(i), info: s.files[i]}
		if !s.mapped || s.files[i].length == 0 {
			cf.mem = s.maps[i]
		} else {
			f, err := s.reopen(i, cf.path, viaMapping)
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			if f == nil {
				cf.mem = s.maps[i]
			} else {
				cf.f = f
			}
		}
		c.files = append(c.files, cf)
	}
	return c, nil
}

// reopen opens the file the i-th map was made from by its path. When the
// path no longer names that file (a writer removed the snapshot, pruning
// it or replacing it with another of the same version, while it was
// mapped) it returns nil with viaMapping, for the check to read the
// mapping, which reads go on serving, and an error otherwise.
func (s *Snapshot) reopen(i int, path string, viaMapping bool) (*os.File, error) {
	if viaMapping && s.ids[i] != nil {
		if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
			return nil, nil // not the file mapped, a regular one
		}
	}
	f, fi, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) && viaMapping && s.ids[i] != nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s.ids[i] != nil && !os.SameFile(fi, s.ids[i]) {
		f.Close()
		if viaMapping {
			return nil, nil
		}
		return nil, fmt.Errorf("snapshot: %s is no longer the file mapped: %w", path, fs.ErrNotExist)
	}
	return f, nil
}

// Run checks the files and closes them. It returns ctx's error if ctx ends
// first; an error wrapping ErrCorrupt and ErrChecksum that names the file
// for a mismatch, and one wrapping ErrCorrupt for a file shorter than meta
// records.
func (c *ChecksumCheck) Run(ctx context.Context) error {
	if c.done {
		return fmt.Errorf("%w: the checksum check has run or was closed", ErrClosed)
	}
	defer c.Close()
	pace := pacer{l: c.limiter, ctx: ctx}
	var buf []byte
	for _, cf := range c.files {
		if cf.f != nil && buf == nil {
			buf = make([]byte, checksumChunk)
		}
		crc, err := cf.crc(ctx, &pace, buf)
		if err != nil {
			return err
		}
		if crc != cf.info.crc {
			return checksumError(cf.path, cf.info.crc, crc)
		}
	}
	return nil
}

// crc computes the checksum of the file, checksumChunk bytes at a time
// (read through buf for a file on disk), checking ctx between chunks.
func (cf *checkedFile) crc(ctx context.Context, pace *pacer, buf []byte) (uint32, error) {
	var crc uint32
	if cf.f == nil {
		for off := 0; off < len(cf.mem); off += checksumChunk {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			crc = crc32.Update(crc, crcTable, cf.mem[off:min(off+checksumChunk, len(cf.mem))])
		}
		return crc, nil
	}
	for off := uint64(0); off < cf.info.length; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b := buf[:min(uint64(len(buf)), cf.info.length-off)]
		if err := pace.wait(len(b)); err != nil {
			return 0, err
		}
		n, err := cf.f.ReadAt(b, int64(off))
		if n < len(b) {
			if err == nil || errors.Is(err, io.EOF) {
				return 0, corruptAt(cf.path, off+uint64(n), "file ends before the %d bytes meta records", cf.info.length)
			}
			return 0, fmt.Errorf("snapshot: read %s: %w", cf.path, err)
		}
		crc = crc32.Update(crc, crcTable, b)
		off += uint64(n)
	}
	return crc, nil
}

// Close closes the files of a check that does not run.
func (c *ChecksumCheck) Close() error {
	c.done = true
	var errs []error
	for i := range c.files {
		if f := c.files[i].f; f != nil {
			errs = append(errs, f.Close())
			c.files[i].f = nil
		}
	}
	return errors.Join(errs...)
}

func (s *Snapshot) verifyLeaves() error {
	leavesPath := s.path(metaFileIndexLeaves)
	var prevKey []byte
	var kvEnd uint64 // where the next leaf's entry must start
	hdr := s.kvHeaderSize()
	hash := make([]byte, 0, HashSize)
	for i := uint64(0); i < s.leafCount; i++ {
		rec := s.leafRec(i)
		base := i * RecordSize
		if v := s.LeafVersion(i); v < 1 || v > s.treeVersion {
			return corruptAt(leavesPath, base+leafOffVersion, "leaf %d: version %d outside [1, %d]", i, v, s.treeVersion)
		}
		if off := binary.LittleEndian.Uint64(rec[leafOffKVOff:]); off != kvEnd+hdr {
			return corruptAt(leavesPath, base+leafOffKVOff, "leaf %d: key at %s offset %d, want %d", i, FileKVs, off, kvEnd+hdr)
		}
		key, value, err := s.LeafKV(i)
		if err != nil {
			return err
		}
		if hdr > 0 {
			h := s.kvs[kvEnd : kvEnd+hdr] // LeafKV checked the key's offset
			if kl, vl := binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint32(h[4:]); int(kl) != len(key) || int(vl) != len(value) {
				return corruptAt(s.path(metaFileIndexKVs), kvEnd, "leaf %d: entry header lengths %d and %d, the leaf records %d and %d",
					i, kl, vl, len(key), len(value))
			}
		}
		kvEnd += hdr + uint64(len(key)) + uint64(len(value))
		if p := binary.BigEndian.Uint64(rec[leafOffPrefix:]); p != keyPrefix(key) {
			return corruptAt(leavesPath, base+leafOffPrefix, "leaf %d: key prefix %#016x does not match key %s", i, p, hexkey.Lower(key))
		}
		if i > 0 && bytes.Compare(prevKey, key) >= 0 {
			return corruptAt(s.path(metaFileIndexKVs), kvEnd-uint64(len(key)+len(value)),
				"leaf %d: key %s not greater than the previous key %s", i, hexkey.Lower(key), hexkey.Lower(prevKey))
		}
		if i%IndexStride == 0 {
			off := i / IndexStride * IndexEntrySize
			if e := binary.BigEndian.Uint64(s.index[off:]); e != keyPrefix(key) {
				return corruptAt(s.path(metaFileIndexIndex), off, "entry for leaf %d: prefix %#016x does not match key %s", i, e, hexkey.Lower(key))
			}
		}
		prevKey = key
		hash = nodehash.Leaf(hash[:0], key, value, s.LeafVersion(i))
		if !bytes.Equal(hash, rec[leafOffHash:leafOffHash+HashSize]) {
			return corruptAt(leavesPath, base+leafOffHash, "leaf %d: hash %x, recomputed %x", i, rec[leafOffHash:leafOffHash+HashSize], hash)
		}
	}
	if kvEnd != uint64(len(s.kvs)) {
		return corruptAt(s.path(metaFileIndexKVs), kvEnd, "%d bytes after the last value", uint64(len(s.kvs))-kvEnd)
	}
	return nil
}

// subtree is a branch on the verifier's stack: checked, waiting for its
// parent.
type subtree struct {
	index   uint64
	first   uint64
	size    uint64
	height  uint8
	version int64
}

func (s *Snapshot) verifyBranches() error {
	metaPath := filepath.Join(s.dir, FileMeta)
	switch s.leafCount {
	case 0:
		return nil // Open checked the empty tree's root hash
	case 1:
		if !bytes.Equal(s.rootHash[:], s.LeafHash(0)) {
			return corruptAt(metaPath, metaOffRootHash, "root hash %x, leaf 0 hash %x", s.rootHash, s.LeafHash(0))
		}
		return nil
	}

	stack := make([]subtree, 0, 64)
	hash := make([]byte, 0, HashSize)
	for i := uint64(0); i < s.branchCount; i++ {
		rec := s.branchRec(i)
		if binary.LittleEndian.Uint64(rec[branchOffReserved:]) != 0 {
			return s.branchError(i, branchOffReserved, "reserved field is not zero")
		}
		version := s.BranchVersion(i)
		if version < 1 || version > s.treeVersion {
			return s.branchError(i, branchOffVersion, "version %d outside [1, %d]", version, s.treeVersion)
		}
		f, k, e, err := s.branchLayout(i)
		if err != nil {
			return err
		}

		// The right child: the leaf k or the subtree completed last.
		var rightHash []byte
		var rightHeight uint8
		var rightVersion int64
		if e-k == 1 {
			rightHash, rightVersion = s.LeafHash(k), s.LeafVersion(k)
		} else {
			if len(stack) == 0 {
				return s.branchError(i, branchOffSize, "right subtree of %d leaves has no branch", e-k)
			}
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if c.index != i-1 || c.first != k || c.size != e-k {
				return s.branchError(i, branchOffKeyLeaf,
					"right subtree is leaves [%d, %d), branch %d holds [%d, %d)", k, e, c.index, c.first, c.first+c.size)
			}
			rightHash, rightHeight, rightVersion = s.BranchHash(c.index), c.height, c.version
		}

		// The left child: the leaf f or the subtree completed before.
		var leftHash []byte
		var leftHeight uint8
		var leftVersion int64
		if k-f == 1 {
			leftHash, leftVersion = s.LeafHash(f), s.LeafVersion(f)
		} else {
			if len(stack) == 0 {
				return s.branchError(i, branchOffFirstLeaf, "left subtree of %d leaves has no branch", k-f)
			}
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if c.index != i-(e-k) || c.first != f || c.size != k-f {
				return s.branchError(i, branchOffFirstLeaf,
					"left subtree is leaves [%d, %d), branch %d holds [%d, %d)", f, k, c.index, c.first, c.first+c.size)
			}
			leftHash, leftHeight, leftVersion = s.BranchHash(c.index), c.height, c.version
		}

		height := s.BranchHeight(i)
		if want := int(max(leftHeight, rightHeight)) + 1; int(height) != want {
			return s.branchError(i, branchOffHeight, "height %d, want %d", height, want)
		}
		if d := int(leftHeight) - int(rightHeight); d < -1 || d > 1 {
			return s.branchError(i, branchOffHeight, "unbalanced: children heights %d and %d", leftHeight, rightHeight)
		}
		if c := max(leftVersion, rightVersion); c > version {
			// copy-on-write: a node is saved with or after its children
			return s.branchError(i, branchOffVersion, "version %d older than its child's %d", version, c)
		}
		hash = nodehash.Inner(hash[:0], height, int64(e-f), version, leftHash, rightHash)
		if !bytes.Equal(hash, s.BranchHash(i)) {
			return s.branchError(i, branchOffHash, "hash %x, recomputed %x", s.BranchHash(i), hash)
		}
		if len(stack) >= maxPending {
			return s.branchError(i, branchOffSize, "more than %d subtrees without a parent", maxPending)
		}
		stack = append(stack, subtree{index: i, first: f, size: e - f, height: height, version: version})
	}

	root := s.branchCount - 1
	if len(stack) != 1 || stack[0].first != 0 || stack[0].size != s.leafCount {
		return s.branchError(root, branchOffSize, "root covers leaves [%d, %d) of %d, %d subtrees without a parent",
			stack[len(stack)-1].first, stack[len(stack)-1].first+stack[len(stack)-1].size, s.leafCount, len(stack)-1)
	}
	if !bytes.Equal(s.rootHash[:], s.BranchHash(root)) {
		return corruptAt(metaPath, metaOffRootHash, "root hash %x, branch %d hash %x", s.rootHash, root, s.BranchHash(root))
	}
	return nil
}
