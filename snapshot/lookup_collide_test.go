package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// collidingKeys grinds k keys of 16 bytes whose home slots (the low 40 bits
// of KeyHash) fall in the fraction frac of the hash range, from its middle:
// in a table of any size their homes share a window of frac*slots slots,
// so that they make one run of occupied slots about k long. This is what
// anyone who chooses keys (a contract's storage keys) can do in
// milliseconds, since the hash has no seed.
func collidingKeys(k int, frac float64) [][]byte {
	const lo = uint64(1) << 39
	w := uint64(frac * float64(uint64(1)<<40))
	out := make([][]byte, 0, k)
	buf := make([]byte, 16)
	copy(buf, "contract")
	for i := uint64(0); len(out) < k; i++ {
		binary.BigEndian.PutUint64(buf[8:], i)
		if l := KeyHash(buf) & uint40Mask; l >= lo && l < lo+w {
			out = append(out, append([]byte(nil), buf...))
		}
	}
	return out
}

// collidingTree returns the sorted keys and values of n random keys and k
// colliding ones (collidingKeys, their homes in a window of k/4 slots).
func collidingTree(r *rand.Rand, n, k int) (keys, values [][]byte) {
	keys = collidingKeys(k, float64(k)/4/float64(lookupSlots(uint64(n+k))))
	for range n {
		key := make([]byte, 20)
		r.Read(key)
		keys = append(keys, key)
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	for i := range keys {
		values = append(values, []byte(fmt.Sprintf("value-%d", i)))
	}
	return keys, values
}

// TestLookupCollidingKeys: keys chosen to share home slots make one long
// run of occupied slots. The whole-table build gives up on them (its
// insertions would step over the run, quadratic in its length) for the
// windowed sweep, which gives the same table; random keys stay with the
// whole-table build. Lookups of every key, and of absent keys whose homes
// fall in the run, give the right answer whether the probe reaches the
// key or stops at lookupMaxProbe slots for a binary search; Verify accepts
// the table.
func TestLookupCollidingKeys(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	const n, k = 3000, 3000

	// the build: the whole table gives up on colliding keys only
	dir := t.TempDir()
	for _, colliding := range []bool{false, true} {
		var hashes []uint64
		if colliding {
			for _, key := range collidingKeys(n, 0.05) {
				hashes = append(hashes, KeyHash(key))
			}
		} else {
			for range n {
				hashes = append(hashes, r.Uint64())
			}
		}
		offs := make([]uint64, len(hashes))
		for i := range offs {
			offs[i] = uint64(i) * 40
		}
		b, err := newLookupBuilder(filepath.Join(dir, fmt.Sprintf("hashes-%v", colliding)))
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hashes {
			if err := b.addHash(h, offs[i]); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("whole-%v", colliding)))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.buf.Flush(); err != nil {
			t.Fatal(err)
		}
		_, done, err := b.buildWhole(f, uint64(n), lookupSlots(uint64(n)), &pacer{})
		if err != nil || done == colliding {
			t.Fatalf("colliding %v: whole build done %v, %v", colliding, done, err)
		}
		f.Close()
		b.close()
		// and build, which falls back, gives the format's table
		got, _ := buildLookup(t, dir, hashes, offs, 0, lookupPartitionBuffer)
		if !bytes.Equal(got, referenceLookup(hashes, offs)) {
			t.Fatalf("colliding %v: table differs from leaf-order insertion", colliding)
		}
	}

	// lookups and Verify on a snapshot with a run of k colliding keys
	keys, values := collidingTree(r, n, k)
	snapDir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, snapDir, 1, 1, false, keys, values)
	s, err := Open(snapDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	absent := collidingKeys(k+200, float64(k)/4/float64(lookupSlots(uint64(len(keys)))))[k:]
	defer func(m uint64) { lookupMaxProbe = m }(lookupMaxProbe)
	for _, probe := range []uint64{lookupMaxProbe, 1, 2, 5, 1 << 30} {
		lookupMaxProbe = probe
		if err := s.Verify(); err != nil {
			t.Fatalf("probe %d: %v", probe, err)
		}
		for i, key := range keys {
			idx, v, found, err := s.Lookup(key)
			if err != nil || !found || idx != uint64(i) || !bytes.Equal(v, values[i]) {
				t.Fatalf("probe %d: lookup of key %d: %d %q %v %v", probe, i, idx, v, found, err)
			}
		}
		for _, key := range absent {
			if _, found := slices.BinarySearchFunc(keys, key, bytes.Compare); found {
				continue
			}
			if _, _, found, err := s.Lookup(key); found || err != nil {
				t.Fatalf("probe %d: absent key %x: %v %v", probe, key, found, err)
			}
		}
	}
}

