package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/internal/osfile"
)

const (
	// writeBufferSize is the buffer of each data file being written but
	// the index, whose entries are one per IndexStride leaves; larger
	// buffers save no measurable time, only memory, once per store
	// written in parallel.
	writeBufferSize      = 256 << 10
	indexWriteBufferSize = 16 << 10
	// maxPending bounds the writer's stack of subtrees waiting for a
	// parent. In post-order that stack holds at most one subtree per level
	// of the tree, and an AVL tree of MaxLeaves leaves is under 60 levels
	// high, so a deeper stack means the input is not such a tree.
	maxPending = 128
)

// crcFile is the sink under a data file's buffer: it counts and checksums
// the bytes on their way to the file, a buffer-full at a time. Every
// writebackChunk bytes it asks the kernel to start writing the chunk back
// (without waiting), so that the disk works while the tree is still being
// walked and the fsync at Finish finds little left to do, instead of the
// whole file dirty in the page cache and the writer throttled at the dirty
// limit.
type crcFile struct {
	f       *os.File
	pace    *pacer
	n       uint64
	crc     uint32
	flushed uint64 // bytes handed to writeback
	// placed: the bytes go to f from offset base on, with pwrite, instead
	// of at f's own position: a forked writer's records of fixed size,
	// written straight into their place in the parent's file (see Fork).
	placed bool
	base   uint64
}

// writebackChunk is how many written bytes start a writeback.
const writebackChunk = 8 << 20

func (c *crcFile) Write(p []byte) (int, error) {
	if err := c.pace.wait(len(p)); err != nil {
		return 0, err
	}
	var n int
	var err error
	if c.placed {
		n, err = c.f.WriteAt(p, int64(c.base+c.n))
	} else {
		n, err = c.f.Write(p)
	}
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	c.n += uint64(n)
	if c.n-c.flushed >= writebackChunk {
		// Advisory: an error here (say, a file system without the call)
		// changes nothing, as Finish fsyncs every file.
		osfile.StartWriteback(c.f.Fd(), int64(c.base+c.flushed), int64(c.n-c.flushed))
		c.flushed = c.n
	}
	return n, err
}

// dataFile is one data file being written.
type dataFile struct {
	crcFile
	buf *bufio.Writer
}

// pending is a finished subtree waiting for its parent.
type pending struct {
	first   uint64 // index of its leftmost leaf
	size    uint64 // number of leaves
	version int64  // its root's version
	height  uint8
	hash    [HashSize]byte
}

// Writer streams the nodes of one tree, in post-order, into a new snapshot
// directory. Memory use is bounded by the height of the tree plus one write
// buffer of 256 KiB per data file; nothing is allocated per node. A Writer is
// not safe for concurrent use.
//
// The snapshot is written under a temporary directory next to the target and
// appears under its name only when Finish has made it durable (or, after
// DeferSync, has handed its fsyncs to a SyncGroup). After any
// error the Writer is failed: every later call returns the first error, and
// the caller should call Abort, which removes the temporary directory. Abort
// after a successful Finish does nothing, so `defer w.Abort()` is the usual
// pattern.
type Writer struct {
	dir     string
	tmp     string
	version int64

	files  [metaDataFileCount - 1]dataFile // streamed: every file but lookup
	lookup *os.File                        // built at Finish from hashes
	hashes *lookupBuilder
	pace   pacer // see SetLimiter

	leafCount   uint64
	branchCount uint64
	kvLen       uint64 // bytes written to kvs so far
	stack       []pending
	shape       []pending // AddSubtree's scratch stack
	lastKey     []byte
	rec         [RecordSize]byte
	kvHeader    [KVHeaderSize]byte

	err      error // sticky
	finished bool
	syncs    *SyncGroup // see DeferSync; nil: Finish syncs

	// Fork and Join (fork.go): a forked writer has a parent, writes its
	// leaf and branch records into the parent's files (placedBase) and the
	// rest into scratch files named forkPrefix+name, and starts at
	// leafBase and branchBase with kvs offsets from 0.
	parent               *Writer
	forkPrefix           string
	leafBase, branchBase uint64
	forks                int          // forks made, to name their files
	openForks            atomic.Int32 // forks neither joined nor aborted: 0 or 1
	forkLeaf, forkBranch uint64       // the open fork's first leaf and branch
	forkEnded            bool         // a fork: counted out of its parent's openForks
}

