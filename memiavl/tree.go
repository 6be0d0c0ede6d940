package memiavl

import (
	"bytes"
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
)

// Options configure a new tree. The zero value is a valid configuration.
type Options struct {
	// InitialVersion is the version of the first SaveVersion. 0 and 1 both
	// mean 1. As in cosmos/iavl >= 1.2, the nodes written by that first
	// version carry InitialVersion in their hashes.
	InitialVersion int64
	// ChangesHint is about how many keys a tree opened on a snapshot
	// (NewFromSnapshot) will change: it sizes the first filter of the
	// changed keys, which adds filters as it fills. 0 takes a quarter of
	// the snapshot's keys (at most about a million), for a working tree
	// that collects a snapshot interval's changes; a tree that changes
	// few keys, such as a view rebuilt at an older version, gives a small
	// hint and holds the filter's minimum, 8 KiB for 4,096 keys.
	ChangesHint int64
}

func (o Options) validate() error {
	if o.InitialVersion < 0 {
		return fmt.Errorf("%w: negative initial version %d", ErrVersion, o.InitialVersion)
	}
	if o.ChangesHint < 0 {
		return fmt.Errorf("memiavl: negative changes hint %d", o.ChangesHint)
	}
	return nil
}

// Tree is an IAVL+ tree: an AVL tree whose leaves hold the key/value pairs
// and whose node hashes are identical to cosmos/iavl v1's.
//
// A Tree is used by one goroutine at a time. Copy returns an independent tree
// of the last saved version that shares all committed nodes (copy-on-write);
// copies may be read from other goroutines while the original is mutated.
//
// Keys and values passed to Set are retained by the tree and must not be
// modified by the caller afterwards.
//
// Make a tree with New or NewFromSnapshot (or get one from a database); the
// zero Tree is not usable.
type Tree struct {
	pers    persisted // the snapshot under this tree; zero when none
	root    ref       // working root
	saved   ref       // root of the last saved version
	version int64     // last saved version; 0 before the first save
	initial int64     // initial version, from Options
	// changes counts the Set and Remove calls since the root was last
	// hashed: enough of them make hashing split across goroutines.
	changes int
	// mutations counts every Set and Remove: an open iterator that sees it
	// change finds its place again (nodes may have changed in place).
	mutations uint64
	// With excl set, nodes of versions above exclAbove belong to this tree
	// alone and are mutated in place like uncommitted ones (see
	// SetExclusive).
	excl      bool
	exclAbove int64
	// touched holds the keys changed since the snapshot (see touchSet):
	// any other key has the snapshot's value, which get reads directly.
	// nil when not known (a tree without a snapshot, or rebased without
	// one); reads then descend. Shared with copies, which add to it too.
	touched *touchSet
	// next holds the keys changed since next.from (StartNextTouches): the
	// touched set of this tree's rebase onto a snapshot of that version.
	next *touchSet
	// rewroteLeaf reports that the last Set replaced the value of a leaf
	// the tree had written in the working version (WorkingLeafRewritten)
	rewroteLeaf bool
	// dirty is set by changes (a Set, a Remove that removed) and
	// cleared by saving.
	dirty bool
	// deferred is set by SaveVersionDeferHash: nodes of the saved version
	// may be unhashed, also ones later changes made unreachable from the
	// working root, which Copy and Rebase still hand out (see hashRoot).
	deferred bool
}

// New returns an empty tree.
func New(opts Options) (*Tree, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Tree{root: nilRef, saved: nilRef, initial: opts.InitialVersion}, nil
}

// Version returns the last saved version, 0 if none was saved.
func (t *Tree) Version() int64 { return t.version }

// WorkingVersion returns the version the next SaveVersion will create:
// none after the last version (math.MaxInt64), where it wraps around to
// math.MinInt64 and Set, Remove and the saves fail.
func (t *Tree) WorkingVersion() int64 {
	v := t.version + 1
	if v == 1 && t.initial > 0 {
		v = t.initial
	}
	return v
}

