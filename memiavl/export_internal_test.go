package memiavl

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
