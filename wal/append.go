package wal

import (
	"fmt"
	"slices"
	"time"
)

const (
	// maxCoalesce bounds the buffer in which the background writer joins
	// the records of a batch into one write call; a larger batch is
	// written with several calls (and still at most one fsync).
	maxCoalesce = 4 << 20
	// maxKeptBuffer is the largest encoding buffer kept for reuse (one
	// in synchronous mode, one for the background writer's batches).
	maxKeptBuffer = 16 << 20
)

// pendingRecord is an encoded record on its way to the active segment.
type pendingRecord struct {
	data    []byte
	version int64
}

// Append logs e, whose version must be the last version plus one (any
// version >= 1 for an empty log, or the version after the one passed to
// TruncateBack).
//
// In synchronous mode Append encodes e before it returns and retains none
// of its slices. In asynchronous mode the background writer encodes it: the
// queue holds e itself, not a copy of its keys and values, so a caller that
// keeps them anyway (the database's trees do) holds each value once; the
// caller must not modify e's slices until Flush returns or the entry is
// otherwise known to be written. The queue holds at most AsyncBuffer
// entries.
//
// In synchronous mode (AsyncBuffer 0) Append writes the record to the
// active segment and, under SyncEveryCommit, fsyncs it before returning;
// under SyncGrouped it fsyncs when the group is full or old enough.
//
// In asynchronous mode Append queues the entry for the background writer
// and returns; it blocks while the queue is full. A write or fsync failure
// of the writer is sticky: it is returned by this and every later Append,
// Flush and Close, and wakes an Append blocked on the full queue. The log
// must then be closed and reopened (which repairs a torn tail).
func (l *Log) Append(e Entry) error {
	if l.queue != nil {
		return l.appendAsync(&e)
	}
	return l.appendSync(&e)
}

// checkVersionLocked checks that v may be appended next; app must be held.
func (l *Log) checkVersionLocked(v int64) error {
	if v < 1 {
		return fmt.Errorf("%w: version %d", ErrInvalidEntry, v)
	}
	if l.app.next != 0 && v != l.app.next {
		return fmt.Errorf("%w: got version %d, want %d", ErrVersionNotNext, v, l.app.next)
	}
	return nil
}

