package wal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// buildSegments writes n entries of versions 1..n to a real directory with
// small segments and returns the sorted segment file names.
func buildSegments(t *testing.T, dir string, n int) []string {
	t.Helper()
	rng := newRand(t)
	entries := makeEntries(rng, n, smallShape)
	l := mustOpen(t, dir, Options{SegmentSize: 300})
	mustAppendEach(t, l, entries...)
	mustClose(t, l)
	return segmentNamesIn(t, dir)
}

func segmentNamesIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, ok := parseSegmentName(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// TestSymlinkedSegmentNotIgnored: a segment file that is a symbolic
// link to a segment kept elsewhere (an operator moving files to another
// disk) is part of the log: Open refuses the directory (or follows the
// link), never skips it, which would lose its versions and let the writer
// append them anew.
func TestSymlinkedSegmentNotIgnored(t *testing.T) {
	dir := t.TempDir()
	names := buildSegments(t, dir, 30)
	if len(names) < 3 {
		t.Fatalf("want at least 3 segments, got %v", names)
	}
	ro := mustOpen(t, dir, Options{ReadOnly: true})
	wantLast := ro.LastVersion()
	mustClose(t, ro)

	newest := names[len(names)-1]
	elsewhere := filepath.Join(t.TempDir(), newest)
	if err := os.Rename(filepath.Join(dir, newest), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, newest)); err != nil {
		t.Fatal(err)
	}

	l, err := Open(dir, Options{})
	if err != nil {
		return // refusing the directory with an error is acceptable
	}
	defer l.Close()
	if got := l.LastVersion(); got != wantLast {
		base, _ := parseSegmentName(newest)
		appendErr := l.Append(Entry{Version: got + 1})
		t.Fatalf("segment %s is a symlink: Open ignored it silently, LastVersion %d, want %d (versions %d..%d lost); Append(%d) of an already committed version: err=%v",
			newest, got, wantLast, base, wantLast, got+1, appendErr)
	}
}

// TestSegmentNamedDirectoryRejected: an entry with a segment's name that
// is not a regular file (here a directory) fails Open, rather than the
// Append that rolls onto that name later.
func TestSegmentNamedDirectoryRejected(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	mustAppend(t, l, Entry{Version: 1}, Entry{Version: 2})
	mustClose(t, l)
	if err := os.Mkdir(filepath.Join(dir, segmentName(3)), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{})
	if err != nil {
		return // a clear error at Open is fine
	}
	defer l.Close()
	l.RollAt(3)
	l.rollAhead.Wait()
	if err := l.Append(Entry{Version: 3}); err != nil {
		t.Fatalf("Open accepted a directory named %s, and the log then failed on Append(3): %v", segmentName(3), err)
	}
}

// TestVerifyConcurrentTruncateFront: Verify of a sound log answers nil
// also beside a TruncateFront (which a database runs after each
// snapshot): it checks the versions the log holds when it starts, the
// truncation waiting for it, and never a range that is no longer there.
func TestVerifyConcurrentTruncateFront(t *testing.T) {
	verifyBesideTruncation(t, func(l *Log, last int64) error { return l.TruncateFront(last) })
}

// TestVerifyConcurrentTruncateBack: the same with TruncateBack.
func TestVerifyConcurrentTruncateBack(t *testing.T) {
	verifyBesideTruncation(t, func(l *Log, last int64) error { return l.TruncateBack(last - 5) })
}

// verifyBesideTruncation starts Verify while truncate waits for a Replay
// in progress (which holds the truncation lock shared), and requires it to
// answer nil.
func verifyBesideTruncation(t *testing.T, truncate func(l *Log, last int64) error) {
	dir := t.TempDir()
	if names := buildSegments(t, dir, 30); len(names) < 3 {
		t.Fatalf("want at least 3 segments, got %v", names)
	}
	l := mustOpen(t, dir, Options{})
	defer l.Close()
	last := l.LastVersion()

	inFn := make(chan struct{})
	release := make(chan struct{})
	replayDone := make(chan error, 1)
	go func() {
		replayDone <- l.Replay(1, 1, func(Entry) error {
			close(inFn)
			<-release
			return nil
		})
	}()
	<-inFn
	// the truncation queues behind the Replay
	truncDone := make(chan error, 1)
	go func() { truncDone <- truncate(l, last) }()
	waitTruncationQueued(l)
	// Verify starts now, behind the pending truncation
	verifyDone := make(chan error, 1)
	go func() { verifyDone <- l.Verify() }()
	letOthersRun()
	close(release)
	if err := <-replayDone; err != nil {
		t.Fatal(err)
	}
	if err := <-truncDone; err != nil {
		t.Fatal(err)
	}
	if err := <-verifyDone; err != nil {
		t.Fatalf("Verify of a sound log beside a truncation: %v (ErrCorrupt %v, ErrVersionNotFound %v)",
			err, errors.Is(err, ErrCorrupt), errors.Is(err, ErrVersionNotFound))
	}
}

// waitTruncationQueued waits until a writer is queued on truncMu: a
// new reader then cannot get it.
func waitTruncationQueued(l *Log) {
	for i := 0; i < 1000; i++ {
		if !l.truncMu.TryRLock() {
			break
		}
		l.truncMu.RUnlock()
		letOthersRun()
	}
	letOthersRun()
}

func letOthersRun() {
	for i := 0; i < 50; i++ {
		// let other goroutines run; no timing assertions
		runtime.Gosched()
	}
	time.Sleep(20 * time.Millisecond)
}

// TestVerifyAfterCloseEmpty: ErrClosed "is returned by every operation on
// a closed Log", Verify of a closed empty log included.
func TestVerifyAfterCloseEmpty(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	mustClose(t, l)
	if err := l.Verify(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify on a closed log: %v, want ErrClosed", err)
	}
}

// TestForeignNamesIgnoredKept: names close to a segment's
// (wrong zero padding, other case, extra suffix) are neither read nor
// removed by a writable Open and its Close.
func TestForeignNamesIgnoredKept(t *testing.T) {
	dir := t.TempDir()
	foreign := []string{
		"0000000000000000001.wal",   // 19 digits
		"000000000000000000001.wal", // 21 digits
		"00000000000000000001.WAL",
		"00000000000000000001.wal.bak",
		"00000000000000000001.wal.tmp.old",
		" 0000000000000000001.wal",
		"-0000000000000000001.wal",
		"99999999999999999999.wal", // beyond int64
	}
	for _, name := range foreign {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := mustOpen(t, dir, Options{SegmentSize: 200})
	for v := int64(1); v <= 10; v++ {
		mustAppend(t, l, Entry{Version: v, ChangeSets: []ChangeSet{{Name: "s", Pairs: []KVPair{{Key: []byte("k"), Value: make([]byte, 60)}}}}})
	}
	if err := l.TruncateFront(6); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBack(8); err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	for _, name := range foreign {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != "garbage" {
			t.Fatalf("foreign file %q touched: %q %v", name, b, err)
		}
		if IsSegmentFile(name) {
			t.Fatalf("IsSegmentFile(%q) = true", name)
		}
	}
	l = mustOpen(t, dir, Options{ReadOnly: true})
	defer l.Close()
	if l.LastVersion() != 8 || l.FirstVersion() > 6 || !strings.HasSuffix(segmentNamesIn(t, dir)[0], ".wal") {
		t.Fatalf("reopened log %d..%d", l.FirstVersion(), l.LastVersion())
	}
}
