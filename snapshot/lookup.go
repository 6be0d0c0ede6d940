package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"os"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/seed-6dfbb450/memiavl/internal/hexkey"
	"github.com/seed-6dfbb450/memiavl/internal/prefetch"
)

// The lookup file (format version 2) is a hash table from keys to leaf
// indices and kvs offsets, so that a point read touches one table slot and
// the key's kvs entry, whatever the size of the tree. Its layout is described
// in format.go; this file builds, probes and verifies it.

// lookupSlots returns the number of slots of the lookup table of a tree of n
// leaves: 0 for the empty tree, else n + n/2 + 1 and at least 8, so that
// the table is at most two-thirds full and always has an empty slot.
func lookupSlots(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return max(8, n+n/2+1)
}

// lookupHome returns the home slot of a key with hash h in a table of slots
// slots: the low 40 bits of h scaled to [0, slots). The tag is the top 24
// bits, so home slot and tag use different bits of the hash.
func lookupHome(h, slots uint64) uint64 {
	hi, _ := bits.Mul64(h<<24, slots)
	return hi
}

// lookupNext returns the slot after slot, wrapping at the end of the table.
func lookupNext(slot, slots uint64) uint64 {
	if slot++; slot == slots {
		return 0
	}
	return slot
}

// lookupLen returns the length of the lookup file of a tree of n leaves.
func lookupLen(n uint64) uint64 { return lookupSlots(n) * LookupEntrySize }

// lookupHash is the hash that places a key in the lookup table.
func lookupHash(key []byte) uint64 { return xxhash.Sum64(key) }

// KeyHash returns the hash the lookup table files key under, for
// LookupHashed.
func KeyHash(key []byte) uint64 { return lookupHash(key) }

// lookupEntry returns the slot entry for leaf i of a key with hash h.
func lookupEntry(h, i uint64) uint64 { return h&^uint40Mask | (i + 1) }

// lookupMaxProbe bounds the slots a Lookup reads: past them it
// binary-searches the leaves. The hash has no seed, so keys chosen to share
// home slots (ground in milliseconds) make one long run of occupied slots,
// which every key whose home falls in it would otherwise read to its end;
// random keys at the table's load of at most two thirds almost never run
// that long. A variable for tests.
var lookupMaxProbe = uint64(96)

// Lookup finds key with the lookup table: it returns the key's leaf index
// and value and true, or false when the tree does not hold the key. It reads
// the table slots from the key's home slot to the first empty one and the kvs
// entry of each slot whose tag matches (almost always only the key's own), so
// a present key costs one slot and one kvs entry, an absent one a slot. A
// probe longer than lookupMaxProbe slots (a run of colliding keys) ends in a
// binary search of the leaves, so a read costs O(log n) at worst. It
// does not allocate; the value points into the mapping. A snapshot of format
// version 1 has no lookup table: Lookup then binary-searches the leaves.
// After Close it fails with an error wrapping ErrClosed.
func (s *Snapshot) Lookup(key []byte) (idx uint64, value []byte, found bool, err error) {
	return s.LookupHashed(key, lookupHash(key))
}