// NewWriter starts a snapshot of a tree at the given version, to appear as
// directory dir, which must not exist; its parent must. The files are written
// under dir+".tmp-*" in the same parent.
func NewWriter(dir string, version int64) (*Writer, error) {
	if version < 0 {
		return nil, fmt.Errorf("%w: negative tree version %d", ErrInvalidNode, version)
	}
	dir = filepath.Clean(dir)
	if err := checkAbsent(dir); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("snapshot: create temporary directory: %w", err)
	}
	w := &Writer{
		dir:     dir,
		tmp:     tmp,
		version: version,
		stack:   make([]pending, 0, 64),
		lastKey: make([]byte, 0, 64),
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = w.Abort()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := w.createDataFiles(tmp+string(filepath.Separator), os.O_WRONLY, 0o644); err != nil {
		_ = w.Abort()
		return nil, err
	}
	// The lookup table's build reads the file back for its checksum.
	if w.lookup, err = os.OpenFile(filepath.Join(tmp, FileLookup), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		_ = w.Abort()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if w.hashes, err = newLookupBuilder(filepath.Join(tmp, "lookup.hashes")); err != nil {
		_ = w.Abort()
		return nil, err
	}
	return w, nil
}

// placedBase reports whether data file i of a forked writer is written
// straight into the parent's file, and from which offset: the leaf and
// branch records, whose places the fork's first leaf and branch give.
func (w *Writer) placedBase(i int) (uint64, bool) {
	if w.parent == nil || !placedFile(i) {
		return 0, false
	}
	if i == metaFileIndexLeaves {
		return w.leafBase * RecordSize, true
	}
	return w.branchBase * RecordSize, true
}

// beforeFork refuses a write of leaves leaf records and branches branch
// records that would reach the records of the open fork: those places are
// its.
func (w *Writer) beforeFork(leaves, branches uint64) error {
	if w.openForks.Load() == 0 {
		return nil
	}
	if w.leafCount+leaves > w.forkLeaf || w.branchCount+branches > w.forkBranch {
		return fmt.Errorf("%w: records up to leaf %d and branch %d, with a fork open from leaf %d and branch %d",
			ErrTreeShape, w.leafCount+leaves, w.branchCount+branches, w.forkLeaf, w.forkBranch)
	}
	return nil
}

// placedFile reports whether forked writers write data file i straight
// into the parent's.
func placedFile(i int) bool { return i == metaFileIndexLeaves || i == metaFileIndexBranch }

// createDataFiles creates the streamed data files, named prefix+name,
// opened with flag (O_WRONLY or O_RDWR), and their buffers.
func (w *Writer) createDataFiles(prefix string, flag int, perm os.FileMode) error {
	for i, name := range dataFileNames[:len(w.files)] {
		var f *os.File
		var err error
		if base, ok := w.placedBase(i); ok {
			// read back and patched in place by Join
			f, err = os.OpenFile(filepath.Join(w.parent.tmp, name), os.O_RDWR, 0)
			w.files[i].placed, w.files[i].base = true, base
		} else {
			f, err = os.OpenFile(prefix+name, flag|os.O_CREATE|os.O_EXCL, perm)
		}
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		w.files[i].f = f
		w.files[i].pace = &w.pace
		if w.parent != nil && !w.files[i].placed {
			// a fork's scratch file: Join copies its bytes into the
			// parent's file, whose writes wait for the limiter
			w.files[i].pace = &noPace
		}
		size := writeBufferSize
		if i == metaFileIndexIndex {
			size = indexWriteBufferSize
		}
		w.files[i].buf = bufio.NewWriterSize(&w.files[i].crcFile, size)
	}
	return nil
}

func checkAbsent(dir string) error {
	_, err := os.Lstat(dir)
	switch {
	case err == nil:
		return fmt.Errorf("%w: %s", ErrExists, dir)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("snapshot: %w", err)
	}
}

// fail records err as the writer's sticky error and returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// usable returns the error that stops the writer from taking more input.
func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return ErrClosed
	}
	return nil
}