// SetInitialVersion changes the initial version. It is only valid before the
// first SaveVersion: after it, it fails with ErrVersion (cosmos/iavl ignores
// the call then). Changes made before it are kept and take the new
// working version, as in cosmos/iavl, whose new nodes take their version
// when the tree is saved. Hashes computed before it (RootHash, a proof of
// the working tree) are computed again with the new version; iavl keeps
// the node hashes it computed with the old one, so after a WorkingHash
// followed by SetInitialVersion its saved root differs from this tree's
// (and its nodes' proofs no longer verify against it). The SDK sets the
// initial version before anything is written.
func (t *Tree) SetInitialVersion(v int64) error {
	if v < 0 {
		return fmt.Errorf("%w: negative initial version %d", ErrVersion, v)
	}
	if t.version != 0 {
		return fmt.Errorf("%w: initial version can only be set before the first save", ErrVersion)
	}
	if !t.root.isNil() && t.root.n == nil {
		// a tree over a snapshot has been saved
		return fmt.Errorf("%w: initial version can only be set on a tree without a snapshot", ErrVersion)
	}
	old := t.WorkingVersion()
	t.initial = v
	if w := t.WorkingVersion(); w != old {
		restamp(t.root.n, w)
	}
	return nil
}

// restamp gives the in-memory nodes under n, all of them uncommitted,
// version v, and clears their hashes.
func restamp(n *node, v int64) {
	for n != nil {
		n.version, n.hashed = v, false
		if n.height == 0 {
			return
		}
		restamp(n.left.n, v)
		n = n.right.n
	}
}

// Size returns the number of keys in the working tree. A root in the
// snapshot is read from its mapping: when that read fails (a file cut
// short under the mapping, a failed disk read), Size panics with an error
// wrapping ErrCorrupt, which SizeChecked returns instead.
func (t *Tree) Size() int64 {
	n, err := t.SizeChecked()
	if err != nil {
		panic(err)
	}
	return n
}

