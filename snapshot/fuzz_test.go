package snapshot

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary files to Open, Verify and every accessor. None may
// panic, and a snapshot that verifies must serve every leaf and find every
// key.
//
// Input: a flags byte, the lengths of meta, leaves, branches, index and
// lookup as five uint16 (clamped to what is left), then the files' bytes in
// that order; kvs takes the rest. Flags rewrite meta before writing it so that mutations get
// past the checksums: bit 0 derives the counts from the record files, bit 1
// records the data files' lengths and checksums, bit 2 the meta checksum.
func FuzzOpen(f *testing.F) {
	// Inputs run one at a time in each process: they share a directory.
	dir := filepath.Join(f.TempDir(), "snap")
	f.Fuzz(func(t *testing.T, data []byte) {
		header := 1 + 2*(len(fuzzFiles)-1)
		if len(data) < header {
			return
		}
		flags := data[0]
		rest := data[header:]
		files := map[string][]byte{}
		for i, name := range fuzzFiles[:len(fuzzFiles)-1] {
			n := min(int(binary.LittleEndian.Uint16(data[1+2*i:])), len(rest))
			files[name], rest = rest[:n:n], rest[n:]
		}
		files[FileKVs] = rest
		files[FileMeta] = bytes.Clone(files[FileMeta])
		fixMeta(files, flags&2 != 0, flags&1 != 0, flags&4 != 0)

		writeDir(t, dir, files)
		s, err := Open(dir)
		if err != nil {
			return
		}
		defer s.Close()
		exerciseErr := exercise(s)
		if err := s.Verify(); err != nil {
			return
		}
		if exerciseErr != nil {
			t.Fatalf("verified snapshot fails an accessor: %v", exerciseErr)
		}
		for i := uint64(0); i < s.LeafCount(); i++ {
			k, err := s.LeafKey(i)
			if err != nil {
				t.Fatal(err)
			}
			if idx, found, err := s.Search(k, 0, s.LeafCount()); idx != i || !found || err != nil {
				t.Fatalf("verified snapshot: Search(leaf %d key %x) = %d %v %v", i, k, idx, found, err)
			}
			v, err := s.LeafValue(i)
			if err != nil {
				t.Fatal(err)
			}
			if idx, lv, found, err := s.Lookup(k); idx != i || !found || err != nil || !bytes.Equal(lv, v) {
				t.Fatalf("verified snapshot: Lookup(leaf %d key %x) = %d %x %v %v, want value %x", i, k, idx, lv, found, err, v)
			}
		}
		checkNavigation(t, s)
	})
}
