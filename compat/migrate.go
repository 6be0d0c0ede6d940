package compat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"
	"cosmossdk.io/store/wrapper"
	dbm "github.com/cosmos/cosmos-db"
	gogotypes "github.com/cosmos/gogoproto/types"
	"github.com/cosmos/iavl"
	"github.com/ledgerwatch/erigon-lib/mmap"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/internal/osfile"
	"github.com/seed-6dfbb450/memiavl/internal/pages"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// ImportIAVL creates the database in dir at height from the cosmos/iavl
// stores of an SDK application database (application.db: the rootmulti
// layout, each store's tree under the key prefix "s/k:<name>/", the commit
// info of each version under "s/<version>").
//
// stores selects the stores to import; none (nil or empty) means every
// store of the commit info at height. Each tree is streamed at height through iavl's exporter
// into the database's snapshot (stores in parallel, opts.RewriteConcurrency
// at a time; memory bounded by the trees' heights), and each root hash must
// equal the one the commit info records, and, when every store is imported,
// the app hash (CommitInfo.Hash()) too; otherwise nothing is left in dir.
// A store whose recorded hash is the empty tree's is imported empty even
// when iavl cannot load its version: iavl marks an empty root with an empty
// value, which goleveldb reads back as absent. A height above the
// application's latest version (s/latest), such as one a rollback left the
// commit info of, is refused. iavlDB is only read. dir must not hold a
// database, except one with nothing committed (version 0), such as a
// node's first start with the store enabled creates: that one is replaced
// (see multitree.ImportOptions.Replace; a failed import leaves it). Of opts only
// RewriteConcurrency and InitialVersion are used: open the result with
// multitree.Open and the options of your choice.
func ImportIAVL(iavlDB dbm.DB, height int64, stores []string, dir string, opts multitree.Options) error {
	return ImportIAVLContext(context.Background(), iavlDB, height, stores, dir, opts)
}

// ImportIAVLContext is ImportIAVL, stopped when ctx is done (see
// multitree.ImportContext): it then fails with an error wrapping ctx.Err()
// and leaves dir as a failed ImportIAVL does.
func ImportIAVLContext(ctx context.Context, iavlDB dbm.DB, height int64, stores []string, dir string, opts multitree.Options) error {
	if height <= 0 {
		return fmt.Errorf("%w: cannot import height %d", ErrMigrate, height)
	}
	if opts.RewriteConcurrency < 0 || opts.InitialVersion < 0 {
		return fmt.Errorf("%w: negative RewriteConcurrency or InitialVersion", multitree.ErrInvalidOptions)
	}
	want, err := rootMultiCommitInfo(iavlDB, height)
	if err != nil {
		return err
	}
	recorded := map[string][]byte{}
	for _, si := range want.StoreInfos {
		recorded[si.Name] = si.CommitId.Hash
	}
	all := len(stores) == 0
	if all {
		stores = nil
		for _, si := range want.StoreInfos {
			stores = append(stores, si.Name)
		}
	}
	sources := make(map[string]multitree.NodeSource, len(stores))
	var started []*iavlSource
	defer func() {
		for _, s := range started {
			s.close()
		}
	}()
	for _, name := range stores {
		if _, ok := recorded[name]; !ok {
			return fmt.Errorf("%w: store %q is not in the commit info of height %d", ErrMigrate, name, height)
		}
		if _, ok := sources[name]; ok {
			return fmt.Errorf("%w: store %q listed twice", ErrMigrate, name)
		}
		prefixed := dbm.NewPrefixDB(iavlDB, []byte("s/k:"+name+"/"))
		tree := iavl.NewMutableTree(wrapper.NewDBWrapper(prefixed), 0, true, log.NewNopLogger())
		it, err := tree.GetImmutable(height)
		if errors.Is(err, iavl.ErrVersionDoesNotExist) && bytes.Equal(recorded[name], nodehash.Empty()) {
			// An empty tree: iavl marks its root with an empty value,
			// which goleveldb reads back as absent (cosmos/cosmos-db#146),
			// so iavl finds no such version. The recorded hash says the
			// store was empty at height, and the check after the import
			// holds the result to it; the marker, which an iterator
			// finds (see hasEmptyRoot), says the version was not pruned.
			if ok, err := hasEmptyRoot(prefixed, height); err != nil {
				return fmt.Errorf("%w: store %q at height %d: %w", ErrMigrate, name, height, err)
			} else if !ok {
				return fmt.Errorf("%w: store %q at height %d: version does not exist (pruned?)", ErrMigrate, name, height)
			}
			sources[name] = emptySource{}
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: store %q at height %d: %w", ErrMigrate, name, height, err)
		}
		// the export starts when the import reads the store: an iavl
		// exporter reads ahead on a goroutine of its own as soon as it
		// is made, and memory is to follow the stores imported at once
		src := &iavlSource{height: height, tree: it}
		started = append(started, src)
		sources[name] = src
	}
	// replace a database at version 0 only: the import's own check would
	// also let one at height be replaced
	latest, lerr := multitree.LatestVersion(dir)
	_, err = multitree.ImportContext(ctx, dir, height, sources, multitree.ImportOptions{
		InitialVersion: opts.InitialVersion,
		Concurrency:    opts.RewriteConcurrency,
		Replace:        lerr == nil && latest == 0,
		Check: func(info *storetypes.CommitInfo) error {
			return checkImported(info, recorded, want, all)
		},
	})
	return migrateErr(err)
}

