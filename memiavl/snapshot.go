package memiavl

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/seed-6dfbb450/memiavl/internal/prefetch"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// maxSnapshotTouchHint bounds the first filter of changed keys that a tree
// opened on a snapshot sizes by the snapshot (2 MiB): a quarter of a very
// large store's keys would allocate up to the filter's whole bound at open.
const maxSnapshotTouchHint = 1 << 20

// NewFromSnapshot returns a tree at the snapshot's version whose nodes are
// read from the snapshot. Mutations copy only the path they touch. The
// snapshot must stay open while the tree or any of its copies is in use; the
// caller owns it and closes it.
func NewFromSnapshot(s *snapshot.Snapshot, opts Options) (*Tree, error) {
	if s == nil {
		return nil, errors.New("memiavl: NewFromSnapshot of a nil snapshot")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	hint := opts.ChangesHint
	if hint == 0 {
		hint = int64(min(s.LeafCount()/4, maxSnapshotTouchHint))
	}
	t := &Tree{pers: persisted{s: s}, root: nilRef, version: s.Version(), initial: opts.InitialVersion,
		touched: newTouchSet(s.Version(), hint)}
	if r, ok := s.Root(); ok {
		t.root = ref{p: r}
	}
	t.saved = t.root
	return t, nil
}

// Snapshot returns the snapshot the tree reads from, nil if none.
func (t *Tree) Snapshot() *snapshot.Snapshot { return t.pers.s }

// WriteSnapshot writes the last saved version of the tree as a snapshot into
// dir, streaming the nodes in post-order: memory use is bounded by the tree's
// height, not its size. A subtree unchanged since the tree's snapshot is
// copied from it in bulk (snapshot.Writer.AddSubtree), its records
// re-encoded and its keys and values copied with one write, instead of node
// by node. It only reads committed nodes, so it may run on a Copy in another
// goroutine while the original tree goes on changing. Cancelling ctx aborts
// the write and removes the partial files.
//
// Meanwhile another goroutine checks the checksums of the files of the
// tree's snapshot that the write reads (snapshot.Snapshot.VerifyChecksums:
// leaves, branches, keys and values), and a mismatch fails the write
// before the new snapshot is put in place: what the write copies from it
// would otherwise go into the new files under checksums of their own, and
// damage that no read has met yet would no longer be found by them.
func (t *Tree) WriteSnapshot(ctx context.Context, dir string, opts ...WriteOption) error {
	return t.writeSnapshot(ctx, dir, nil, opts)
}

// WriteOption is an optional setting of a snapshot write (WriteSnapshot,
// WriteSnapshotMapped).
type WriteOption func(*writeConfig)

type writeConfig struct {
	limiter snapshot.Limiter
	split   bool
	spawn   func(task func()) // see WithSplitRunner; nil: a goroutine
	syncs   *snapshot.SyncGroup
}

// WithSplit writes the root's right subtree on a goroutine of its own while
// the calling one writes the left (snapshot.Writer.Fork and Join), when the
// root is an in-memory node over at least SplitMinLeaves leaves: the write
// of one large tree then keeps two processors busy. The files are the same
// bytes. The right half's leaf and branch records go straight to their
// places, but its key-value entries go through a scratch file and are
// copied once more at the join, and its leaf records are read and
// rewritten there (their entries' offsets move), so the write does more
// work in all; it pays where a processor would otherwise idle. With
// WithLimiter, the limiter must be safe for concurrent use (a
// *rate.Limiter is).
func WithSplit() WriteOption {
	return func(c *writeConfig) { c.split = true }
}

// WithSplitRunner is WithSplit with the right subtree's write handed to
// run instead of a goroutine of its own: a database that writes several
// trees on a pool of goroutines gives it to the pool, so that the halves
// and the other trees share the processors without more goroutines than
// it runs. run may call the task it gets on any goroutine, at any time, or
// never: the write runs the task itself when its left half is done and
// the task has not started, and a task called after that does nothing.
func WithSplitRunner(run func(task func())) WriteOption {
	return func(c *writeConfig) { c.split, c.spawn = true, run }
}

// errSplitPanic is the right half's result when its write panicked.
var errSplitPanic = errors.New("memiavl: the split write's right half panicked")

// SplitMinLeaves is the size from which WithSplit splits a tree's write.
const SplitMinLeaves = 1 << 16

// splitMinLeaves is SplitMinLeaves, a variable for tests.
var splitMinLeaves = int64(SplitMinLeaves)

// WithLimiter paces the writes of the snapshot's files with l
// (snapshot.Writer.SetLimiter), so that a snapshot written beside a running
// database leaves the disk to its reads and commits. A wait that ctx ends
// fails the write with ctx's error. nil means no pacing.
func WithLimiter(l snapshot.Limiter) WriteOption {
	return func(c *writeConfig) { c.limiter = l }
}

// WithSyncGroup leaves the write's fsyncs to g (snapshot.Writer.DeferSync):
// the snapshot is in place when the write returns, and durable once
// g.Sync has returned nil with dir's parent added to g. A database that
// writes one snapshot per store in a temporary directory syncs them all at
// once this way. nil means the write syncs its own files.
func WithSyncGroup(g *snapshot.SyncGroup) WriteOption {
	return func(c *writeConfig) { c.syncs = g }
}

func (t *Tree) writeSnapshot(ctx context.Context, dir string, m *NodeMap, opts []WriteOption) (err error) {
	if t.excl && t.dirty {
		return fmt.Errorf("%w: snapshot write; save first", ErrExclusive)
	}
	var cfg writeConfig
	for _, o := range opts {
		o(&cfg)
	}
	w, err := snapshot.NewWriter(dir, t.version)
	if err != nil {
		return err
	}
	if cfg.limiter != nil {
		w.SetLimiter(ctx, cfg.limiter)
	}
	if cfg.syncs != nil {
		if err := w.DeferSync(cfg.syncs); err != nil {
			_ = w.Abort()
			return err
		}
	}
	defer func() {
		if err != nil {
			_ = w.Abort()
		}
	}()
	checked := t.checkSnapshot(ctx)
	defer checked(false) // the check reads the snapshot: it ends before the write returns
	if !t.saved.isNil() {
		sw := snapshotWriter{t: t, w: w, ctx: ctx, m: m, split: cfg.split, spawn: cfg.spawn, limiter: cfg.limiter}
		sw.bulk = bulkCopy && t.pers.s != nil && t.pers.s.FormatVersion() == snapshot.FormatVersion
		if err := sw.run(t.saved); err != nil {
			// Damage in the files copied from can fail the write first,
			// as bad input to the writer (keys out of order, a branch's
			// height): the check, run to its end, tells damage from other
			// failures.
			if ctx.Err() == nil {
				if cerr := checked(true); errors.Is(cerr, snapshot.ErrClosed) {
					return err // released under the write: not damage
				} else if cerr != nil && ctx.Err() == nil {
					return fmt.Errorf("%w: the snapshot the write copies from: %w (the write failed: %w)", ErrCorrupt, cerr, err)
				}
			}
			return err
		}
	}
	if err := checked(true); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, snapshot.ErrClosed) {
			return err // released under the write: not damage
		}
		return fmt.Errorf("%w: the snapshot the write copies from: %w", ErrCorrupt, err)
	}
	// the walk looks at ctx only every few thousand nodes: a small tree's
	// write cancelled before or during it ends here, before it is put in
	// place
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.Finish()
}