func (l *Log) appendSync(e *Entry) error {
	l.app.Lock()
	defer l.app.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return err
	}
	if err := l.checkVersionLocked(e.Version); err != nil {
		return err
	}
	rec, err := appendRecord(l.app.buf[:0], e)
	if err != nil {
		return err
	}
	if cap(rec) <= maxKeptBuffer {
		l.app.buf = rec
	} else {
		l.app.buf = nil
	}

	l.w.Lock()
	// a segment started ahead (startRollAheadLocked) may have failed the
	// log while this Append waited for the writer: its cut-back must not
	// be written over
	if err := l.stickyErr(); err != nil {
		l.w.Unlock()
		return err
	}
	recs := append(l.w.pend[:0], pendingRecord{data: rec, version: e.Version})
	err = l.writeLocked(recs)
	recs[0] = pendingRecord{}
	l.w.pend = recs[:0]
	if err == nil {
		err = l.syncAfterWriteLocked(false)
	}
	if err != nil {
		l.fail(err)
	}
	unsynced := l.w.unsynced > 0
	// a record as large as this one would not fit: the next segment is
	// started now rather than by the next Append
	last := int64(len(rec))
	full := err == nil && l.w.size+last > l.opts.SegmentSize
	l.w.Unlock()
	if err != nil {
		return err
	}
	l.app.next = e.Version + 1
	if full {
		l.startRollAheadLocked(e.Version+1, func() bool { return l.w.size+last > l.opts.SegmentSize })
	}
	if unsynced && l.opts.Sync == SyncGrouped {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (l *Log) appendAsync(e *Entry) error {
	// Validated now so that a bad entry fails its own Append (the writer
	// encodes it later, from the caller's slices; see Append), after the
	// log's state, in the order appendSync checks them: a closed or
	// failed log answers so whatever the entry.
	size := EncodedSize(*e)
	l.app.Lock()
	defer l.app.Unlock()
	err := l.checkWritableLocked()
	if err == nil {
		err = l.checkVersionLocked(e.Version)
	}
	if err != nil {
		return err
	}
	if size > MaxEntrySize {
		return fmt.Errorf("%w: version %d encodes to %d bytes, limit %d", ErrEntryTooLarge, e.Version, size, MaxEntrySize)
	}
	select {
	case l.queue <- request{entry: e, size: frameHeaderSize + size, version: e.Version}:
	case <-l.failed:
		return l.stickyErr()
	}
	l.app.next = e.Version + 1
	l.mu.Lock()
	if l.mu.first == 0 {
		l.mu.first = e.Version
	}
	if l.mu.last < e.Version {
		l.mu.last = e.Version
	}
	err = l.mu.err
	l.mu.Unlock()
	return err
}

// Flush waits until every entry appended before the call is written to its
// segment file and, unless the policy is SyncNone, fsynced. It returns the
// sticky writer error if there is one.
func (l *Log) Flush() error { return l.flush(false) }

// Sync is Flush with an fsync whatever the policy: once it returns, every
// entry appended before the call is durable. It is for the points where
// something outside the log comes to depend on its entries (a snapshot
// made current, which the log must continue), not for the append path.
func (l *Log) Sync() error { return l.flush(true) }

func (l *Log) flush(always bool) error {
	l.app.Lock()
	if l.app.closed {
		l.app.Unlock()
		return ErrClosed
	}
	if l.opts.ReadOnly {
		l.app.Unlock()
		return nil
	}
	if l.queue != nil {
		done, err := l.sendFlushLocked(true, always)
		l.app.Unlock()
		if err != nil {
			return err
		}
		return <-done
	}
	defer l.app.Unlock()
	l.w.Lock()
	defer l.w.Unlock()
	if err := l.stickyErr(); err != nil {
		return err
	}
	err := l.syncAfterWriteLocked(true)
	if err == nil && always {
		err = l.syncUnsyncedLocked()
	}
	if err != nil {
		l.fail(err)
		return err
	}
	return nil
}

// syncUnsyncedLocked fsyncs the active segment if it holds entries not
// fsynced yet, whatever the policy. w must be held.
func (l *Log) syncUnsyncedLocked() error {
	if l.w.unsynced == 0 || l.w.f == nil {
		return nil
	}
	return l.syncLocked()
}

// sendFlushLocked queues a flush marker; app must be held. The writer
// answers every marker, also after a failure.
func (l *Log) sendFlushLocked(sync, always bool) (chan error, error) {
	done := make(chan error, 1)
	select {
	case l.queue <- request{done: done, sync: sync, always: always}:
		return done, nil
	case <-l.failed:
		return nil, l.stickyErr()
	}
}

// flushQueueLocked waits until the writer has written everything queued;
// app must be held.
func (l *Log) flushQueueLocked(sync bool) error {
	done, err := l.sendFlushLocked(sync, false)
	if err != nil {
		return err
	}
	return <-done
}

// run is the background goroutine: in asynchronous mode it writes the
// queued records, and under SyncGrouped it fsyncs when the oldest unsynced
// entry reaches GroupInterval. It exits when Close closes stop.
func (l *Log) run() {
	defer l.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	var reqs []request
	for {
		select {
		case req := <-l.queue:
			reqs = l.runBatch(append(reqs[:0], req))
		case <-l.kick:
		case <-timer.C:
			armed = false
			l.syncIfDue()
		case <-l.stop:
			timer.Stop()
			l.answerLeftMarkers()
			return
		}
		if l.opts.Sync == SyncGrouped && !armed {
			if d, ok := l.syncDeadline(); ok {
				timer.Reset(d)
				armed = true
			}
		}
	}
}

// answerLeftMarkers answers the flush markers still queued when the writer
// stops. Close queues a marker of its own and waits for it, so that nothing
// is left behind it, except after a failure: Close's marker then gives up
// on a full queue, and a Flush waiting on another goroutine must still get
// its answer, the sticky error. The entries left are not written: the log
// accepts nothing after a failure.
func (l *Log) answerLeftMarkers() {
	for {
		select {
		case r := <-l.queue:
			if r.done != nil {
				err := l.stickyErr()
				if err == nil {
					err = ErrClosed
				}
				r.done <- err
			}
		default:
			return
		}
	}
}

// runBatch drains the queue behind reqs[0], writes all their records with
// as few write calls as possible and fsyncs at most once (plus once per
// segment rollover), then answers the flush markers.
func (l *Log) runBatch(reqs []request) []request {
	for n := len(l.queue); n > 0; n-- {
		reqs = append(reqs, <-l.queue)
	}
	if l.batchTaken != nil {
		l.batchTaken(len(reqs))
	}
	l.w.Lock()
	err := l.stickyErr()
	if err == nil {
		// Every entry of the batch is encoded into one buffer, reused by
		// the next batch when it is no larger than maxKeptBuffer: what
		// the log keeps between batches is bounded by that, whatever the
		// queue's length and the entries' sizes.
		size := 0
		for _, r := range reqs {
			size += r.size
		}
		enc := slices.Grow(l.w.enc[:0], size)
		ends := l.w.ends[:0]
		force, always := false, false
		for _, r := range reqs {
			if r.done != nil {
				force = force || r.sync
				always = always || r.always
				continue
			}
			var encErr error
			enc, encErr = appendRecord(enc, r.entry)
			if encErr != nil { // validated by Append: cannot happen
				err = encErr
				break
			}
			ends = append(ends, len(enc))
		}
		recs := l.w.pend[:0]
		start, k := 0, 0
		for i, r := range reqs {
			if r.done != nil {
				continue
			}
			if k == len(ends) {
				break
			}
			recs = append(recs, pendingRecord{data: enc[start:ends[k]:ends[k]], version: r.version})
			start = ends[k]
			k++
			// the entry's slices are released as soon as its record is
			// built
			reqs[i].entry = nil
		}
		if err == nil {
			err = l.writeLocked(recs)
		}
		if err == nil {
			err = l.syncAfterWriteLocked(force)
		}
		if err == nil && always {
			err = l.syncUnsyncedLocked()
		}
		clear(recs)
		l.w.pend = recs[:0]
		l.w.ends = ends[:0]
		if cap(enc) <= maxKeptBuffer {
			l.w.enc = enc[:0]
		} else {
			l.w.enc = nil
		}
		if err != nil {
			l.fail(err)
		}
	}
	l.w.Unlock()
	for i, r := range reqs {
		if r.done != nil {
			r.done <- err
		}
		reqs[i] = request{}
	}
	return reqs[:0]
}

// syncDeadline returns how long until the oldest unsynced entry is due.
func (l *Log) syncDeadline() (time.Duration, bool) {
	l.w.Lock()
	defer l.w.Unlock()
	if l.w.unsynced == 0 || l.w.f == nil || l.w.syncFailed {
		return 0, false
	}
	return max(0, l.opts.GroupInterval-time.Since(l.w.oldest)), true
}

// syncIfDue fsyncs when the oldest unsynced entry is GroupInterval old.
// It does so after a failed write too: the entries written before it were
// acknowledged and their pages are intact, so the policy's bound on how
// long they stay unsynced still holds. Only a failed fsync stops it (its
// pages may be lost, so a later fsync would prove nothing).
func (l *Log) syncIfDue() {
	l.w.Lock()
	defer l.w.Unlock()
	if l.w.unsynced == 0 || l.w.f == nil || l.w.syncFailed {
		return
	}
	if time.Since(l.w.oldest) < l.opts.GroupInterval {
		return
	}
	if err := l.syncLocked(); err != nil {
		l.fail(err)
	}
}

// syncAfterWriteLocked fsyncs the entries written since the last fsync
// (writeRunLocked counts them) as the policy requires; force asks for an
// fsync unless the policy is SyncNone. w must be held.
func (l *Log) syncAfterWriteLocked(force bool) error {
	if l.w.unsynced == 0 || l.w.f == nil {
		return nil
	}
	switch l.opts.Sync {
	case SyncEveryCommit:
		return l.syncLocked()
	case SyncGrouped:
		if force || l.w.unsynced >= l.opts.GroupCount || time.Since(l.w.oldest) >= l.opts.GroupInterval {
			return l.syncLocked()
		}
	}
	return nil
}

func (l *Log) syncLocked() error {
	if err := l.w.f.Sync(); err != nil {
		l.w.syncFailed = true
		l.discardUnsyncedLocked()
		return fmt.Errorf("wal: sync %s: %w", l.segmentPath(l.w.base), fileError(err))
	}
	l.w.unsynced = 0
	l.w.oldest = time.Time{}
	l.w.synced = l.w.size
	l.mu.Lock()
	l.w.syncedV = l.mu.written // the last record written is f's
	l.mu.Unlock()
	return nil
}

// discardUnsyncedLocked cuts the active segment back to what its last
// successful fsync made durable, after an fsync of it failed. Linux marks
// the pages of a failed fsync clean whether or not they reached the disk:
// a later open would read the records back from the page cache, its fsync
// would succeed, and versions acknowledged after them would stand on
// records a power loss turns into a hole. Cut back, the file holds only
// what is durable, and the records after (never acknowledged under
// SyncEveryCommit; under the other policies, what a crash may lose too)
// are gone. The log has failed; its written version goes back to the
// last record kept, so a Replay of the records cut off fails with the
// log's error instead of reading past the end of the file (a Replay
// already reading them gets a read error). When the cut itself fails, the
// records stay in the file but the written version goes back all the
// same: they are not durable, and no Replay of this log serves them. w
// must be held.
func (l *Log) discardUnsyncedLocked() {
	if l.w.f == nil || l.w.size <= l.w.synced {
		return
	}
	cut := l.w.f.Truncate(l.w.synced) == nil
	if cut {
		_ = l.w.f.Sync()
		l.w.size = l.w.synced
	}
	l.mu.Lock()
	if cut {
		l.mu.segments[len(l.mu.segments)-1].size = l.w.synced
	}
	// the records past the last fsync are not durable whether or not
	// the cut succeeded: a Replay must not serve them
	l.mu.written = min(l.mu.written, l.w.syncedV)
	l.mu.Unlock()
}

// writeLocked writes records in order to the active segment, starting a
// new segment whenever the next record would take the active one past
// SegmentSize. w must be held.
func (l *Log) writeLocked(recs []pendingRecord) error {
	start, pending := 0, int64(0)
	for i := range recs {
		r := &recs[i]
		cur := l.w.size + pending
		// a segment holds the records of one kind of appends (its
		// header's flags): a writer of the other kind starts its own
		if l.w.f == nil || (cur > segmentHeaderSize && (cur+int64(len(r.data)) > l.opts.SegmentSize || l.rollsAt(r.version) || l.w.flags != l.appendsFlag())) {
			if err := l.writeRunLocked(recs[start:i]); err != nil {
				return err
			}
			start, pending = i, 0
			if err := l.rollLocked(r.version); err != nil {
				return err
			}
		} else if pending > 0 && pending+int64(len(r.data)) > maxCoalesce {
			if err := l.writeRunLocked(recs[start:i]); err != nil {
				return err
			}
			start, pending = i, 0
		}
		pending += int64(len(r.data))
	}
	return l.writeRunLocked(recs[start:])
}

// rollsAt reports whether the record of version must start a new segment
// because of RollAt; the active segment's base tells whether it already
// did.
func (l *Log) rollsAt(version int64) bool {
	at := l.rollAt.Load()
	return at > 0 && version >= at && l.w.base < at
}

// RollAt makes the record of version, or the first later one, start a new
// segment, unless the active segment has no record yet. A database that
// takes a snapshot of version-1 calls it so that TruncateFront(version)
// can later remove every entry the snapshot holds, not only the segments
// that end before the segment holding it. A later call replaces the
// request; a version at or below the active segment's base does nothing.
//
// When the record of version-1 is already written, the roll starts at once
// (see startRollAheadLocked).
func (l *Log) RollAt(version int64) {
	l.rollAt.Store(version)
	l.app.Lock()
	defer l.app.Unlock()
	if l.WrittenVersion() == version-1 {
		l.startRollAheadLocked(version, func() bool { return l.rollsAt(version) })
	}
}

// startRollAheadLocked starts on a goroutine of the log the roll that the
// record of version, the one after the last written, is due to start (an
// fsync of the active segment, the new segment's header and the
// directory), so that its Append does not wait for it unless it comes
// first. due, called with w held, reports whether the roll is still due. A
// failed roll fails the log, as it would have failed that Append. app must
// be held.
func (l *Log) startRollAheadLocked(version int64, due func() bool) {
	if l.app.closed || l.opts.ReadOnly {
		return
	}
	l.rollAhead.Add(1)
	go func() {
		defer l.rollAhead.Done()
		l.w.Lock()
		defer l.w.Unlock()
		if l.w.f == nil || l.w.size <= segmentHeaderSize || l.w.base >= version || l.stickyErr() != nil {
			return
		}
		if l.WrittenVersion() != version-1 || !due() { // an Append came first
			return
		}
		if err := l.rollLocked(version); err != nil {
			l.fail(err)
			return
		}
		l.w.ahead = true
	}()
}

// dropAheadLocked removes the active segment, started ahead of a record
// that never came and still empty; the previous one, fsynced and closed
// when it was started, is the last again. Close calls it with w held, when
// no Append can come anymore.
func (l *Log) dropAheadLocked() error {
	path := l.segmentPath(l.w.base)
	err := fileError(l.w.f.Close())
	l.w.f = nil
	if err == nil {
		err = l.fs.Remove(path)
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		return fmt.Errorf("wal: remove unused segment %s: %w", path, err)
	}
	l.mu.Lock()
	l.mu.segments = l.mu.segments[:len(l.mu.segments)-1]
	l.mu.Unlock()
	return nil
}

// writeRunLocked writes consecutive records with one write call, makes
// them visible to readers and counts them unsynced.
func (l *Log) writeRunLocked(run []pendingRecord) error {
	if len(run) == 0 {
		return nil
	}
	data := run[0].data
	if len(run) > 1 {
		buf := l.w.batch[:0]
		for _, r := range run {
			buf = append(buf, r.data...)
		}
		l.w.batch = buf
		data = buf
	}
	if _, err := l.w.f.WriteAt(data, l.w.size); err != nil {
		// what a short write left past the records written before is
		// cut off (best effort: a reopen cuts a torn tail anyway), so
		// that an fsync of those records (the policy's timer, Close)
		// leaves a clean segment
		_ = l.w.f.Truncate(l.w.size)
		return fmt.Errorf("wal: write %s at offset %d: %w", l.segmentPath(l.w.base), l.w.size, fileError(err))
	}
	l.w.size += int64(len(data))
	l.w.ahead = false
	// counted as they reach the file, so that a later run of the same
	// batch that fails leaves these to the policy's timer and Close
	if l.w.unsynced == 0 {
		l.w.oldest = time.Now()
	}
	l.w.unsynced += len(run)
	if l.w.size-l.w.wbFrom >= writebackChunk {
		// Start writing the segment back without waiting, so that the
		// fsync that ends it (or an fsync policy's) finds little left to
		// do: under a relaxed policy the whole segment would otherwise be
		// dirty when the Commit that fills it rolls to the next one.
		if wb, ok := l.w.f.(writebacker); ok {
			wb.startWriteback(l.w.wbFrom, l.w.size-l.w.wbFrom)
		}
		l.w.wbFrom = l.w.size
	}
	v := run[len(run)-1].version

	l.mu.Lock()
	l.mu.segments[len(l.mu.segments)-1].size = l.w.size
	l.mu.written = v
	if l.mu.first == 0 {
		l.mu.first = run[0].version
	}
	if l.mu.last < v {
		l.mu.last = v
	}
	l.written.Broadcast()
	l.mu.Unlock()
	return nil
}

// rollLocked finishes the active segment (fsync, close) and starts a new
// one whose first record will have version base. The new file gets its
// header under a temporary name and is renamed into place once durable, so
// a segment file on disk always has a complete header. w must be held.
func (l *Log) rollLocked(base int64) error {
	if l.w.f != nil {
		if err := l.w.f.Sync(); err != nil {
			l.w.syncFailed = true
			l.discardUnsyncedLocked()
			return fmt.Errorf("wal: sync %s: %w", l.segmentPath(l.w.base), fileError(err))
		}
		l.w.unsynced = 0
		l.w.oldest = time.Time{}
		err := l.w.f.Close()
		l.w.f = nil
		if err != nil {
			return fmt.Errorf("wal: close %s: %w", l.segmentPath(l.w.base), fileError(err))
		}
	}
	path := l.segmentPath(base)
	tmp := path + tmpExt
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", tmp, err)
	}
	hdr := appendSegmentHeader(make([]byte, 0, segmentHeaderSize), base, l.appendsFlag())
	if _, err = f.WriteAt(hdr, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = l.fs.Rename(tmp, path)
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("wal: create segment %s: %w", path, err)
	}
	l.w.f, l.w.base, l.w.size, l.w.wbFrom = f, base, segmentHeaderSize, segmentHeaderSize
	l.w.synced, l.w.syncedV = segmentHeaderSize, base-1
	l.w.flags = l.appendsFlag()

	l.mu.Lock()
	l.mu.segments = append(l.mu.segments, segment{base: base, path: path, size: segmentHeaderSize, flags: l.w.flags})
	l.mu.Unlock()
	return nil
}
