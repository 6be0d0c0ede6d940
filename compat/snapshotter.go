package compat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// SnapshotDB writes the state of db at height to protoWriter as the SDK's
// rootmulti store does for a state-sync snapshot (snapshot format
// snapshottypes.CurrentFormat): for each store in name order, a
// SnapshotItem holding a SnapshotStoreItem with the store's name, then one
// SnapshotItem holding a SnapshotIAVLItem per node of the store's tree at
// height, in post-order (cosmos/iavl's export order). A snapshot written by
// SnapshotDB restores into a rootmulti store over cosmos/iavl with the same
// app hash, and the other way round.
//
// height must be a version db can serve: the latest, or an older one at or
// after its oldest kept snapshot. The view of height is held while writing,
// so commits may go on meanwhile. Keys and values are written from the
// memory map without copies, after a check of the checksums of the
// snapshot files they come from: damage fails the export (ErrCorrupt of
// package multitree) before any item is written.
func SnapshotDB(db *multitree.DB, height uint64, protoWriter protoio.Writer) error {
	if height == 0 {
		return fmt.Errorf("compat: cannot snapshot height 0")
	}
	if height > uint64(db.Version()) {
		return fmt.Errorf("compat: cannot snapshot future height %d (latest is %d)", height, db.Version())
	}
	view, err := db.ViewAt(int64(height))
	if err != nil {
		return fmt.Errorf("compat: snapshot of height %d: %w", height, err)
	}
	defer view.Release()
	return snapshotView(view, height, protoWriter)
}

// snapshotView writes the state-sync stream of view, of height.
func snapshotView(view *multitree.View, height uint64, protoWriter protoio.Writer) error {
	if view.Version() != int64(height) {
		return fmt.Errorf("compat: snapshot of height %d: a view of version %d", height, view.Version())
	}
	// the stream carries the values as they are read: the snapshot files
	// they come from are checked first, so that damage fails the export
	// instead of going to peers
	for _, name := range view.StoreNames() {
		if s := view.Tree(name).Snapshot(); s != nil {
			if err := s.VerifyChecksums(context.Background()); err != nil {
				return fmt.Errorf("compat: snapshot of store %q: %w: %w", name, multitree.ErrCorrupt, err)
			}
		}
	}
	for _, name := range view.StoreNames() {
		if err := snapshotStore(view, name, protoWriter); err != nil {
			return err
		}
	}
	return nil
}

func snapshotStore(view *multitree.View, name string, w protoio.Writer) error {
	err := w.WriteMsg(&snapshottypes.SnapshotItem{
		Item: &snapshottypes.SnapshotItem_Store{Store: &snapshottypes.SnapshotStoreItem{Name: name}},
	})
	if err != nil {
		return fmt.Errorf("compat: snapshot of store %q: %w", name, err)
	}
	e := view.Tree(name).Export()
	defer e.Close()
	// one message and item reused for every node of the store
	iavlItem := &snapshottypes.SnapshotIAVLItem{}
	item := &snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: iavlItem}}
	for {
		n, err := e.Next()
		if errors.Is(err, memiavl.ErrExportDone) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("compat: snapshot of store %q: %w", name, err)
		}
		iavlItem.Key, iavlItem.Value, iavlItem.Version, iavlItem.Height = n.Key, n.Value, n.Version, int32(n.Height)
		if err := w.WriteMsg(item); err != nil {
			return fmt.Errorf("compat: snapshot of store %q: %w", name, err)
		}
	}
}

