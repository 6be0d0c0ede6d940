package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// smallSnapshot writes a 7-leaf snapshot (keys with prefix ties, short and
// empty values) and returns its files.
func smallSnapshot(t *testing.T, random bool) map[string][]byte {
	t.Helper()
	keys := [][]byte{
		[]byte("a"), []byte("a\x00"), []byte("key1"), []byte("key12345678"),
		[]byte("key12345679"), []byte("m"), []byte("zz"),
	}
	values := [][]byte{[]byte("v0"), nil, []byte("value-2"), []byte("v3"), []byte("v4"), []byte("v5"), []byte("last")}
	dir := filepath.Join(t.TempDir(), "snap")
	seed := testutil.Seed(t)
	writeTree(t, dir, seed, 9, random, keys, values)
	return readDir(t, dir)
}

// openMem opens a snapshot whose files are in memory, with the checks of
// Open; dir only names the files in errors.
func openMem(dir string, files map[string][]byte) (*Snapshot, error) {
	m, err := parseMeta(filepath.Join(dir, FileMeta), files[FileMeta])
	if err != nil {
		return nil, err
	}
	s := newSnapshot(dir, &m)
	for i, name := range dataFileNames[:dataFiles(m.formatVersion)] {
		b := files[name]
		if err := checkLength(filepath.Join(dir, name), uint64(len(b)), m.files[i].length); err != nil {
			return nil, err
		}
		if len(b) > 0 {
			s.maps[i] = b
		}
	}
	s.setViews()
	return s, nil
}

// openAndCheck opens dir, exercises every accessor and verifies. It
// returns the errors of Open and of Verify (nil when Open failed).
func openAndCheck(t *testing.T, dir string) (openErr, verifyErr error) {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		return err, nil
	}
	defer s.Close()
	return nil, checkOpened(t, s)
}

// openMemAndCheck is openAndCheck for files in memory.
func openMemAndCheck(t *testing.T, files map[string][]byte) (openErr, verifyErr error) {
	t.Helper()
	s, err := openMem("mem", files)
	if err != nil {
		return err, nil
	}
	defer s.Close()
	return nil, checkOpened(t, s)
}

// checkOpened exercises every accessor of s, which must not panic, and
// returns the result of Verify; accessors must succeed when Verify does.
func checkOpened(t *testing.T, s *Snapshot) error {
	t.Helper()
	exerciseErr := exercise(s)
	verifyErr := s.Verify()
	if verifyErr == nil && exerciseErr != nil {
		t.Fatalf("Verify passed but accessors failed: %v", exerciseErr)
	}
	return verifyErr
}

var byteMutations = []func(byte) byte{
	func(b byte) byte { return b ^ 0x01 },
	func(b byte) byte { return b ^ 0x80 },
	func(byte) byte { return 0x00 },
	func(byte) byte { return 0xff },
}

// checkMutation checks one changed byte of one file: Open or Verify fails,
// as is; and with the checksums in meta rewritten to match, a change in a
// data file still fails Verify on its structure or hashes. open opens the
// files given.
func checkMutation(t *testing.T, orig map[string][]byte, name string, off int, mut func(byte) byte,
	open func(files map[string][]byte) (error, error)) {
	t.Helper()
	files := map[string][]byte{}
	for k, v := range orig {
		files[k] = v
	}
	files[name] = bytes.Clone(orig[name])
	files[name][off] = mut(files[name][off])
	o, v := open(files)
	switch {
	case name == FileMeta && o == nil:
		t.Fatalf("%s byte %d: Open passed", name, off)
	case o == nil && !errors.Is(v, ErrChecksum):
		t.Fatalf("%s byte %d: Verify returned %v", name, off, v)
	case o != nil && !errors.Is(o, ErrCorrupt) && !errors.Is(o, ErrFormatVersion):
		t.Fatalf("%s byte %d: Open returned %v", name, off, o)
	}

	files[FileMeta] = bytes.Clone(files[FileMeta])
	fixMeta(files, true, false, true)
	o, v = open(files)
	if name == FileMeta {
		return // the tree version and the data checksums are covered by the meta checksum alone
	}
	if o != nil {
		t.Fatalf("%s byte %d with checksums fixed: Open returned %v", name, off, o)
	}
	if !errors.Is(v, ErrCorrupt) || errors.Is(v, ErrChecksum) {
		t.Fatalf("%s byte %d with checksums fixed: Verify returned %v", name, off, v)
	}
}