// migrateErr wraps a failed import in ErrMigrate (keeping what it wraps).
func migrateErr(err error) error {
	if err == nil || errors.Is(err, ErrMigrate) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMigrate, err)
}

// checkImported compares the imported root hashes with the recorded ones,
// and the app hash when every recorded store was imported.
func checkImported(info *storetypes.CommitInfo, recorded map[string][]byte, want *storetypes.CommitInfo, all bool) error {
	for _, si := range info.StoreInfos {
		if h := recorded[si.Name]; !bytes.Equal(si.CommitId.Hash, h) {
			return fmt.Errorf("%w: store %q imported with root hash %X, the source records %X", ErrMigrate, si.Name, si.CommitId.Hash, h)
		}
	}
	if all {
		if got, exp := info.Hash(), want.Hash(); !bytes.Equal(got, exp) {
			return fmt.Errorf("%w: imported app hash %X, the source records %X", ErrMigrate, got, exp)
		}
	}
	return nil
}

// rootMultiCommitInfo reads the commit info rootmulti stores for version.
func rootMultiCommitInfo(db dbm.DB, version int64) (*storetypes.CommitInfo, error) {
	// a rollback leaves the commit infos above the version it went back
	// to: s/latest says which are the application's
	if b, err := db.Get([]byte("s/latest")); err != nil {
		return nil, fmt.Errorf("%w: reading %q: %w", ErrMigrate, "s/latest", err)
	} else if b != nil {
		var latest gogotypes.Int64Value
		if err := latest.Unmarshal(b); err != nil {
			return nil, fmt.Errorf("%w: the latest version record: %w", ErrMigrate, err)
		}
		if version > latest.Value {
			return nil, fmt.Errorf("%w: height %d is above the application's latest version %d", ErrMigrate, version, latest.Value)
		}
	}
	key := fmt.Sprintf("s/%d", version)
	bz, err := db.Get([]byte(key))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %q: %w", ErrMigrate, key, err)
	}
	if bz == nil {
		return nil, fmt.Errorf("%w: no commit info for height %d (key %q): not a committed, unpruned version", ErrMigrate, version, key)
	}
	info := &storetypes.CommitInfo{}
	if err := info.Unmarshal(bz); err != nil {
		return nil, fmt.Errorf("%w: commit info of height %d: %w", ErrMigrate, version, err)
	}
	if info.Version != version {
		return nil, fmt.Errorf("%w: commit info under %q is of version %d", ErrMigrate, key, info.Version)
	}
	return info, nil
}

