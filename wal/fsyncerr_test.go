package wal

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// lostFS is memFS with Linux's behaviour after a failed fsync: the dirty
// pages are marked clean though they never reached the disk, so they stay
// readable in the page cache while later fsyncs, which find them clean, do
// not write them. Bytes written again, or cut off by a truncation, are new
// pages and leave that state.
type lostFS struct {
	*memFS
	mu   sync.Mutex
	lost map[*memNode][][2]int64 // byte ranges of each file in that state
	fail int                     // Syncs left to fail
}

type lostFile struct {
	file
	fs *lostFS
}

func (l *lostFS) wrap(f file, err error) (file, error) {
	if err != nil {
		return nil, err
	}
	return &lostFile{file: f, fs: l}, nil
}

func (l *lostFS) Create(p string) (file, error) { return l.wrap(l.memFS.Create(p)) }
func (l *lostFS) OpenFile(p string, ro bool) (file, error) {
	return l.wrap(l.memFS.OpenFile(p, ro))
}

// keep trims the lost ranges of n to the bytes outside [from, to).
func (l *lostFS) keep(n *memNode, from, to int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][2]int64
	for _, r := range l.lost[n] {
		if r[0] < from {
			out = append(out, [2]int64{r[0], min(r[1], from)})
		}
		if r[1] > to {
			out = append(out, [2]int64{max(r[0], to), r[1]})
		}
	}
	l.lost[n] = out
}

func (f *lostFile) node() *memNode { return f.file.(*memFile).n }

func (f *lostFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.keep(f.node(), off, off+int64(len(b)))
	return f.file.WriteAt(b, off)
}

func (f *lostFile) Truncate(size int64) error {
	f.fs.keep(f.node(), size, 1<<62)
	return f.file.Truncate(size)
}

func (f *lostFile) Sync() error {
	n := f.node()
	f.fs.mu.Lock()
	failNow := f.fs.fail > 0
	if failNow {
		f.fs.fail--
		f.fs.memFS.mu.Lock()
		f.fs.lost[n] = append(f.fs.lost[n], [2]int64{int64(len(n.synced)), int64(len(n.data))})
		f.fs.memFS.mu.Unlock()
	}
	f.fs.mu.Unlock()
	if failNow {
		return errors.New("input/output error")
	}
	if err := f.file.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.memFS.mu.Lock()
	defer f.fs.memFS.mu.Unlock()
	for _, r := range f.fs.lost[n] {
		for i := r[0]; i < r[1] && i < int64(len(n.synced)); i++ {
			n.synced[i] = 0 // what the disk holds there: never written
		}
	}
	return nil
}

// TestFsyncFailureDiscardsUnsynced: an Append whose fsync fails (on Linux,
// its pages are then clean but not on disk) must not leave its record for
// the next open to read from the page cache and take for durable: the
// versions acknowledged after that open would stand on a hole a power loss
// leaves, and the log would not open. The record is cut off when the fsync
// fails, so the reopened log ends before it, and everything acknowledged
// after survives the crash.
func TestFsyncFailureDiscardsUnsynced(t *testing.T) {
	rng := newRand(t)
	entries := makeEntries(rng, 6, smallShape)
	for _, async := range []int{0, 2} {
		fs := &lostFS{memFS: newMemFS(), lost: map[*memNode][][2]int64{}}
		opts := Options{fs: fs, Sync: SyncEveryCommit, AsyncBuffer: async}
		l := mustOpen(t, memDir, opts)
		mustAppend(t, l, entries[:3]...)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		fs.fail = 1
		err := l.Append(entries[3])
		if err == nil {
			err = l.Flush()
		}
		if err == nil {
			t.Fatalf("async %d: the fsync failure was not reported", async)
		}
		_ = l.Close()

		l = mustOpen(t, memDir, opts)
		if l.LastVersion() != 3 {
			t.Fatalf("async %d: reopened at %d, want 3 (the record whose fsync failed cut off)", async, l.LastVersion())
		}
		mustAppend(t, l, entries[3:]...)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		crashed := fs.crash()
		r, err := Open(memDir, Options{fs: crashed})
		if err != nil {
			t.Fatalf("async %d: after a crash: %v", async, err)
		}
		checkReplay(t, r, entries)
		mustClose(t, r)
		mustClose(t, l)
	}
}