// checkSnapshot starts checking the checksums of the tree's snapshot on a
// goroutine of its own and returns the function that ends the check: with
// wait set it waits for the check and returns its result, otherwise it
// cancels it and waits for it to stop. Only the first call counts.
func (t *Tree) checkSnapshot(ctx context.Context) func(wait bool) error {
	s := t.pers.s
	if s == nil {
		return func(bool) error { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	// the files the write reads; it builds the index and the lookup table
	go func() { res <- s.VerifyChecksums(ctx, snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileKVs) }()
	var done bool
	return func(wait bool) error {
		if done {
			return nil
		}
		done = true
		if !wait {
			cancel()
		}
		err := <-res
		cancel()
		return err
	}
}

type snapshotWriter struct {
	t     *Tree
	w     *snapshot.Writer
	ctx   context.Context
	count int
	m     *NodeMap          // nil unless the write is mapped
	inRun bool              // writing a subtree of t's snapshot that m maps as a run
	bulk  bool              // subtrees of t's snapshot are copied with AddSubtree
	split bool              // see WithSplit
	spawn func(task func()) // see WithSplitRunner
	// limiter: see WithLimiter; nil: none
	limiter snapshot.Limiter
}

// bulkCopy enables AddSubtree for unchanged subtrees, and bulkMaxLeaves
// bounds the subtrees copied by one call, so that a write over a mostly
// unchanged tree still notices a cancellation often: larger ones are split
// into their children. Variables for tests, which compare the bulk and the
// node-by-node paths.
var (
	bulkCopy      = true
	bulkMaxLeaves = uint64(1 << 16)
)

// prefetchDepth is how many levels below the node being written or rebased
// the walks prefetch in-memory nodes (see prefetchBelow).
const prefetchDepth = 3

// prefetchBelow prefetches the cache lines of the in-memory nodes depth
// levels below n and the first bytes of the keys and values of the leaves
// one level above those, whose nodes an earlier call prefetched. The
// snapshot write's walk is bound by memory latency, a miss per node and two
// per leaf when each is reached; prefetches do not wait for the lines they
// ask for, so the misses overlap each other and the walk. Every node is
// prefetched once, by its ancestor depth levels up, before it is written.
// The nodes between are already cached, read by earlier calls.
func prefetchBelow(n *node, depth int) {
	if n.height == 0 {
		return
	}
	for _, c := range [2]*node{n.left.n, n.right.n} {
		if c == nil {
			continue
		}
		if depth > 1 {
			if c.height > 0 {
				prefetchBelow(c, depth-1)
			} else if depth == 2 {
				prefetchLeafData(c)
			}
			continue
		}
		prefetchNode(c)
	}
}

// prefetchLeafData prefetches the first bytes of the leaf n's key and
// value, which a walk reads once it reaches the leaf.
func prefetchLeafData(n *node) {
	prefetch.Line(unsafe.Pointer(unsafe.StringData(n.k)))
	prefetch.Line(unsafe.Pointer(unsafe.StringData(n.valueStr())))
}

// prefetchNode prefetches the cache lines of n: a node spans two or three,
// and the walks read them all.
func prefetchNode(n *node) {
	p := unsafe.Pointer(n)
	prefetch.Line(p)
	prefetch.Line(unsafe.Add(p, 64))
	prefetch.Line(unsafe.Add(p, unsafe.Sizeof(node{})-1))
}

func (sw *snapshotWriter) run(root ref) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, sw.t.pers.s)
	if n := root.n; n != nil {
		for d := 1; d < prefetchDepth; d++ {
			prefetchBelow(n, d) // the levels the walk does not prefetch ahead
		}
		if sw.split && n.height > 0 && n.size >= splitMinLeaves {
			return sw.writeSplit(n)
		}
	}
	return sw.write(root)
}