// hasEmptyRoot reports whether the iavl tree in db marks version as empty:
// the root key of the version (iavl v1: 's', the version and nonce 1, big
// endian; iavl v0.x: 'r' and the version) is present. An iterator finds
// it: goleveldb's Get and Has take its empty value for an absent key.
func hasEmptyRoot(db dbm.DB, version int64) (bool, error) {
	v1 := binary.BigEndian.AppendUint64([]byte{'s'}, uint64(version))
	v1 = binary.BigEndian.AppendUint32(v1, 1)
	for _, key := range [][]byte{v1, binary.BigEndian.AppendUint64([]byte{'r'}, uint64(version))} {
		it, err := db.Iterator(key, append(bytes.Clone(key), 0))
		if err != nil {
			return false, err
		}
		found := it.Valid()
		err = errors.Join(it.Error(), it.Close())
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// emptySource is the node stream of an empty tree.
type emptySource struct{}

func (emptySource) Next() (*memiavl.ExportNode, error) { return nil, memiavl.ErrExportDone }

// iavlSource adapts cosmos/iavl's exporter of tree to a
// multitree.NodeSource; the two ExportNode types have the same fields. The
// exporter is made at the first Next and closed at the end of the stream
// (or by close).
//
// iavl's exporter ends its stream early, without an error, at a node it
// cannot read; the source counts the leaves and fails a stream that ends
// with fewer than the root records (a source database missing nodes).
type iavlSource struct {
	height int64
	tree   *iavl.ImmutableTree
	e      *iavl.Exporter
	leaves int64
	done   bool
}

func (s *iavlSource) Next() (*memiavl.ExportNode, error) {
	if s.done {
		return nil, memiavl.ErrExportDone
	}
	if s.e == nil {
		e, err := s.tree.Export()
		if err != nil {
			return nil, err
		}
		s.e = e
	}
	n, err := s.e.Next()
	if errors.Is(err, iavl.ErrorExportDone) {
		s.done = true
		s.close()
		if size := s.tree.Size(); s.leaves != size {
			return nil, fmt.Errorf("the source's export of height %d ended after %d of the root's %d leaves: "+
				"nodes are missing from the source database (damaged or pruned by hand?)", s.height, s.leaves, size)
		}
		return nil, memiavl.ErrExportDone
	}
	if err != nil {
		return nil, err
	}
	if n.Height == 0 {
		s.leaves++
	}
	return (*memiavl.ExportNode)(n), nil
}

// close stops the exporter, if one was made; it may be called again.
func (s *iavlSource) close() {
	if s.e != nil {
		s.e.Close()
	}
}

// ImportMemIAVL creates the database in dir from a directory written by the
// reference memiavl (github.com/crypto-org-chain/cronos/memiavl v0.1.0), at
// the reference's latest version and with the identical app hash.
//
// It reads the reference's current snapshot (the "current" symlink to
// snapshot-<version>, its "__metadata" commit info and one directory of
// metadata/nodes/leaves/kvs files per store), streams each tree into the
// database's snapshot at that version, checking every root hash and the app
// hash against the recorded commit info, and then replays the entries of
// the reference's write-ahead log ("wal", tidwall/wal binary segments of
// protobuf WALEntry records) that come after the snapshot, committing one
// version per entry. A torn last log record is ignored, as the reference
// ignores it. The reference directory is only read; it must not be written
// meanwhile.
//
// A log entry that renames a store is refused: the reference keeps the
// renamed tree as it is, while this database (like the SDK's rootmulti)
// rebuilds it, so the app hashes would part. Rewrite the reference snapshot
// after the rename (the reference's RewriteSnapshot) and import again.
//
// The reference's node must be stopped: on Linux a shared lock on its lock
// file, held for the migration, makes a running node an error wrapping
// ErrMigrate (and a node started meanwhile fail to lock its directory).
//
// dir must not hold a database, except one with nothing committed (version
// 0), which is replaced, as ImportIAVL replaces one. The replay of the log
// is the import's last step (multitree.ImportOptions.Finish): the import is
// all or nothing. A failed import, in the snapshot or in the replay, leaves
// dir as it was (a database at version 0 it was to replace included); a
// process killed during the import leaves at most what the next import
// into dir removes: killed during the replay of an import into a directory
// without a database, a database that is not the import's result, which
// Open refuses with multitree.ErrUnfinishedImport until a rerun (or
// multitree.RemoveDatabase) removes it. opts are the
// options the replay opens the database with (CreateIfMissing, ReadOnly and
// TargetVersion are ignored); RewriteConcurrency also sets how many trees are
// imported in parallel.
func ImportMemIAVL(refDir string, dir string, opts multitree.Options) error {
	return ImportMemIAVLContext(context.Background(), refDir, dir, opts)
}

// ImportMemIAVLContext is ImportMemIAVL, stopped when ctx is done: the
// import of the snapshot as multitree.ImportContext stops, the replay of the
// log between versions. It then fails with an error wrapping ctx.Err() and
// leaves dir as a failed ImportMemIAVL does.
func ImportMemIAVLContext(ctx context.Context, refDir string, dir string, opts multitree.Options) (err error) {
	unlock, err := lockRefDir(refDir)
	if err != nil {
		return err
	}
	defer unlock()
	ref, err := openRefSnapshot(refDir)
	if err != nil {
		return err
	}
	defer ref.close()
	walDir := filepath.Join(refDir, "wal")
	segs, err := listRefSegments(walDir)
	if err != nil {
		return err
	}

	want := map[string][]byte{}
	for _, si := range ref.info.StoreInfos {
		want[si.Name] = si.CommitId.Hash
	}
	sources := map[string]multitree.NodeSource{}
	for name, t := range ref.trees {
		sources[name] = &refTreeSource{t: t}
	}
	// replace a database at version 0 only, as ImportIAVL does
	latest, lerr := multitree.LatestVersion(dir)
	iopts := multitree.ImportOptions{
		InitialVersion: ref.initialVersion,
		Concurrency:    max(opts.RewriteConcurrency, 0),
		Replace:        lerr == nil && latest == 0,
		Check: func(info *storetypes.CommitInfo) error {
			for _, si := range info.StoreInfos {
				h, err := ref.trees[si.Name].checkedRootHash()
				if err != nil {
					return err
				}
				if !bytes.Equal(si.CommitId.Hash, h) {
					return fmt.Errorf("%w: store %q imported with root hash %X, its reference snapshot has %X",
						ErrMigrate, si.Name, si.CommitId.Hash, h)
				}
			}
			return checkImported(info, want, ref.info, true)
		},
	}
	if len(segs) > 0 {
		// the replay of the log is the import's last step: until it
		// has committed the reference's latest version, the database
		// is not the import's result
		iopts.FinishOptions = opts
		iopts.Finish = func(db *multitree.DB) error {
			ref.close() // the snapshot is imported
			return replayRefWAL(ctx, db, segs, ref.version, ref.initialVersion)
		}
	}
	_, err = multitree.ImportContext(ctx, dir, ref.version, sources, iopts)
	return migrateErr(err)
}

// The reference memiavl's snapshot format (v0.1.0, little-endian):
//
//	<refDir>/current -> snapshot-<20-digit version>    (symlink)
//	snapshot-N/__metadata     protobuf MultiTreeMetadata{1: CommitInfo, 2: int64 initial_version}
//	snapshot-N/<store>/metadata  12 bytes: magic 0x4C564149 ("IAVL") | format 0 | version (uint32)
//	snapshot-N/<store>/nodes     48-byte branch records in post-order:
//	                             height u8 | pre-trees u8 | 2 zero | version u32 | size u32 | key leaf u32 | hash [32]
//	snapshot-N/<store>/leaves    48-byte leaf records in key order:
//	                             version u32 | key length u32 | kvs offset u64 | hash [32]
//	snapshot-N/<store>/kvs       per leaf: key length u32 | key | value length u32 | value
//
// A branch's pre-trees is the number of complete subtrees that precede its
// own in post-order; the reference exports a tree by emitting leaves until
// pre-trees+2 subtrees are pending, then the branch.
const (
	refSnapshotMagic  = 0x4C564149
	refSnapshotFormat = 0
	refMetaSize       = 12
	refRecordSize     = 48
	refHashOffset     = 16
	refMetadataFile   = "__metadata"
	refSnapshotPrefix = "snapshot-"
	// refMaxSmallFile bounds the metadata files read whole: far more
	// than the commit info of any number of stores a chain has
	refMaxSmallFile = 64 << 20
)

type refSnapshot struct {
	dir            string
	version        int64
	initialVersion int64
	info           *storetypes.CommitInfo
	trees          map[string]*refTree
}

func refErr(path string, format string, args ...any) error {
	return fmt.Errorf("%w: reference memiavl %s: %s", ErrMigrate, path, fmt.Sprintf(format, args...))
}

func openRefSnapshot(refDir string) (_ *refSnapshot, err error) {
	cur := filepath.Join(refDir, "current")
	target, err := os.Readlink(cur)
	if err != nil {
		return nil, refErr(cur, "%v", err)
	}
	name := filepath.Base(target)
	if !strings.HasPrefix(name, refSnapshotPrefix) || len(name) != len(refSnapshotPrefix)+20 {
		return nil, refErr(cur, "points at %q, not a snapshot directory", target)
	}
	version, perr := strconv.ParseInt(name[len(refSnapshotPrefix):], 10, 64)
	if perr != nil || version < 0 || version > math.MaxUint32 {
		return nil, refErr(cur, "points at %q, not a snapshot directory", target)
	}
	sdir := filepath.Join(refDir, name)
	mpath := filepath.Join(sdir, refMetadataFile)
	bz, err := osfile.ReadRegular(mpath, refMaxSmallFile)
	if err != nil {
		return nil, refErr(mpath, "%v", err)
	}
	info, initial, err := decodeRefMetadata(bz)
	if err != nil {
		return nil, refErr(mpath, "%v", err)
	}
	if info.Version != version {
		return nil, refErr(mpath, "records version %d in %s", info.Version, name)
	}
	if initial < 0 || initial > math.MaxUint32 {
		return nil, refErr(mpath, "initial version %d", initial)
	}
	s := &refSnapshot{dir: sdir, version: version, initialVersion: initial, info: info, trees: map[string]*refTree{}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	ents, err := os.ReadDir(sdir)
	if err != nil {
		return nil, refErr(sdir, "%v", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		t, err := openRefTree(filepath.Join(sdir, e.Name()))
		if err != nil {
			return nil, err
		}
		s.trees[e.Name()] = t
		if int64(t.version) != version {
			return nil, refErr(t.dir, "tree at version %d in snapshot %d", t.version, version)
		}
	}
	if len(s.trees) != len(info.StoreInfos) {
		return nil, refErr(sdir, "%d tree directories, the commit info lists %d stores", len(s.trees), len(info.StoreInfos))
	}
	for _, si := range info.StoreInfos {
		if _, ok := s.trees[si.Name]; !ok {
			return nil, refErr(sdir, "store %q of the commit info has no tree directory", si.Name)
		}
	}
	return s, nil
}

func (s *refSnapshot) close() {
	for _, t := range s.trees {
		t.close()
	}
}

// decodeRefMetadata decodes MultiTreeMetadata{1: CommitInfo, 2: int64}.
func decodeRefMetadata(b []byte) (*storetypes.CommitInfo, int64, error) {
	var (
		info    *storetypes.CommitInfo
		initial int64
	)
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			info = &storetypes.CommitInfo{}
			return info.Unmarshal(v)
		case num == 2 && typ == protowire.VarintType:
			initial = int64(x)
		case num == 1 || num == 2:
			return fmt.Errorf("field %d of wire type %d", num, typ)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if info == nil {
		return nil, 0, errors.New("no commit info")
	}
	return info, initial, nil
}

// refTree is one store's mapped reference snapshot.
type refTree struct {
	dir                string
	version            uint32
	nodes, leaves, kvs []byte
	nNodes, nLeaves    uint64
	mapped             [3][]byte
}

func openRefTree(dir string) (_ *refTree, err error) {
	mpath := filepath.Join(dir, "metadata")
	bz, err := osfile.ReadRegular(mpath, refMaxSmallFile)
	if err != nil {
		return nil, refErr(mpath, "%v", err)
	}
	if len(bz) != refMetaSize {
		return nil, refErr(mpath, "%d bytes, want %d", len(bz), refMetaSize)
	}
	if m := binary.LittleEndian.Uint32(bz); m != refSnapshotMagic {
		return nil, refErr(mpath, "magic %#x, want %#x", m, refSnapshotMagic)
	}
	if f := binary.LittleEndian.Uint32(bz[4:]); f != refSnapshotFormat {
		return nil, refErr(mpath, "snapshot format %d, this reader knows %d", f, refSnapshotFormat)
	}
	t := &refTree{dir: dir, version: binary.LittleEndian.Uint32(bz[8:])}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	for i, name := range refFileNames {
		b, err := mapRefFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		t.mapped[i] = b
	}
	t.nodes, t.leaves, t.kvs = t.mapped[0], t.mapped[1], t.mapped[2]
	if len(t.nodes)%refRecordSize != 0 || len(t.leaves)%refRecordSize != 0 {
		return nil, refErr(dir, "nodes (%d bytes) or leaves (%d bytes) not a multiple of %d", len(t.nodes), len(t.leaves), refRecordSize)
	}
	t.nNodes, t.nLeaves = uint64(len(t.nodes)/refRecordSize), uint64(len(t.leaves)/refRecordSize)
	if (t.nLeaves > 0 && t.nNodes+1 != t.nLeaves) || (t.nLeaves == 0 && t.nNodes != 0) || t.nLeaves > math.MaxUint32 {
		return nil, refErr(dir, "%d branches for %d leaves", t.nNodes, t.nLeaves)
	}
	return t, nil
}

func mapRefFile(path string) ([]byte, error) {
	f, fi, err := osfile.OpenRegular(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refErr(path, "missing")
		}
		return nil, refErr(path, "%v", err)
	}
	defer f.Close()
	if fi.Size() == 0 {
		return nil, nil
	}
	if fi.Size() > math.MaxInt {
		return nil, refErr(path, "file of %d bytes", fi.Size())
	}
	b, _, err := mmap.Mmap(f, int(fi.Size()))
	if err != nil {
		return nil, refErr(path, "mmap: %v", err)
	}
	return b, nil
}

func (t *refTree) close() {
	for i, b := range t.mapped {
		if b != nil {
			_ = mmap.Munmap(b, nil)
		}
		t.mapped[i] = nil
	}
	t.nodes, t.leaves, t.kvs = nil, nil, nil
}

// refFileNames are the files of a reference tree, in the order of
// refTree.mapped.
var refFileNames = [3]string{"nodes", "leaves", "kvs"}

// checkedRootHash returns a copy of the root hash, or the error of a fault
// reading it.
func (t *refTree) checkedRootHash() (h []byte, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer t.recoverFault(&err)
	return bytes.Clone(t.rootHash()), nil
}

func (t *refTree) rootHash() []byte {
	switch {
	case t.nNodes > 0:
		off := (t.nNodes-1)*refRecordSize + refHashOffset
		return t.nodes[off : off+32]
	case t.nLeaves == 1:
		return t.leaves[refHashOffset : refHashOffset+32]
	default:
		h := sha256.Sum256(nil) // the empty tree
		return h[:]
	}
}

// leaf returns the key, value and version of leaf i, checking every offset.
func (t *refTree) leaf(i uint64) (key, value []byte, version uint32, err error) {
	if i >= t.nLeaves {
		return nil, nil, 0, refErr(t.dir, "leaf %d of %d", i, t.nLeaves)
	}
	rec := t.leaves[i*refRecordSize : (i+1)*refRecordSize]
	version = binary.LittleEndian.Uint32(rec)
	kl := uint64(binary.LittleEndian.Uint32(rec[4:]))
	off := binary.LittleEndian.Uint64(rec[8:])
	n := uint64(len(t.kvs))
	bad := func() error {
		return refErr(filepath.Join(t.dir, "kvs"), "leaf %d: key and value at offset %d outside the file", i, off)
	}
	if off > n || n-off < 4 {
		return nil, nil, 0, bad()
	}
	if got := uint64(binary.LittleEndian.Uint32(t.kvs[off:])); got != kl {
		return nil, nil, 0, refErr(filepath.Join(t.dir, "kvs"), "leaf %d: key length %d, the leaf records %d", i, got, kl)
	}
	off += 4
	if n-off < kl+4 {
		return nil, nil, 0, bad()
	}
	key = t.kvs[off : off+kl : off+kl]
	off += kl
	vl := uint64(binary.LittleEndian.Uint32(t.kvs[off:]))
	off += 4
	if n-off < vl {
		return nil, nil, 0, bad()
	}
	value = t.kvs[off : off+vl : off+vl]
	return key, value, version, nil
}

// refTreeSource streams a reference tree in post-order (a
// multitree.NodeSource), in a single sequential pass over its files.
type refTreeSource struct {
	t       *refTree
	i, j    uint64 // next branch, next leaf
	pending int    // complete subtrees waiting for a parent
}

// Next returns the next node. The reference's files are mapped: a page the
// file no longer has (cut short under the mapping) or that the disk cannot
// return faults, which Next turns into an error naming the file, and it
// reads the pages of the key and value it hands out, which the importer
// reads later, outside the guard.
func (s *refTreeSource) Next() (n *memiavl.ExportNode, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.t.recoverFault(&err)
	if n, err = s.next(); n != nil {
		pages.Touch(n.Key, n.Value)
	}
	return n, err
}

// recoverFault turns a memory fault inside the tree's mappings into *err;
// other panics go on. It must be deferred itself.
func (t *refTree) recoverFault(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		a := f.Addr()
		for i, b := range t.mapped {
			if len(b) == 0 {
				continue
			}
			if lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))); a >= lo && a-lo < uintptr(len(b)) {
				*err = refErr(filepath.Join(t.dir, refFileNames[i]), "memory fault at offset %d (the file cut short under its mapping, or a failed disk read)", a-lo)
				return
			}
		}
	}
	panic(r)
}

