package memiavl

import (
	"fmt"
	"runtime/debug"
)

// ExportNode is one node of an export stream, with the same fields and
// meaning as cosmos/iavl's ExportNode (a *ExportNode converts to an
// *iavl.ExportNode and back):
//
//   - a leaf has Height 0, its Key and Value, and the version in which it was
//     last written;
//   - an inner node has its height, its key (the smallest key of its right
//     subtree), a nil Value and its version.
//
// Nodes are streamed in depth-first post-order (left subtree, right subtree,
// node), which is the order Importer and cosmos/iavl's importer expect.
type ExportNode struct {
	Key     []byte
	Value   []byte
	Version int64
	Height  int8
}

// Exporter streams the nodes of a saved version of a tree in post-order. It
// is created by Tree.Export and holds a stack of at most two nodes per level
// of the tree, so its memory is bounded by the tree's height.
//
// Zero copy: the Key and Value of a node read from the tree's snapshot are
// slices into the snapshot's memory map, and those of an in-memory node are
// the tree's own slices. They must not be modified, and stay valid while the
// tree's snapshot is open (for a tree of a database read view, until the view
// is released), also after Close. Each ExportNode is freshly allocated and
// belongs to the caller.
//
// An Exporter is used by one goroutine. It reads an immutable copy of the
// tree, so the tree it was taken from may go on changing meanwhile.
type Exporter struct {
	t     *Tree
	stack []exportFrame
	err   error
}

// maxExportStack bounds the exporter's stack: a valid tree needs at most two
// frames per level and no IAVL tree is 128 levels high.
const maxExportStack = 2 * 128

type exportFrame struct {
	r        ref
	expanded bool // the children have been pushed
}

// Export returns an exporter of the last saved version of the tree. The
// working changes since that version are not exported. A tree that has
// never been saved exports as the empty tree.
func (t *Tree) Export() *Exporter {
	if t.excl && t.dirty {
		return &Exporter{err: fmt.Errorf("%w: Export; save first", ErrExclusive)}
	}
	c := t.Copy()
	e := &Exporter{t: c, stack: make([]exportFrame, 0, 64)}
	if !c.root.isNil() {
		e.stack = append(e.stack, exportFrame{r: c.root})
	}
	return e
}

// Next returns the next node, or ErrExportDone after the last one. A
// corruption found in the snapshot is returned as an error wrapping
// ErrCorrupt; after any error Next keeps returning it.
func (e *Exporter) Next() (n *ExportNode, err error) {
	if e.err != nil {
		return nil, e.err
	}
	if e.t == nil {
		return nil, ErrExportDone
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = corruptFrom(r, e.t.pers.s)
		}
		if err != nil {
			n = nil
			if e.err == nil {
				e.err = err
			}
		}
	}()
	t := e.t
	for len(e.stack) > 0 {
		top := &e.stack[len(e.stack)-1]
		r := top.r
		if t.isLeaf(r) {
			e.stack = e.stack[:len(e.stack)-1]
			return t.exportLeaf(r), nil
		}
		if top.expanded {
			e.stack = e.stack[:len(e.stack)-1]
			h := t.heightOf(r)
			if h > 127 {
				return nil, fmt.Errorf("%w: node of height %d does not fit an export node", ErrCorrupt, h)
			}
			k := t.keyOf(r)
			touchKV(k, nil) // read by the caller, after the guard
			return &ExportNode{Key: k, Version: t.versionOf(r), Height: int8(h)}, nil
		}
		top.expanded = true
		left, right := t.leftOf(r), t.rightOf(r)
		if len(e.stack) > maxExportStack {
			return nil, fmt.Errorf("%w: tree deeper than any valid IAVL tree", ErrCorrupt)
		}
		e.stack = append(e.stack, exportFrame{r: right}, exportFrame{r: left})
	}
	e.err = ErrExportDone
	return nil, ErrExportDone
}

func (t *Tree) exportLeaf(r ref) *ExportNode {
	if r.n != nil {
		return &ExportNode{Key: r.n.key(), Value: r.n.value(), Version: r.n.version}
	}
	k, v := t.pers.leafKV(r.p.Index())
	touchKV(k, v) // read by the caller, after the guard
	return &ExportNode{Key: k, Value: v, Version: t.pers.version(r.p)}
}

// Close stops the export. Next returns ErrExportDone afterwards. Close may
// be called more than once. It does not invalidate the slices of the nodes
// already returned (see Exporter).
func (e *Exporter) Close() {
	e.t = nil
	e.stack = nil
	if e.err == nil {
		e.err = ErrExportDone
	}
}
