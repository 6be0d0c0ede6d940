package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"sort"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestSearchIndexEntryDamage damages each entry of the index file in turn
// (its checksum fixed, as a snapshot read before Verify may be): Search,
// which narrows with the index, must give the right answer for every key
// of the tree, the keys between them and the keys outside them, or fail
// with ErrCorrupt naming the index file; never a wrong answer.
func TestSearchIndexEntryDamage(t *testing.T) {
	r := testutil.Rand(t)
	keys, values := sortedKVs(r, 20*IndexStride+17)
	src := filepath.Join(t.TempDir(), "src")
	writeTree(t, src, r.Int63(), 5, false, keys, values)
	orig := readDir(t, src)

	var probes [][]byte
	for _, k := range keys {
		probes = append(probes, k, append(bytes.Clone(k), 0))
	}
	probes = append(probes, []byte{}, bytes.Repeat([]byte{0xff}, 70))
	want := func(key []byte) (uint64, bool) {
		i := sort.Search(len(keys), func(i int) bool { return bytes.Compare(keys[i], key) >= 0 })
		return uint64(i), i < len(keys) && bytes.Equal(keys[i], key)
	}
	n := uint64(len(keys))
	entries := len(orig[FileIndex]) / IndexEntrySize
	refused := 0
	for b := 0; b < entries; b++ {
		for _, v := range []uint64{0, ^uint64(0), r.Uint64(), binary.BigEndian.Uint64(orig[FileIndex][r.Intn(entries)*IndexEntrySize:])} {
			files := copyFiles(orig)
			binary.BigEndian.PutUint64(files[FileIndex][b*IndexEntrySize:], v)
			fixMeta(files, true, false, true)
			dir := filepath.Join(t.TempDir(), "d")
			writeDir(t, dir, files)
			s, err := Open(dir)
			if err != nil {
				t.Fatalf("entry %d = %016x: open: %v", b, v, err)
			}
			for _, key := range probes {
				// whole ranges and ones that start or end inside the tree
				for _, rg := range [][2]uint64{{0, n}, {uint64(r.Intn(int(n))), n}, {0, uint64(r.Intn(int(n)) + 1)}} {
					got, found, err := s.Search(key, rg[0], rg[1])
					if err != nil {
						if !errors.Is(err, ErrCorrupt) {
							t.Fatalf("entry %d = %016x: Search(%x, %d, %d): %v, want ErrCorrupt", b, v, key, rg[0], rg[1], err)
						}
						refused++
						continue
					}
					w, wf := want(key)
					w = min(max(w, rg[0]), rg[1])
					wf = wf && w < rg[1] && bytes.Equal(keys[w], key)
					if got != w || found != wf {
						t.Fatalf("entry %d = %016x: Search(%x, %d, %d) = %d, %v; want %d, %v", b, v, key, rg[0], rg[1], got, found, w, wf)
					}
				}
			}
			s.Close()
		}
	}
	if refused == 0 {
		t.Fatal("no damaged entry was ever met")
	}
}