// LookupHashed is Lookup with the key's hash h = KeyHash(key) computed by
// the caller.
func (s *Snapshot) LookupHashed(key []byte, h uint64) (idx uint64, value []byte, found bool, err error) {
	if s.lookup == nil {
		return s.searchLeaves(key)
	}
	slots := uint64(len(s.lookup)) / LookupEntrySize
	tag := h &^ uint40Mask
	slot := lookupHome(h, slots)
	kvLen := uint64(len(s.kvs))
	// Every slot is visited at most once: a table with no empty slot, which
	// Verify rejects, still ends the probe.
	for n := range min(slots, lookupMaxProbe) {
		if n == lookupMaxProbe-1 {
			return s.searchLeaves(key)
		}
		b := s.lookup[slot*LookupEntrySize : slot*LookupEntrySize+LookupEntrySize]
		e := binary.LittleEndian.Uint64(b)
		if e == 0 {
			return 0, nil, false, nil
		}
		if e&^uint40Mask == tag {
			i := e&uint40Mask - 1
			off := binary.LittleEndian.Uint64(b[8:])
			if i >= s.leafCount || off < KVHeaderSize || off > kvLen {
				return 0, nil, false, s.lookupError(slot, "leaf %d of %d, key at %s offset %d of %d",
					i, s.leafCount, FileKVs, off, kvLen)
			}
			hdr := s.kvs[off-KVHeaderSize : off]
			kl := uint64(binary.LittleEndian.Uint32(hdr))
			vl := uint64(binary.LittleEndian.Uint32(hdr[4:]))
			if kl == uint64(len(key)) && kl <= kvLen-off && bytes.Equal(s.kvs[off:off+kl], key) {
				if vl > kvLen-off-kl {
					return 0, nil, false, s.lookupError(slot, "leaf %d value of %d bytes at %s offset %d of %d",
						i, vl, FileKVs, off+kl, kvLen)
				}
				end := off + kl + vl
				return i, s.kvs[off+kl : end : end], true, nil
			}
		}
		slot = lookupNext(slot, slots)
	}
	return 0, nil, false, nil
}

// searchLeaves is Lookup by binary search of the leaves.
func (s *Snapshot) searchLeaves(key []byte) (idx uint64, value []byte, found bool, err error) {
	if s.leafCount == 0 {
		if s.closed.Load() {
			return 0, nil, false, fmt.Errorf("%w: lookup in the snapshot in %s after Close", ErrClosed, s.dir)
		}
		return 0, nil, false, nil
	}
	i, found, err := s.Search(key, 0, s.leafCount)
	if err != nil || !found {
		return 0, nil, false, err
	}
	v, err := s.LeafValue(i)
	return i, v, err == nil, err
}

// kvHeaderSize returns the size of the kvs entry headers of the snapshot's
// format version.
func (s *Snapshot) kvHeaderSize() uint64 {
	if s.format == FormatVersionNoLookup {
		return 0
	}
	return KVHeaderSize
}

// HasLookup reports whether the snapshot has a lookup table (format
// version 2 on).
func (s *Snapshot) HasLookup() bool { return s.lookup != nil }

//go:noinline
func (s *Snapshot) lookupError(slot uint64, format string, args ...any) error {
	return corruptAt(s.path(metaFileIndexLookup), slot*LookupEntrySize, "slot %d: %s", slot, fmt.Sprintf(format, args...))
}

