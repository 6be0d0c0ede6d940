package memiavl

import (
	"bytes"
	"fmt"
	"math"
	"sync"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// maxImportStack bounds the subtrees waiting for a parent. In post-order at
// most one subtree per level of the tree waits, and no IAVL tree is 128
// levels high (heights are int8 in the stream).
const maxImportStack = 128

// Importer builds the snapshot of a tree directly from an export stream (see
// ExportNode), as produced by Exporter or by cosmos/iavl's exporter. It
// computes every node hash as the nodes arrive and writes them straight to a
// snapshot.Writer, so its memory is bounded by the height of the tree: it
// keeps one small record (height, size, version, hash, smallest key) per
// subtree waiting for its parent.
//
// It rejects, with an error wrapping ErrImport, any stream that is not the
// post-order of a valid IAVL tree at the import version: a nil node, key or
// leaf value, an inner node with a value (even an empty one, as iavl), leaf
// keys not strictly increasing, an inner node without two pending
// subtrees, a wrong height or size, unbalanced children, an inner key that
// is not the smallest key of the right subtree, a version outside [1,
// import version] or a child newer than its parent, and, at Commit,
// subtrees left without a parent. The first error is
// sticky. Nothing it is given is retained after Add returns: keys are copied.
//
// An Importer is fed by one goroutine. Close may come from another: it
// waits for a running Add or Commit, and the importer's later calls fail.
// Call Close when done (after Commit it does nothing); a partial snapshot is
// removed.
type Importer struct {
	// mu is held by every method but Version and Dir, so that a Close
	// from another goroutine never aborts the writer under an Add
	mu      sync.Mutex
	w       *snapshot.Writer
	dir     string
	version int64

	stack   []importFrame
	lastKey []byte
	leaves  int64
	nodes   int64

	err       error // sticky
	committed bool
	closed    bool
	root      [nodehash.Size]byte
}

// importFrame is a complete subtree waiting for its parent.
type importFrame struct {
	height  uint8
	size    int64
	version int64
	hash    [nodehash.Size]byte
	minKey  []byte // the subtree's smallest key, a copy
}

// NewImporter starts the import of a tree at version into a new snapshot
// directory dir, which must not exist (its parent must). The snapshot is
// written under a temporary name and appears as dir only at Commit.
func NewImporter(dir string, version int64) (*Importer, error) {
	if version < 0 {
		return nil, fmt.Errorf("%w: negative import version %d", ErrVersion, version)
	}
	if version == math.MaxInt64 {
		return nil, fmt.Errorf("%w: import version %d leaves no version to commit after it", ErrVersion, version)
	}
	w, err := snapshot.NewWriter(dir, version)
	if err != nil {
		return nil, err
	}
	return &Importer{w: w, dir: dir, version: version, stack: make([]importFrame, 0, 32)}, nil
}

func (im *Importer) fail(err error) error {
	if im.err == nil {
		im.err = err
	}
	return im.err
}

func (im *Importer) failf(format string, args ...any) error {
	return im.fail(fmt.Errorf("%w: node %d: %s", ErrImport, im.nodes, fmt.Sprintf(format, args...)))
}

// Add adds the next node of the post-order stream.
func (im *Importer) Add(n *ExportNode) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.err != nil {
		return im.err
	}
	if im.committed || im.closed {
		return fmt.Errorf("%w: importer is finished", ErrImport)
	}
	if n == nil {
		return im.failf("nil node")
	}
	if n.Version < 1 || n.Version > im.version {
		return im.failf("version %d outside [1, %d]", n.Version, im.version)
	}
	if n.Key == nil {
		return im.failf("nil key")
	}
	var err error
	switch {
	case n.Height < 0:
		err = im.failf("negative height %d", n.Height)
	case n.Height == 0:
		err = im.addLeaf(n)
	default:
		err = im.addInner(n)
	}
	im.nodes++
	return err
}

func (im *Importer) push() *importFrame {
	if len(im.stack) < cap(im.stack) {
		im.stack = im.stack[:len(im.stack)+1]
	} else {
		im.stack = append(im.stack, importFrame{})
	}
	return &im.stack[len(im.stack)-1]
}

