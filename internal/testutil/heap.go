package testutil

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// ShmTempDir returns a new directory in /dev/shm, removed when t ends, or
// t.TempDir() where there is none: the memory tests keep their files out
// of the disk's page cache and its writeback.
func ShmTempDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "boundedmem-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// LiveHeap returns the heap in use after a garbage collection.
func LiveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// PeakHeap samples HeapAlloc until stop is called and returns the largest
// value seen.
func PeakHeap() (stop func() uint64) {
	var (
		wg   sync.WaitGroup
		peak uint64
		done = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-time.After(500 * time.Microsecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// HeapGrowth runs f and returns how far the heap's peak during it rose
// above the live heap before it (logged with what); f's error fails t.
func HeapGrowth(t *testing.T, what string, f func() error) int64 {
	t.Helper()
	base := LiveHeap()
	stop := PeakHeap()
	start := time.Now()
	err := f()
	peak := stop()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("%s: peak heap growth %.1f MiB in %v", what, float64(grew)/(1<<20), time.Since(start))
	return grew
}

// WaitGoroutines waits (a minute at most) for the number of goroutines to
// come down to at most base, and fails t with every goroutine's stack if
// it does not.
func WaitGoroutines(t *testing.T, base int, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%s: %d goroutines, baseline %d:\n%s", what, runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
