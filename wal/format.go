package wal

// This file is the single definition of the WAL's on-disk format: the segment
// header, the record frame and the entry encoding. Every constant of the
// format lives here; format_test.go pins the bytes with golden files.
//
// All fixed-width integers are little endian. "uvarint" is the unsigned
// varint of encoding/binary (7 bits per byte, low group first) and must be
// minimal: a decoder rejects an over-long encoding such as 0x80 0x00 for 0,
// so every accepted body has exactly one encoding.
//
// Segment file (named %020d.wal after the version of its first record):
//
//	offset 0                          20
//	       +--------------------------+----------+----------+-- ...
//	       | segment header           | record 1 | record 2 |
//	       +--------------------------+----------+----------+-- ...
//
// Segment header (segmentHeaderSize = 20 bytes):
//
//	 0       4       6       8                      16      20
//	 +-------+-------+-------+----------------------+-------+
//	 | magic | fmt   | flags | base version         | hcrc  |
//	 | u32   | u16   | u16   | u64                  | u32   |
//	 +-------+-------+-------+----------------------+-------+
//	 magic = segmentMagic (0x4C41574D, the bytes "MWAL")
//	 fmt   = FormatVersion (2); version 1 is read too
//	 flags = how the segment's records were appended, exactly one bit set:
//	         flagStrictAppends (0x0001): synchronously under SyncEveryCommit,
//	         each record written only once the one before it was durable;
//	         flagRelaxedAppends (0x0002): under another policy or through an
//	         asynchronous queue. Format version 1 has zero here (a reserved
//	         field): how its records were appended is not recorded, and
//	         an open reads it as relaxed appends leave it. Other bits are a later
//	         build's (ErrUnsupportedFormat); zero or both bits in version 2
//	         are corruption.
//	 base  = version of the first record; equals the number in the file name
//	 hcrc  = CRC32C (Castagnoli) of bytes 0..16
//
// A writer appends only to a segment whose flags are its own: after an open
// with the other kind of appends, its first record starts a new segment.
//
// Record (frameHeaderSize = 12 bytes of frame, then the body):
//
//	 0        4        8        12                   12+n
//	 +--------+--------+--------+--------------------+
//	 | n      | lcrc   | bcrc   | body (n bytes)     |
//	 | u32    | u32    | u32    |                    |
//	 +--------+--------+--------+--------------------+
//	 n    = body length, minBodySize <= n <= MaxEntrySize
//	 lcrc = CRC32C of the 4 bytes of n. It lets a reader trust n before it
//	        has the body, so a damaged length is reported as corruption and
//	        not mistaken for a record cut short by a crash.
//	 bcrc = CRC32C of the body.
//
// Body (one Entry):
//
//	 version      u64            >= 1 (the entry's version; also read alone
//	                             when a reader skips records)
//	 nChangeSets  uvarint
//	 nChangeSets times:
//	   nameLen    uvarint, name bytes
//	   nPairs     uvarint
//	   nPairs times:
//	     op       u8             opSet (0x00) or opDelete (0x01)
//	     keyLen   uvarint, key bytes
//	     (opSet only) valueLen uvarint, value bytes
//	 nAdded       uvarint, then nAdded times:   len uvarint, store name
//	 nRenamed     uvarint, then nRenamed times: len uvarint, old name,
//	                                            len uvarint, new name
//	 nDeleted     uvarint, then nDeleted times: len uvarint, store name
//
// A body must be consumed exactly; trailing bytes are corruption.
//
// Set versus delete: the op byte, not the value, says whether a pair is a
// delete. A delete carries no value bytes and decodes with a nil Value. A set
// always carries a value length; a set of an empty value (valueLen 0) decodes
// to a non-nil empty Value, so "set to empty" and "delete" never collapse.
// A set whose Value is nil is encoded as a set of the empty value.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"strings"
)

const (
	// segmentMagic opens every segment file.
	segmentMagic uint32 = 0x4C41574D
	// FormatVersion is the segment format this package writes. It reads
	// it and formatVersion1 (without the header's flags); segments with
	// another format version are refused with ErrUnsupportedFormat.
	FormatVersion  uint16 = 0x0002
	formatVersion1 uint16 = 0x0001

	// flagStrictAppends and flagRelaxedAppends are the segment header's
	// flags (see above).
	flagStrictAppends  uint16 = 0x0001
	flagRelaxedAppends uint16 = 0x0002

	segmentHeaderSize = 20
	frameHeaderSize   = 12

	// minBodySize is the smallest valid body: the version and four zero
	// counts.
	minBodySize = 8 + 4

	// MaxEntrySize is the largest encoded entry body accepted by Append
	// and by readers.
	MaxEntrySize = 1 << 30

	opSet    byte = 0x00
	opDelete byte = 0x01

	segmentExt        = ".wal"
	tmpExt            = ".tmp"
	segmentNameDigits = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// segmentName returns the file name of the segment whose first record has
// version base.
func segmentName(base int64) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, base, segmentExt)
}

