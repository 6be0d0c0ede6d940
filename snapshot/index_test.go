package snapshot

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestSearchWithIndex compares Search over random sub-ranges with a linear
// scan, on keys that share long prefixes (runs of equal 8-byte prefixes that
// span index entries) and short keys that zero padding makes look alike.
func TestSearchWithIndex(t *testing.T) {
	r := testutil.Rand(t)
	seen := map[string]bool{}
	var keys [][]byte
	add := func(k []byte) {
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	for i := 0; i < 3000; i++ {
		switch r.Intn(4) {
		case 0: // long shared prefix
			add([]byte(fmt.Sprintf("balances/0000/%06d", r.Intn(100000))))
		case 1: // short keys and zero bytes
			k := make([]byte, r.Intn(9))
			for j := range k {
				k[j] = byte(r.Intn(3))
			}
			add(k)
		default:
			k := make([]byte, 1+r.Intn(40))
			r.Read(k)
			add(k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	values := make([][]byte, len(keys))
	for i := range values {
		values[i] = []byte{byte(i)}
	}
	dir := filepath.Join(t.TempDir(), "s")
	writeTree(t, dir, r.Int63(), 1, true, keys, values)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	n := uint64(len(keys))
	for i := 0; i < 20000; i++ {
		lo := uint64(r.Intn(int(n)))
		hi := lo + uint64(r.Intn(int(n-lo)+1))
		if r.Intn(3) == 0 {
			lo, hi = 0, n
		}
		var key []byte
		if r.Intn(2) == 0 {
			key = keys[r.Intn(len(keys))]
		} else {
			key = append(bytes.Clone(keys[r.Intn(len(keys))]), byte(r.Intn(2)))
		}
		want := lo
		for want < hi && bytes.Compare(keys[want], key) < 0 {
			want++
		}
		wantFound := want < hi && bytes.Equal(keys[want], key)
		got, found, err := s.Search(key, lo, hi)
		if err != nil || got != want || found != wantFound {
			t.Fatalf("Search(%x, %d, %d) = %d %v %v, want %d %v", key, lo, hi, got, found, err, want, wantFound)
		}
	}
}
