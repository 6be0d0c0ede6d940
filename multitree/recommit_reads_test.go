package multitree

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// readSyscalls returns the read system calls (read, pread) the process
// has made so far (/proc/self/io syscr).
func readSyscalls(t *testing.T) uint64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "syscr: "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	t.Skip("no syscr in /proc/self/io")
	return 0
}

// recommitReads commits versions 1..n, each setting one key, reopens the
// database at version 1 without a rollback, commits versions 2..n again
// with the same changes, and returns the read system calls those
// re-commits made.
func recommitReads(t *testing.T, n int) uint64 {
	dir := t.TempDir()
	opts := Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, Sync: wal.SyncNone, OpenCheck: OpenCheckNone}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	set := func(db *DB, v int) {
		if err := db.Set("a", []byte(fmt.Sprintf("k%d", v%16)), []byte(fmt.Sprint(v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for v := 1; v <= n; v++ {
		set(db, v)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	opts.TargetVersion = 1
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := readSyscalls(t)
	for v := 2; v <= n; v++ {
		set(db, v)
	}
	return readSyscalls(t) - before
}

// TestRecommitReadsLinear: re-committing the versions a log already holds
// (after an Open at an older TargetVersion without rollback, as compat's
// LoadVersion of an older height and the blocks replayed after it) checks
// each against its logged record. 8 times the versions must cost about 8
// times the reads: each check starts where the previous one stopped, not
// at the start of the segment.
func TestRecommitReadsLinear(t *testing.T) {
	small, large := 200, 1600
	rs := recommitReads(t, small)
	rl := recommitReads(t, large)
	t.Logf("re-commit of %d versions: %d read syscalls (%.1f each); of %d: %d (%.1f each)",
		small, rs, float64(rs)/float64(small), large, rl, float64(rl)/float64(large))
	if per := float64(rl) / float64(large); per > 4*float64(rs)/float64(small)+8 {
		t.Errorf("re-committing %d logged versions made %d read system calls, %.1f per version, against %.1f per version for %d: the check of each re-commit reads every record before it in the segment (quadratic in the versions re-committed)",
			large, rl, per, float64(rs)/float64(small), small)
	}
}