// SizeChecked returns the number of keys in the working tree, or an error
// wrapping ErrCorrupt when the snapshot cannot be read.
func (t *Tree) SizeChecked() (n int64, err error) {
	if t.root.isNil() {
		return 0, nil
	}
	if t.root.n != nil {
		return t.root.n.size, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	return t.sizeOf(t.root), nil
}

// Height returns the height of the working tree (0 for an empty tree or a
// single leaf). It panics as Size does when the snapshot cannot be read;
// HeightChecked returns the error instead.
func (t *Tree) Height() uint8 {
	h, err := t.HeightChecked()
	if err != nil {
		panic(err)
	}
	return h
}

// HeightChecked returns the height of the working tree, or an error
// wrapping ErrCorrupt when the snapshot cannot be read.
func (t *Tree) HeightChecked() (h uint8, err error) {
	if t.root.isNil() {
		return 0, nil
	}
	if t.root.n != nil {
		return t.root.n.height, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	return t.heightOf(t.root), nil
}

// IsEmpty reports whether the working tree holds no keys.
func (t *Tree) IsEmpty() bool { return t.root.isNil() }

// Copy returns a tree of the last saved version that shares its nodes with t.
// The copy does not see t's later changes and t does not see the copy's. It is
// cheap: no node is copied until one side mutates it.
func (t *Tree) Copy() *Tree {
	if t.excl && t.dirty {
		panic(fmt.Errorf("%w: Copy; save first", ErrExclusive))
	}
	if t.excl { // only a tree nobody else reads has it set
		t.excl = false // its nodes are shared from now on
	}
	return &Tree{pers: t.pers, root: t.saved, saved: t.saved, version: t.version, initial: t.initial,
		touched: t.touched, next: t.next}
}

// record notes that key is about to change, for the touched sets: before
// the change, so that a change that fails half way is noted too. Noting a
// key that then does not change (a Remove of an absent key) only costs
// later reads of it a descent.
func (t *Tree) record(key []byte) {
	if t.touched == nil && t.next == nil {
		return
	}
	h := touchHash(key)
	if t.touched != nil {
		t.touched.add(h)
	}
	if t.next != nil {
		t.next.add(h)
	}
}

// StartNextTouches starts a second record of changed keys, of those changed
// after the last saved version, for the tree that Rebase makes of a later
// version of this one onto a snapshot of this version (or a later one): its
// point reads of keys unchanged since that snapshot then go straight to it.
// It reports false and records nothing when the tree has unsaved changes,
// which the new record would miss; a rebased tree without a record reads
// correctly, only more slowly. Copies taken afterwards share the record.
func (t *Tree) StartNextTouches() bool {
	if t.dirty {
		t.next = nil
		return false
	}
	var hint int64
	if t.touched != nil {
		hint = t.touched.keys()
	}
	h, err := t.RootHashChecked()
	if err != nil {
		// unreadable: the rebase that would use the record meets the
		// same damage and reports it
		t.next = nil
		return false
	}
	t.next = newTouchSet(t.version, hint)
	t.next.fromHash = h
	return true
}

// Set inserts or updates key with value. It reports whether the key existed.
// An empty value is valid; a nil key or nil value is an error and leaves the
// tree unchanged, and so are a key or value longer than MaxKeyValueSize
// (ErrTooLarge) and a change of a tree saved at the last version
// (math.MaxInt64), which has no working version (ErrVersion).
func (t *Tree) Set(key, value []byte) (updated bool, err error) {
	t.rewroteLeaf = false // a refused Set replaces nothing either
	if key == nil {
		return false, ErrNilKey
	}
	if value == nil {
		return false, fmt.Errorf("%w: key %s", ErrNilValue, hexkey.Upper(key))
	}
	if err := CheckSize(key, value); err != nil {
		return false, err
	}
	if t.version == math.MaxInt64 {
		return false, errLastVersion(t.version)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	t.record(key)
	t.dirty = true
	t.changes++
	t.mutations++
	v := t.WorkingVersion()
	if t.root.isNil() {
		t.root = memRef(newLeaf(key, value, v))
		return false, nil
	}
	t.root, updated = t.set(t.root, key, value, v)
	return updated, nil
}

// CheckSize returns ErrTooLarge for a key or value longer than
// MaxKeyValueSize bytes, which Set refuses.
func CheckSize(key, value []byte) error {
	if uint64(len(key)) > MaxKeyValueSize || uint64(len(value)) > MaxKeyValueSize {
		return fmt.Errorf("%w: key of %d bytes, value of %d bytes, at most %d each", ErrTooLarge, len(key), len(value), uint64(MaxKeyValueSize))
	}
	return nil
}

// WorkingLeafRewritten reports whether the last Set replaced the value of a
// leaf that an earlier Set of the working version wrote (the key was set in
// this version and not removed since): its shape and the leaf's version
// stay as the earlier Set left them, so a log of the version's changes may
// give that Set the new value instead of recording another.
func (t *Tree) WorkingLeafRewritten() bool { return t.rewroteLeaf }

// Remove deletes key. It reports whether the key existed; removing an absent
// key leaves the tree unchanged. It fails as Set does. Unlike cosmos/iavl's
// Remove it does not return the removed value (Get it first).
func (t *Tree) Remove(key []byte) (removed bool, err error) {
	if key == nil {
		return false, ErrNilKey
	}
	if t.version == math.MaxInt64 {
		return false, errLastVersion(t.version)
	}
	if t.root.isNil() {
		return false, nil
	}
	// a removal, or one that failed half way through (it may have changed
	// nodes of the working version in place), is an unsaved change; a
	// Remove of an absent key changes nothing
	defer func() {
		if removed || err != nil {
			t.dirty = true
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	t.record(key)
	t.changes++
	t.mutations++
	newRoot, _, removed := t.remove(t.root, key, t.WorkingVersion())
	if removed {
		t.root = newRoot
	}
	return removed, nil
}

// Get returns the value of key, or nil if it is absent. A nil key reads the
// empty key, as in iavl (only mutations refuse it). The returned slice
// must not be modified; it stays valid after the tree is closed. See
// GetZeroCopy for a variant that does not copy values out of a snapshot.
func (t *Tree) Get(key []byte) ([]byte, error) {
	v, _, err := t.get(key, readCopy)
	return v, err
}

// GetZeroCopy returns the value of key, or nil if it is absent. A value read
// from the snapshot is a slice into the memory map: it must not be modified
// and is valid only while the tree's snapshot is open (for a tree served by a
// database, while its read view is held). Its pages are read before it is
// returned, so a page the file no longer has is an error wrapping
// ErrCorrupt here; a file cut short later, while the caller holds the
// slice, faults where the caller reads it.
func (t *Tree) GetZeroCopy(key []byte) ([]byte, error) {
	v, _, err := t.get(key, readTouch)
	return v, err
}

// How get hands out a value it finds in the snapshot's map.
const (
	readSlice = iota // as a slice of the map, unread (Has)
	readTouch        // as a slice of the map, its pages read (see touchKV)
	readCopy         // copied
)

// get returns the value of key and whether it lies in the snapshot's map,
// where how says what it does with such a value under its fault guard.
func (t *Tree) get(key []byte, how int) (value []byte, mapped bool, err error) {
	if t.root.isNil() {
		return nil, false, nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	if t.touched != nil && t.pers.s != nil {
		// a key unchanged since the snapshot has the snapshot's value
		if h := touchHash(key); !t.touched.mayContain(h) {
			value, mapped, err = t.pers.getHashed(key, h)
			return handOut(value, mapped, how), mapped, err
		}
	}
	r := t.root
	kp := keyPrefix(key)
	for r.n != nil {
		n := r.n
		if n.height == 0 {
			if n.pfx == kp && bytes.Equal(n.key(), key) {
				return n.value(), false, nil
			}
			return nil, false, nil
		}
		if n.less(key, kp) {
			r = n.left
		} else {
			r = n.right
		}
	}
	value, err = t.pers.get(r.p, key)
	return handOut(value, value != nil, how), value != nil, err
}

// handOut returns value, found in the snapshot's map if mapped, as how
// says (see get). It runs under the caller's fault guard.
func handOut(value []byte, mapped bool, how int) []byte {
	switch {
	case !mapped || value == nil:
		return value
	case how == readCopy:
		return bytes.Clone(value)
	case how == readTouch:
		touchKV(nil, value)
	}
	return value
}

// Has reports whether key is present.
func (t *Tree) Has(key []byte) (bool, error) {
	v, _, err := t.get(key, readSlice)
	return v != nil, err
}

// RootHash returns the hash of the working tree. Hashes are computed once per
// changed node and cached; the empty tree hashes to sha256(""). The hashes
// of snapshot nodes are read from the mapping: when that read fails (a file
// cut short under the mapping, a failed disk read), RootHash panics with an
// error wrapping ErrCorrupt, which RootHashChecked returns instead.
func (t *Tree) RootHash() []byte {
	h, err := t.RootHashChecked()
	if err != nil {
		panic(err)
	}
	return h
}

// RootHashChecked returns the hash of the working tree as RootHash does, or
// an error wrapping ErrCorrupt when the snapshot cannot be read.
func (t *Tree) RootHashChecked() ([]byte, error) {
	if t.root.isNil() && !t.deferred {
		return nodehash.Empty(), nil
	}
	return t.rootHash()
}

// ComputeHashes computes and caches the hashes of the working tree's changed
// nodes, as RootHash does, but returns a corrupt snapshot as an error instead
// of panicking: it is meant for hashing ahead of SaveVersion on another
// goroutine, which must be the only one using the tree meanwhile.
func (t *Tree) ComputeHashes() (err error) {
	if t.root.isNil() && !t.deferred {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	t.hashRoot()
	return nil
}

func (t *Tree) rootHash() (h []byte, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, t.pers.s)
	return bytes.Clone(t.hashRoot()), nil
}

// hashRoot computes the hashes of the changed nodes, splitting the work
// when there are many, and returns the root's. After SaveVersionDeferHash
// it hashes the saved version too: the nodes that changes since made
// unreachable from the working root are still the saved version's, which
// Copy hands out to be read on other goroutines. It panics with a
// corruptError on a corrupt snapshot.
func (t *Tree) hashRoot() []byte {
	if t.changes >= parallelHashChanges {
		t.hashParallel(t.root, parallelHashDepth)
	}
	t.changes = 0
	h := nodehash.Empty()
	if !t.root.isNil() {
		h = t.hashOf(t.root)
	}
	if t.deferred {
		if !t.saved.isNil() {
			t.hashOf(t.saved) // the nodes it shares with the root are hashed
		}
		t.deferred = false
	}
	return h
}

const (
	// parallelHashChanges is how many changes since the last hash make
	// the next one split the tree: below it the unhashed nodes are too few
	// to pay for the goroutines.
	parallelHashChanges = 256
	// parallelHashDepth is how many levels below the root split: 2^depth
	// subtrees are hashed concurrently.
	parallelHashDepth = 2
)

// hashParallel computes the hashes of the unhashed in-memory nodes under r,
// the subtrees below depth levels concurrently. Distinct subtrees share no
// in-memory node, so the goroutines write disjoint nodes. A corruptError
// panic in a goroutine is re-raised in the caller.
func (t *Tree) hashParallel(r ref, depth int) {
	n := r.n
	if n == nil || n.hashed || n.height == 0 {
		return
	}
	if depth == 0 {
		t.hashOf(r)
		return
	}
	var wg sync.WaitGroup
	var panicked any
	wg.Add(1)
	go func() {
		defer wg.Done()
		// a fault in this goroutine is a panic too, handed to the caller
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { panicked = recover() }()
		t.hashParallel(n.left, depth-1)
	}()
	func() {
		// a panic here too waits for the goroutine, which must not
		// hash on after the caller has recovered
		defer wg.Wait()
		t.hashParallel(n.right, depth-1)
	}()
	if panicked != nil {
		panic(panicked)
	}
	t.hashOf(r)
}

// SaveVersion commits the working tree as a new version and returns its root
// hash and version. Saving without changes creates a version with the same
// root hash.
func (t *Tree) SaveVersion() ([]byte, int64, error) {
	if t.version == math.MaxInt64 {
		return nil, 0, errLastVersion(t.version)
	}
	if t.root.isNil() {
		t.version = t.WorkingVersion()
		t.saved = t.root
		t.dirty = false
		t.deferred = false
		return nodehash.Empty(), t.version, nil
	}
	// the saved version this replaces needs no hashes of its own
	deferred := t.deferred
	t.deferred = false
	h, err := t.rootHash()
	if err != nil {
		t.deferred = deferred
		return nil, 0, err
	}
	t.version = t.WorkingVersion()
	t.saved = t.root
	t.dirty = false
	return h, t.version, nil
}

func errLastVersion(v int64) error {
	return fmt.Errorf("%w: version %d is the last one a tree can have", ErrVersion, v)
}

// SaveVersionDeferHash commits the working tree as a new version like
// SaveVersion but leaves the hashes of its changed nodes to be computed by a
// later SaveVersion or RootHash, which then hashes only the nodes still
// reachable. Replaying many versions this way hashes once at the end instead
// of once per version. The tree must not be shared (no Copy, no readers)
// until a SaveVersion or RootHash has run, since computing the deferred
// hashes writes to committed nodes. It fails, as SaveVersion does, at the
// last version a tree can have.
func (t *Tree) SaveVersionDeferHash() (int64, error) {
	if t.version == math.MaxInt64 {
		return 0, errLastVersion(t.version)
	}
	t.version = t.WorkingVersion()
	t.saved = t.root
	t.dirty = false
	t.deferred = true
	return t.version, nil
}

// set inserts key below r, mirroring cosmos/iavl's recursiveSet: a new key
// splits a leaf into an inner node of height 1, an update replaces the leaf and
// does not rebalance.
func (t *Tree) set(r ref, key, value []byte, v int64) (ref, bool) {
	if t.isLeaf(r) {
		lk := t.keyOf(r)
		switch bytes.Compare(key, lk) {
		case -1:
			return memRef(&node{pfx: keyPrefix(lk), k: bstr(lk), height: 1, size: 2, version: v,
				left: memRef(newLeaf(key, value, v)), right: r}), false
		case 1:
			return memRef(&node{pfx: keyPrefix(key), k: bstr(key), height: 1, size: 2, version: v,
				left: r, right: memRef(newLeaf(key, value, v))}), false
		default:
			if r.n != nil && t.owns(r.n, v) {
				t.rewroteLeaf = r.n.version == v
				r.n.setValue(bstr(value))
				r.n.version = v
				r.n.hashed = false
				return r, true
			}
			return memRef(newLeaf(key, value, v)), true
		}
	}
	n := t.mutable(r, v)
	var updated bool
	if n.less(key, keyPrefix(key)) {
		n.left, updated = t.set(n.left, key, value, v)
	} else {
		n.right, updated = t.set(n.right, key, value, v)
	}
	if updated {
		return memRef(n), true
	}
	t.calcHeightAndSize(n)
	return memRef(t.balance(n, v)), false
}

// remove deletes key below r, mirroring cosmos/iavl's recursiveRemove. It
// returns the new subtree (nilRef if r was the removed leaf), the new key for
// the nearest ancestor whose right subtree lost its leftmost leaf, and
// whether anything was removed. Nothing is copied unless the key is found.
func (t *Tree) remove(r ref, key []byte, v int64) (ref, []byte, bool) {
	if t.isLeaf(r) {
		if bytes.Equal(key, t.keyOf(r)) {
			return nilRef, nil, true
		}
		return r, nil, false
	}
	nkey := t.keyOf(r)
	if bytes.Compare(key, nkey) < 0 {
		newLeft, newKey, removed := t.remove(t.leftOf(r), key, v)
		if !removed {
			return r, nil, false
		}
		if newLeft.isNil() {
			return t.rightOf(r), nkey, true
		}
		n := t.mutable(r, v)
		n.left = newLeft
		t.calcHeightAndSize(n)
		return memRef(t.balance(n, v)), newKey, true
	}
	newRight, newKey, removed := t.remove(t.rightOf(r), key, v)
	if !removed {
		return r, nil, false
	}
	if newRight.isNil() {
		return t.leftOf(r), nil, true
	}
	n := t.mutable(r, v)
	n.right = newRight
	if newKey != nil {
		n.setKey(newKey)
	}
	t.calcHeightAndSize(n)
	return memRef(t.balance(n, v)), nil, true
}

// owns reports whether n may be mutated in place at working version v: it
// is uncommitted, or exclusive to the tree (SetExclusive).
func (t *Tree) owns(n *node, v int64) bool {
	return n.version == v || t.excl && n.version > t.exclAbove
}

// SetExclusive declares that the nodes of versions above v belong to this
// tree alone: no Copy of the tree was taken since they were created and no
// other goroutine reads them. Until ClearExclusive or the next Copy,
// mutations then update those nodes in place, as they do uncommitted ones,
// instead of copying them, which saves the copies (and their garbage) when
// replaying many versions into a tree that nobody reads meanwhile. Such a
// mutation changes the last saved version too, so until the next save the
// tree cannot give it out: Copy panics and Export and the snapshot writes
// fail with ErrExclusive.
func (t *Tree) SetExclusive(v int64) { t.excl, t.exclAbove = true, v }

// ClearExclusive ends SetExclusive: committed nodes are copied on mutation
// again.
func (t *Tree) ClearExclusive() { t.excl = false }

// mutable returns an inner node of version v for r: r itself when it is an
// uncommitted node of this version, otherwise a copy.
func (t *Tree) mutable(r ref, v int64) *node {
	if r.n != nil {
		if t.owns(r.n, v) {
			r.n.version = v
			r.n.hashed = false
			return r.n
		}
		n := r.n
		// field by field: a concurrent snapshot writer may set n.snap
		return &node{height: n.height, pfx: n.pfx, k: n.k, left: n.left, right: n.right,
			version: v, size: n.size}
	}
	return t.pers.mutableBranch(r.p, v)
}

func (t *Tree) calcHeightAndSize(n *node) {
	lh, rh := t.heightOf(n.left), t.heightOf(n.right)
	n.height = max(lh, rh) + 1
	n.size = t.sizeOf(n.left) + t.sizeOf(n.right)
}

func (t *Tree) balanceOf(n *node) int {
	return int(t.heightOf(n.left)) - int(t.heightOf(n.right))
}

// balance restores the AVL property at n exactly as cosmos/iavl does. n must
// be mutable (of version v).
func (t *Tree) balance(n *node, v int64) *node {
	b := t.balanceOf(n)
	if b > 1 {
		if t.balanceRef(n.left) >= 0 {
			return t.rotateRight(n, v)
		}
		n.left = memRef(t.rotateLeft(t.mutable(n.left, v), v))
		return t.rotateRight(n, v)
	}
	if b < -1 {
		if t.balanceRef(n.right) <= 0 {
			return t.rotateLeft(n, v)
		}
		n.right = memRef(t.rotateRight(t.mutable(n.right, v), v))
		return t.rotateLeft(n, v)
	}
	return n
}

func (t *Tree) balanceRef(r ref) int {
	return int(t.heightOf(t.leftOf(r))) - int(t.heightOf(t.rightOf(r)))
}

func (t *Tree) rotateRight(n *node, v int64) *node {
	nn := t.mutable(n.left, v)
	n.left = nn.right
	nn.right = memRef(n)
	t.calcHeightAndSize(n)
	t.calcHeightAndSize(nn)
	return nn
}

func (t *Tree) rotateLeft(n *node, v int64) *node {
	nn := t.mutable(n.right, v)
	n.right = nn.left
	nn.left = memRef(n)
	t.calcHeightAndSize(n)
	t.calcHeightAndSize(nn)
	return nn
}

// Node accessors over both kinds of node.

func (t *Tree) isLeaf(r ref) bool {
	if r.n != nil {
		return r.n.height == 0
	}
	return t.pers.isLeaf(r.p)
}

func (t *Tree) heightOf(r ref) uint8 {
	if r.n != nil {
		return r.n.height
	}
	return t.pers.height(r.p)
}

func (t *Tree) sizeOf(r ref) int64 {
	if r.n != nil {
		return r.n.size
	}
	return t.pers.size(r.p)
}

func (t *Tree) versionOf(r ref) int64 {
	if r.n != nil {
		return r.n.version
	}
	return t.pers.version(r.p)
}

func (t *Tree) keyOf(r ref) []byte {
	if r.n != nil {
		return r.n.key()
	}
	return t.pers.key(r.p)
}

func (t *Tree) leftOf(r ref) ref {
	if r.n != nil {
		return r.n.left
	}
	return ref{p: t.pers.left(r.p)}
}

func (t *Tree) rightOf(r ref) ref {
	if r.n != nil {
		return r.n.right
	}
	return ref{p: t.pers.right(r.p)}
}

// touchHash loads the cache lines of r's hash without waiting for them:
// the loads feed only a branch that is never taken, so the processor goes
// on while they complete. Hashing a changed node reads the hash of its
// unchanged sibling, a miss of its own, and this overlaps it with hashing
// the other side.
func (t *Tree) touchHash(r ref) {
	var b byte
	if r.n != nil {
		b = r.n.hash[0] | r.n.height
		if r.n.hashed {
			b |= 1
		}
	} else if r.p != prefNone && t.pers.s != nil {
		b = t.pers.hash(r.p)[0]
	}
	if b == 0xff && r.n == nil && r.p == prefNone {
		neverCalled()
	}
}

//go:noinline
func neverCalled() {}

// hashOf returns the hash of r, computing and caching it for in-memory nodes.
// The slice must not be modified.
func (t *Tree) hashOf(r ref) []byte {
	if r.n == nil {
		return t.pers.hash(r.p)
	}
	n := r.n
	if !n.hashed {
		if n.height == 0 {
			nodehash.Leaf(n.hash[:0], n.key(), n.value(), n.version)
		} else {
			t.touchHash(n.right) // loads while the left subtree hashes
			lh := t.hashOf(n.left)
			rh := t.hashOf(n.right)
			nodehash.Inner(n.hash[:0], n.height, n.size, n.version, lh, rh)
		}
		n.hashed = true
	}
	return n.hash[:]
}