func (s *refTreeSource) next() (*memiavl.ExportNode, error) {
	t := s.t
	if t.nNodes == 0 {
		if t.nLeaves == 1 && s.j == 0 {
			return s.nextLeaf()
		}
		return nil, memiavl.ErrExportDone
	}
	if s.i >= t.nNodes {
		if s.j != t.nLeaves || s.pending != 1 {
			return nil, refErr(t.dir, "branches end with %d of %d leaves streamed and %d subtrees pending", s.j, t.nLeaves, s.pending)
		}
		return nil, memiavl.ErrExportDone
	}
	rec := t.nodes[s.i*refRecordSize : (s.i+1)*refRecordSize]
	if s.pending < int(rec[1])+2 {
		return s.nextLeaf()
	}
	height := rec[0]
	if height == 0 || height > math.MaxInt8 {
		return nil, refErr(t.dir, "branch %d of height %d", s.i, height)
	}
	keyLeaf := uint64(binary.LittleEndian.Uint32(rec[12:]))
	key, _, _, err := t.leaf(keyLeaf)
	if err != nil {
		return nil, err
	}
	s.i++
	s.pending--
	return &memiavl.ExportNode{Key: key, Version: int64(binary.LittleEndian.Uint32(rec[4:])), Height: int8(height)}, nil
}

