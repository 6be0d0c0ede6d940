package snapshot

import (
	"encoding/binary"
	"hash/crc32"
)

// The snapshot format, defined here and nowhere else; the golden test pins
// its bytes. Everything on disk is little-endian except the key prefix, which
// is stored as raw key bytes so that reading it big-endian orders like the
// key.
//
// A snapshot of one tree is a directory holding six files:
//
//	meta      fixed MetaSize bytes: identity, counts, root hash, and the
//	          length and CRC32C of each of the five data files
//	leaves    LeafCount  records of RecordSize bytes, in key order
//	branches  BranchCount records of RecordSize bytes, in post-order
//	kvs       for each leaf in leaf order: an entry header (format
//	          version 2), the key bytes, then the value bytes
//	index     the key prefix of every IndexStride-th leaf
//	lookup    a hash table from keys to leaf indices (format version 2)
//
// Format version 1 is version 2 without the lookup file and without the kvs
// entry headers: its meta has zero where version 2 records the lookup file,
// and no lookup file exists. This package reads both and writes version 2.
//
// The data files have no header: the meta file carries their format version,
// lengths and checksums, so that every record sits at a multiple of
// RecordSize from the start of its mapping and never straddles a cache line
// more than it must.
//
// # meta (MetaSize = 192 bytes)
//
//	offset  size  field
//	     0     8  magic, MetaMagic (the ASCII bytes "MEMIAVLS")
//	     8     4  format version, FormatVersion
//	    12     4  reserved, zero
//	    16     8  tree version (int64, >= 0)
//	    24     8  leaf count (<= MaxLeaves)
//	    32     8  branch count (leaf count - 1, or 0 for the empty tree)
//	    40    32  root hash (sha256("") for the empty tree)
//	    72     8  length of leaves   |  80  4  CRC32C of leaves   |  84  4  reserved, zero
//	    88     8  length of branches |  96  4  CRC32C of branches |  100 4  reserved, zero
//	   104     8  length of kvs      | 112  4  CRC32C of kvs      |  116 4  reserved, zero
//	   120     8  length of index    | 128  4  CRC32C of index    |  132 4  reserved, zero
//	   136     8  length of lookup   | 144  4  CRC32C of lookup   |  148 4  reserved, zero
//	   152    36  reserved, zero
//	   188     4  CRC32C of bytes [0, 188)
//
// # leaves (one RecordSize record per leaf; leaf i holds the i-th smallest key)
//
//	offset  size  field
//	     0    32  node hash
//	    32     8  node version (int64, 1 <= version <= tree version)
//	    40     8  offset of the key in kvs; the value follows the key
//	    48     4  key length
//	    52     4  value length
//	    56     8  key prefix: the first 8 bytes of the key, zero padded
//
// Read big-endian, the key prefix is a uint64 that orders like the key
// whenever two prefixes differ; equal prefixes need the full keys.
//
// # kvs (one entry per leaf, in leaf order)
//
//	offset  size  field
//	     0     4  key length (uint32, equal to the leaf record's)
//	     4     4  value length (uint32, equal to the leaf record's)
//	     8     -  key bytes, then value bytes
//
// The header (KVHeaderSize bytes) lets a point read through the lookup table
// take the lengths from the key's own cache line instead of the leaf record.
// Entries are contiguous: leaf 0's starts at offset 0, each starts where the
// previous one's value ends, and kvs ends with the last value. The leaf
// record's kvs offset points at the key, just after the header. Format
// version 1 has no headers: there the entries are the key and value bytes.
//
// # branches (one RecordSize record per inner node, in post-order)
//
//	offset  size  field
//	     0    32  node hash
//	    32     8  node version (int64, 1 <= version <= tree version, not
//	              older than either child's)
//	    40     5  size: number of leaves under the node (uint40)
//	    45     5  first leaf: index of the leftmost leaf under the node (uint40)
//	    50     5  key leaf: index of the leftmost leaf of the right subtree,
//	              whose key is the branch key (uint40)
//	    55     1  height (leaves have height 0)
//	    56     8  reserved, zero
//
// A branch at index i with size s, first leaf f and key leaf k has a left
// subtree of k-f leaves and a right subtree of f+s-k leaves. In post-order
// the right subtree's f+s-k-1 branches come just before i, so:
//
//	right child = leaf k  if f+s-k == 1, else branch i-1
//	left child  = leaf f  if k-f == 1,   else branch i-(f+s-k)
//
// # index (IndexEntrySize bytes per IndexStride leaves)
//
// Entry b is the key prefix of leaf b*IndexStride, stored like the prefix in
// the leaf record; there are ceil(LeafCount/IndexStride) entries. A point
// lookup binary-searches this small array first (it stays in the CPU caches)
// to narrow the search to the one or two runs of IndexStride leaves, a single
// 4 KiB page of records, whose prefixes can hold the key.
//
// # lookup (LookupEntrySize bytes per slot; format version 2)
//
// An open-addressing hash table with linear probing over lookupSlots(n)
// slots: 0 for the empty tree, else max(8, n + n/2 + 1), so at most
// two-thirds full. A key's hash h is the 64-bit xxHash (XXH64, seed 0) of the
// key bytes; its home slot is ((h mod 2^40) * slots) div 2^40, its low 40
// bits scaled to the table. A slot is all zero when empty, else
//
//	offset  size  field
//	     0     8  little-endian: bits 0-39 leaf index + 1; bits 40-63 the
//	              top 24 bits of the key's hash (a tag that skips most slots
//	              of other keys without reading their keys)
//	     8     8  offset of the key in kvs (the leaf record's field), just
//	              after its entry header
//
// The writer inserts the leaves in leaf order, each in the first empty slot
// from its home slot on, wrapping at the end, so the bytes are a function of
// the keys. A point read hashes the key and scans slots from the home slot to
// the first empty one; for a slot whose tag matches it reads the kvs entry at
// the slot's offset (header, key, value) and never the leaf record. The hash
// has no seed, so keys can be chosen to collide into one long run of
// occupied slots: a reader gives up after a bounded number of slots and
// binary-searches the leaves, which the format allows (the table is only an
// index of them).
//
// The root is the last branch when there is one, leaf 0 for a tree of one
// leaf, and there is none for the empty tree. A tree holds at most MaxLeaves
// leaves because the leaf indices are 40-bit.
const (
	// MetaMagic opens every meta file.
	MetaMagic uint64 = 0x534C5641494D454D
	// FormatVersion is the version of the format described above, the one
	// the Writer writes.
	FormatVersion uint32 = 0x00000002
	// FormatVersionNoLookup is the previous version, without the lookup
	// file; Open reads it.
	FormatVersionNoLookup uint32 = 0x00000001

	// MetaSize is the size of the meta file.
	MetaSize = 192
	// RecordSize is the size of a leaf or branch record.
	RecordSize = 64
	// HashSize is the size of a node hash.
	HashSize = 32
	// MaxLeaves is the largest number of leaves a snapshot can hold.
	MaxLeaves = 1<<40 - 1

	// File names inside a snapshot directory.
	FileMeta     = "meta"
	FileLeaves   = "leaves"
	FileBranches = "branches"
	FileKVs      = "kvs"
	FileIndex    = "index"
	FileLookup   = "lookup"

	// IndexStride is the number of leaves per index entry: one page of
	// leaf records.
	IndexStride = 64
	// IndexEntrySize is the size of an index entry.
	IndexEntrySize = 8
	// KVHeaderSize is the size of the header of a kvs entry (format
	// version 2).
	KVHeaderSize = 8
	// LookupEntrySize is the size of a lookup table slot.
	LookupEntrySize = 16
)