// writeSplit writes the in-memory branch n, its right subtree through a
// forked writer on a goroutine of its own or the one WithSplitRunner's
// runner calls the task on, or on this one if the task has not started
// when the left subtree is written. It waits for the right half however
// it returns, a panic included.
func (sw *snapshotWriter) writeSplit(n *node) error {
	t := sw.t
	leftLeaves := uint64(t.sizeOf(n.left))
	p, err := sw.w.Fork(leftLeaves, leftLeaves-1)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(sw.ctx)
	defer cancel()
	if sw.limiter != nil {
		// the right half's waits end when the left half fails, too
		p.SetLimiter(ctx, sw.limiter)
	}
	right := &snapshotWriter{t: t, w: p, ctx: ctx, bulk: sw.bulk, limiter: sw.limiter}
	if sw.m != nil {
		right.m = &NodeMap{version: sw.m.version, from: sw.m.from}
	}
	done := make(chan error, 1)
	var claimed atomic.Bool // the right half's task has started
	task := func() {
		if !claimed.CompareAndSwap(false, true) {
			return
		}
		err := errSplitPanic // sent as the panic goes on
		defer func() { done <- err }()
		err = right.run(n.right)
	}
	if sw.spawn != nil {
		sw.spawn(task)
	} else {
		go task()
	}
	received := false // the forked half's result
	defer func() {
		if !received { // the left half failed or panicked
			cancel()
			if !claimed.CompareAndSwap(false, true) {
				<-done // started: wait for it to stop
			}
			_ = p.Abort()
		}
	}()
	if err := sw.write(n.left); err != nil {
		return err
	}
	task() // the right half here, unless it has started elsewhere
	received = true
	if err := <-done; err != nil {
		_ = p.Abort()
		return err
	}
	if err := sw.w.Join(p); err != nil {
		return err
	}
	if sw.m != nil {
		sw.m.merge(right.m)
	}
	r := memRef(n)
	if err := sw.w.AddBranch(t.heightOf(r), t.sizeOf(r), t.versionOf(r), t.hashOf(r)); err != nil {
		return err
	}
	if sw.m != nil {
		sw.m.setIndex(n, sw.w.BranchCount()-1)
	}
	return nil
}