func (s *refTreeSource) nextLeaf() (*memiavl.ExportNode, error) {
	key, value, version, err := s.t.leaf(s.j)
	if err != nil {
		return nil, err
	}
	s.j++
	s.pending++
	return &memiavl.ExportNode{Key: key, Value: value, Version: int64(version)}, nil
}

// The reference's write-ahead log is a tidwall/wal log: segment files named
// after the 20-digit index of their first entry, each a sequence of
// uvarint(length) | WALEntry protobuf. Index i holds version i, or
// i + initial version - 1 when the initial version is above 1.
type refSegment struct {
	first uint64
	path  string
}

func listRefSegments(walDir string) ([]refSegment, error) {
	ents, err := os.ReadDir(walDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, refErr(walDir, "%v", err)
	}
	var segs []refSegment
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, ".START") || strings.HasSuffix(name, ".END") {
			return nil, refErr(walDir, "%s is left by an interrupted log truncation; open the reference database once to finish it", name)
		}
		if len(name) != 20 {
			continue
		}
		first, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		segs = append(segs, refSegment{first: first, path: filepath.Join(walDir, name)})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	return segs, nil
}

func refWALIndex(version, initial int64) uint64 {
	if initial > 1 {
		return uint64(version - initial + 1)
	}
	return uint64(version)
}

