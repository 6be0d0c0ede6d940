package snapshot

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"path/filepath"
	"testing"
)

// FuzzMutateFixed writes a valid snapshot of up to 200 leaves (more than
// one index stride, keys with prefix ties), changes several bytes of its data
// files and rewrites the checksums in meta to match. Either Open or Verify
// refuses it, or it must serve exactly what the original served: the same
// leaves, the same root, every key found by Search and Lookup with its
// value, and absent keys not found.
func FuzzMutateFixed(f *testing.F) {
	f.Add(uint16(100), int64(1), []byte{0, 0, 0, 1, 1})
	f.Add(uint16(130), int64(2), []byte{4, 0, 0, 8, 0x80, 4, 0, 16, 8, 0x80})
	f.Add(uint16(7), int64(3), []byte{2, 0, 0, 0, 1, 3, 0, 0, 1, 2})
	dir := filepath.Join(f.TempDir(), "snap")
	f.Fuzz(func(t *testing.T, n uint16, seed int64, muts []byte) {
		r := rand.New(rand.NewSource(seed))
		keys, values := sortedKVs(r, int(n%200))
		origDir := filepath.Join(t.TempDir(), "orig")
		writeTree(t, origDir, seed, 9, seed%2 == 0, keys, values)
		orig := readDir(t, origDir)
		files := map[string][]byte{}
		for k, v := range orig {
			files[k] = bytes.Clone(v)
		}
		changed := false
		// each 5 bytes: file, offset (u16), xor, and a spare byte
		for ; len(muts) >= 5; muts = muts[5:] {
			name := dataFileNames[int(muts[0])%len(dataFileNames)]
			b := files[name]
			if len(b) == 0 || muts[3] == 0 {
				continue
			}
			off := int(binary.LittleEndian.Uint16(muts[1:])) % len(b)
			if muts[4]&1 != 0 && off+1 < len(b) { // also the next byte
				b[off+1] ^= muts[4]
			}
			b[off] ^= muts[3]
			changed = true
		}
		if !changed {
			return
		}
		fixMeta(files, true, false, true)
		writeDir(t, dir, files)
		s, err := Open(dir)
		if err != nil {
			return
		}
		defer s.Close()
		_ = exercise(s)
		if err := s.Verify(); err != nil {
			return
		}
		// accepted: it must mean what the original meant
		o, err := Open(origDir)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if s.LeafCount() != o.LeafCount() || !bytes.Equal(s.RootHash(), o.RootHash()) || s.Version() != o.Version() {
			t.Fatalf("a damaged snapshot verifies with %d leaves, root %x; the original %d, %x", s.LeafCount(), s.RootHash(), o.LeafCount(), o.RootHash())
		}
		for i := uint64(0); i < o.LeafCount(); i++ {
			k, v, err := s.LeafKV(i)
			if err != nil || !bytes.Equal(k, keys[i]) || !bytes.Equal(v, values[i]) || s.LeafVersion(i) != o.LeafVersion(i) {
				t.Fatalf("leaf %d: %x=%x v%d (%v), want %x=%x v%d", i, k, v, s.LeafVersion(i), err, keys[i], values[i], o.LeafVersion(i))
			}
			if idx, lv, found, err := s.Lookup(keys[i]); idx != i || !found || err != nil || !bytes.Equal(lv, values[i]) {
				t.Fatalf("Lookup(leaf %d) = %d %x %v %v", i, idx, lv, found, err)
			}
			if idx, found, err := s.Search(keys[i], 0, s.LeafCount()); idx != i || !found || err != nil {
				t.Fatalf("Search(leaf %d) = %d %v %v", i, idx, found, err)
			}
			absent := append(bytes.Clone(keys[i]), 0)
			if i+1 < o.LeafCount() && bytes.Equal(absent, keys[i+1]) {
				continue
			}
			if _, _, found, err := s.Lookup(absent); found || err != nil {
				t.Fatalf("Lookup(absent key after leaf %d) found %v, %v", i, found, err)
			}
		}
		for i := uint64(0); i < o.BranchCount(); i++ {
			if s.BranchHeight(i) != o.BranchHeight(i) || s.BranchSize(i) != o.BranchSize(i) || s.BranchVersion(i) != o.BranchVersion(i) ||
				s.BranchKeyLeaf(i) != o.BranchKeyLeaf(i) || s.BranchFirstLeaf(i) != o.BranchFirstLeaf(i) || !bytes.Equal(s.BranchHash(i), o.BranchHash(i)) {
				t.Fatalf("branch %d differs from the original's", i)
			}
		}
		checkNavigation(t, s)
	})
}