func (w *Writer) checkNode(version int64, hash []byte) error {
	if len(hash) != HashSize {
		return fmt.Errorf("%w: hash of %d bytes", ErrInvalidNode, len(hash))
	}
	if version < 1 || version > w.version {
		return fmt.Errorf("%w: node version %d outside [1, %d]", ErrInvalidNode, version, w.version)
	}
	return nil
}

// AddLeaf appends the next leaf in post-order. Keys must be strictly
// increasing. hash is the leaf's node hash; the writer does not recompute it
// (Verify does).
func (w *Writer) AddLeaf(key, value []byte, version int64, hash []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.checkNode(version, hash); err != nil {
		return w.fail(err)
	}
	if uint64(len(key)) > math.MaxUint32 || uint64(len(value)) > math.MaxUint32 {
		return w.fail(fmt.Errorf("%w: key of %d bytes, value of %d bytes", ErrInvalidNode, len(key), len(value)))
	}
	if w.leafCount >= MaxLeaves {
		return w.fail(fmt.Errorf("%w: more than %d leaves", ErrInvalidNode, uint64(MaxLeaves)))
	}
	if w.hasLastKey() && bytes.Compare(key, w.lastKey) <= 0 {
		return w.fail(fmt.Errorf("%w: leaf %d key %s after %s", ErrKeyOrder, w.leafCount, hexkey.Lower(key), hexkey.Lower(w.lastKey)))
	}
	if len(w.stack) >= maxPending {
		return w.fail(fmt.Errorf("%w: more than %d subtrees without a parent", ErrTreeShape, maxPending))
	}
	if err := w.beforeFork(1, 0); err != nil {
		return w.fail(err)
	}

	kvs := &w.files[metaFileIndexKVs]
	keyOff := w.kvLen + KVHeaderSize
	putLeaf(&w.rec, hash, version, keyOff, uint32(len(key)), uint32(len(value)), key)
	if _, err := w.files[metaFileIndexLeaves].buf.Write(w.rec[:]); err != nil {
		return w.fail(fmt.Errorf("snapshot: write %s: %w", FileLeaves, err))
	}
	binary.LittleEndian.PutUint32(w.kvHeader[0:], uint32(len(key)))
	binary.LittleEndian.PutUint32(w.kvHeader[4:], uint32(len(value)))
	if _, err := kvs.buf.Write(w.kvHeader[:]); err != nil {
		return w.fail(fmt.Errorf("snapshot: write %s: %w", FileKVs, err))
	}
	if _, err := kvs.buf.Write(key); err != nil {
		return w.fail(fmt.Errorf("snapshot: write %s: %w", FileKVs, err))
	}
	if _, err := kvs.buf.Write(value); err != nil {
		return w.fail(fmt.Errorf("snapshot: write %s: %w", FileKVs, err))
	}

	if w.leafCount%IndexStride == 0 {
		var e [IndexEntrySize]byte
		copy(e[:], w.rec[leafOffPrefix:leafOffPrefix+IndexEntrySize])
		if _, err := w.files[metaFileIndexIndex].buf.Write(e[:]); err != nil {
			return w.fail(fmt.Errorf("snapshot: write %s: %w", FileIndex, err))
		}
	}

	if err := w.hashes.add(key, keyOff); err != nil {
		return w.fail(fmt.Errorf("snapshot: write key hashes: %w", err))
	}

	p := pending{first: w.leafCount, size: 1, version: version}
	copy(p.hash[:], hash)
	w.stack = append(w.stack, p)
	w.lastKey = append(w.lastKey[:0], key...)
	w.kvLen = keyOff + uint64(len(key)) + uint64(len(value))
	w.leafCount++
	return nil
}