func refWALVersion(index uint64, initial int64) int64 {
	if initial > 1 {
		return int64(index) + initial - 1
	}
	return int64(index)
}

// readRefWAL calls fn with every entry of index from on, in order.
func readRefWAL(segs []refSegment, from uint64, fn func(index uint64, data []byte) error) error {
	next := uint64(0) // index expected at the start of the next segment read
	for k, seg := range segs {
		last := k == len(segs)-1
		if !last && segs[k+1].first <= from {
			continue // every entry of this segment is before from
		}
		if seg.first > from && next == 0 {
			return refErr(seg.path, "the log starts at index %d, the snapshot needs %d on", seg.first, from)
		}
		if next != 0 && seg.first != next {
			return refErr(seg.path, "segment starts at index %d, the previous one ended before %d", seg.first, next)
		}
		data, err := osfile.ReadRegular(seg.path, -1)
		if err != nil {
			return refErr(seg.path, "%v", err)
		}
		idx := seg.first
		for off := 0; off < len(data); idx++ {
			size, n := binary.Uvarint(data[off:])
			if n <= 0 || uint64(len(data)-off-n) < size {
				if last {
					break // a torn tail, which the reference cuts off on open
				}
				return refErr(seg.path, "entry %d at offset %d is cut short", idx, off)
			}
			body := data[off+n : off+n+int(size)]
			off += n + int(size)
			if idx >= from {
				if err := fn(idx, body); err != nil {
					return err
				}
			}
		}
		next = idx
	}
	return nil
}