func (im *Importer) addLeaf(n *ExportNode) error {
	if n.Value == nil {
		return im.failf("leaf %s with a nil value", hexkey.Upper(n.Key))
	}
	if im.leaves > 0 && bytes.Compare(n.Key, im.lastKey) <= 0 {
		return im.failf("leaf key %s after %s", hexkey.Upper(n.Key), hexkey.Upper(im.lastKey))
	}
	if len(im.stack) >= maxImportStack {
		return im.failf("more than %d subtrees without a parent", maxImportStack)
	}
	f := im.push()
	f.height, f.size, f.version = 0, 1, n.Version
	nodehash.Leaf(f.hash[:0], n.Key, n.Value, n.Version)
	f.minKey = append(f.minKey[:0], n.Key...)
	if err := im.w.AddLeaf(n.Key, n.Value, n.Version, f.hash[:]); err != nil {
		return im.fail(err)
	}
	im.lastKey = append(im.lastKey[:0], n.Key...)
	im.leaves++
	return nil
}

func (im *Importer) addInner(n *ExportNode) error {
	if n.Value != nil { // as iavl: not even an empty one
		return im.failf("inner node with a value")
	}
	k := len(im.stack)
	if k < 2 {
		return im.failf("inner node of height %d with %d pending subtrees", n.Height, k)
	}
	left, right := &im.stack[k-2], &im.stack[k-1]
	height := uint8(n.Height)
	if want := max(left.height, right.height) + 1; height != want {
		return im.failf("inner node of height %d over subtrees of heights %d and %d", height, left.height, right.height)
	}
	if d := int(left.height) - int(right.height); d < -1 || d > 1 {
		return im.failf("unbalanced inner node: subtree heights %d and %d", left.height, right.height)
	}
	if !bytes.Equal(n.Key, right.minKey) {
		return im.failf("inner key %s, smallest key of the right subtree %s", hexkey.Upper(n.Key), hexkey.Upper(right.minKey))
	}
	if left.version > n.Version || right.version > n.Version {
		return im.failf("inner node of version %d over children of versions %d and %d", n.Version, left.version, right.version)
	}
	size := left.size + right.size
	var h [nodehash.Size]byte
	nodehash.Inner(h[:0], height, size, n.Version, left.hash[:], right.hash[:])
	if err := im.w.AddBranch(height, size, n.Version, h[:]); err != nil {
		return im.fail(err)
	}
	// the left frame becomes the parent; its smallest key stays
	left.height, left.size, left.version, left.hash = height, size, n.Version, h
	im.stack = im.stack[:k-1]
	return nil
}

// Commit checks that the stream formed one tree (or none: the empty tree)
// and completes the snapshot: after it returns nil the snapshot directory
// exists and is durable, and RootHash returns the tree's root hash.
func (im *Importer) Commit() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.err != nil {
		return im.err
	}
	if im.committed || im.closed {
		return fmt.Errorf("%w: importer is finished", ErrImport)
	}
	if len(im.stack) > 1 {
		return im.failf("stream ended with %d subtrees without a parent", len(im.stack))
	}
	if err := im.w.Finish(); err != nil {
		return im.fail(err)
	}
	if len(im.stack) == 1 {
		im.root = im.stack[0].hash
	} else {
		copy(im.root[:], nodehash.Empty())
	}
	// a finished importer may be kept until a larger import ends: its
	// copies of keys go now
	im.stack, im.lastKey = nil, nil
	im.committed = true
	return nil
}

// RootHash returns the root hash of the imported tree after a successful
// Commit (sha256("") for the empty tree), nil before.
func (im *Importer) RootHash() []byte {
	im.mu.Lock()
	defer im.mu.Unlock()
	if !im.committed {
		return nil
	}
	h := im.root
	return h[:]
}

// Size returns the number of leaves added so far.
func (im *Importer) Size() int64 {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.leaves
}

// Version returns the import version.
func (im *Importer) Version() int64 { return im.version }

// Dir returns the snapshot directory the importer writes.
func (im *Importer) Dir() string { return im.dir }

// Close releases the importer. Before a successful Commit it aborts the
// import and removes the partial snapshot. It may be called more than once.
func (im *Importer) Close() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.closed {
		return nil
	}
	im.closed = true
	im.stack = nil
	if im.committed {
		return nil
	}
	_ = im.fail(fmt.Errorf("%w: importer is closed", ErrImport))
	return im.w.Abort()
}