// TestVerifyLookupCollidingDamage: Verify finds a table of colliding keys
// whose entries were moved or duplicated (the checksums made to match),
// whether it reaches the entries by probing from their homes or, past
// lookupMaxProbe slots, by the pass over the runs of the table.
func TestVerifyLookupCollidingDamage(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	keys, values := collidingTree(r, 500, 800)
	dir := filepath.Join(t.TempDir(), "snap")
	writeTree(t, dir, 1, 1, false, keys, values)
	files := readDir(t, dir)
	lk := files[FileLookup]
	slots := len(lk) / LookupEntrySize
	entry := func(slot int) []byte { return lk[slot*LookupEntrySize : (slot+1)*LookupEntrySize] }
	// the longest run of occupied slots
	best, bestLen := 0, 0
	for start := 0; start < slots; start++ {
		if binary.LittleEndian.Uint64(entry(start)) == 0 || binary.LittleEndian.Uint64(entry((start+slots-1)%slots)) != 0 {
			continue
		}
		l := 0
		for binary.LittleEndian.Uint64(entry((start+l)%slots)) != 0 {
			l++
		}
		if l > bestLen {
			best, bestLen = start, l
		}
	}
	if bestLen < 200 {
		t.Fatalf("longest run %d slots", bestLen)
	}
	emptyBefore := (best + slots - 1) % slots
	last := (best + bestLen - 1) % slots
	damages := map[string]func(lk []byte){
		// the run's last entry moved to the empty slot before the run:
		// before its home
		"moved before its home": func(lk []byte) {
			copy(lk[emptyBefore*LookupEntrySize:], lk[last*LookupEntrySize:(last+1)*LookupEntrySize])
			clear(lk[last*LookupEntrySize : (last+1)*LookupEntrySize])
		},
		// the run's first entry copied over its last: one leaf twice,
		// another missing
		"duplicated": func(lk []byte) {
			copy(lk[last*LookupEntrySize:], lk[best*LookupEntrySize:(best+1)*LookupEntrySize])
		},
		// an empty slot cut into the run's middle: the entries after it
		// whose homes are before it are out of reach
		"run cut": func(lk []byte) {
			mid := (best + bestLen/2) % slots
			e := append([]byte(nil), lk[mid*LookupEntrySize:(mid+1)*LookupEntrySize]...)
			clear(lk[mid*LookupEntrySize : (mid+1)*LookupEntrySize])
			copy(lk[emptyBefore*LookupEntrySize:], e)
		},
	}
	defer func(m uint64) { lookupMaxProbe = m }(lookupMaxProbe)
	for name, damage := range damages {
		bad := map[string][]byte{}
		for f, b := range files {
			bad[f] = append([]byte(nil), b...)
		}
		damage(bad[FileLookup])
		fixMeta(bad, true, false, true)
		bdir := filepath.Join(t.TempDir(), "bad")
		writeDir(t, bdir, bad)
		s, err := Open(bdir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, probe := range []uint64{96, 1, 2, 7} {
			lookupMaxProbe = probe
			if err := s.Verify(); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s, probe %d: Verify: %v", name, probe, err)
			}
		}
		s.Close()
	}
}

// BenchmarkLookupCollidingKeys reads keys ground to share home slots, k of
// them in one run of the table beside 100,000 random keys: ns/op stays
// flat in k (the probe ends in a binary search past lookupMaxProbe slots),
// as for random keys.
func BenchmarkLookupCollidingKeys(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, k := range []int{4000, 16000, 64000} {
		keys, values := collidingTree(r, 100000, k)
		s := writeAndOpen(b, 1, 1, false, keys, values)
		probe := collidingKeys(k, float64(k)/4/float64(lookupSlots(uint64(len(keys)))))
		b.Run(fmt.Sprintf("colliding=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, found, err := s.Lookup(probe[i%len(probe)]); !found || err != nil {
					b.Fatal(found, err)
				}
			}
		})
	}
}
