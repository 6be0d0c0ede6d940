package snapshot

import (
	"fmt"
	"runtime"
	"unsafe"
)

// A read through a mapping faults (SIGBUS) when the file was cut short
// under it or the disk cannot return the page. By default the Go runtime
// ends the process on such a fault; with debug.SetPanicOnFault(true) the
// faulting goroutine panics instead, with a runtime.Error whose Addr
// method gives the address. The functions here turn such a panic, when the
// address lies inside a snapshot's mappings, into an error naming the file
// and offset, so that a damaged disk fails an operation instead of the
// process.

// FaultError returns the error for a memory fault at addr if addr lies
// inside one of the snapshot's mappings: ErrCorrupt naming the file and
// the offset in it. ok is false for any other address, and after Close.
func (s *Snapshot) FaultError(addr uintptr) (err error, ok bool) {
	if s == nil || s.closed.Load() || !s.mapped {
		return nil, false
	}
	for i, b := range s.maps {
		if len(b) == 0 {
			continue
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if addr >= start && addr-start < uintptr(len(b)) {
			off := uint64(addr - start)
			return corruptAt(s.path(i), off, "memory fault reading the mapped file (cut short under the mapping, or a failed disk read)"), true
		}
	}
	return nil, false
}

// FaultFrom returns the error for a recovered panic value r that is a
// memory fault inside the mappings of one of ss (see FaultError), or a
// runtime error of a read of one of ss after its Close (a fault in the
// released mapping, or an index into the slices Close cleared): an error
// wrapping ErrClosed. ok is false for any other value, which the caller
// should panic with again.
func FaultFrom(r any, ss ...*Snapshot) (err error, ok bool) {
	if fault, isFault := r.(interface{ Addr() uintptr }); isFault {
		for _, s := range ss {
			if err, ok := s.FaultError(fault.Addr()); ok {
				return err, true
			}
		}
	}
	if _, isRuntime := r.(runtime.Error); isRuntime {
		for _, s := range ss {
			if s != nil && s.closed.Load() {
				return fmt.Errorf("%w: read of the snapshot in %s after its release", ErrClosed, s.dir), true
			}
		}
	}
	return nil, false
}

// recoverFault turns a memory fault inside s's mappings into *err; any
// other panic goes on. Deferred directly, after
// defer debug.SetPanicOnFault(debug.SetPanicOnFault(true)).
func (s *Snapshot) recoverFault(err *error) {
	if r := recover(); r != nil {
		e, ok := FaultFrom(r, s)
		if !ok {
			panic(r)
		}
		*err = e
	}
}