// IsSegmentFile reports whether name is the file name of a log segment, or
// of one being created (its temporary name), so that other code can tell a
// log directory's own files from anything else in it.
func IsSegmentFile(name string) bool {
	_, ok := parseSegmentName(strings.TrimSuffix(name, tmpExt))
	return ok
}

// parseSegmentName returns the base version encoded in a segment file name.
func parseSegmentName(name string) (int64, bool) {
	if len(name) != segmentNameDigits+len(segmentExt) || name[segmentNameDigits:] != segmentExt {
		return 0, false
	}
	var v uint64
	for i := 0; i < segmentNameDigits; i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxInt64-uint64(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v == 0 {
		return 0, false
	}
	return int64(v), true
}

// appendSegmentHeader appends the header of a segment starting at base
// with the given flags: format version 1 for 0 (which only tests write),
// FormatVersion otherwise.
func appendSegmentHeader(dst []byte, base int64, flags uint16) []byte {
	start := len(dst)
	v := FormatVersion
	if flags == 0 {
		v = formatVersion1
	}
	dst = binary.LittleEndian.AppendUint32(dst, segmentMagic)
	dst = binary.LittleEndian.AppendUint16(dst, v)
	dst = binary.LittleEndian.AppendUint16(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(base))
	return binary.LittleEndian.AppendUint32(dst, crc32c(dst[start:start+16]))
}

// parseSegmentHeader checks a segment header and returns its base version
// and flags. The error is a reason for a CorruptionError, or wraps
// ErrUnsupportedFormat.
func parseSegmentHeader(b []byte) (int64, uint16, error) {
	if len(b) < segmentHeaderSize {
		return 0, 0, fmt.Errorf("segment header is %d bytes, want %d", len(b), segmentHeaderSize)
	}
	if got := binary.LittleEndian.Uint32(b[16:20]); got != crc32c(b[:16]) {
		return 0, 0, fmt.Errorf("segment header checksum mismatch")
	}
	if m := binary.LittleEndian.Uint32(b[0:4]); m != segmentMagic {
		return 0, 0, fmt.Errorf("bad magic %#08x, want %#08x", m, segmentMagic)
	}
	v := binary.LittleEndian.Uint16(b[4:6])
	flags := binary.LittleEndian.Uint16(b[6:8])
	switch v {
	case FormatVersion:
		if flags&^(flagStrictAppends|flagRelaxedAppends) != 0 {
			// bits this build does not know: a later build's
			return 0, 0, fmt.Errorf("%w: segment header flags %#04x, this build knows %#04x and %#04x", ErrUnsupportedFormat, flags, flagStrictAppends, flagRelaxedAppends)
		}
		if flags != flagStrictAppends && flags != flagRelaxedAppends {
			return 0, 0, fmt.Errorf("header flags are %#04x, want %#04x or %#04x", flags, flagStrictAppends, flagRelaxedAppends)
		}
	case formatVersion1:
		if flags != 0 {
			return 0, 0, fmt.Errorf("reserved header field is %#04x, want 0", flags)
		}
	default:
		return 0, 0, fmt.Errorf("%w: segment format version %d, this build reads %d and %d", ErrUnsupportedFormat, v, formatVersion1, FormatVersion)
	}
	base := binary.LittleEndian.Uint64(b[8:16])
	if base == 0 || base > math.MaxInt64 {
		return 0, 0, fmt.Errorf("bad base version %d", base)
	}
	return int64(base), flags, nil
}

// frameHeader is a decoded record frame header.
type frameHeader struct {
	n    uint32 // body length
	bcrc uint32 // CRC32C of the body
}

// parseFrameHeader decodes the 12-byte frame header. ok is false when the
// length check fails or the length is out of range.
func parseFrameHeader(b []byte) (h frameHeader, ok bool) {
	n := binary.LittleEndian.Uint32(b[0:4])
	if binary.LittleEndian.Uint32(b[4:8]) != crc32c(b[0:4]) {
		return h, false
	}
	if n < minBodySize || n > MaxEntrySize {
		return h, false
	}
	return frameHeader{n: n, bcrc: binary.LittleEndian.Uint32(b[8:12])}, true
}

// putFrameHeader fills the frame header in front of body.
func putFrameHeader(hdr []byte, body []byte) {
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(hdr[4:8], crc32c(hdr[0:4]))
	binary.LittleEndian.PutUint32(hdr[8:12], crc32c(body))
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func bytesLen(b []byte) int { return uvarintLen(uint64(len(b))) + len(b) }

// EncodedSize returns the length of e's encoded body, as AppendEntry would
// produce it (without the record frame).
func EncodedSize(e Entry) int {
	n := 8 + uvarintLen(uint64(len(e.ChangeSets)))
	for i := range e.ChangeSets {
		cs := &e.ChangeSets[i]
		n += uvarintLen(uint64(len(cs.Name))) + len(cs.Name)
		n += uvarintLen(uint64(len(cs.Pairs)))
		for j := range cs.Pairs {
			p := &cs.Pairs[j]
			n += 1 + bytesLen(p.Key)
			if !p.Delete {
				n += bytesLen(p.Value)
			}
		}
	}
	u := &e.Upgrades
	n += uvarintLen(uint64(len(u.Added)))
	for _, s := range u.Added {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	n += uvarintLen(uint64(len(u.Renamed)))
	for _, r := range u.Renamed {
		n += uvarintLen(uint64(len(r.OldName))) + len(r.OldName)
		n += uvarintLen(uint64(len(r.NewName))) + len(r.NewName)
	}
	n += uvarintLen(uint64(len(u.Deleted)))
	for _, s := range u.Deleted {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendEntry appends the encoded body of e to dst and returns the extended
// slice. It fails with ErrInvalidEntry for a version below 1 and with
// ErrEntryTooLarge when the body would exceed MaxEntrySize. A delete's Value
// is not encoded; a set with a nil Value is encoded as a set of the empty
// value.
func AppendEntry(dst []byte, e Entry) ([]byte, error) {
	if e.Version < 1 {
		return dst, fmt.Errorf("%w: version %d", ErrInvalidEntry, e.Version)
	}
	size := EncodedSize(e)
	if size > MaxEntrySize {
		return dst, fmt.Errorf("%w: version %d encodes to %d bytes, limit %d", ErrEntryTooLarge, e.Version, size, MaxEntrySize)
	}
	if cap(dst)-len(dst) < size {
		grown := make([]byte, len(dst), len(dst)+size)
		copy(grown, dst)
		dst = grown
	}
	return appendBody(dst, &e), nil
}

func appendBody(dst []byte, e *Entry) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Version))
	dst = binary.AppendUvarint(dst, uint64(len(e.ChangeSets)))
	for i := range e.ChangeSets {
		cs := &e.ChangeSets[i]
		dst = appendString(dst, cs.Name)
		dst = binary.AppendUvarint(dst, uint64(len(cs.Pairs)))
		for j := range cs.Pairs {
			p := &cs.Pairs[j]
			if p.Delete {
				dst = append(dst, opDelete)
				dst = appendBytes(dst, p.Key)
			} else {
				dst = append(dst, opSet)
				dst = appendBytes(dst, p.Key)
				dst = appendBytes(dst, p.Value)
			}
		}
	}
	u := &e.Upgrades
	dst = binary.AppendUvarint(dst, uint64(len(u.Added)))
	for _, s := range u.Added {
		dst = appendString(dst, s)
	}
	dst = binary.AppendUvarint(dst, uint64(len(u.Renamed)))
	for _, r := range u.Renamed {
		dst = appendString(dst, r.OldName)
		dst = appendString(dst, r.NewName)
	}
	dst = binary.AppendUvarint(dst, uint64(len(u.Deleted)))
	for _, s := range u.Deleted {
		dst = appendString(dst, s)
	}
	return dst
}

// appendRecord appends the framed record of e (frame header and body).
func appendRecord(dst []byte, e *Entry) ([]byte, error) {
	if e.Version < 1 {
		return dst, fmt.Errorf("%w: version %d", ErrInvalidEntry, e.Version)
	}
	size := EncodedSize(*e)
	if size > MaxEntrySize {
		return dst, fmt.Errorf("%w: version %d encodes to %d bytes, limit %d", ErrEntryTooLarge, e.Version, size, MaxEntrySize)
	}
	start := len(dst)
	if need := frameHeaderSize + size; cap(dst)-start < need {
		// Headroom lets a reused buffer take the next, slightly larger
		// entry without growing again.
		grown := make([]byte, start, start+need+need/8)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+frameHeaderSize]
	dst = appendBody(dst, e)
	putFrameHeader(dst[start:start+frameHeaderSize], dst[start+frameHeaderSize:])
	return dst, nil
}

// bodyVersion returns the version stored at the start of a body (at least
// 8 bytes long).
func bodyVersion(b []byte) uint64 { return binary.LittleEndian.Uint64(b[:8]) }

// DecodeEntry decodes one entry body. It never panics: malformed input
// yields an error wrapping ErrCorrupt that gives the byte offset in body.
//
// The returned keys and values alias body (with their capacity clipped to
// their length); the caller must not modify body while it uses them. Store
// names are copied. Empty sets decode to a non-nil empty Value; deletes to a
// nil Value.
func DecodeEntry(body []byte) (Entry, error) {
	d := decoder{b: body}
	var e Entry
	if len(body) < minBodySize {
		return e, fmt.Errorf("%w: entry body is %d bytes, minimum %d", ErrCorrupt, len(body), minBodySize)
	}
	v := bodyVersion(body)
	if v == 0 || v > math.MaxInt64 {
		return e, fmt.Errorf("%w: entry version %d out of range", ErrCorrupt, v)
	}
	e.Version = int64(v)
	d.off = 8

	if n := d.count("change set count", 2); n > 0 {
		e.ChangeSets = make([]ChangeSet, n)
		for i := range e.ChangeSets {
			cs := &e.ChangeSets[i]
			cs.Name = d.str("store name")
			np := d.count("pair count", 2)
			if np > 0 {
				cs.Pairs = make([]KVPair, np)
			}
			for j := 0; j < np && d.err == nil; j++ {
				p := &cs.Pairs[j]
				switch op := d.byte("op"); op {
				case opSet:
					p.Key = d.bytes("key")
					p.Value = d.bytes("value")
					if p.Value == nil {
						p.Value = []byte{}
					}
				case opDelete:
					p.Delete = true
					p.Key = d.bytes("key")
				default:
					d.fail("op", fmt.Sprintf("unknown op %#02x", op))
				}
			}
			if d.err != nil {
				break
			}
		}
	}
	if n := d.count("added store count", 1); n > 0 {
		e.Upgrades.Added = make([]string, n)
		for i := range e.Upgrades.Added {
			e.Upgrades.Added[i] = d.str("added store name")
		}
	}
	if n := d.count("renamed store count", 2); n > 0 {
		e.Upgrades.Renamed = make([]RenamedStore, n)
		for i := range e.Upgrades.Renamed {
			e.Upgrades.Renamed[i].OldName = d.str("old store name")
			e.Upgrades.Renamed[i].NewName = d.str("new store name")
		}
	}
	if n := d.count("deleted store count", 1); n > 0 {
		e.Upgrades.Deleted = make([]string, n)
		for i := range e.Upgrades.Deleted {
			e.Upgrades.Deleted[i] = d.str("deleted store name")
		}
	}
	if d.err == nil && d.off != len(body) {
		d.fail("end", fmt.Sprintf("%d trailing bytes", len(body)-d.off))
	}
	if d.err != nil {
		return Entry{}, d.err
	}
	return e, nil
}

// decoder reads a body; after the first failure every read returns zero
// values and err keeps the first error.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what, reason string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: entry %s at byte %d: %s", ErrCorrupt, what, d.off, reason)
	}
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(what, "unexpected end of entry")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n == 0 {
		d.fail(what, "unexpected end of entry")
		return 0
	}
	if n < 0 {
		d.fail(what, "varint overflows 64 bits")
		return 0
	}
	if n != uvarintLen(v) {
		d.fail(what, "non-minimal varint")
		return 0
	}
	d.off += n
	return v
}

// count reads an element count and checks that the remaining bytes can hold
// that many elements of at least minSize bytes each, so a damaged count
// cannot make the decoder allocate more than the input justifies.
func (d *decoder) count(what string, minSize int) int {
	c := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if c > uint64((len(d.b)-d.off)/minSize) {
		d.fail(what, fmt.Sprintf("count %d exceeds the remaining %d bytes", c, len(d.b)-d.off))
		return 0
	}
	return int(c)
}

func (d *decoder) bytes(what string) []byte {
	l := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if l > uint64(len(d.b)-d.off) {
		d.fail(what, fmt.Sprintf("length %d exceeds the remaining %d bytes", l, len(d.b)-d.off))
		return nil
	}
	end := d.off + int(l)
	s := d.b[d.off:end:end]
	d.off = end
	return s
}

func (d *decoder) str(what string) string {
	b := d.bytes(what)
	if d.err != nil {
		return ""
	}
	return string(b)
}