// RestoreDB creates the database in dir at height from a state-sync snapshot
// stream in the format SnapshotDB and the SDK's rootmulti store write. It
// reads store and node items until the end of the stream or the first item
// of another kind, which it returns for the caller to go on with, as
// rootmulti's Restore does: an extension item (SnapshotExtensionMeta) that
// the snapshot manager hands to its extensions, or the zero item at the end
// of the stream.
//
// The nodes go straight into the new database's snapshot files (see
// multitree.Import): memory is bounded by the trees' heights, not by the
// state's size. Of opts it uses InitialStores and InitialVersion (recorded
// in the new database): when InitialStores is not empty every store of the
// stream must be one of them, and those the stream does not mention are
// created empty (MultiStore.Restore instead refuses a stream without one of
// its mounted stores, as rootmulti does).
//
// The stream is checked as it is read and any fault is an error wrapping
// ErrSnapshotStream (or the reader's error), never a panic: a message that
// does not decode or exceeds the reader's limit, an item of no known kind, an
// IAVL item before the first store item, stores out of name order or
// repeated, a node height outside [0, 127], and any node stream that is not
// the post-order of a valid IAVL tree at height (an unfinished store when the
// next store item or the end comes, keys out of order, wrong heights, sizes or
// inner keys, unbalanced nodes, versions after height). Whether the restored
// state is the one wanted is for the caller to check: state sync compares
// the resulting app hash with the one the light client trusts, which also
// catches a stream cut cleanly between two stores when RestoreDB creates
// the missing ones. A stream with no store
// item is refused when InitialStores is empty too, since it would make a
// database of no stores.
//
// Idempotence: RestoreDB may be retried. A directory left by a failed or
// interrupted restore is cleaned up. A database in dir at version 0 (nothing
// committed, as created empty at start-up) or at exactly height is replaced
// by the restored one: the restore is staged beside dir and swapped in only
// once complete and durable, so a failing restore leaves it untouched. A
// database at any other version is refused (multitree.ErrExists). The
// database must not be open during RestoreDB.
func RestoreDB(dir string, height uint64, format uint32, protoReader protoio.Reader, opts multitree.Options) (snapshottypes.SnapshotItem, error) {
	return restoreDB(dir, height, format, protoReader, opts, false)
}

// restoreDB is RestoreDB; with allStores set, every store of
// opts.InitialStores must be in the stream, as rootmulti requires of its
// mounted IAVL stores, and a stream without one of them is refused before
// anything is committed.
func restoreDB(dir string, height uint64, format uint32, protoReader protoio.Reader, opts multitree.Options, allStores bool) (snapshottypes.SnapshotItem, error) {
	if err := checkRestore(height, format); err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	im, err := multitree.NewImporter(dir, int64(height), multitree.ImportOptions{
		InitialVersion: opts.InitialVersion,
		Stores:         opts.InitialStores,
		Replace:        true,
	})
	if err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	defer im.Close()
	var only map[string]struct{}
	if allStores {
		// exactly the mounted IAVL stores, also when none is mounted (an
		// empty opts.InitialStores lets the importer take any name)
		only = make(map[string]struct{}, len(opts.InitialStores))
		for _, name := range opts.InitialStores {
			only[name] = struct{}{}
		}
	}
	next, stores, err := restoreStream(im, protoReader, only)
	if err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	if allStores {
		for _, name := range opts.InitialStores {
			if _, ok := stores[name]; !ok {
				return snapshottypes.SnapshotItem{}, fmt.Errorf("%w: the mounted store %q is not in the snapshot of height %d (a store added after that height is added by a store upgrade once the node has caught up to it)",
					ErrSnapshotStream, name, height)
			}
		}
	}
	if len(stores) == 0 && len(opts.InitialStores) == 0 {
		// Nothing says which stores the state has: committing would make
		// a database of none, whose app hash no chain has.
		return snapshottypes.SnapshotItem{}, fmt.Errorf("%w: the stream holds no store, and no store is mounted", ErrSnapshotStream)
	}
	if _, err := im.Commit(); err != nil {
		return snapshottypes.SnapshotItem{}, err
	}
	return next, nil
}

// checkRestore returns why a restore of height in format cannot be made
// whatever the stream holds, nil if it can.
func checkRestore(height uint64, format uint32) error {
	if format != snapshottypes.CurrentFormat {
		return fmt.Errorf("%w: format %d, want %d", snapshottypes.ErrUnknownFormat, format, snapshottypes.CurrentFormat)
	}
	if height == 0 || height > math.MaxInt64 {
		return fmt.Errorf("compat: cannot restore height %d", height)
	}
	return nil
}

// MaxSnapshotItem is the bound on one item of the SDK's state-sync stream
// reader (snapshotMaxItemSize in its snapshot manager): a node restores no
// stream holding a longer one.
const MaxSnapshotItem = int(64e6)

