package memiavl

// RebaserCopies counts the leaves and branches rb has copied.
func RebaserCopies(rb *Rebaser) (leaves, branches int) {
	for _, c := range rb.copies {
		if c.height == 0 {
			leaves++
		} else {
			branches++
		}
	}
	return leaves, branches
}
