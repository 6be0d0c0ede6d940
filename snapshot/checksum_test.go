package snapshot

import (
	"context"
	"errors"
	"hash/crc32"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestChecksumCheck checks the checksum check on mapped files: it passes
// on a sound snapshot, finds a damaged byte of any file and names it,
// keeps the files it opened when the directory goes away before it runs,
// reports a file cut short, and stops at a cancelled context.
func TestChecksumCheck(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(6)), 2000)
	parent := t.TempDir()
	dir := filepath.Join(parent, "snap")
	if err := writePaced(context.Background(), dir, keys, values, nil); err != nil {
		t.Fatal(err)
	}
	open := func() *Snapshot {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if err := s.VerifyChecksums(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()

	for _, name := range dataFileNames {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		restore := testutil.DamageByte(t, path, fi.Size()/2)
		s := open()
		err = s.VerifyChecksums(context.Background(), name)
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), path) {
			t.Errorf("damaged %s: %v", name, err)
		}
		// the other files are not read
		others := slices.DeleteFunc(slices.Clone(dataFileNames[:]), func(n string) bool { return n == name })
		if err := s.VerifyChecksums(context.Background(), others...); err != nil {
			t.Errorf("damaged %s, checking the others: %v", name, err)
		}
		s.Close()
		restore()
	}

	// the files stay open for a check made before the directory went away
	copyDir := filepath.Join(parent, "copy")
	writeDir(t, copyDir, readDir(t, dir))
	s, err := Open(copyDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.NewChecksumCheck()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.RemoveAll(copyDir); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("check after the directory went: %v", err)
	}

	// a file cut short after the snapshot was opened
	s = open()
	kvs := filepath.Join(dir, FileKVs)
	b, err := os.ReadFile(kvs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(kvs, int64(len(b)/2)); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyChecksums(context.Background(), FileKVs); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), kvs) {
		t.Errorf("kvs cut short: %v", err)
	}
	s.Close()
	if err := os.WriteFile(kvs, b, 0o644); err != nil {
		t.Fatal(err)
	}

	s = open()
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.VerifyChecksums(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled check: %v", err)
	}
}

// writeOpen writes a snapshot of keys and values to dir and opens it.
func writeOpen(t *testing.T, dir string, keys, values [][]byte) *Snapshot {
	t.Helper()
	if err := writePaced(context.Background(), dir, keys, values, nil); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChecksumCheckLimiter checks that a limiter sees every byte a check
// reads, and that a failed wait fails the check.
func TestChecksumCheckLimiter(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(7)), 2000)
	dir := filepath.Join(t.TempDir(), "snap")
	s := writeOpen(t, dir, keys, values)
	defer s.Close()
	data := 0
	for name, b := range readDir(t, dir) {
		if name != FileMeta {
			data += len(b)
		}
	}
	l := &countingLimiter{burst: 4096}
	c, err := s.NewChecksumCheck()
	if err != nil {
		t.Fatal(err)
	}
	c.SetLimiter(l)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.total != data || l.maxN > l.burst {
		t.Fatalf("the limiter let %d bytes through in waits of at most %d, the files hold %d", l.total, l.maxN, data)
	}
	errStop := errors.New("stop")
	c, err = s.NewChecksumCheck()
	if err != nil {
		t.Fatal(err)
	}
	c.SetLimiter(&countingLimiter{burst: 4096, budget: data / 2, err: errStop})
	if err := c.Run(context.Background()); !errors.Is(err, errStop) {
		t.Fatalf("failed wait: %v", err)
	}
}

// TestCRCCombine: the checksum combined from two parts' is the checksum of
// the parts one after the other, for lengths around the powers of two the
// combination squares through, and empty parts.
func TestCRCCombine(t *testing.T) {
	r := testutil.Rand(t)
	lens := []int{0, 1, 2, 3, 4, 7, 8, 9, 63, 64, 65, 1000, 4096, 65537, 1 << 20}
	for _, la := range []int{0, 1, 100, 4097} {
		for _, lb := range lens {
			a, b := make([]byte, la), make([]byte, lb)
			r.Read(a)
			r.Read(b)
			want := crc32.Update(crc32.Update(0, crcTable, a), crcTable, b)
			if got := crcCombine(crc32.Update(0, crcTable, a), crc32.Update(0, crcTable, b), uint64(lb)); got != want {
				t.Fatalf("lengths %d and %d: combined %08x, want %08x", la, lb, got, want)
			}
		}
	}
}

// TestChecksumsOfRemovedFiles: a writer may prune a snapshot, or replace
// it with another of the same version, while a reader has it mapped.
// VerifyChecksums, which runs while the snapshot is open, then checks the
// mapping that reads serve: it passes on a sound one, where reopening by
// path found nothing or another file. NewChecksumCheck, whose check may
// run after the snapshot is closed, fails with fs.ErrNotExist instead of
// checking another file against this snapshot's checksums.
func TestChecksumsOfRemovedFiles(t *testing.T) {
	r := rand.New(rand.NewSource(testutil.Seed(t)))
	keys, values := sortedKVs(r, 1500)
	parent := t.TempDir()
	dir := filepath.Join(parent, "snap")
	if err := writePaced(context.Background(), dir, keys, values, nil); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(parent, "other")
	keys2, values2 := sortedKVs(r, 1700)
	if err := writePaced(context.Background(), other, keys2, values2, nil); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func(what string) {
		t.Helper()
		if err := s.VerifyChecksums(context.Background()); err != nil {
			t.Fatalf("VerifyChecksums, %s: %v", what, err)
		}
		if c, err := s.NewChecksumCheck(); !errors.Is(err, fs.ErrNotExist) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("NewChecksumCheck, %s: %v; want fs.ErrNotExist", what, err)
		}
	}
	// another snapshot's files renamed over these
	if err := os.Rename(dir, filepath.Join(parent, "pruned")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, dir); err != nil {
		t.Fatal(err)
	}
	check("replaced by another snapshot")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(parent, "pruned")); err != nil {
		t.Fatal(err)
	}
	check("removed")
}

// TestChecksumsThroughMappingFault: a check that reads the mapping (its
// path names another file now) and faults on it, here because the mapped
// file was cut short, as a disk's read error would, returns an error
// wrapping ErrCorrupt instead of killing the process.
func TestChecksumsThroughMappingFault(t *testing.T) {
	keys, values := sortedKVs(rand.New(rand.NewSource(testutil.Seed(t))), 3000)
	parent := t.TempDir()
	dir := filepath.Join(parent, "snap")
	s := writeOpen(t, dir, keys, values)
	defer s.Close()
	moved := filepath.Join(parent, "pruned")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(moved, FileKVs), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyChecksums(context.Background(), FileKVs); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a check through a mapping that faults: %v; want ErrCorrupt", err)
	}
}
