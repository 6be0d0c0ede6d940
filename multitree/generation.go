package multitree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// generation is the set of mapped snapshots of one snapshot directory. It is
// reference counted: the trees built on it, each published state and each
// read view hold a reference, and the files are unmapped when the last one is
// released.
type generation struct {
	version int64
	meta    *metadata
	snaps   map[string]*snapshot.Snapshot
	refs    atomic.Int64
	// unmap, when set, runs the unmapping of the files that the last
	// release asks for (DB.unmapLater): unmapping takes time in
	// proportion to the pages mapped, which must not be paid by the
	// Commit or the reader that happens to release last.
	unmap func(closeAll func(), collect bool)
	// replaced is set, before the DB releases its reference, when a
	// Commit switches from the generation to a background rewrite's: its
	// trees' in-memory nodes, most of the heap, are then garbage once the
	// last view of them goes (see DB.unmapLater).
	replaced atomic.Bool
	// parent, when set, is the generation whose mapped snapshots this one
	// shares (a version rebuilt from a snapshot mapped already: see
	// DB.sharedGeneration): its last release releases its reference on
	// parent instead of unmapping. Its own count is the rebuilt version's
	// holders, so that a view's Pin fails once they are gone, as for a
	// generation of its own.
	parent *generation
	// children counts the references on g held by child generations
	// (newChild). They hold none of g's trees: once every other
	// reference of a replaced generation is gone, its trees are garbage
	// and are collected then (collected), while the children keep the
	// files mapped.
	children  atomic.Int64
	collected atomic.Bool
}

// newChild returns a generation that shares g's mapped snapshots, holding
// a reference on g, with one reference of its own for the caller; nil if g
// is already released.
func (g *generation) newChild() *generation {
	if !g.tryAcquire() {
		return nil
	}
	g.children.Add(1)
	c := &generation{version: g.version, meta: g.meta, snaps: g.snaps, parent: g}
	c.refs.Store(1)
	return c
}

// copyMapped returns a copy of b, read under a fault guard, when it is a
// slice of an open snapshot's key/value data (snapshot.Mapping: a value
// from GetZeroCopy, through the working trees or any view), and b itself
// otherwise: a page the file no longer has (cut short under the mapping,
// or a failed disk read) is an error wrapping ErrCorrupt here.
func copyMapped(b []byte) (c []byte, err error) {
	s := snapshot.Mapping(b)
	if s == nil {
		return b, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			e, ok := snapshot.FaultFrom(r, s)
			switch {
			case !ok:
				panic(r)
			case errors.Is(e, snapshot.ErrClosed):
				err = fmt.Errorf("multitree: a key or value read from a snapshot closed meanwhile (a released view): %w", e)
			default:
				err = fmt.Errorf("%w: %w", ErrCorrupt, e)
			}
		}
	}()
	return bytes.Clone(b), nil
}