// AddBranch appends the next inner node in post-order: its children are the
// two subtrees completed last. size must be the sum of their sizes, height
// one more than the larger of their heights, their heights may differ by
// at most one, and version may not be older than theirs (a node is saved
// with or after its children). A branch that breaks a rule fails the
// writer (ErrTreeShape, ErrInvalidNode for the version).
func (w *Writer) AddBranch(height uint8, size int64, version int64, hash []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.checkNode(version, hash); err != nil {
		return w.fail(err)
	}
	n := len(w.stack)
	if n < 2 {
		return w.fail(fmt.Errorf("%w: branch %d with %d pending subtrees", ErrTreeShape, w.branchCount, n))
	}
	if err := w.beforeFork(0, 1); err != nil {
		return w.fail(err)
	}
	left, right := &w.stack[n-2], &w.stack[n-1]
	if size < 0 || uint64(size) != left.size+right.size {
		return w.fail(fmt.Errorf("%w: branch %d size %d, children sizes %d + %d",
			ErrTreeShape, w.branchCount, size, left.size, right.size))
	}
	want := int(max(left.height, right.height)) + 1
	if int(height) != want {
		return w.fail(fmt.Errorf("%w: branch %d height %d, want %d", ErrTreeShape, w.branchCount, height, want))
	}
	if d := int(left.height) - int(right.height); d < -1 || d > 1 {
		return w.fail(fmt.Errorf("%w: branch %d children heights %d and %d", ErrTreeShape, w.branchCount, left.height, right.height))
	}
	if c := max(left.version, right.version); version < c {
		// copy-on-write saves a node with or after its children (Verify
		// refuses the file otherwise)
		return w.fail(fmt.Errorf("%w: branch %d version %d older than its child's %d", ErrInvalidNode, w.branchCount, version, c))
	}

	putBranch(&w.rec, hash, version, uint64(size), left.first, right.first, height)
	if _, err := w.files[metaFileIndexBranch].buf.Write(w.rec[:]); err != nil {
		return w.fail(fmt.Errorf("snapshot: write %s: %w", FileBranches, err))
	}
	left.size = uint64(size)
	left.version = version
	left.height = height
	copy(left.hash[:], hash)
	w.stack = w.stack[:n-1]
	w.branchCount++
	return nil
}

// LeafCount returns the number of leaves added so far, which is the index
// the next leaf gets.
func (w *Writer) LeafCount() uint64 { return w.leafCount }

// BranchCount returns the number of branches added so far, which is the
// index the next branch gets.
func (w *Writer) BranchCount() uint64 { return w.branchCount }

