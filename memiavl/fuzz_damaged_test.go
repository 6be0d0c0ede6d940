package memiavl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/snapshot"
)

// FuzzDamagedTree damages several bytes of a tree's snapshot files (which
// Open does not read) and uses the tree every way, index reads included:
// no call may panic, every error wraps ErrCorrupt (or ErrKeyNotFound for a
// proof), and a rewrite of the damaged tree either fails or writes a
// snapshot that verifies.
func FuzzDamagedTree(f *testing.F) {
	f.Add(uint16(100), []byte{0, 0, 1, 0x40, 1, 5, 0, 0x80})
	f.Add(uint16(130), []byte{1, 0x10, 0, 0x01, 2, 0x20, 1, 0xff})
	f.Add(uint16(65), []byte{3, 0, 0, 0x02, 4, 0x33, 0, 0x08})
	files := []string{snapshot.FileLeaves, snapshot.FileBranches, snapshot.FileKVs, snapshot.FileIndex, snapshot.FileLookup}
	f.Fuzz(func(t *testing.T, n uint16, muts []byte) {
		n %= 300
		dir := filepath.Join(t.TempDir(), "snap")
		if err := keysTree(t, int(n), "").WriteSnapshot(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		changed := false
		for ; len(muts) >= 4; muts = muts[4:] {
			path := filepath.Join(dir, files[int(muts[0])%len(files)])
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 || muts[3] == 0 {
				continue
			}
			b[int(binary.LittleEndian.Uint16(muts[1:]))%len(b)] ^= muts[3]
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			changed = true
		}
		if !changed {
			return
		}
		what := "damaged"
		readAll(t, dir, what, int(n))
		s, err := snapshot.Open(dir)
		if err != nil {
			return
		}
		defer s.Close()
		tr, err := memiavl.NewFromSnapshot(s, memiavl.Options{})
		if err != nil {
			return
		}
		ok := func(op string, err error) {
			t.Helper()
			if err != nil && !errors.Is(err, memiavl.ErrCorrupt) && !errors.Is(err, memiavl.ErrKeyNotFound) {
				t.Fatalf("%s: %v, want nil, ErrCorrupt or ErrKeyNotFound", op, err)
			}
		}
		_, err = tr.SizeChecked()
		ok("SizeChecked", err)
		_, err = tr.HeightChecked()
		ok("HeightChecked", err)
		_, err = tr.RootHashChecked()
		ok("RootHashChecked", err)
		for i := int64(-1); i <= int64(n); i++ {
			_, _, err := tr.GetByIndex(i)
			ok(fmt.Sprint("GetByIndex ", i), err)
			key := []byte(fmt.Sprintf("key-%05d", i))
			_, _, err = tr.GetWithIndex(key)
			ok("GetWithIndex", err)
			_, _, err = tr.GetWithIndex(append(key, 'x'))
			ok("GetWithIndex absent", err)
			_, err = tr.GetZeroCopy(key)
			ok("GetZeroCopy", err)
		}
		for _, bounds := range [][2][]byte{{[]byte("key-00010x"), nil}, {nil, []byte("key-00050")}, {[]byte("key"), []byte("key-00002")}} {
			for _, asc := range []bool{true, false} {
				it := tr.Iterator(bounds[0], bounds[1], asc)
				for ; it.Valid(); it.Next() {
				}
				ok("Iterator", it.Error())
				_ = it.Close()
			}
		}
		ok("Check", tr.Check())
		c := tr.Copy()
		for i := 0; i < int(n); i += 3 {
			_, err := c.Set([]byte(fmt.Sprintf("key-%05d", i)), []byte("updated"))
			ok("Set", err)
		}
		_, _, err = c.SaveVersion()
		ok("SaveVersion", err)
		if err != nil {
			return
		}
		out := filepath.Join(t.TempDir(), "rewritten")
		if err := c.WriteSnapshot(context.Background(), out); err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				ok("WriteSnapshot", err)
			}
			return
		}
		rs, err := snapshot.Open(out)
		if err != nil {
			t.Fatalf("the rewritten snapshot does not open: %v", err)
		}
		defer rs.Close()
		if err := rs.Verify(); err != nil {
			t.Fatalf("a rewrite of the damaged tree wrote a snapshot that does not verify: %v", err)
		}
	})
}

// TestWriteSnapshotDamagedIsCorrupt: damage of the snapshot a tree reads
// from (found by FuzzDamagedTree) that the writer sees first as bad input
// fails WriteSnapshot of the tree's next version with ErrCorrupt, as for any
// damage of the snapshot it copies from (the file's checksum no longer
// matches): a byte of a key in kvs changed so that the key sorts before
// the one written just before it (keys out of order), and the height byte
// of a branch record (a tree of the wrong shape).
func TestWriteSnapshotDamagedIsCorrupt(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int
		file   string
		damage func(b []byte)
		// SaveVersion may find the damage first (the test is then moot)
		saveMayFail bool
	}{
		{"key", 227, snapshot.FileKVs, func(b []byte) {
			b[bytes.Index(b, []byte("key-00102"))+2] = 'I' // "keI-00102" sorts before "key-00101"
		}, false},
		{"height", 100, snapshot.FileBranches, func(b []byte) {
			b[2*snapshot.RecordSize+55] ^= 0x30 // branch 2's height
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := patchedTree(t, c.n, c.file, c.damage)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.n; i += 3 {
				if _, err := tr.Set([]byte(fmt.Sprintf("key-%05d", i)), []byte("updated")); err != nil &&
					!(c.saveMayFail && errors.Is(err, memiavl.ErrCorrupt)) {
					t.Fatal(err)
				}
			}
			if _, _, err := tr.SaveVersion(); err != nil {
				if c.saveMayFail {
					t.Skipf("SaveVersion found the damage: %v", err)
				}
				t.Fatal(err)
			}
			err = tr.WriteSnapshot(context.Background(), filepath.Join(t.TempDir(), "rewritten"))
			if !errors.Is(err, memiavl.ErrCorrupt) && !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("WriteSnapshot over a snapshot whose %s checksum fails: %v; want ErrCorrupt", c.file, err)
			}
		})
	}
}