// Field offsets inside the meta file.
const (
	metaOffMagic         = 0
	metaOffFormat        = 8
	metaOffReserved0     = 12
	metaOffTreeVersion   = 16
	metaOffLeafCount     = 24
	metaOffBranchCount   = 32
	metaOffRootHash      = 40
	metaOffFiles         = 72 // metaDataFileCount entries of metaFileEntrySize bytes
	metaFileEntrySize    = 16 // length u64 | crc u32 | reserved u32
	metaOffReservedTail  = 152
	metaOffCRC           = 188
	metaFileIndexLeaves  = 0
	metaFileIndexBranch  = 1
	metaFileIndexKVs     = 2
	metaFileIndexIndex   = 3
	metaFileIndexLookup  = 4
	metaDataFileCount    = 5
	metaReservedTailSize = metaOffCRC - metaOffReservedTail
)

// Field offsets inside a leaf record.
const (
	leafOffHash    = 0
	leafOffVersion = 32
	leafOffKVOff   = 40
	leafOffKeyLen  = 48
	leafOffValLen  = 52
	leafOffPrefix  = 56
)

// Field offsets inside a branch record.
const (
	branchOffHash      = 0
	branchOffVersion   = 32
	branchOffSize      = 40
	branchOffFirstLeaf = 45
	branchOffKeyLeaf   = 50
	branchOffHeight    = 55
	branchOffReserved  = 56
)

const uint40Mask = 1<<40 - 1

// crcTable is the Castagnoli table used for every checksum in a snapshot.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// dataFileNames lists the data files in the order of their meta entries.
var dataFileNames = [metaDataFileCount]string{FileLeaves, FileBranches, FileKVs, FileIndex, FileLookup}

// dataFiles returns how many data files a snapshot of the format version
// has: the first ones of dataFileNames.
func dataFiles(formatVersion uint32) int {
	if formatVersion == FormatVersionNoLookup {
		return metaDataFileCount - 1
	}
	return metaDataFileCount
}

// indexLen returns the length of the index file of a tree of n leaves.
func indexLen(n uint64) uint64 { return (n + IndexStride - 1) / IndexStride * IndexEntrySize }

// fileInfo is the length and checksum of one data file as recorded in meta.
type fileInfo struct {
	length uint64
	crc    uint32
}