// Finish completes the snapshot: exactly one subtree (the root) or none (the
// empty tree) must be pending. It flushes and fsyncs the data files, writes
// and fsyncs meta, fsyncs the temporary directory, renames it to the target
// and fsyncs the parent directory; after DeferSync it leaves every fsync to
// the group. On error the caller should call Abort.
func (w *Writer) Finish() error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.parent != nil {
		return w.fail(fmt.Errorf("%w: a forked writer ends with Join, not Finish", ErrTreeShape))
	}
	if len(w.stack) > 1 {
		return w.fail(fmt.Errorf("%w: %d subtrees without a parent at finish", ErrTreeShape, len(w.stack)))
	}
	if n := w.openForks.Load(); n != 0 {
		// it would go on writing into the files
		return w.fail(fmt.Errorf("%w: %d forked writers neither joined nor aborted at finish", ErrTreeShape, n))
	}
	m := meta{
		formatVersion: FormatVersion,
		treeVersion:   w.version,
		leafCount:     w.leafCount,
		branchCount:   w.branchCount,
	}
	if len(w.stack) == 1 {
		m.rootHash = w.stack[0].hash
	} else {
		copy(m.rootHash[:], nodehash.Empty())
	}
	for i := range w.files {
		df := &w.files[i]
		if err := df.buf.Flush(); err != nil {
			return w.fail(fmt.Errorf("snapshot: write %s: %w", dataFileNames[i], err))
		}
		m.files[i] = fileInfo{length: df.n, crc: df.crc}
		if placedFile(i) && w.forks > 0 {
			// an aborted fork may have written past the records
			if err := df.f.Truncate(int64(df.n)); err != nil {
				return w.fail(fmt.Errorf("snapshot: truncate %s: %w", dataFileNames[i], err))
			}
		}
	}
	// The data files are synced while the lookup table is built: the
	// fsyncs wait on the disk, the build on the processor.
	syncErrs := make([]error, len(w.files))
	var wg sync.WaitGroup
	for i := range w.files {
		if w.syncs != nil {
			// start the writeback that the group's fsync waits for
			startWriteback(w.files[i].f)
			continue
		}
		wg.Add(1)
		go func(df *dataFile) {
			defer wg.Done()
			if err := fsyncFile(df.f); err != nil {
				syncErrs[i] = fmt.Errorf("snapshot: sync %s: %w", dataFileNames[i], err)
			}
		}(&w.files[i])
	}
	crc, err := w.hashes.build(w.lookup, w.leafCount, &w.pace)
	if err != nil {
		err = fmt.Errorf("snapshot: build %s: %w", FileLookup, err)
	} else if w.syncs != nil {
		startWriteback(w.lookup)
	} else {
		if serr := fsyncFile(w.lookup); serr != nil {
			err = fmt.Errorf("snapshot: sync %s: %w", FileLookup, serr)
		}
	}
	wg.Wait()
	if err != nil {
		return w.fail(err)
	}
	if err := errors.Join(syncErrs...); err != nil {
		return w.fail(err)
	}
	for i := range w.files {
		if err := w.release(&w.files[i].f); err != nil {
			return w.fail(fmt.Errorf("snapshot: close %s: %w", dataFileNames[i], err))
		}
	}
	if err := w.hashes.close(); err != nil {
		return w.fail(fmt.Errorf("snapshot: remove key hashes: %w", err))
	}
	if err := w.release(&w.lookup); err != nil {
		return w.fail(fmt.Errorf("snapshot: close %s: %w", FileLookup, err))
	}
	m.files[metaFileIndexLookup] = fileInfo{length: lookupLen(w.leafCount), crc: crc}
	if err := w.writeMeta(filepath.Join(w.tmp, FileMeta), m.encode()); err != nil {
		return w.fail(err)
	}
	if w.syncs == nil {
		if err := syncDir(w.tmp); err != nil {
			return w.fail(err)
		}
	}
	// rename(2) would replace an empty directory: refuse any existing one.
	if err := checkAbsent(w.dir); err != nil {
		return w.fail(err)
	}
	if err := os.Rename(w.tmp, w.dir); err != nil {
		return w.fail(fmt.Errorf("snapshot: %w", err))
	}
	// Until the steps below succeed, the snapshot under its name is the
	// writer's to remove: a failed Finish followed by Abort leaves nothing.
	w.tmp = w.dir
	if w.syncs != nil {
		// the files' entries; the caller adds the parent, for the rename
		if err := w.syncs.addFinishedDir(w.dir); err != nil {
			return w.fail(err)
		}
	} else if err := syncDir(filepath.Dir(w.dir)); err != nil {
		return w.fail(err)
	}
	w.finished = true
	w.tmp = ""
	w.dropBuffers()
	return nil
}

// dropBuffers lets go of the write buffers (about 850 KiB) and of the
// copies of keys (the last leaf's, the pending subtrees') once the writer
// can write no more: a caller may keep a finished writer until a larger
// operation ends (an import of many stores keeps each store's).
func (w *Writer) dropBuffers() {
	for i := range w.files {
		w.files[i].buf = nil
	}
	if w.hashes != nil {
		w.hashes.buf = nil
	}
	w.lastKey, w.stack, w.shape = nil, nil, nil
}