// replayRefWAL applies the reference log entries after version to db, the
// database imported at version, committing one version per entry.
func replayRefWAL(ctx context.Context, db *multitree.DB, segs []refSegment, version, initial int64) error {
	from := uint64(1) // the entries of a snapshot at version 0 start at index 1
	if version > 0 {
		from = refWALIndex(version, initial) + 1
	}
	return readRefWAL(segs, from, func(index uint64, data []byte) error {
		v := refWALVersion(index, initial)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: replay of the reference log stopped before version %d: %w", ErrMigrate, v, err)
		}
		if got := db.WorkingVersion(); got != v {
			return fmt.Errorf("%w: reference log entry %d is version %d, the database is at working version %d", ErrMigrate, index, v, got)
		}
		ops, css, err := decodeRefWALEntry(data)
		if err != nil {
			return fmt.Errorf("%w: reference log entry %d (version %d): %w", ErrMigrate, index, v, err)
		}
		up, err := refUpgradesNet(db.StoreNames(), ops)
		if err != nil {
			return fmt.Errorf("%w: reference log entry %d (version %d): %w", ErrMigrate, index, v, err)
		}
		if err := db.ApplyUpgrades(up); err != nil {
			return fmt.Errorf("%w: version %d: %w", ErrMigrate, v, err)
		}
		if err := db.ApplyChangeSets(css); err != nil {
			return fmt.Errorf("%w: version %d: %w", ErrMigrate, v, err)
		}
		if _, err := db.Commit(); err != nil {
			return fmt.Errorf("%w: version %d: %w", ErrMigrate, v, err)
		}
		return nil
	})
}

// refUpgrade is a TreeNameUpgrade of a reference log entry that adds or
// deletes a store (renames are refused when decoded).
type refUpgrade struct {
	name string
	del  bool
}

