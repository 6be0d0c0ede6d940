package testutil

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BigZeroSlice returns a read-only slice of n zero bytes (a multiple of
// 16 MiB) made of one 16 MiB file mapped over and over at consecutive
// addresses: the pages are shared, so the slice costs 16 MiB of page cache
// however long it is (a value of 4 GiB and more for the tests of size
// limits). It is unmapped when t ends; t is skipped where the address space
// cannot be reserved.
func BigZeroSlice(t testing.TB, n int) []byte {
	t.Helper()
	const chunk = 16 << 20
	if n%chunk != 0 {
		t.Fatalf("BigZeroSlice: %d is not a multiple of %d", n, chunk)
	}
	f, err := os.CreateTemp(t.TempDir(), "zero")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(chunk); err != nil {
		t.Fatal(err)
	}
	region, err := unix.Mmap(-1, 0, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		t.Skipf("reserve %d bytes of address space: %v", n, err)
	}
	t.Cleanup(func() { _ = unix.Munmap(region) })
	base := uintptr(unsafe.Pointer(unsafe.SliceData(region)))
	for off := 0; off < n; off += chunk {
		_, _, errno := unix.Syscall6(unix.SYS_MMAP, base+uintptr(off), chunk, unix.PROT_READ,
			unix.MAP_SHARED|unix.MAP_FIXED, f.Fd(), 0)
		if errno != 0 {
			t.Fatalf("mmap at offset %d: %v", off, errno)
		}
	}
	return region
}
