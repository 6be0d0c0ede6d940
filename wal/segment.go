package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
)

// segment describes one segment file.
type segment struct {
	base  int64  // version of the first record (from the file name)
	path  string // full path
	size  int64  // end of the last whole, written record: readers stop here
	flags uint16 // the header's flags: how its records were appended
}

func (l *Log) segmentPath(base int64) string {
	return filepath.Join(l.dir, segmentName(base))
}

func corruptAt(path string, off int64, format string, args ...any) error {
	return &CorruptionError{File: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// readFullAt reads len(b) bytes at off. A short read is reported as
// io.ErrUnexpectedEOF.
func readFullAt(f file, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// listSegments returns the segment base versions found in dir, sorted, and
// the names of leftover temporary segment files.
func listSegments(fs fileSystem, dir string) (bases []int64, tmps []string, err error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		if seg, ok := strings.CutSuffix(name, tmpExt); ok {
			if _, ok := parseSegmentName(seg); ok {
				tmps = append(tmps, name) // a segment being created
			}
			continue
		}
		if base, ok := parseSegmentName(name); ok {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	return bases, tmps, nil
}

// checkSegmentHeader reads and validates the header of an open segment and
// returns the file size and the header's flags.
func checkSegmentHeader(f file, path string, base int64) (int64, uint16, error) {
	size, err := f.Size()
	if err != nil {
		return 0, 0, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	if size < segmentHeaderSize {
		return 0, 0, corruptAt(path, 0, "file is %d bytes, shorter than the segment header", size)
	}
	var hdr [segmentHeaderSize]byte
	if err := readFullAt(f, hdr[:], 0); err != nil {
		return 0, 0, fmt.Errorf("wal: read %s: %w", path, err)
	}
	got, flags, err := parseSegmentHeader(hdr[:])
	if err != nil {
		if errors.Is(err, ErrUnsupportedFormat) {
			return 0, 0, fmt.Errorf("wal: %s: %w", path, err)
		}
		return 0, 0, corruptAt(path, 0, "%v", err)
	}
	if got != base {
		return 0, 0, corruptAt(path, 0, "header base version %d does not match the file name", got)
	}
	return size, flags, nil
}

// scanSegment walks the records of a segment from the header to size and
// returns the end of the last good record and its version (base-1 when the
// segment holds no record).
//
// It checks every frame header (the length is protected by its own
// checksum) and every record's version, but reads bodies only where it
// must: the last record, whose checksum it verifies, and a record whose
// version is out of sequence. With verifyAll it verifies every body; so it
// does in the newest segment (tail) of a log whose appends are not strict
// (where a page inside an unsynced record's body may be lost with later
// records after it), and for the records after discard.
// Replay verifies each body it reads, so a damaged body that Open skips is
// still never served.
//
// With tail set (the newest segment on disk), damage that a crash during an
// append can leave is accepted as a torn tail, and end stops before it:
//   - the file ends inside a record (its frame header, or a body whose
//     length the verified frame header promises);
//   - everything from the bad record to the end of the file is zero bytes;
//   - the bad record is the last one in the file: its body checksum fails
//     and nothing but zeros follows it, or its length check fails but the
//     rest of the file is one body matching the stored body checksum;
//   - the bad record's frame header lies in a page the file system did not
//     write back (see tornAfterBadHeader; with strict set, for a log of
//     synchronous appends under SyncEveryCommit, only if no whole record
//     follows);
//     the record before it is cut too when that page starts inside it and
//     its body fails (see lostPageAcross);
//   - without strict, the bad record's body fails and such a page starts
//     inside the record, after its first byte: a whole page of zeros (see
//     lostPageIn);
//   - with discard positive, any bad record of a version after discard,
//     which an unfinished TruncateBack was dropping (Options.Discarding).
//
// Any other bad record is corruption, as is every bad record when tail is
// not set.
func scanSegment(f file, path string, base, size int64, tail, verifyAll, strict bool, discard int64) (end, last int64, err error) {
	var (
		off    = int64(segmentHeaderSize)
		next   = base
		hdr    [frameHeaderSize + 8]byte
		body   []byte
		prev   = int64(-1) // offset of the last record whose body is not verified
		prevH  frameHeader
		readEr = func(off int64, err error) error {
			return fmt.Errorf("wal: read %s at offset %d: %w", path, off, err)
		}
	)
	// bodyOK reads the body of the record at off and checks its checksum.
	bodyOK := func(off int64, h frameHeader) (bool, error) {
		if cap(body) < int(h.n) {
			body = make([]byte, h.n)
		}
		body = body[:h.n]
		if err := readFullAt(f, body, off+frameHeaderSize); err != nil {
			return false, readEr(off, err)
		}
		return crc32c(body) == h.bcrc, nil
	}
	// badHeaderTorn is set when the scan stops at a bad frame header that
	// tornAfterBadHeader accepts as torn (not only as discarded): then the
	// record before it may have lost the same page (lostPageAcross).
	badHeaderTorn := false
	// discarded reports whether a bad record of version v is one that an
	// unfinished TruncateBack was dropping.
	discarded := func(v int64) bool { return tail && discard > 0 && v > discard }
	// tornFrom reports whether everything from off to the end of the file
	// may be dropped as a torn tail.
	tornFrom := func(off int64) (bool, error) {
		if !tail {
			return false, nil
		}
		zeros, err := allZero(f, off, size)
		if err != nil {
			return false, readEr(off, err)
		}
		return zeros, nil
	}

	for off < size {
		if size-off < frameHeaderSize {
			if tail {
				break
			}
			return 0, 0, corruptAt(path, off, "segment ends inside a record frame header")
		}
		if err := readFullAt(f, hdr[:frameHeaderSize], off); err != nil {
			return 0, 0, readEr(off, err)
		}
		h, ok := parseFrameHeader(hdr[:frameHeaderSize])
		if !ok {
			if tail {
				torn, err := tornAfterBadHeader(f, hdr[:frameHeaderSize], off, size, next, strict)
				if err != nil {
					return 0, 0, readEr(off, err)
				}
				if torn {
					badHeaderTorn = true
					break
				}
			}
			if discarded(next) {
				break
			}
			return 0, 0, corruptAt(path, off, "bad record frame header")
		}
		recEnd := off + frameHeaderSize + int64(h.n)
		if recEnd > size {
			if tail {
				break
			}
			return 0, 0, corruptAt(path, off, "record of %d bytes extends past the end of the segment (%d bytes)", h.n, size)
		}
		var v uint64
		verified := false
		if verifyAll || recEnd == size || (tail && !strict) || discarded(next) {
			ok, err := bodyOK(off, h)
			if err != nil {
				return 0, 0, err
			}
			if !ok {
				torn, err := tornFrom(recEnd)
				if err != nil {
					return 0, 0, err
				}
				if !torn && tail && !strict {
					if torn, err = lostPageIn(f, off, recEnd, size); err != nil {
						return 0, 0, readEr(off, err)
					}
				}
				if torn || discarded(next) {
					break // cut at off, once the record before is checked
				}
				return 0, 0, corruptAt(path, off, "record checksum mismatch")
			}
			v = bodyVersion(body)
			verified = true
		} else {
			if err := readFullAt(f, hdr[frameHeaderSize:], off+frameHeaderSize); err != nil {
				return 0, 0, readEr(off, err)
			}
			v = bodyVersion(hdr[frameHeaderSize:])
		}
		if v != uint64(next) || v > math.MaxInt64 {
			// A damaged body can hold a wrong version: report what is
			// wrong. (After math.MaxInt64, next wraps around to a
			// negative version, whose bits a record of version 2^63
			// would match: no version follows the last.)
			ok, err := bodyOK(off, h)
			if err != nil {
				return 0, 0, err
			}
			if ok && !discarded(next) {
				return 0, 0, corruptAt(path, off, "record has version %d, %s", v, wantVersion(next))
			}
			torn, err := tornFrom(recEnd)
			if err != nil {
				return 0, 0, err
			}
			if !torn && !discarded(next) {
				return 0, 0, corruptAt(path, off, "record checksum mismatch")
			}
			break // cut at off, once the record before is checked
		}
		if verified {
			prev = -1
		} else {
			prev, prevH = off, h
		}
		next++
		off = recEnd
	}
	// The scan stopped at off: the end of the file or a torn tail (a
	// record cut short, or one whose body fails with only zeros after
	// it). The record before it may be the one a crash tore (zeros inside
	// it and after it): verify it too; a bad one before a torn record that
	// is not all zeros is damage.
	if prev >= 0 {
		ok, err := bodyOK(prev, prevH)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			torn, err := tornFrom(off)
			if err == nil && !torn && badHeaderTorn {
				torn, err = lostPageAcross(f, prev+frameHeaderSize, off, size)
			}
			torn = torn || discarded(next-1)
			if err != nil || torn {
				return prev, next - 2, err
			}
			return 0, 0, corruptAt(path, prev, "record checksum mismatch")
		}
	}
	return off, next - 1, nil
}

// unwrittenPage is the smallest unit in which a file system writes a file's
// data back: a page, or a block of at least this size.
const unwrittenPage = 4096

// tornAfterBadHeader decides whether a record whose frame header failed its
// length check, at off in the newest segment, is a torn tail.
//
// It is when only zeros follow; when the rest of the file is exactly the
// record's body with a damaged length field; and when the header and the
// rest of its page are zeros (with strict set, the log's appends are
// synchronous under SyncEveryCommit, also only if no whole record
// follows): that is a page
// the file system had not written back when the system stopped (no frame
// header is all zeros), and the bytes after it were written after it, so
// that no fsync had returned for any of them (it would have written the
// page back too). They were never durable, so under SyncEveryCommit never
// acknowledged, and the log drops them as the suffix a crash loses. A
// header that crosses a page boundary counts as in such a page when its
// part in either page is zeros up to that page's end: a failing header
// whose zeros stop exactly at a page's end is far more likely a page not
// written back than damage.
func tornAfterBadHeader(f file, hdr []byte, off, size, next int64, strict bool) (bool, error) {
	zeros, err := allZero(f, off, size)
	if err != nil || zeros {
		return zeros, err
	}
	if lost, err := lostPageAt(f, off, size); err != nil || lost {
		if err != nil || !strict {
			return lost, err
		}
		// with synchronous appends under SyncEveryCommit a record is
		// written only once the one before it is durable: a whole record
		// after the lost page is one that damage hid, not a crash
		found, err := verifiedRecordFrom(f, off+1, size, next)
		return !found, err
	}
	n := size - off - frameHeaderSize
	if n < minBodySize || n > MaxEntrySize {
		return false, nil
	}
	rest := make([]byte, n)
	if err := readFullAt(f, rest, off+frameHeaderSize); err != nil {
		return false, err
	}
	// The rest of the file is exactly one record body with the expected
	// version: this is the last record, with a damaged length field.
	return binary.LittleEndian.Uint32(hdr[8:12]) == crc32c(rest) && bodyVersion(rest) == uint64(next), nil
}

// lostPageAt reports whether the bad frame header at off lies in a page
// the file system did not write back: the header and the rest of its page
// are zeros, or, for a header that crosses into the next page, its part in
// either page is zeros to that page's end (or the file's).
func lostPageAt(f file, off, size int64) (bool, error) {
	pageEnd := (off/unwrittenPage + 1) * unwrittenPage
	switch {
	case pageEnd-off >= frameHeaderSize:
		if pageEnd <= size {
			return allZero(f, off, pageEnd)
		}
	case pageEnd < size:
		if zeros, err := allZero(f, off, pageEnd); err != nil || zeros {
			return zeros, err
		}
		return allZero(f, pageEnd, min(pageEnd+unwrittenPage, size))
	}
	return false, nil
}

// verifiedRecordFrom reports whether a whole record, with a sound frame
// header, a body that passes its checksum and a version the records after
// from could have (next up to one per smallest record), starts anywhere in
// [from, size) of f. It reads the file a window at a time. The bodies it
// checksums are bounded in total (a stored value may hold frame headers
// that pass their length check): past twice the bytes scanned, it stops
// and reports that one was found, which makes the caller report
// corruption rather than cut.
func verifiedRecordFrom(f file, from, size, next int64) (bool, error) {
	const window = 1 << 20
	buf := make([]byte, window+frameHeaderSize+8)
	var body []byte
	maxV := int64(math.MaxInt64) // next plus one per smallest record, without wrapping around
	if n := (size - from) / (frameHeaderSize + minBodySize); next <= math.MaxInt64-n {
		maxV = next + n
	}
	budget := 2*(size-from) + window
	for start := from; start+frameHeaderSize+minBodySize <= size; start += window {
		b := buf[:min(int64(len(buf)), size-start)]
		if err := readFullAt(f, b, start); err != nil {
			return false, err
		}
		for i := 0; i < window && i+frameHeaderSize+8 <= len(b); i++ {
			off := start + int64(i)
			n := int64(binary.LittleEndian.Uint32(b[i:]))
			if n < minBodySize || n > size-off-frameHeaderSize {
				continue // cheap tests before the header's checksum
			}
			if v := int64(bodyVersion(b[i+frameHeaderSize:])); v < next || v > maxV {
				continue
			}
			h, ok := parseFrameHeader(b[i : i+frameHeaderSize])
			if !ok {
				continue
			}
			if budget -= int64(h.n); budget < 0 {
				return true, nil
			}
			if cap(body) < int(h.n) {
				body = make([]byte, h.n)
			}
			body = body[:h.n]
			if err := readFullAt(f, body, off+frameHeaderSize); err != nil {
				return false, err
			}
			if crc32c(body) == h.bcrc {
				return true, nil
			}
		}
	}
	return false, nil
}

// lostPageAcross reports whether the page holding off, where the scan of
// the newest segment stopped, is all zeros and starts inside the body of
// the record before off, which begins at bodyStart: a page the file system
// had not written back, holding that record's tail and what followed it
// (see tornAfterBadHeader). Its failing record then was never durable
// either, and is cut too.
func lostPageAcross(f file, bodyStart, off, size int64) (bool, error) {
	page := off / unwrittenPage * unwrittenPage
	if page <= bodyStart || page == off || page+unwrittenPage > size {
		return false, nil
	}
	return allZero(f, page, page+unwrittenPage)
}

// lostPageIn reports whether a page the file system did not write back
// starts inside the record at off, which ends at recEnd, in the newest
// segment: a whole page of zeros, within the file, at a page boundary after
// the record's first byte (in its frame header's checksum fields, which a
// parse of the header does not check, or in its body). In a log whose
// appends are not strict (another policy than SyncEveryCommit, or
// asynchronous appends), a page inside an unsynced record can be lost
// while later unsynced pages, with whole records, reach the disk; no fsync
// returned after that record was written, or it would have written the
// page back, so the record and everything after it were never durable. A
// body can hold a page of zeros of its own, but then its checksum passes:
// only a record whose body fails is looked at.
func lostPageIn(f file, off, recEnd, size int64) (bool, error) {
	buf := make([]byte, unwrittenPage) // one for all the pages of a large body
	for p := (off/unwrittenPage + 1) * unwrittenPage; p < recEnd && p+unwrittenPage <= size; p += unwrittenPage {
		if zeros, err := allZeroIn(f, p, p+unwrittenPage, buf); err != nil || zeros {
			return zeros, err
		}
	}
	return false, nil
}

// allZero reports whether bytes [from, to) of f are all zero.
func allZero(f file, from, to int64) (bool, error) {
	return allZeroIn(f, from, to, make([]byte, 32<<10))
}

// allZeroIn is allZero reading through buf.
func allZeroIn(f file, from, to int64, buf []byte) (bool, error) {
	for from < to {
		n := int64(len(buf))
		if to-from < n {
			n = to - from
		}
		if err := readFullAt(f, buf[:n], from); err != nil {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		from += n
	}
	return true, nil
}

// recordReader reads the records of one segment in order, strictly: any
// damage is corruption. It checks that versions follow each other.
type recordReader struct {
	f    file
	path string
	off  int64 // offset of the next record
	end  int64 // readable end of the segment
	next int64 // version the next record must have
	hdr  [frameHeaderSize + 8]byte
}

// wantVersion says which version a record must have: next, or none after
// the last version (math.MaxInt64), where next has wrapped around.
func wantVersion(next int64) string {
	if next < 0 {
		return fmt.Sprintf("but no record follows version %d", int64(math.MaxInt64))
	}
	return fmt.Sprintf("want %d", next)
}

// read returns the version of the record at r.off and, when wantBody is
// set, its verified body in a fresh slice. It returns io.EOF at the
// readable end of the segment.
func (r *recordReader) read(wantBody bool) (int64, []byte, error) {
	if r.off >= r.end {
		return 0, nil, io.EOF
	}
	off := r.off
	if r.end-off < frameHeaderSize+minBodySize {
		return 0, nil, corruptAt(r.path, off, "segment ends inside a record")
	}
	if err := readFullAt(r.f, r.hdr[:], off); err != nil {
		return 0, nil, fmt.Errorf("wal: read %s at offset %d: %w", r.path, off, err)
	}
	h, ok := parseFrameHeader(r.hdr[:frameHeaderSize])
	if !ok {
		return 0, nil, corruptAt(r.path, off, "bad record frame header")
	}
	recEnd := off + frameHeaderSize + int64(h.n)
	if recEnd > r.end {
		return 0, nil, corruptAt(r.path, off, "record of %d bytes extends past the end of the segment (%d bytes)", h.n, r.end)
	}
	var body []byte
	if wantBody {
		body = make([]byte, h.n)
		copy(body, r.hdr[frameHeaderSize:])
		if err := readFullAt(r.f, body[8:], off+frameHeaderSize+8); err != nil {
			return 0, nil, fmt.Errorf("wal: read %s at offset %d: %w", r.path, off, err)
		}
		if crc32c(body) != h.bcrc {
			return 0, nil, corruptAt(r.path, off, "record checksum mismatch")
		}
	}
	v := bodyVersion(r.hdr[frameHeaderSize:])
	if v != uint64(r.next) || v > math.MaxInt64 {
		return 0, nil, corruptAt(r.path, off, "record has version %d, %s", v, wantVersion(r.next))
	}
	r.next++
	r.off = recEnd
	return int64(v), body, nil
}
