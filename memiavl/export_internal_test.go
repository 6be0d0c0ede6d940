package memiavl

import "fmt"

// RebaserCopies counts the leaves and branches rb has copied.
func RebaserCopies(rb *Rebaser) (leaves, branches int) {
	for _, chunk := range rb.copies.chunks {
		for _, c := range chunk {
			if c.height == 0 {
				leaves++
			} else {
				branches++
			}
		}
	}
	return leaves, branches
}

// SetBulkCopy turns the bulk copy of unchanged subtrees on or off and sets
// the largest subtree copied in one piece; the returned function restores
// both.
func SetBulkCopy(on bool, maxLeaves uint64) (restore func()) {
	oldOn, oldMax := bulkCopy, bulkMaxLeaves
	bulkCopy, bulkMaxLeaves = on, maxLeaves
	return func() { bulkCopy, bulkMaxLeaves = oldOn, oldMax }
}

// SetSplitMin sets the size from which WithSplit splits a write; the
// returned function restores it.
func SetSplitMin(n int64) (restore func()) {
	old := splitMinLeaves
	splitMinLeaves = n
	return func() { splitMinLeaves = old }
}

// MapSummary describes what m maps: its runs, whether it is usable, and the
// index each in-memory node of t's saved version was written at, in
// post-order.
func MapSummary(m *NodeMap, t *Tree) string {
	var snaps []uint32
	var walk func(r ref)
	walk = func(r ref) {
		if r.n == nil {
			return
		}
		if r.n.height > 0 {
			walk(r.n.left)
			walk(r.n.right)
		}
		snaps = append(snaps, r.n.snap)
	}
	walk(t.saved)
	return fmt.Sprint(m.leaves, m.branches, m.bad, snaps)
}
