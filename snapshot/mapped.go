package snapshot

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The key/value data of every open mapped snapshot, so that a database can
// tell a key or value that is a slice of one (from GetZeroCopy, through any
// view) from the caller's own memory, and copy it before it keeps it.
var openKVs struct {
	mu    sync.Mutex
	spans []kvSpan // guarded by mu; index holds a copy
	index atomic.Pointer[kvIndex]
}

// kvSpan is the address range [lo, hi) of a snapshot's mapped kvs file.
type kvSpan struct {
	lo, hi uintptr
	s      *Snapshot
}

// kvIndex is the spans of the open snapshots and the smallest range that
// holds them all, which most slices (of the Go heap) fall outside of.
type kvIndex struct {
	lo, hi uintptr
	spans  []kvSpan
}

func registerKVs(s *Snapshot) {
	if len(s.kvs) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s.kvs)))
	openKVs.mu.Lock()
	defer openKVs.mu.Unlock()
	openKVs.spans = append(openKVs.spans, kvSpan{lo: lo, hi: lo + uintptr(len(s.kvs)), s: s})
	publishKVs()
}

func unregisterKVs(s *Snapshot) {
	openKVs.mu.Lock()
	defer openKVs.mu.Unlock()
	n := len(openKVs.spans)
	openKVs.spans = slices.DeleteFunc(openKVs.spans, func(sp kvSpan) bool { return sp.s == s })
	if len(openKVs.spans) != n {
		publishKVs()
	}
}

// publishKVs makes the spans the index Mapping reads; under openKVs.mu.
func publishKVs() {
	idx := &kvIndex{spans: slices.Clone(openKVs.spans)}
	for i, sp := range idx.spans {
		if i == 0 || sp.lo < idx.lo {
			idx.lo = sp.lo
		}
		idx.hi = max(idx.hi, sp.hi)
	}
	openKVs.index.Store(idx)
}

// Mapping returns the open snapshot whose mapped key/value data b starts
// in, nil if none: whether b is a key or value an accessor of a snapshot
// returned, which its Close invalidates. For a slice of the Go heap it
// costs two comparisons. Empty slices are never held.
func Mapping(b []byte) *Snapshot {
	idx := openKVs.index.Load()
	if idx == nil || len(b) == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < idx.lo || p >= idx.hi {
		return nil
	}
	for _, sp := range idx.spans {
		if p >= sp.lo && p < sp.hi {
			return sp.s
		}
	}
	return nil
}