// meta is the decoded meta file.
type meta struct {
	formatVersion uint32
	treeVersion   int64
	leafCount     uint64
	branchCount   uint64
	rootHash      [HashSize]byte
	files         [metaDataFileCount]fileInfo
}

// encode returns the MetaSize bytes of m, checksum included.
func (m *meta) encode() [MetaSize]byte {
	var b [MetaSize]byte
	binary.LittleEndian.PutUint64(b[metaOffMagic:], MetaMagic)
	binary.LittleEndian.PutUint32(b[metaOffFormat:], m.formatVersion)
	binary.LittleEndian.PutUint64(b[metaOffTreeVersion:], uint64(m.treeVersion))
	binary.LittleEndian.PutUint64(b[metaOffLeafCount:], m.leafCount)
	binary.LittleEndian.PutUint64(b[metaOffBranchCount:], m.branchCount)
	copy(b[metaOffRootHash:], m.rootHash[:])
	for i, f := range m.files {
		off := metaOffFiles + i*metaFileEntrySize
		binary.LittleEndian.PutUint64(b[off:], f.length)
		binary.LittleEndian.PutUint32(b[off+8:], f.crc)
	}
	binary.LittleEndian.PutUint32(b[metaOffCRC:], crc32.Checksum(b[:metaOffCRC], crcTable))
	return b
}

// decodeMetaFields reads the fields of a MetaSize meta file. It checks
// nothing; see Open for the checks.
func decodeMetaFields(b *[MetaSize]byte) meta {
	var m meta
	m.formatVersion = binary.LittleEndian.Uint32(b[metaOffFormat:])
	m.treeVersion = int64(binary.LittleEndian.Uint64(b[metaOffTreeVersion:]))
	m.leafCount = binary.LittleEndian.Uint64(b[metaOffLeafCount:])
	m.branchCount = binary.LittleEndian.Uint64(b[metaOffBranchCount:])
	copy(m.rootHash[:], b[metaOffRootHash:])
	for i := range m.files {
		off := metaOffFiles + i*metaFileEntrySize
		m.files[i].length = binary.LittleEndian.Uint64(b[off:])
		m.files[i].crc = binary.LittleEndian.Uint32(b[off+8:])
	}
	return m
}

// keyPrefix returns the first 8 bytes of key, zero padded, read big-endian.
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var p [8]byte
	copy(p[:], key)
	return binary.BigEndian.Uint64(p[:])
}

// putLeaf encodes a leaf record into rec.
func putLeaf(rec *[RecordSize]byte, hash []byte, version int64, kvOff uint64, keyLen, valLen uint32, key []byte) {
	copy(rec[leafOffHash:leafOffHash+HashSize], hash)
	binary.LittleEndian.PutUint64(rec[leafOffVersion:], uint64(version))
	binary.LittleEndian.PutUint64(rec[leafOffKVOff:], kvOff)
	binary.LittleEndian.PutUint32(rec[leafOffKeyLen:], keyLen)
	binary.LittleEndian.PutUint32(rec[leafOffValLen:], valLen)
	binary.BigEndian.PutUint64(rec[leafOffPrefix:], keyPrefix(key))
}

// putBranch encodes a branch record into rec.
func putBranch(rec *[RecordSize]byte, hash []byte, version int64, size, firstLeaf, keyLeaf uint64, height uint8) {
	copy(rec[branchOffHash:branchOffHash+HashSize], hash)
	binary.LittleEndian.PutUint64(rec[branchOffVersion:], uint64(version))
	putUint40(rec[branchOffSize:], size)
	putUint40(rec[branchOffFirstLeaf:], firstLeaf)
	putUint40(rec[branchOffKeyLeaf:], keyLeaf)
	rec[branchOffHeight] = height
	binary.LittleEndian.PutUint64(rec[branchOffReserved:], 0)
}

func putUint40(b []byte, v uint64) {
	_ = b[4]
	b[0] = byte(v)
	b[1] = byte(v >> 8)
	b[2] = byte(v >> 16)
	b[3] = byte(v >> 24)
	b[4] = byte(v >> 32)
}

// uint40At reads the uint40 at b[off:off+5]; b must extend 3 bytes past it,
// which holds for every uint40 field of a branch record.
func uint40At(rec []byte, off int) uint64 {
	return binary.LittleEndian.Uint64(rec[off:off+8]) & uint40Mask
}

// crcCombine returns the checksum (crcTable's) of the bytes a then b from
// the checksums of a and of b and the length of b, without the bytes: the
// method of zlib's crc32_combine, which applies the effect of lenB zero
// bytes to crcA as a matrix over GF(2), squared for each bit of lenB.
func crcCombine(crcA, crcB uint32, lenB uint64) uint32 {
	if lenB == 0 {
		return crcA
	}
	var even, odd [32]uint32 // operators for 2^k zero bits
	odd[0] = crc32.Castagnoli
	for n, row := 1, uint32(1); n < 32; n, row = n+1, row<<1 {
		odd[n] = row
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	for {
		gf2Square(&even, &odd) // the first round: one zero byte
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
		gf2Square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}