// DeferSync makes Finish leave every fsync to g (see SyncGroup). Finish
// then writes the files, renames the temporary directory into place, and
// hands the open files and the directory to g, which closes them. The
// snapshot is durable only once g.Sync has returned nil, and its rename only
// if the caller has also added the parent directory to g; until then the
// parent must be out of reach of readers that expect durable snapshots
// (for example, a temporary directory that is renamed into place after
// Sync). Call it before Finish; a forked writer takes no group.
func (w *Writer) DeferSync(g *SyncGroup) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.parent != nil {
		return w.fail(fmt.Errorf("%w: a forked writer ends with Join, which its parent's Finish syncs", ErrTreeShape))
	}
	w.syncs = g
	return nil
}

// release closes *f, or hands it to the sync group when Finish defers
// its fsyncs, and sets *f to nil. The group's errors name the file by its
// path once the temporary directory is renamed into place.
func (w *Writer) release(f **os.File) error {
	file := *f
	*f = nil
	if w.syncs != nil {
		return w.syncs.add(file, filepath.Join(w.dir, filepath.Base(file.Name())), false)
	}
	return file.Close()
}

// writeMeta writes meta's bytes to a new file at path and syncs it, or
// hands it to the sync group when Finish defers its fsyncs.
func (w *Writer) writeMeta(path string, b [MetaSize]byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if _, err := f.Write(b[:]); err != nil {
		_ = f.Close()
		return fmt.Errorf("snapshot: write %s: %w", path, err)
	}
	if w.syncs == nil {
		if err := fsyncFile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("snapshot: sync %s: %w", path, err)
		}
	}
	if err := w.release(&f); err != nil {
		return fmt.Errorf("snapshot: close %s: %w", path, err)
	}
	return nil
}

// Abort stops the writer and removes its temporary directory, or, after a
// Finish that failed once it had renamed the snapshot into place (the fsync
// of the parent directory), the snapshot. It does nothing after a
// successful Finish, and may be called more than once.
func (w *Writer) Abort() error {
	var errs []error
	for i := range w.files {
		if f := w.files[i].f; f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, err)
			}
			w.files[i].f = nil
		}
	}
	if w.lookup != nil {
		if err := w.lookup.Close(); err != nil {
			errs = append(errs, err)
		}
		w.lookup = nil
	}
	if w.hashes != nil {
		// the temporary directory goes below; only close the file
		if f := w.hashes.f; f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, err)
			}
			w.hashes.f = nil
		}
	}
	if w.tmp != "" {
		if err := os.RemoveAll(w.tmp); err != nil {
			errs = append(errs, err)
		}
		w.tmp = ""
	}
	if w.forkPrefix != "" {
		// a forked writer's scratch files, unless the parent's Abort
		// removed them with its directory
		for i, name := range append(dataFileNames[:len(w.files):len(w.files)], "hashes") {
			if i < len(w.files) && placedFile(i) {
				continue // the parent's
			}
			if err := os.Remove(w.forkPrefix + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		w.forkPrefix = ""
	}
	if w.parent != nil && !w.forkEnded {
		w.forkEnded = true
		w.parent.openForks.Add(-1)
	}
	if !w.finished {
		w.finished = true
		_ = w.fail(ErrClosed)
	}
	w.dropBuffers()
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	serr := fsyncFile(d)
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("snapshot: sync directory %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("snapshot: %w", cerr)
	}
	return nil
}

// startWriteback starts writing f's dirty pages to disk without waiting for
// them, so that a later fsync finds the work under way. Advisory: an error
// (say, a file system without the call) changes nothing, as the fsync
// follows.
func startWriteback(f *os.File) {
	osfile.StartWriteback(f.Fd(), 0, 0)
}