// verifyLookup checks that every slot is empty (all zero) or names a leaf,
// that the table holds one entry per leaf, and that probing each leaf's key
// from its home slot reaches that leaf's entry before an empty slot: that
// the entry lies in the run of occupied slots that holds the key's home
// slot. It goes over the table once, in runs, whatever the keys' collisions;
// it keeps a bit per leaf.
func (s *Snapshot) verifyLookup() error {
	if s.lookup == nil {
		return nil
	}
	slots := uint64(len(s.lookup)) / LookupEntrySize
	used, empty := uint64(0), slots
	for slot := uint64(0); slot < slots; slot++ {
		b := s.lookup[slot*LookupEntrySize:]
		e := binary.LittleEndian.Uint64(b)
		if e == 0 {
			if binary.LittleEndian.Uint64(b[8:]) != 0 {
				return s.lookupError(slot, "empty slot with a kvs offset")
			}
			empty = slot
			continue
		}
		if i := e&uint40Mask - 1; i >= s.leafCount {
			return s.lookupError(slot, "leaf %d of %d leaves", i, s.leafCount)
		}
		used++
	}
	if used != s.leafCount || empty == slots {
		return s.lookupError(0, "%d entries for %d leaves in %d slots", used, s.leafCount, slots)
	}
	seen := make([]uint64, (s.leafCount+63)/64)
	// from the slot after an empty one around the table: run is the first
	// slot of the current run of occupied slots
	run := lookupNext(empty, slots)
	for j, slot := uint64(0), run; j < slots; j, slot = j+1, lookupNext(slot, slots) {
		e := binary.LittleEndian.Uint64(s.lookup[slot*LookupEntrySize:])
		if e == 0 {
			run = lookupNext(slot, slots)
			continue
		}
		i := e&uint40Mask - 1
		if seen[i/64]&(1<<(i%64)) != 0 {
			return s.lookupError(slot, "a second entry for leaf %d", i)
		}
		seen[i/64] |= 1 << (i % 64)
		key, err := s.LeafKey(i)
		if err != nil {
			return err
		}
		h := lookupHash(key)
		home := lookupHome(h, slots)
		// home in [run, slot], around the end of the table
		if e != lookupEntry(h, i) || (slot+slots-home)%slots > (slot+slots-run)%slots {
			return s.lookupError(home, "no entry for leaf %d (key %s) from its home slot", i, hexkey.Lower(key))
		}
		off := binary.LittleEndian.Uint64(s.lookup[slot*LookupEntrySize+8:])
		if rec := binary.LittleEndian.Uint64(s.leafRec(i)[leafOffKVOff:]); off != rec {
			return s.lookupError(slot, "leaf %d key at %s offset %d, the leaf records %d", i, FileKVs, off, rec)
		}
	}
	return nil
}

// lookupBuilder collects the key hashes of the leaves as they are written,
// in a scratch file, and builds the table from them at Finish: the writer's
// memory then stays bounded whatever the number of leaves, as long as the
// hash spreads their home slots. Keys chosen to share home slots (the hash
// has no seed) gather in one window of the windowed build and in its heap
// of leaves waiting for a slot: about 240 bytes of memory each while the
// table is built.
type lookupBuilder struct {
	f       *os.File
	buf     *bufio.Writer
	scratch [lookupBuildRecord]byte
}

// lookupBuildRecord is the size of a leaf's record in the scratch file: the
// key's hash and its kvs offset.
const lookupBuildRecord = 16

// A table of up to lookupWholeMax bytes is built whole in memory; a larger
// one lookupWindow slots (LookupEntrySize bytes each) at a time, or more
// for a table of more than maxLookupWindows windows. Variables for tests.
var (
	lookupWholeMax = uint64(8 << 20)
	lookupWindow   = uint64(1 << 14)
)

