package wal

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// TruncateFront drops entries older than version, a whole segment at a
// time: it removes every segment all of whose entries are older than
// version, oldest first. The segment holding the last written entry is
// never removed, so that entry (and with it LastVersion) survives a
// reopen. Entries older than version may remain readable in the oldest
// kept segment; FirstVersion reports what remains.
//
// It does not wait for running Replay or Verify calls: it keeps the
// segments they read (from the first one each reads on), which a later
// call removes. Replays and Verify calls that start meanwhile see the log
// as it will be after the removals, also when a removal then fails and
// the segments not removed are put back. Appends go on concurrently.
func (l *Log) TruncateFront(version int64) error {
	l.front.Lock()
	defer l.front.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.opts.ReadOnly {
		l.mu.Unlock()
		return ErrReadOnly
	}
	floor := int64(math.MaxInt64) // the first version a running reader reads
	for from := range l.mu.pins {
		floor = min(floor, from)
	}
	segs := l.mu.segments
	// a segment goes when the next one starts at or before version and
	// holds a written record: a segment started ahead of its first record
	// (RollAt) does not count as the newest one; and when the next one
	// starts at or before what every running reader reads first
	n := 0
	for n+1 < len(segs) && segs[n+1].base <= min(version, l.mu.written, floor) {
		n++
	}
	if n == 0 {
		l.mu.Unlock()
		return nil
	}
	// taken off the list before their files go: no reader starts on them
	drop := append([]segment(nil), segs[:n]...)
	l.mu.segments = segs[n:]
	l.mu.first = l.mu.segments[0].base
	l.mu.Unlock()
	// Oldest first, each removal made durable before the next, so that
	// the files left on disk after a failure, a crash or a power loss are
	// still a contiguous run of versions (removals under one directory
	// fsync may survive in any subset).
	for i, s := range drop {
		if err := l.fs.Remove(s.path); err != nil {
			l.restoreFront(drop[i:])
			return fmt.Errorf("wal: remove %s: %w", s.path, err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			l.restoreFront(drop[i+1:])
			return fmt.Errorf("wal: sync %s: %w", l.dir, err)
		}
	}
	return nil
}

// restoreFront puts back at the front of the list the segments a failed
// TruncateFront took off it and did not remove.
func (l *Log) restoreFront(kept []segment) {
	if len(kept) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.segments = append(append([]segment(nil), kept...), l.mu.segments...)
	l.mu.first = kept[0].base
}

// TruncateBack drops every entry newer than version (a rollback): segments
// that start after version are removed, and the segment holding version is
// cut after its record and fsynced. The next Append must carry version+1.
// A version below FirstVersion empties the log. It returns an error
// wrapping ErrVersionNotFound when version > LastVersion; version ==
// LastVersion is a no-op.
//
// It waits for queued appends to be written and for running Replay calls.
// A failure part way leaves the log in an unknown state: it becomes the
// sticky error, and the log must be reopened.
func (l *Log) TruncateBack(version int64) error {
	if version < 0 {
		return l.refuseArg(fmt.Errorf("%w: cannot truncate back to version %d", ErrVersionNotFound, version))
	}
	return l.rewriteTail(func(segs []segment, last int64) (int64, error) {
		if version > last {
			return 0, fmt.Errorf("%w: cannot truncate back to version %d, last version is %d", ErrVersionNotFound, version, last)
		}
		if version == last {
			return 0, nil
		}
		return version + 1, l.truncateBackLocked(segs, version)
	})
}

// refuseArg returns err, the refusal of a call's argument, unless the log
// is closed, read-only or failed: a closed or failed log answers so
// whatever the argument (as Append does), a read-only one with
// ErrReadOnly.
func (l *Log) refuseArg(err error) error {
	l.app.Lock()
	defer l.app.Unlock()
	if werr := l.checkWritableLocked(); werr != nil {
		return werr
	}
	return err
}

// rewriteTail runs cut with the log quiesced: no Replay running, every
// queued append written, the appender and writer locked. cut gets the
// segments and the last version and returns the version the next Append
// must carry (0 to leave it unchanged). A cut error becomes the sticky error.
func (l *Log) rewriteTail(cut func(segs []segment, last int64) (int64, error)) error {
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	l.front.Lock()
	defer l.front.Unlock()
	l.app.Lock()
	defer l.app.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return err
	}
	if l.queue != nil {
		if err := l.flushQueueLocked(false); err != nil {
			return err
		}
	}
	l.w.Lock()
	defer l.w.Unlock()
	// a segment started ahead (startRollAheadLocked, also by Open) may
	// have failed the log while this call waited for the writer
	if err := l.stickyErr(); err != nil {
		return err
	}

	l.mu.Lock()
	segs := append([]segment(nil), l.mu.segments...)
	last := l.mu.last
	l.mu.resume = resumePos{} // the cut may remove or shorten its segment
	l.mu.Unlock()
	next, err := cut(segs, last)
	if err != nil {
		if !errors.Is(err, ErrVersionNotFound) {
			l.fail(err)
		}
		return err
	}
	if next != 0 {
		l.app.next = next
	}
	return nil
}

