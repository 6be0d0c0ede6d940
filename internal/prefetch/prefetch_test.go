package prefetch

import (
	"testing"
	"unsafe"
)

// Line must accept any address and return without faulting or changing
// memory: nil, the start and end of live memory, and one past its end.
func TestLineNeverFaults(t *testing.T) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	Line(nil)
	Line(unsafe.Pointer(&buf[0]))
	Line(unsafe.Pointer(&buf[len(buf)-1]))
	Line(unsafe.Add(unsafe.Pointer(&buf[len(buf)-1]), 1))
	var s string
	Line(unsafe.Pointer(unsafe.StringData(s))) // an empty string's data may be nil
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, buf[i])
		}
	}
}