// tryAcquire takes a reference unless the generation is already released.
func (g *generation) tryAcquire() bool {
	for {
		n := g.refs.Load()
		if n <= 0 {
			return false
		}
		if g.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *generation) acquire() {
	if !g.tryAcquire() {
		panic("multitree: acquire of a released generation")
	}
}

// Release is release, for memiavl.Iterator.Hold.
func (g *generation) Release() { g.release() }

func (g *generation) release() {
	switch n := g.refs.Add(-1); {
	case n == 0 && g.parent != nil:
		g.parent.children.Add(-1)
		g.parent.release()
	case n == 0:
		closeAll := func() {
			for _, s := range g.snaps {
				_ = s.Close()
			}
		}
		if g.unmap != nil {
			g.unmap(closeAll, g.replaced.Load() && g.collected.CompareAndSwap(false, true))
		} else {
			closeAll()
		}
	case n < 0:
		panic("multitree: generation released too often")
	case g.replaced.Load() && n == g.children.Load() && g.unmap != nil && g.collected.CompareAndSwap(false, true):
		// only children hold the replaced generation: its trees are
		// garbage now, its files stay mapped for the children
		g.unmap(func() {}, true)
	}
}

// openGeneration maps the snapshot directory of version and builds a tree
// per store on it. The returned generation holds one reference, owned by the
// caller. It checks that every tree's snapshot has the version and root hash
// the metadata records.
func openGeneration(dir string, version int64) (*generation, map[string]*memiavl.Tree, error) {
	return openGenerationAs(filepath.Join(dir, snapshotDirName(version)), "", version, 0)
}

// openGenerationAs is openGeneration of the snapshot directory sdir, whose
// snapshots are named as if sdir were named (snapshot.OpenAs) unless named
// is empty: a rewrite's snapshot directory, mapped under its temporary name
// before it is renamed to named. changes is the trees' hint of the keys
// they will change (memiavl.Options.ChangesHint).
func openGenerationAs(sdir, named string, version, changes int64) (*generation, map[string]*memiavl.Tree, error) {
	if named == "" {
		named = sdir
	}
	mpath := filepath.Join(sdir, metadataFileName)
	b, err := readRegularFile(mpath)
	if err != nil {
		return nil, nil, openFailure(fmt.Errorf("snapshot %s: %w", sdir, err))
	}
	meta, err := decodeMetadata(mpath, b)
	if err != nil {
		return nil, nil, err
	}
	if meta.Version != version {
		return nil, nil, fmt.Errorf("%w: %s records version %d", ErrCorrupt, mpath, meta.Version)
	}
	g := &generation{version: version, meta: meta, snaps: map[string]*snapshot.Snapshot{}}
	g.refs.Store(1)
	fail := func(err error) (*generation, map[string]*memiavl.Tree, error) {
		g.release()
		return nil, nil, err
	}
	for _, si := range meta.Stores {
		tdir := filepath.Join(sdir, treeDirName(si.Name))
		s, err := snapshot.OpenAs(tdir, filepath.Join(named, treeDirName(si.Name)))
		if err != nil {
			return fail(openFailure(fmt.Errorf("store %q: %w", si.Name, err)))
		}
		g.snaps[si.Name] = s
		if s.Version() != version {
			return fail(fmt.Errorf("%w: %s has version %d, metadata %d", ErrCorrupt, tdir, s.Version(), version))
		}
		if !bytes.Equal(s.RootHash(), si.Hash) {
			return fail(fmt.Errorf("%w: %s has root hash %X, metadata records %X", ErrCorrupt, tdir, s.RootHash(), si.Hash))
		}
	}
	trees, err := g.newTrees(changes)
	if err != nil {
		return fail(err)
	}
	// the root record is what every hash of the tree starts from: one
	// record read here turns its damage into a failed open, where the
	// checksum check (Options.OpenCheck) would report it only after the
	// database had served and committed over it
	for _, si := range meta.Stores {
		h, err := trees[si.Name].RootHashChecked()
		if err != nil {
			return fail(openFailure(fmt.Errorf("store %q: %w", si.Name, err)))
		}
		if !bytes.Equal(h, si.Hash) {
			// the root is the last branch record, or the only leaf's
			s := g.snaps[si.Name]
			file, rec := snapshot.FileBranches, s.BranchCount()
			if rec == 0 {
				file, rec = snapshot.FileLeaves, max(s.LeafCount(), 1)
			}
			return fail(fmt.Errorf("%w: %s offset %d: the root record has hash %X, metadata records %X", ErrCorrupt,
				filepath.Join(named, treeDirName(si.Name), file), (rec-1)*snapshot.RecordSize, h, si.Hash))
		}
	}
	return g, trees, nil
}

// newTrees builds a tree per store on the generation's mapped snapshots.
// openGeneration's trees are built so; a version rebuilt from a snapshot
// the database maps already gets its trees so too (DB.sharedGeneration).
// The caller holds a reference on g. changes is the trees' hint of the keys
// they will change (memiavl.Options.ChangesHint): 0 for working trees,
// rebuiltChanges for the trees of a rebuilt version.
func (g *generation) newTrees(changes int64) (map[string]*memiavl.Tree, error) {
	trees := make(map[string]*memiavl.Tree, len(g.snaps))
	for name, s := range g.snaps {
		t, err := memiavl.NewFromSnapshot(s, memiavl.Options{InitialVersion: g.meta.InitialVersion, ChangesHint: changes})
		if err != nil {
			return nil, fmt.Errorf("store %q: %w", name, err)
		}
		trees[name] = t
	}
	return trees, nil
}

// openFailure is err, a failure to open a snapshot's file, as ErrCorrupt,
// unless the file could not be opened for want of permission or of a
// resource (descriptors, memory for its mapping): the files are whole then,
// and a report of damage would send the operator the wrong way.
func openFailure(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) {
		return fmt.Errorf("multitree: %w", err)
	}
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// verify checks every file checksum and the full structure of every tree.
func (g *generation) verify() error {
	var errs []error
	for name, s := range g.snaps {
		if err := s.Verify(); err != nil {
			errs = append(errs, fmt.Errorf("store %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// checkChecksums checks the checksums of the generation's snapshot files
// (Options.OpenCheck, and a kept snapshot before a version is rebuilt from
// it) store by store, opening a store's files only for its turn: the
// check holds the files of one store open at a time, however many stores
// there are. The caller holds a reference on g until it returns, so that a
// file its path no longer names (the directory pruned meanwhile) is
// checked through the mapping. l, when not nil, paces the reads. A damaged
// file gives an error wrapping ErrCorrupt; ctx's end, ctx's error.
func (g *generation) checkChecksums(ctx context.Context, l snapshot.Limiter) error {
	for _, name := range slices.Sorted(maps.Keys(g.snaps)) {
		if err := g.snaps[name].VerifyChecksumsPaced(ctx, l); err != nil {
			// damage found is reported even if ctx ended meanwhile
			if errors.Is(err, snapshot.ErrCorrupt) {
				return fmt.Errorf("%w: store %q: %w", ErrCorrupt, name, err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("store %q: check of the snapshot's checksums: %w", name, err)
		}
	}
	return nil
}