func newLookupBuilder(path string) (*lookupBuilder, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &lookupBuilder{f: f, buf: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (b *lookupBuilder) add(key []byte, kvOff uint64) error {
	return b.addHash(lookupHash(key), kvOff)
}

func (b *lookupBuilder) addHash(h, kvOff uint64) error {
	binary.LittleEndian.PutUint64(b.scratch[:], h)
	binary.LittleEndian.PutUint64(b.scratch[8:], kvOff)
	_, err := b.buf.Write(b.scratch[:])
	return err
}

// build writes the table of the n leaves recorded into f, which must be
// empty, and returns its checksum; f ends up lookupLen(n) bytes long, not
// yet synced.
//
// The table must be the one that inserting the leaves in leaf order, each
// in the first empty slot from its home slot on, gives. Doing that in a
// table held whole would hold it whole, in memory or in a mapping, which
// for a large tree is more than the writer may use. The build instead
// sorts the leaves into windows of slots by their home slot (in a scratch
// file) and goes over the slots in order, a window at a time, placing in
// each slot the leaf of lowest index among those whose home slot it has
// passed and that are not placed yet. That is the leaf leaf-order insertion
// puts there: every slot between such a leaf's home and this one holds a
// leaf of lower index, inserted before it. The sweep starts after a slot
// that ends up empty, so that no run of occupied slots wraps around it
// (see lastEmptySlot). A table of up to lookupWholeMax bytes is built
// whole instead, by inserting the leaves in leaf order, unless its keys
// collide so much that the insertions' probes grow quadratic (see
// lookupProbeBudget).
//
// The writes of the table wait for pace first.
func (b *lookupBuilder) build(f *os.File, n uint64, pace *pacer) (crc uint32, err error) {
	if err := b.buf.Flush(); err != nil {
		return 0, err
	}
	slots := lookupSlots(n)
	if slots == 0 {
		return 0, nil
	}
	if slots*LookupEntrySize <= lookupWholeMax {
		crc, done, err := b.buildWhole(f, n, slots, pace)
		if err != nil || done {
			return crc, err
		}
		// colliding keys: the sweep below places each leaf once
	}
	win, err := b.partition(n, slots)
	if err != nil {
		return 0, err
	}
	defer win.close()
	s0, err := win.lastEmptySlot()
	if err != nil {
		return 0, err
	}
	start := (s0 + 1) % slots
	k0 := start / win.size
	// from start to the end, around, and back to start
	ranges := [][3]uint64{{k0, start, min((k0+1)*win.size, slots)}}
	for k := k0 + 1; k < win.count; k++ {
		ranges = append(ranges, [3]uint64{k, k * win.size, min((k+1)*win.size, slots)})
	}
	for k := uint64(0); k < k0; k++ {
		ranges = append(ranges, [3]uint64{k, k * win.size, (k + 1) * win.size})
	}
	if start > k0*win.size {
		ranges = append(ranges, [3]uint64{k0, k0 * win.size, start})
	}
	var pending lookupHeap // reached their home, not placed; by leaf index
	out := make([]byte, win.size*LookupEntrySize)
	for _, r := range ranges {
		k, lo, hi := r[0], r[1], r[2]
		if err := win.load(k, true); err != nil {
			return 0, err
		}
		w := out[:(hi-lo)*LookupEntrySize]
		clear(w)
		next := 0
		for next < len(win.entries) && win.entries[next].home < lo {
			next++
		}
		for s := lo; s < hi; s++ {
			for ; next < len(win.entries) && win.entries[next].home == s; next++ {
				pending.push(win.entries[next])
			}
			if len(pending) == 0 {
				continue
			}
			e := pending.pop()
			slot := w[(s-lo)*LookupEntrySize:]
			binary.LittleEndian.PutUint64(slot, lookupEntry(e.h, e.leaf))
			binary.LittleEndian.PutUint64(slot[8:], e.off)
		}
		if err := pace.wait(len(w)); err != nil {
			return 0, err
		}
		if _, err := f.WriteAt(w, int64(lo*LookupEntrySize)); err != nil {
			return 0, err
		}
	}
	if len(pending) != 0 {
		return 0, fmt.Errorf("%d keys left unplaced after slot %d", len(pending), s0)
	}
	return fileCRC(f, slots*LookupEntrySize)
}

// scan calls f with each of the n recorded leaves, in leaf order: its
// index, key hash and kvs offset.
func (b *lookupBuilder) scan(n uint64, f func(i, h, off uint64) error) error {
	return b.scanChunks(n, func(first uint64, recs []byte) error {
		for j := 0; j < len(recs); j += lookupBuildRecord {
			e := recs[j : j+lookupBuildRecord]
			if err := f(first+uint64(j/lookupBuildRecord), binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])); err != nil {
				return err
			}
		}
		return nil
	})
}

// lookupScanChunk is how many records scanChunks reads at a time (64 KiB).
const lookupScanChunk = 4096

