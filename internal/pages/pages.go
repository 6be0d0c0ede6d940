// Package pages reads memory-mapped slices a byte per page, so that a page
// the file no longer has (cut short under the mapping) or that the disk
// cannot return faults where the caller guards against it
// (debug.SetPanicOnFault), not later where the slice is read.
package pages

// Stride is the step of Touch's reads: the smallest page size.
const Stride = 4096

// Touch reads a byte of every page a and b span and returns them combined.
// Not inlined, so that the reads are not removed.
//
//go:noinline
func Touch(a, b []byte) byte {
	var x byte
	for _, s := range [2][]byte{a, b} {
		if len(s) == 0 {
			continue
		}
		for i := 0; i < len(s); i += Stride {
			x ^= s[i]
		}
		x ^= s[len(s)-1]
	}
	return x
}
