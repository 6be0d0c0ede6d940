package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// referenceLookup is the table the format defines: the leaves inserted in
// leaf order, each in the first empty slot from its home slot on, wrapping
// at the end, in a table held whole.
func referenceLookup(hashes, offs []uint64) []byte {
	n := uint64(len(hashes))
	slots := lookupSlots(n)
	table := make([]byte, slots*LookupEntrySize)
	for i, h := range hashes {
		slot := lookupHome(h, slots)
		for binary.LittleEndian.Uint64(table[slot*LookupEntrySize:]) != 0 {
			slot = lookupNext(slot, slots)
		}
		binary.LittleEndian.PutUint64(table[slot*LookupEntrySize:], lookupEntry(h, uint64(i)))
		binary.LittleEndian.PutUint64(table[slot*LookupEntrySize+8:], offs[i])
	}
	return table
}

// buildLookup builds the table of hashes and offs with lookupBuilder, window
// slots at a time (0: whole), and returns it and the checksum build
// reported.
func buildLookup(t *testing.T, dir string, hashes, offs []uint64, window, partBuf uint64) ([]byte, uint32) {
	t.Helper()
	defer func(w, m, p uint64) {
		lookupWindow, lookupWholeMax, lookupPartitionBuffer = w, m, p
	}(lookupWindow, lookupWholeMax, lookupPartitionBuffer)
	lookupWindow, lookupWholeMax, lookupPartitionBuffer = window, 0, partBuf
	if window == 0 {
		lookupWholeMax = math.MaxUint64
	}
	b, err := newLookupBuilder(filepath.Join(dir, "hashes"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	for i, h := range hashes {
		if err := b.addHash(h, offs[i]); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "lookup"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crc, err := b.build(f, uint64(len(hashes)), &pacer{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return table, crc
}

// TestLookupBuild: the build, whole (window 0) or windowed, gives the bytes
// of leaf-order insertion into a whole table, and their checksum, for random tables small
// enough that runs of occupied slots collide and wrap around the end, for
// every window size from one slot to the whole table; and for keys whose
// home slots are all the last one or all the first.
func TestLookupBuild(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	check := func(name string, hashes []uint64, windows ...uint64) {
		t.Helper()
		offs := make([]uint64, len(hashes))
		for i := range offs {
			offs[i] = r.Uint64() >> 1
		}
		want := referenceLookup(hashes, offs)
		// the windows' buffers as sized, and as small as they get, so
		// that they fill and flush while the leaves are sorted
		partBufs := []uint64{lookupPartitionBuffer}
		if len(hashes) > 1000 {
			partBufs = append(partBufs, 0)
		}
		for _, w := range windows {
			for _, pb := range partBufs {
				got, crc := buildLookup(t, dir, hashes, offs, w, pb)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s, %d keys, window %d, buffers %d: table differs from leaf-order insertion\n got %x\nwant %x", name, len(hashes), w, pb, got, want)
				}
				if c := crc32.Update(0, crcTable, want); crc != c {
					t.Fatalf("%s, %d keys, window %d, buffers %d: checksum %08x, want %08x", name, len(hashes), w, pb, crc, c)
				}
			}
		}
	}
	trials := 1500
	if testing.Short() {
		trials = 300
	}
	for trial := 0; trial < trials; trial++ {
		n := 1 + r.Intn(40)
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = r.Uint64()
		}
		slots := lookupSlots(uint64(n))
		check("random", hashes, 0, 1, 2, 3, 1+uint64(r.Int63n(int64(slots))), slots, 1<<16)
	}
	// homes at the extremes: one run of every key, from the last slot
	// around to the first ones, or from slot 0
	for _, n := range []int{1, 2, 5, 12, 100} {
		last, first := make([]uint64, n), make([]uint64, n)
		for i := range last {
			last[i] = ^uint64(0)       // home: the last slot
			first[i] = uint64(i) << 40 // home 0: the low 40 bits are zero
		}
		slots := lookupSlots(uint64(n))
		check("homes at the last slot", last, 0, 1, 3, slots)
		check("homes at slot 0", first, 0, 1, 3, slots)
	}
	// homes in one quarter of a larger table, so that many windows hold
	// no home and the runs spilling out of the quarter cross windows: the
	// first quarter, and the last, whose run wraps around the end
	for _, quarter := range []uint64{0, 3} {
		hashes := make([]uint64, 20_000)
		for i := range hashes {
			hashes[i] = r.Uint64()&^(1<<40-1) | quarter<<38 | r.Uint64()&(1<<38-1)
		}
		check(fmt.Sprintf("homes in quarter %d", quarter), hashes, 0, 1<<14, 777)
	}
	// a larger table through the default window and a few others
	hashes := make([]uint64, 100_000)
	for i := range hashes {
		hashes[i] = r.Uint64()
	}
	check("large", hashes, 0, 1<<14, 4093, lookupSlots(uint64(len(hashes))))
}

// BenchmarkLookupBuild builds the lookup table of 250,000 random keys (6
// MB) and of 1,000,000 (24 MB), whole in memory or window by window.
func BenchmarkLookupBuild(b *testing.B) {
	for _, n := range []int{250_000, 1_000_000} {
		r := rand.New(rand.NewSource(1))
		dir := b.TempDir()
		lb, err := newLookupBuilder(filepath.Join(dir, "hashes"))
		if err != nil {
			b.Fatal(err)
		}
		defer lb.close()
		for i := 0; i < n; i++ {
			if err := lb.addHash(r.Uint64(), uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
		for _, whole := range []bool{true, false} {
			b.Run(fmt.Sprintf("keys=%d/%s", n, map[bool]string{true: "whole", false: "windows"}[whole]), func(b *testing.B) {
				defer func(m uint64) { lookupWholeMax = m }(lookupWholeMax)
				lookupWholeMax = 0
				if whole {
					lookupWholeMax = math.MaxUint64
				}
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					f, err := os.OpenFile(filepath.Join(dir, "lookup"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := lb.build(f, uint64(n), &pacer{}); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			})
		}
	}
}