// TestCorruptByteFlips changes every byte of every file of small snapshots
// in four ways, opening the files from memory with the checks of Open.
func TestCorruptByteFlips(t *testing.T) {
	for _, random := range []bool{false, true} {
		t.Run(fmt.Sprintf("random=%v", random), func(t *testing.T) {
			orig := smallSnapshot(t, random)
			if o, v := openMemAndCheck(t, orig); o != nil || v != nil {
				t.Fatalf("pristine copy: %v %v", o, v)
			}
			open := func(files map[string][]byte) (error, error) { return openMemAndCheck(t, files) }
			n := 0
			for _, name := range allFiles {
				for off := range orig[name] {
					for _, mut := range byteMutations {
						if mut(orig[name][off]) != orig[name][off] {
							checkMutation(t, orig, name, off, mut, open)
							n++
						}
					}
				}
			}
			t.Logf("%d mutations", n)
		})
	}
}

// TestCorruptByteFlipsMapped is TestCorruptByteFlips through files and
// mappings, for a sample of bytes.
func TestCorruptByteFlipsMapped(t *testing.T) {
	r := testutil.Rand(t)
	orig := smallSnapshot(t, true)
	dir := filepath.Join(t.TempDir(), "snap")
	open := func(files map[string][]byte) (error, error) {
		writeDir(t, dir, files)
		return openAndCheck(t, dir)
	}
	for _, name := range allFiles {
		for j := 0; j < 24; j++ {
			off := r.Intn(len(orig[name]))
			mut := byteMutations[r.Intn(len(byteMutations))]
			if mut(orig[name][off]) != orig[name][off] {
				checkMutation(t, orig, name, off, mut, open)
			}
		}
	}
}

func TestCorruptTruncation(t *testing.T) {
	orig := smallSnapshot(t, false)
	dir := filepath.Join(t.TempDir(), "snap")
	for _, name := range allFiles {
		for n := 0; n < len(orig[name]); n++ {
			files := copyFiles(orig)
			files[name] = files[name][:n]
			if o, _ := openMemAndCheck(t, files); !errors.Is(o, ErrCorrupt) {
				t.Fatalf("%s truncated to %d bytes: Open returned %v", name, n, o)
			}
			// Through files: every length of meta, a few of the others.
			if name == FileMeta || n < 2 || n == len(orig[name])-1 || n%61 == 0 {
				writeDir(t, dir, files)
				if o, _ := openAndCheck(t, dir); !errors.Is(o, ErrCorrupt) {
					t.Fatalf("%s truncated to %d bytes: Open returned %v", name, n, o)
				}
				writeDir(t, dir, orig)
			}

			// The same with lengths, counts and checksums in meta rewritten:
			// Open or Verify fails.
			if name == FileMeta {
				continue
			}
			fixMeta(files, true, true, true)
			o, v := openMemAndCheck(t, files)
			if o == nil && !errors.Is(v, ErrCorrupt) {
				t.Fatalf("%s truncated to %d bytes, meta rewritten: Verify returned %v", name, n, v)
			}
		}
	}
	// An extra byte is caught by Open too.
	for _, name := range allFiles {
		files := copyFiles(orig)
		files[name] = append(files[name], 0)
		writeDir(t, dir, files)
		if o, _ := openAndCheck(t, dir); !errors.Is(o, ErrCorrupt) {
			t.Fatalf("%s with an extra byte: Open returned %v", name, o)
		}
		writeDir(t, dir, orig)
	}
	// A meta file that is a directory is an error, not a panic.
	files := copyFiles(orig)
	delete(files, FileMeta)
	d2 := filepath.Join(t.TempDir(), "snap")
	writeDir(t, d2, files)
	if err := os.Mkdir(filepath.Join(d2, FileMeta), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d2); err == nil {
		t.Fatal("meta directory accepted")
	}
}

// TestCorruptErrorsNameFileAndOffset checks the context of a few errors.
func TestCorruptErrorsNameFileAndOffset(t *testing.T) {
	orig := smallSnapshot(t, false)
	dir := filepath.Join(t.TempDir(), "snap")
	cases := []struct {
		file string
		off  int
		want string
	}{
		{FileLeaves, 2*RecordSize + leafOffPrefix, "leaves at offset 184"},
		{FileLeaves, 3*RecordSize + leafOffHash, "leaves at offset 192"},
		{FileBranches, 1*RecordSize + branchOffHeight, "branches at offset 119"},
		{FileBranches, 0*RecordSize + branchOffReserved + 3, "branches at offset 56"},
	}
	for _, c := range cases {
		files := copyFiles(orig)
		files[c.file][c.off] ^= 0x10
		fixMeta(files, true, false, true)
		writeDir(t, dir, files)
		_, v := openAndCheck(t, dir)
		if v == nil || !containsAll(v.Error(), filepath.Join(dir, c.file), c.want) {
			t.Errorf("%s byte %d: %v, want it to name %q", c.file, c.off, v, c.want)
		}
		writeDir(t, dir, orig)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
