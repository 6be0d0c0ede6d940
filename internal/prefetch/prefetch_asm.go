//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line asks the processor to bring the cache line holding the byte at p
// into its caches, without waiting for it. It never faults, whatever p is,
// nil included.
//
//go:noescape
func Line(p unsafe.Pointer)