func (sw *snapshotWriter) write(r ref) error {
	sw.count++
	if sw.count%4096 == 0 {
		if err := sw.ctx.Err(); err != nil {
			return fmt.Errorf("snapshot write cancelled: %w", err)
		}
	}
	t := sw.t
	if sw.m != nil && r.n == nil && !sw.inRun {
		// a subtree of t's snapshot is written in one piece: its leaves
		// and its branches keep their order, so a run maps it
		if err := sw.m.addRun(t.pers, r.p, sw.w.LeafCount(), sw.w.BranchCount()); err != nil {
			return err
		}
		sw.inRun = true
		err := sw.write(r)
		sw.inRun = false
		return err
	}
	if sw.bulk && r.n == nil {
		if lo, hi := t.pers.leafRange(r.p); hi-lo <= bulkMaxLeaves {
			// an unchanged subtree: its records and entries are
			// contiguous in t's snapshot, and copied as they are
			if err := sw.ctx.Err(); err != nil {
				return fmt.Errorf("snapshot write cancelled: %w", err)
			}
			err := sw.w.AddSubtree(t.pers.s, r.p)
			if errors.Is(err, snapshot.ErrCorrupt) {
				err = fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
			return err
		}
	}
	if t.isLeaf(r) {
		var key, value []byte
		if r.n != nil {
			key, value = r.n.key(), r.n.value()
		} else {
			key, value = t.pers.leafKV(r.p.Index())
		}
		if err := sw.w.AddLeaf(key, value, t.versionOf(r), t.hashOf(r)); err != nil {
			return err
		}
		if sw.m != nil && r.n != nil {
			sw.m.setIndex(r.n, sw.w.LeafCount()-1)
		}
		return nil
	}
	if r.n != nil {
		prefetchBelow(r.n, prefetchDepth)
	}
	if err := sw.write(t.leftOf(r)); err != nil {
		return err
	}
	if err := sw.write(t.rightOf(r)); err != nil {
		return err
	}
	if err := sw.w.AddBranch(t.heightOf(r), t.sizeOf(r), t.versionOf(r), t.hashOf(r)); err != nil {
		return err
	}
	if sw.m != nil && r.n != nil {
		sw.m.setIndex(r.n, sw.w.BranchCount()-1)
	}
	return nil
}