// restoreStream feeds the stores of the stream to im and returns the item
// that ended it (the zero item at the end of the stream) and the names of
// the stores the stream held. A non-nil only is the set of store names the
// stream may hold (the multistore's mounted IAVL stores): another is
// refused before it is imported, with rootmulti's words.
func restoreStream(im *multitree.Importer, r protoio.Reader, only map[string]struct{}) (_ snapshottypes.SnapshotItem, stores map[string]struct{}, _ error) {
	stores = make(map[string]struct{})
	var (
		cur     *memiavl.Importer
		curName string
		items   int
		node    memiavl.ExportNode
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		if err := cur.Commit(); err != nil {
			return fmt.Errorf("%w: store %q: %w", importFault(err), curName, err)
		}
		cur = nil
		return nil
	}
	for ; ; items++ {
		var item snapshottypes.SnapshotItem
		err := r.ReadMsg(&item)
		if err == io.EOF {
			return snapshottypes.SnapshotItem{}, stores, finish()
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// a reader that stops with its context: not the stream's fault
			return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("compat: reading state-sync snapshot stream item %d: %w", items, err)
		}
		if errors.Is(err, io.ErrShortBuffer) {
			// protoio's delimited reader's answer to an item over its
			// bound, which alone says nothing of the kind
			return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d is longer than the stream reader's bound on an item (the SDK's reader allows %d bytes): %w",
				ErrSnapshotStream, items, MaxSnapshotItem, err)
		}
		if err != nil {
			return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: %w", ErrSnapshotStream, items, err)
		}
		switch it := item.Item.(type) {
		case *snapshottypes.SnapshotItem_Store:
			if err := finish(); err != nil {
				return snapshottypes.SnapshotItem{}, nil, err
			}
			name := it.Store.GetName()
			if len(stores) > 0 && name <= curName {
				return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: store %q after %q: stores must come once each, in name order",
					ErrSnapshotStream, items, name, curName)
			}
			if _, ok := only[name]; only != nil && !ok {
				return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: cannot import into non-IAVL store %q (not a mounted IAVL store)",
					ErrSnapshotStream, items, name)
			}
			cur, err = im.AddStore(name)
			if err != nil {
				return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: %w", importFault(err), items, err)
			}
			curName = name
			stores[name] = struct{}{}
		case *snapshottypes.SnapshotItem_IAVL:
			if cur == nil {
				return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: IAVL node before any store item", ErrSnapshotStream, items)
			}
			n := it.IAVL
			if n == nil || n.Height < 0 || n.Height > math.MaxInt8 {
				return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: node height %d outside [0, %d]",
					ErrSnapshotStream, items, n.GetHeight(), math.MaxInt8)
			}
			// Protobuf does not tell an empty byte string from an absent
			// one; IAVL has no nil keys or leaf values, so nil means empty
			// (as in rootmulti's Restore).
			node = memiavl.ExportNode{Key: n.Key, Value: n.Value, Version: n.Version, Height: int8(n.Height)}
			if node.Key == nil {
				node.Key = []byte{}
			}
			if node.Height == 0 && node.Value == nil {
				node.Value = []byte{}
			}
			if err := cur.Add(&node); err != nil {
				return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: store %q: %w", importFault(err), items, curName, err)
			}
		case *snapshottypes.SnapshotItem_Extension:
			if err := finish(); err != nil {
				return snapshottypes.SnapshotItem{}, nil, err
			}
			return item, stores, nil
		default:
			return snapshottypes.SnapshotItem{}, nil, fmt.Errorf("%w: item %d: unknown or misplaced item %T", ErrSnapshotStream, items, item.Item)
		}
	}
}

// errRestoreWrite labels a failure of a restore that is not the stream's
// fault: the database could not write what it read (a full disk, an I/O
// error).
var errRestoreWrite = errors.New("compat: state-sync restore failed")

// importFault returns the label of an error of the importers: ErrSnapshotStream
// when the stream's content was refused (a store name, or nodes that do not
// form a tree), errRestoreWrite otherwise.
func importFault(err error) error {
	for _, target := range []error{
		memiavl.ErrImport, snapshot.ErrInvalidNode, snapshot.ErrKeyOrder, snapshot.ErrTreeShape,
		multitree.ErrStoreExists, multitree.ErrUnknownStore, multitree.ErrInvalidOptions,
	} {
		if errors.Is(err, target) {
			return ErrSnapshotStream
		}
	}
	return errRestoreWrite
}