// truncateBackLocked does the work of TruncateBack; app and w are held.
func (l *Log) truncateBackLocked(segs []segment, version int64) error {
	keep := len(segs) - 1 // index of the segment that will hold version
	for keep >= 0 && segs[keep].base > version {
		keep--
	}
	// Newest first, each removal made durable before the next, so that
	// what remains after a failure, a crash or a power loss is a
	// contiguous run of versions.
	for i := len(segs) - 1; i > keep; i-- {
		if l.w.f != nil && l.w.base == segs[i].base {
			err := l.w.f.Close()
			l.w.f = nil
			if err != nil {
				return fmt.Errorf("wal: close %s: %w", segs[i].path, fileError(err))
			}
		}
		if err := l.fs.Remove(segs[i].path); err != nil {
			return fmt.Errorf("wal: remove %s: %w", segs[i].path, err)
		}
		l.mu.Lock()
		l.mu.segments = l.mu.segments[:i]
		l.mu.last = segs[i].base - 1
		l.mu.written = l.mu.last
		l.mu.Unlock()
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("wal: sync %s: %w", l.dir, err)
		}
	}
	l.w.unsynced = 0
	l.w.ahead = false
	if keep < 0 {
		l.mu.Lock()
		l.mu.segments = nil
		l.mu.first, l.mu.last, l.mu.written = 0, 0, 0
		l.mu.Unlock()
		return nil
	}

	s := segs[keep]
	f := l.w.f
	if f == nil {
		var err error
		if f, err = l.fs.OpenFile(s.path, false); err != nil {
			return openError(s.path, err)
		}
	}
	end, err := recordEnd(f, s, version)
	if err == nil {
		if err = f.Truncate(end); err != nil {
			err = fmt.Errorf("wal: truncate %s: %w", s.path, fileError(err))
		}
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("wal: sync %s: %w", s.path, fileError(err))
		}
	}
	if err != nil {
		f.Close()
		l.w.f = nil
		return err
	}
	l.w.f, l.w.base, l.w.size, l.w.wbFrom = f, s.base, end, end
	l.w.synced, l.w.syncedV = end, version
	l.w.flags = s.flags
	l.mu.Lock()
	l.mu.segments[keep].size = end
	l.mu.last, l.mu.written = version, version
	l.mu.Unlock()
	return nil
}

// recordEnd returns the offset just past the record of version in s.
func recordEnd(f file, s segment, version int64) (int64, error) {
	r := recordReader{f: f, path: s.path, off: segmentHeaderSize, end: s.size, next: s.base}
	for {
		v, _, err := r.read(false)
		if err == io.EOF {
			return 0, corruptAt(s.path, r.off, "segment ends at version %d before version %d", r.next-1, version)
		}
		if err != nil {
			return 0, err
		}
		if v == version {
			return r.off, nil
		}
	}
}

// Reset removes every entry and makes next the version the following Append
// must carry. A database uses it when its newest snapshot is ahead of the
// log's end, so that the log resumes right after the snapshot.
func (l *Log) Reset(next int64) error {
	if next < 1 {
		return l.refuseArg(fmt.Errorf("%w: next version %d", ErrInvalidEntry, next))
	}
	return l.rewriteTail(func(segs []segment, _ int64) (int64, error) {
		return next, l.truncateBackLocked(segs, -1)
	})
}