// scanChunks calls f with the n recorded leaves in leaf order, a chunk of
// whole records at a time; first is the index of the chunk's first leaf.
// recs is reused by the next call.
func (b *lookupBuilder) scanChunks(n uint64, f func(first uint64, recs []byte) error) error {
	buf := make([]byte, lookupScanChunk*lookupBuildRecord)
	for first := uint64(0); first < n; {
		recs := buf[:min(n-first, lookupScanChunk)*lookupBuildRecord]
		if _, err := b.f.ReadAt(recs, int64(first*lookupBuildRecord)); err != nil {
			return fmt.Errorf("read key hashes: %w", err)
		}
		if err := f(first, recs); err != nil {
			return err
		}
		first += uint64(len(recs) / lookupBuildRecord)
	}
	return nil
}

// lookupAhead is how many leaves ahead buildWhole prefetches the home slot
// of the leaf it will insert: the reads of a table larger than the caches
// miss, and fetches issued ahead of the insertions that need them overlap.
const lookupAhead = 16

// lookupProbeBudget bounds the slots buildWhole may step over, on average
// per leaf, before it gives up for the windowed sweep: an insertion steps
// over the run of occupied slots after its home, about one slot for random
// keys, but the whole run for keys chosen to collide, which would make the
// build quadratic in their number. A variable for tests.
var lookupProbeBudget = uint64(16)

