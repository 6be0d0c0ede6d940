package wal

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// shortFS wraps memFS so that one write takes effect in part and fails
// with ENOSPC, as a write to a file system that fills up part way does.
type shortFS struct {
	*memFS
	fail *bool
}

type shortFile struct {
	file
	fail *bool
}

func (s shortFS) Create(p string) (file, error) {
	f, err := s.memFS.Create(p)
	if err != nil {
		return nil, err
	}
	return shortFile{f, s.fail}, nil
}

func (s shortFS) OpenFile(p string, ro bool) (file, error) {
	f, err := s.memFS.OpenFile(p, ro)
	if err != nil {
		return nil, err
	}
	return shortFile{f, s.fail}, nil
}

func (f shortFile) WriteAt(b []byte, off int64) (int, error) {
	if *f.fail {
		*f.fail = false
		n, err := f.file.WriteAt(b[:len(b)/2], off)
		if err != nil {
			return n, err
		}
		return n, syscall.ENOSPC
	}
	return f.file.WriteAt(b, off)
}

// TestShortWriteCutThenClose: a write that took effect in part and
// failed leaves the earlier (acknowledged) entries intact and the partial
// record cut off, so Close's fsync leaves a clean segment: after a power
// loss the log ends at the last acknowledged entry with no torn tail.
func TestShortWriteCutThenClose(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 3, smallShape)
	mfs := newMemFS()
	fail := false
	opts := Options{fs: shortFS{mfs, &fail}, Sync: SyncGrouped, GroupCount: 100, GroupInterval: time.Hour}
	l := mustOpen(t, memDir, opts)
	for _, e := range entries[:2] {
		if err := l.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	fail = true
	if err := l.Append(entries[2]); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append: %v", err)
	}
	if err := l.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close: %v", err)
	}
	r, err := Open(memDir, Options{fs: mfs.crash()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.LastVersion(); got != 2 {
		t.Errorf("last version %d, want 2", got)
	}
	if tt, ok := r.TornTail(); ok {
		t.Errorf("torn tail %+v: the partial record was not cut before Close's fsync", tt)
	}
}