// TestFsyncFailureReplayOfDiscarded: under SyncGrouped the records written
// since the last fsync are acknowledged; when the next fsync fails
// they are cut off the file, and a Replay of them fails with the log's
// error (the versions are not readable any more) rather than with a read
// past the end of the file. The versions before stay readable, and
// WrittenVersion goes back to the last record kept.
func TestFsyncFailureReplayOfDiscarded(t *testing.T) {
	for _, async := range []int{0, 2} {
		lost := &lostFS{memFS: newMemFS(), lost: map[*memNode][][2]int64{}}
		checkReplayAfterFailedSync(t, async, lost, lost)
	}
}

// checkReplayAfterFailedSync appends 5 entries to a log on fs under
// SyncGrouped, fsyncing after the third, makes the next fsync fail (lost
// is fs or the lostFS under it) and checks that the log's written version
// goes back to 3, that a Replay of 4 and 5 fails with the log's error and
// that 1..3 stay readable.
func checkReplayAfterFailedSync(t *testing.T, async int, fs fileSystem, lost *lostFS) {
	t.Helper()
	entries := makeEntries(newRand(t), 6, smallShape)
	opts := Options{fs: fs, Sync: SyncGrouped, AsyncBuffer: async, GroupCount: 100, GroupInterval: time.Hour}
	l := mustOpen(t, memDir, opts)
	defer l.Close()
	mustAppend(t, l, entries[:3]...)
	if err := l.Flush(); err != nil { // fsyncs
		t.Fatal(err)
	}
	mustAppend(t, l, entries[3:5]...)
	lost.fail = 1
	serr := l.Flush()
	if serr == nil {
		t.Fatalf("async %d: the fsync failure was not reported", async)
	}
	if w := l.WrittenVersion(); w != 3 {
		t.Errorf("async %d: written version %d after the failed fsync, want 3", async, w)
	}
	for _, v := range []int64{4, 5} {
		err := l.Replay(v, v, func(Entry) error { return nil })
		if err == nil || err.Error() != serr.Error() {
			t.Errorf("async %d: replay of %d, not durable: %v, want the log's error %v", async, v, err, serr)
		}
	}
	var got []int64
	if err := l.Replay(1, 3, func(e Entry) error { got = append(got, e.Version); return nil }); err != nil || len(got) != 3 {
		t.Errorf("async %d: replay of 1..3: %v %v", async, got, err)
	}
}

// truncFailFS is lostFS whose truncations fail.
type truncFailFS struct{ *lostFS }

type truncFailFile struct{ file }

func (f truncFailFile) Truncate(int64) error { return errors.New("input/output error") }

func (t truncFailFS) Create(p string) (file, error) {
	f, err := t.lostFS.Create(p)
	if err != nil {
		return nil, err
	}
	return truncFailFile{f}, nil
}

func (t truncFailFS) OpenFile(p string, ro bool) (file, error) {
	f, err := t.lostFS.OpenFile(p, ro)
	if err != nil {
		return nil, err
	}
	return truncFailFile{f}, nil
}

// TestFsyncFailureCutFailsReplayRefused: when the cut after a failed fsync
// fails too, the records past the last fsync stay in the file, but they
// are no more durable than if they were cut: WrittenVersion goes back to
// the last fsynced record and a Replay of the others fails with the log's
// error instead of serving them.
func TestFsyncFailureCutFailsReplayRefused(t *testing.T) {
	for _, async := range []int{0, 2} {
		lost := &lostFS{memFS: newMemFS(), lost: map[*memNode][][2]int64{}}
		checkReplayAfterFailedSync(t, async, truncFailFS{lost}, lost)
	}
}