// buildWhole builds the table in memory, inserting the leaves in leaf
// order, and writes it with one call. It returns done false, having
// written nothing, when the insertions step over more than
// lookupProbeBudget slots per leaf (keys that collide).
func (b *lookupBuilder) buildWhole(f *os.File, n, slots uint64, pace *pacer) (crc uint32, done bool, err error) {
	table := make([]byte, slots*LookupEntrySize)
	// A fresh allocation of this size is memory the process has not
	// touched: the insertions' first read of a page would map the shared
	// zero page and their first write replace it, a second fault whose TLB
	// flush interrupts every other processor running the process. A write
	// to each page first gets it in one fault.
	for i := 0; i < len(table); i += 4096 {
		table[i] = 0
	}
	budget := lookupProbeBudget*n + 1024
	if err := b.scanChunks(n, func(first uint64, recs []byte) error {
		m := len(recs) / lookupBuildRecord
		for j := 0; j < min(lookupAhead, m); j++ {
			prefetch.Line(unsafe.Pointer(&table[lookupHome(binary.LittleEndian.Uint64(recs[j*lookupBuildRecord:]), slots)*LookupEntrySize]))
		}
		for j := 0; j < m; j++ {
			if a := j + lookupAhead; a < m {
				prefetch.Line(unsafe.Pointer(&table[lookupHome(binary.LittleEndian.Uint64(recs[a*lookupBuildRecord:]), slots)*LookupEntrySize]))
			}
			e := recs[j*lookupBuildRecord : (j+1)*lookupBuildRecord]
			h := binary.LittleEndian.Uint64(e)
			slot := lookupHome(h, slots)
			for binary.LittleEndian.Uint64(table[slot*LookupEntrySize:]) != 0 {
				slot = lookupNext(slot, slots)
				if budget--; budget == 0 {
					return errProbeBudget
				}
			}
			binary.LittleEndian.PutUint64(table[slot*LookupEntrySize:], lookupEntry(h, first+uint64(j)))
			binary.LittleEndian.PutUint64(table[slot*LookupEntrySize+8:], binary.LittleEndian.Uint64(e[8:]))
		}
		return nil
	}); err == errProbeBudget {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	if err := pace.wait(len(table)); err != nil {
		return 0, false, err
	}
	if _, err := f.WriteAt(table, 0); err != nil {
		return 0, false, err
	}
	return crc32.Update(0, crcTable, table), true, nil
}

// errProbeBudget stops buildWhole (see lookupProbeBudget).
var errProbeBudget = errors.New("lookup table: probe budget spent")

// lookupWindows is the leaves sorted into windows of slots by home slot:
// window k holds the leaves whose home slot is in [k*size, (k+1)*size), in
// leaf order, as records of lookupBucketRecord bytes in a scratch file.
type lookupWindows struct {
	f       *os.File
	slots   uint64
	size    uint64   // slots per window
	count   uint64   // windows
	starts  []uint64 // record index of each window's first leaf, and the end
	buf     []byte
	counts  []uint32     // per slot of the loaded window: leaves whose home it is (see load)
	entries []lookupLeaf // the loaded window's leaves by home slot, then leaf index
	loaded  []lookupLeaf
}

// lookupBucketRecord is a leaf in a window: hash, kvs offset, leaf index.
const lookupBucketRecord = 24

type lookupLeaf struct{ home, leaf, h, off uint64 }

// maxLookupWindows bounds the number of windows, and so the buffers that
// sort the leaves into them: larger tables get larger windows.
const maxLookupWindows = 256

// lookupPartitionBuffer is the memory the buffers that sort the leaves into
// windows share (4 MiB, half the largest table built whole): the fewer the
// windows, the larger each buffer and the fewer the writes to the scratch
// file, whose cost on this path is per call more than per byte. A variable
// for tests, which make the buffers fill.
var lookupPartitionBuffer = uint64(4 << 20)

// partition sorts the n recorded leaves into windows, in two passes over the
// scratch file: one counts each window's leaves, one writes them.
func (b *lookupBuilder) partition(n, slots uint64) (*lookupWindows, error) {
	size := max(lookupWindow, (slots+maxLookupWindows-1)/maxLookupWindows)
	w := &lookupWindows{slots: slots, size: size, count: (slots + size - 1) / size}
	w.starts = make([]uint64, w.count+1)
	if err := b.scan(n, func(_, h, _ uint64) error {
		w.starts[lookupHome(h, slots)/size+1]++
		return nil
	}); err != nil {
		return nil, err
	}
	for k := uint64(1); k <= w.count; k++ {
		w.starts[k] += w.starts[k-1]
	}
	var err error
	if w.f, err = os.OpenFile(b.f.Name()+".windows", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	// Each window's leaves go through a buffer of their own, flushed with
	// one write when full: lookupPartitionBuffer bytes in all, but at
	// least about 4 KiB each, and no more than the largest window holds.
	most := uint64(1)
	for k := uint64(0); k < w.count; k++ {
		most = max(most, w.starts[k+1]-w.starts[k])
	}
	bufRecords := min(most, max(170, lookupPartitionBuffer/lookupBucketRecord/w.count))
	bufs := make([]byte, w.count*bufRecords*lookupBucketRecord)
	used := make([]uint64, w.count)
	pos := append([]uint64(nil), w.starts[:w.count]...)
	flush := func(k uint64) error {
		if used[k] == 0 {
			return nil
		}
		b := bufs[k*bufRecords*lookupBucketRecord:][:used[k]*lookupBucketRecord]
		if _, err := w.f.WriteAt(b, int64(pos[k]*lookupBucketRecord)); err != nil {
			return err
		}
		pos[k] += used[k]
		used[k] = 0
		return nil
	}
	err = b.scan(n, func(i, h, off uint64) error {
		k := lookupHome(h, slots) / size
		rec := bufs[(k*bufRecords+used[k])*lookupBucketRecord:]
		binary.LittleEndian.PutUint64(rec, h)
		binary.LittleEndian.PutUint64(rec[8:], off)
		binary.LittleEndian.PutUint64(rec[16:], i)
		if used[k]++; used[k] == bufRecords {
			return flush(k)
		}
		return nil
	})
	for k := uint64(0); k < w.count && err == nil; k++ {
		err = flush(k)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// close closes and removes the windows' scratch file.
func (w *lookupWindows) close() {
	if w.f != nil {
		_ = w.f.Close()
		_ = os.Remove(w.f.Name())
		w.f = nil
	}
}

// load reads window k: its counts or, with entries set, its entries,
// ordered by home slot, then by leaf index (counts are then spent).
func (w *lookupWindows) load(k uint64, entries bool) error {
	lo, n := k*w.size, w.starts[k+1]-w.starts[k]
	w.buf = resize(w.buf, n*lookupBucketRecord)
	buf := w.buf
	if _, err := w.f.ReadAt(buf, int64(w.starts[k]*lookupBucketRecord)); err != nil {
		return fmt.Errorf("read key hashes: %w", err)
	}
	w.counts = resize(w.counts, w.size)
	clear(w.counts)
	w.loaded = w.loaded[:0]
	if entries {
		w.loaded = resize(w.loaded, n)[:0]
	}
	for r := 0; r < len(buf); r += lookupBucketRecord {
		h := binary.LittleEndian.Uint64(buf[r:])
		l := lookupLeaf{home: lookupHome(h, w.slots), h: h, off: binary.LittleEndian.Uint64(buf[r+8:]), leaf: binary.LittleEndian.Uint64(buf[r+16:])}
		w.counts[l.home-lo]++
		if entries {
			w.loaded = append(w.loaded, l)
		}
	}
	if !entries {
		return nil
	}
	// a counting sort, stable: a window holds its leaves in leaf order
	w.entries = resize(w.entries, uint64(len(w.loaded)))
	sum := uint32(0)
	for i, c := range w.counts {
		w.counts[i] = sum
		sum += c
	}
	for _, l := range w.loaded { // counts become the slots' ends in entries
		w.entries[w.counts[l.home-lo]] = l
		w.counts[l.home-lo]++
	}
	return nil
}

// resize returns s with length n, reusing its array when large enough;
// a new one has room to spare, as windows differ a little in size.
func resize[T any](s []T, n uint64) []T {
	if uint64(cap(s)) < n {
		return make([]T, n, n+n/4+64)
	}
	return s[:n]
}

// lastEmptySlot returns a slot that the table leaves empty. Which slots end
// up occupied does not depend on the order of insertion: going over the
// slots from 0 with a count of leaves still looking for a slot, a slot is
// occupied when the count (plus the leaves whose home it is) is positive.
// Leaves still looking at the end wrap around and take the first slots
// this pass found empty, one each; the last slot it found empty stays so,
// since at least one slot does (the table is at most two-thirds full).
func (w *lookupWindows) lastEmptySlot() (uint64, error) {
	carry, last, found := uint64(0), uint64(0), false
	for k := uint64(0); k < w.count; k++ {
		if err := w.load(k, false); err != nil {
			return 0, err
		}
		lo := k * w.size
		for i, c := range w.counts[:min(w.size, w.slots-lo)] {
			if carry += uint64(c); carry > 0 {
				carry--
			} else {
				last, found = lo+uint64(i), true
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("no empty slot among %d", w.slots)
	}
	return last, nil
}

// lookupHeap is a min-heap of leaves by leaf index. Not container/heap,
// whose interface boxes every leaf pushed: two allocations per key, and
// BenchmarkLookupBuild/windows took 225-233 ms/op with it against 128-131.
type lookupHeap []lookupLeaf

func (h *lookupHeap) push(l lookupLeaf) {
	*h = append(*h, l)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].leaf <= a[i].leaf {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *lookupHeap) pop() lookupLeaf {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l].leaf < a[m].leaf {
			m = l
		}
		if r < len(a) && a[r].leaf < a[m].leaf {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// fileCRC returns the CRC32C of the first size bytes of f.
func fileCRC(f *os.File, size uint64) (uint32, error) {
	r := io.NewSectionReader(f, 0, int64(size))
	crc := uint32(0)
	buf := make([]byte, 256<<10)
	for size > 0 {
		k := min(uint64(len(buf)), size)
		if _, err := io.ReadFull(r, buf[:k]); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, crcTable, buf[:k])
		size -= k
	}
	return crc, nil
}

// close closes and removes the scratch file.
func (b *lookupBuilder) close() error {
	if b.f == nil {
		return nil
	}
	name := b.f.Name()
	err := b.f.Close()
	b.f = nil
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}
