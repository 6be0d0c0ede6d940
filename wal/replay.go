package wal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Replay calls fn with every entry from version from to version to,
// inclusive, in order, and stops at the first error fn returns (Replay
// returns it unchanged). It returns nil at once when from > to (ErrClosed
// on a closed log), an error wrapping ErrVersionNotFound when
// from < FirstVersion or to > LastVersion, and an error for a nil fn.
//
// Replay is safe while other goroutines append: it reads only records
// that are written to their segment files, and in asynchronous mode first
// waits for the writer to write version to (it returns the sticky writer
// error if the writer fails first). It reads written data, not only
// fsynced data: what it returns may still be lost by a machine crash under
// the policy's bound.
//
// Each record is read into its own buffer, its checksum and version are
// verified, and it is decoded. The keys and values of the Entry passed to
// fn alias that buffer, which the log does not reuse: fn may keep them.
// Damage is reported as an error wrapping ErrCorrupt that names the
// segment file and the record's offset.
//
// fn must not call Replay, Verify, TruncateBack, Reset or Close: those
// wait for Replay to return. It may call Append and TruncateFront, which
// keeps the segments this replay reads.
func (l *Log) Replay(from, to int64, fn func(Entry) error) error {
	if fn == nil {
		return errors.New("wal: Replay with a nil fn")
	}
	if from > to {
		l.mu.Lock()
		closed := l.mu.closed
		l.mu.Unlock()
		if closed {
			return ErrClosed
		}
		return nil
	}
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	return l.replayLocked(from, to, false, fn)
}

// replayLocked is Replay with truncMu held shared by the caller. With
// whole, from and to are ignored: the replay runs from the log's first
// version to its last, both taken with the check of the range (a
// TruncateFront may raise the first version past a last version read
// before).
func (l *Log) replayLocked(from, to int64, whole bool, fn func(Entry) error) error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if whole {
		from, to = l.mu.first, l.mu.last
	}
	if l.mu.last == 0 || from < l.mu.first || to > l.mu.last {
		first, last := l.mu.first, l.mu.last
		l.mu.Unlock()
		return fmt.Errorf("%w: replay of %d..%d, log holds %d..%d", ErrVersionNotFound, from, to, first, last)
	}
	// from here on TruncateFront keeps every segment holding from or a
	// later version, also while this replay waits for the writer
	if l.mu.pins == nil {
		l.mu.pins = make(map[int64]int)
	}
	l.mu.pins[from]++
	defer func() {
		l.mu.Lock()
		if l.mu.pins[from]--; l.mu.pins[from] == 0 {
			delete(l.mu.pins, from)
		}
		l.mu.Unlock()
	}()
	for l.mu.written < to && l.mu.err == nil && !l.mu.closed {
		l.written.Wait()
	}
	if l.mu.written < to {
		err := l.mu.err
		if err == nil {
			err = ErrClosed
		}
		l.mu.Unlock()
		return err
	}
	segs := append([]segment(nil), l.mu.segments...)
	l.mu.Unlock()

	// The last segment whose base is <= from holds from.
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > from }) - 1
	if i < 0 {
		return fmt.Errorf("%w: no segment holds version %d", ErrCorrupt, from)
	}
	for ; i < len(segs); i++ {
		done, err := l.replaySegment(segs, i, from, to, fn)
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("%w: replay stopped before version %d", ErrCorrupt, to)
}

// replaySegment replays the records of segs[i] in [from, to]. done reports
// that version to was reached.
func (l *Log) replaySegment(segs []segment, i int, from, to int64, fn func(Entry) error) (done bool, err error) {
	s := segs[i]
	f, err := l.fs.OpenFile(s.path, true)
	if err != nil {
		return false, openError(s.path, err)
	}
	defer f.Close()
	r := recordReader{f: f, path: s.path, off: segmentHeaderSize, end: s.size, next: s.base}
	l.mu.Lock()
	if p := l.mu.resume; p.next != 0 && p.base == s.base && p.next <= from && p.off <= s.size {
		r.off, r.next = p.off, p.next
	}
	l.mu.Unlock()
	for {
		off := r.off
		// Skip records before from without reading their bodies.
		v, body, err := r.read(r.next >= from)
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, err
		}
		if i+1 < len(segs) && v >= segs[i+1].base {
			// the next segment holds this version too: the segments
			// overlap, whichever of them a replay would read (a replay
			// that ends in this segment would not reach the check of
			// its end against the next base below)
			return false, corruptAt(s.path, off, "record of version %d, but the next segment starts at version %d", v, segs[i+1].base)
		}
		if v < from {
			continue
		}
		e, err := DecodeEntry(body)
		if err != nil {
			return false, &CorruptionError{File: s.path, Offset: off, Reason: "undecodable entry", Err: err}
		}
		if err := fn(e); err != nil {
			return false, err
		}
		if v == to {
			if v < math.MaxInt64 {
				l.mu.Lock()
				l.mu.resume = resumePos{base: s.base, off: r.off, next: v + 1}
				l.mu.Unlock()
			}
			return true, nil
		}
	}
	if i+1 < len(segs) && r.next != segs[i+1].base {
		return false, corruptAt(s.path, r.off, "segment ends at version %d but the next segment starts at %d", r.next-1, segs[i+1].base)
	}
	if i+1 == len(segs) {
		return false, corruptAt(s.path, r.off, "log ends at version %d before version %d", r.next-1, to)
	}
	return false, nil
}

// Verify reads every entry of the log and checks record checksums, entry
// decoding and version continuity across segments. It returns nil for an
// empty log and the first problem found otherwise (an error wrapping
// ErrCorrupt that names the file and offset).
//
// The versions checked are those the log holds when Verify pins its first
// version, at its start: a TruncateFront after that keeps the segments
// Verify reads, and the other truncations wait for Verify to return. A
// TruncateFront that took segments off the log before and then fails to
// remove them puts them back unchecked.
func (l *Log) Verify() error {
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	l.mu.Lock()
	closed, empty := l.mu.closed, l.mu.last == 0
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if empty {
		return nil
	}
	return l.replayLocked(0, 0, true, func(Entry) error { return nil })
}