// refUpgradesNet returns the upgrades of this database that have the effect
// of a reference log entry's upgrades, which the reference applies one by
// one in their order, on stores: a store deleted and then added again is
// emptied (deleted and added here); a store added and then deleted is
// nothing when it did not exist before, and emptied when it did (the
// reference deletes the first tree of that name, the old one); an entry
// the reference refuses (a deletion of an unknown store, two stores of
// one name) is refused.
func refUpgradesNet(stores []string, ops []refUpgrade) (wal.Upgrades, error) {
	type tree struct {
		name string
		old  bool // a store before the entry, not one it added
	}
	trees := make([]tree, 0, len(stores)+len(ops))
	for _, name := range stores {
		trees = append(trees, tree{name, true})
	}
	for _, op := range ops {
		if !op.del {
			trees = append(trees, tree{op.name, false})
			continue
		}
		i := slices.IndexFunc(trees, func(t tree) bool { return t.name == op.name })
		if i < 0 {
			return wal.Upgrades{}, fmt.Errorf("store %q deleted, which does not exist (the reference refuses this too)", op.name)
		}
		// the reference's swap deletion
		trees[i] = trees[len(trees)-1]
		trees = trees[:len(trees)-1]
	}
	after := make(map[string]bool, len(trees)) // name: the old store kept
	for _, t := range trees {
		if _, dup := after[t.name]; dup {
			return wal.Upgrades{}, fmt.Errorf("two stores named %q after the upgrades (the reference refuses this too)", t.name)
		}
		after[t.name] = t.old
	}
	var up wal.Upgrades
	for _, name := range stores {
		if old, ok := after[name]; !ok || !old {
			up.Deleted = append(up.Deleted, name)
		}
	}
	for _, t := range trees {
		if !t.old {
			up.Added = append(up.Added, t.name)
		}
	}
	slices.Sort(up.Added)
	return up, nil
}

// decodeRefWALEntry decodes WALEntry{1: repeated NamedChangeSet, 2: repeated
// TreeNameUpgrade} with NamedChangeSet{1: ChangeSet{1: repeated KVPair{1:
// bool delete, 2: key, 3: value}}, 2: name} and TreeNameUpgrade{1: name, 2:
// rename_from, 3: bool delete}. The upgrades keep their order.
func decodeRefWALEntry(b []byte) ([]refUpgrade, []wal.ChangeSet, error) {
	var (
		up  []refUpgrade
		css []wal.ChangeSet
	)
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			cs, err := decodeRefNamedChangeSet(v)
			if err != nil {
				return err
			}
			css = append(css, cs)
		case num == 2 && typ == protowire.BytesType:
			var name, from string
			var del bool
			err := protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					name = string(v)
				case num == 2 && typ == protowire.BytesType:
					from = string(v)
				case num == 3 && typ == protowire.VarintType:
					del = x != 0
				case num <= 3:
					return fmt.Errorf("upgrade field %d of wire type %d", num, typ)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if !del && from != "" {
				return fmt.Errorf("store %q renamed to %q: the reference keeps a renamed tree as it is and this database rebuilds it, "+
					"so the app hash would differ; rewrite the reference snapshot after this version and import again", from, name)
			}
			up = append(up, refUpgrade{name: name, del: del})
		case num == 1 || num == 2:
			return fmt.Errorf("entry field %d of wire type %d", num, typ)
		}
		return nil
	})
	return up, css, err
}

func decodeRefNamedChangeSet(b []byte) (wal.ChangeSet, error) {
	var cs wal.ChangeSet
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != 1 {
					return nil
				}
				if typ != protowire.BytesType {
					return fmt.Errorf("changeset field %d of wire type %d", num, typ)
				}
				var p wal.KVPair
				err := protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
					switch {
					case num == 1 && typ == protowire.VarintType:
						p.Delete = x != 0
					case num == 2 && typ == protowire.BytesType:
						p.Key = bytes.Clone(v)
					case num == 3 && typ == protowire.BytesType:
						p.Value = bytes.Clone(v)
					case num <= 3:
						return fmt.Errorf("pair field %d of wire type %d", num, typ)
					}
					return nil
				})
				if err != nil {
					return err
				}
				if p.Key == nil {
					p.Key = []byte{}
				}
				if p.Delete {
					p.Value = nil
				} else if p.Value == nil {
					p.Value = []byte{}
				}
				cs.Pairs = append(cs.Pairs, p)
				return nil
			})
		case num == 2 && typ == protowire.BytesType:
			cs.Name = string(v)
		case num == 1 || num == 2:
			return fmt.Errorf("named changeset field %d of wire type %d", num, typ)
		}
		return nil
	})
	return cs, err
}

// protoFields calls fn with each field of the protobuf message b: for a
// varint its value in x, for a length-delimited field its bytes in v (a
// slice of b); other wire types are skipped after fn sees them with neither.
func protoFields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("protobuf: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("protobuf: field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
