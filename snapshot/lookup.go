package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"os"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"
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

// lookupEntry returns the slot entry for leaf i of a key with hash h.
func lookupEntry(h, i uint64) uint64 { return h&^uint40Mask | (i + 1) }

// Lookup finds key with the lookup table: it returns the key's leaf index
// and value and true, or false when the tree does not hold the key. It reads
// the table slots from the key's home slot to the first empty one and the kvs
// entry of each slot whose tag matches (almost always only the key's own), so
// a present key costs one slot and one kvs entry, an absent one a slot. It
// does not allocate; the value points into the mapping. A snapshot of format
// version 1 has no lookup table: Lookup then binary-searches the leaves.
func (s *Snapshot) Lookup(key []byte) (idx uint64, value []byte, found bool, err error) {
	if s.lookup == nil {
		if s.leafCount == 0 {
			return 0, nil, false, nil
		}
		i, found, err := s.Search(key, 0, s.leafCount)
		if err != nil || !found {
			return 0, nil, false, err
		}
		v, err := s.LeafValue(i)
		return i, v, err == nil, err
	}
	h := lookupHash(key)
	slots := uint64(len(s.lookup)) / LookupEntrySize
	tag := h &^ uint40Mask
	slot := lookupHome(h, slots)
	kvLen := uint64(len(s.kvs))
	// Every slot is visited at most once: a table with no empty slot, which
	// Verify rejects, still ends the probe.
	for range slots {
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
// that the table holds one entry per leaf, and that probing each leaf's key from its
// home slot reaches that leaf's entry before an empty slot.
func (s *Snapshot) verifyLookup() error {
	if s.lookup == nil {
		return nil
	}
	slots := uint64(len(s.lookup)) / LookupEntrySize
	used := uint64(0)
	for slot := uint64(0); slot < slots; slot++ {
		b := s.lookup[slot*LookupEntrySize:]
		e := binary.LittleEndian.Uint64(b)
		if e == 0 {
			if binary.LittleEndian.Uint64(b[8:]) != 0 {
				return s.lookupError(slot, "empty slot with a kvs offset")
			}
			continue
		}
		if i := e&uint40Mask - 1; i >= s.leafCount {
			return s.lookupError(slot, "leaf %d of %d leaves", i, s.leafCount)
		}
		used++
	}
	if used != s.leafCount {
		return s.lookupError(0, "%d entries for %d leaves", used, s.leafCount)
	}
	for i := uint64(0); i < s.leafCount; i++ {
		key, err := s.LeafKey(i)
		if err != nil {
			return err
		}
		h := lookupHash(key)
		want := lookupEntry(h, i)
		home := lookupHome(h, slots)
		slot := home
		for n := uint64(0); ; n++ {
			e := binary.LittleEndian.Uint64(s.lookup[slot*LookupEntrySize:])
			if e == want {
				break
			}
			if e == 0 || n == slots {
				return s.lookupError(home, "no entry for leaf %d (key %x) from its home slot", i, key)
			}
			slot = lookupNext(slot, slots)
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
// memory then stays bounded whatever the number of leaves.
type lookupBuilder struct {
	f       *os.File
	buf     *bufio.Writer
	scratch [lookupBuildRecord]byte
}

// lookupBuildRecord is the size of a leaf's record in the scratch file: the
// key's hash and its kvs offset.
const lookupBuildRecord = 16

func newLookupBuilder(path string) (*lookupBuilder, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &lookupBuilder{f: f, buf: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (b *lookupBuilder) add(key []byte, kvOff uint64) error {
	binary.LittleEndian.PutUint64(b.scratch[:], lookupHash(key))
	binary.LittleEndian.PutUint64(b.scratch[8:], kvOff)
	_, err := b.buf.Write(b.scratch[:])
	return err
}

// build writes the table of n leaves into f through a shared mapping, then
// checksums it: f ends up lookupLen(n) bytes long, not yet synced.
func (b *lookupBuilder) build(f *os.File, n uint64) (crc uint32, err error) {
	if err := b.buf.Flush(); err != nil {
		return 0, err
	}
	size := lookupLen(n)
	if size == 0 {
		return 0, nil
	}
	// Write the table's zeros through the file first rather than
	// extending it with a hole: a full disk then fails a write with an
	// error here, where storing into a mapped hole would raise SIGBUS.
	if err := writeZeros(f, size); err != nil {
		return 0, err
	}
	table, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap: %w", err)
	}
	defer func() {
		if uerr := unix.Munmap(table); uerr != nil && err == nil {
			err = fmt.Errorf("munmap: %w", uerr)
		}
	}()
	// Fault the whole table in with one call: the inserts write pages in
	// random order, and a write fault per page costs more than the
	// inserts. Advisory; kernels before 5.14 fault page by page.
	_ = unix.Madvise(table, unix.MADV_POPULATE_WRITE)
	slots := size / LookupEntrySize
	r := bufio.NewReaderSize(io.NewSectionReader(b.f, 0, int64(n*lookupBuildRecord)), 64<<10)
	var e [lookupBuildRecord]byte
	for i := uint64(0); i < n; i++ {
		if _, err := io.ReadFull(r, e[:]); err != nil {
			return 0, fmt.Errorf("read key hashes: %w", err)
		}
		h := binary.LittleEndian.Uint64(e[:])
		slot := lookupHome(h, slots)
		for binary.LittleEndian.Uint64(table[slot*LookupEntrySize:]) != 0 {
			slot = lookupNext(slot, slots)
		}
		binary.LittleEndian.PutUint64(table[slot*LookupEntrySize:], lookupEntry(h, i))
		copy(table[slot*LookupEntrySize+8:slot*LookupEntrySize+16], e[8:])
	}
	return crc32.Update(0, crcTable, table), nil
}

// writeZeros writes size zero bytes to f from its start.
func writeZeros(f *os.File, size uint64) error {
	zeros := make([]byte, min(size, 1<<20))
	for off := uint64(0); off < size; {
		n, err := f.WriteAt(zeros[:min(uint64(len(zeros)), size-off)], int64(off))
		if err != nil {
			return err
		}
		off += uint64(n)
	}
	return nil
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
