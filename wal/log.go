package wal

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// KVPair is one change to a store: a set of Key to Value, or a delete of Key.
// A set of an empty (non-nil, zero-length) Value is legal and distinct from
// a delete.
type KVPair struct {
	Delete bool
	Key    []byte
	Value  []byte
}

// ChangeSet is one store's changes in one version, in order.
type ChangeSet struct {
	Name  string
	Pairs []KVPair
}

// RenamedStore is a store renamed by an upgrade.
type RenamedStore struct {
	OldName string `json:"old_name"`
	NewName string `json:"new_name"`
}

// Upgrades are the store additions, renames and deletions applied in a
// version.
type Upgrades struct {
	Added   []string       `json:"added,omitempty"`
	Renamed []RenamedStore `json:"renamed,omitempty"`
	Deleted []string       `json:"deleted,omitempty"`
}

// Entry is everything logged for one version.
type Entry struct {
	Version    int64
	ChangeSets []ChangeSet
	Upgrades   Upgrades
}

// resumePos is a record boundary: the record of version next starts at
// offset off of the segment of base.
type resumePos struct{ base, off, next int64 }

// Log is a write-ahead log of entries with consecutive versions, stored in
// a directory of segment files. All methods are safe for concurrent use.
//
// Lock order: truncMu, then front, then app, then w, then mu. Replay holds
// truncMu shared and then takes only mu; TruncateFront takes front and
// then mu; the background goroutine takes w and mu.
type Log struct {
	dir  string
	opts Options
	fs   fileSystem

	// torn is the torn tail a read-only Open found and left in place.
	torn *TornTail

	// truncMu is held shared by Replay and Verify and exclusively by
	// TruncateBack, Reset and Close, so files never vanish or shrink under
	// a reader. TruncateFront does not take it: it removes only segments
	// no running reader has pinned (mu.pins), so that a reader never
	// waits for its removals and directory fsyncs (a database prunes its
	// log after every snapshot rewrite, while views replay it).
	truncMu sync.RWMutex

	// front serializes TruncateFront with itself and with the holders of
	// truncMu's write side, which edit the segment list too.
	front sync.Mutex

	// app serializes appenders: version assignment and the order in which
	// records reach the writer.
	app struct {
		sync.Mutex
		next   int64  // version the next Append must carry; 0: any version >= 1
		closed bool   // set by Close
		buf    []byte // encoding buffer of synchronous appends
	}

	// w is the writer's state: the active (newest) segment file. It is held
	// by whoever writes or fsyncs: a synchronous Append, the background
	// goroutine, truncation and Close.
	w struct {
		sync.Mutex
		f        file   // active segment; nil when the log has no segment
		base     int64  // base version of f
		flags    uint16 // f's header flags: a record of another kind of appends rolls
		size     int64  // bytes written to f
		synced   int64  // bytes of f its last successful fsync made durable
		syncedV  int64  // the version of the last record in those bytes (base-1 when none)
		wbFrom   int64  // offset in f from which writeback has not been started
		unsynced int    // entries written to f since its last fsync
		// syncFailed: an fsync of the active segment failed. It is never
		// fsynced again: the kernel may have dropped the failed pages, so
		// a later success would prove nothing (a failed write does not
		// set it: the pages written before it are intact).
		syncFailed bool
		oldest     time.Time
		batch      []byte          // coalescing buffer of the background writer
		pend       []pendingRecord // reused list of records to write
		enc        []byte          // background writer: a batch's encoded records
		ends       []int           // background writer: where each record of enc ends
		ahead      bool            // f was started ahead of its first record (startRollAheadLocked)
	}

	// mu guards the state readers see. Critical sections are short and do
	// no I/O.
	mu struct {
		sync.Mutex
		segments []segment
		first    int64 // first version of the log; 0 when empty
		last     int64 // last accepted version; 0 when empty
		written  int64 // last version whose record is written to its file
		err      error // sticky writer error
		closed   bool
		// pins counts the running readers (Replay, Verify) by the first
		// version each reads, from its first check of the log's range
		// on, including its wait for the writer: TruncateFront keeps
		// every segment that holds that version or a later one.
		pins map[int64]int
		// resume is where the last Replay stopped. A Replay from its
		// next version or a later one in that segment starts there
		// instead of skipping the segment's records from its start,
		// so that replaying a log one version at a time costs one
		// record each. Cleared by TruncateBack and Reset, which cut
		// segments; zero when unset.
		resume resumePos
	}
	// written is signalled (with mu held) when mu.written, mu.err or
	// mu.closed change.
	written *sync.Cond

	// rollAt is the version whose record starts a new segment (RollAt);
	// 0 for none. Set by any goroutine, read by the writer.
	rollAt atomic.Int64
	// rollAhead counts the rolls started ahead of their record
	// (startRollAheadLocked); added to under app before Close sets closed,
	// waited for by Close.
	rollAhead sync.WaitGroup

	queue  chan request  // asynchronous mode: encoded records for the writer
	kick   chan struct{} // tells the goroutine that unsynced data appeared
	stop   chan struct{} // closed by Close
	failed chan struct{} // closed when mu.err is set
	wg     sync.WaitGroup

	// batchTaken, set by tests before the first Append, is called by the
	// writer with each batch it has taken off the queue, before it locks w.
	batchTaken func(n int)
}

// request is one item of the writer's queue: an encoded record, or a flush
// marker when done is set.
type request struct {
	entry   *Entry // an entry to encode and write (asynchronous mode)
	size    int    // its record's size, frame included
	version int64
	done    chan error // flush marker: receives the outcome
	sync    bool       // flush marker: fsync (unless SyncNone)
	always  bool       // flush marker: fsync whatever the policy (Sync)
}

// Open opens the log in dir, creating the directory if needed (unless
// opts.ReadOnly).
//
// Open checks every segment header and walks the records of the newest
// segment: it checks each frame header and version and verifies the body
// checksum of the last record; it verifies the other bodies only where the
// segment's records were appended under another policy than
// SyncEveryCommit or through an asynchronous queue (its header says; a
// segment of format version 1, which does not, is read as such), and after
// opts.Discarding (Replay verifies each body it reads; Verify reads them
// all; see the package doc). A torn tail of the
// newest segment (what a crash during an append leaves, see scanSegment)
// is cut off: the file is truncated to the end of the last good record and
// fsynced; a newest segment left without records is removed. A corrupted
// last record is indistinguishable from a torn one and is cut off the same
// way. Other damage that Open meets fails it with an error wrapping
// ErrCorrupt that names the file and offset.
//
// With opts.ReadOnly, Open modifies nothing: the torn tail is just ignored.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{
		dir:    filepath.Clean(dir),
		opts:   opts,
		fs:     opts.fs,
		failed: make(chan struct{}),
		stop:   make(chan struct{}),
		kick:   make(chan struct{}, 1),
	}
	l.written = sync.NewCond(&l.mu.Mutex)
	if err := l.load(); err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		return l, nil
	}
	if opts.AsyncBuffer > 0 {
		l.queue = make(chan request, opts.AsyncBuffer)
	}
	if opts.AsyncBuffer > 0 || opts.Sync == SyncGrouped {
		l.wg.Add(1)
		go l.run()
	}
	// the newest segment holds the other kind of appends: the next record
	// starts a segment of this writer's kind (writeLocked), ahead of it
	l.app.Lock()
	l.startRollAheadLocked(l.LastVersion()+1, func() bool { return l.w.flags != l.appendsFlag() })
	l.app.Unlock()
	return l, nil
}

// create makes the log's directory and its missing parents, and their
// entries in their parents durable, before any record in it can be
// acknowledged.
func (l *Log) create() error {
	var missing []string // the log's directory and its missing parents, innermost first
	for d := filepath.Clean(l.dir); ; d = filepath.Dir(d) {
		if _, err := l.fs.ReadDir(d); !errors.Is(err, iofs.ErrNotExist) {
			break // there, or an error listSegments or MkdirAll reports
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return fmt.Errorf("wal: create %s: %w", l.dir, err)
	}
	for i := len(missing) - 1; i >= 0; i-- { // outermost first
		if err := l.fs.SyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("wal: sync the parent of %s: %w", missing[i], err)
		}
	}
	return nil
}

// load reads the directory, repairs the tail and fills in the state.
func (l *Log) load() (err error) {
	fs, ro := l.fs, l.opts.ReadOnly
	if !ro {
		if err := l.create(); err != nil {
			return err
		}
	}
	bases, tmps, err := listSegments(fs, l.dir)
	if err != nil {
		return fmt.Errorf("wal: list %s: %w", l.dir, err)
	}
	if !ro && len(tmps) > 0 {
		// Segments are created under a temporary name and renamed once
		// their header is durable; leftovers hold no record.
		for _, name := range tmps {
			if err := fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("wal: remove %s: %w", name, err)
			}
		}
		if err := fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("wal: sync %s: %w", l.dir, err)
		}
	}

	segs := make([]segment, 0, len(bases))
	for _, base := range bases {
		s := segment{base: base, path: l.segmentPath(base)}
		f, err := fs.OpenFile(s.path, true)
		if err != nil {
			return openError(s.path, err)
		}
		s.size, s.flags, err = checkSegmentHeader(f, s.path, base)
		f.Close()
		if err != nil {
			return err
		}
		segs = append(segs, s)
	}

	// Find the last version in the newest segment, repairing its tail. A
	// newest segment without records is dropped and the one before it
	// becomes the newest; only the file that was newest on disk may have a
	// torn tail, since a segment is fsynced before the next one is created.
	var last int64
	var active file
	defer func() {
		if err != nil && active != nil {
			active.Close()
		}
	}()
	tail := true
	// base of the last empty segment dropped: the segment before it was
	// fsynced, up to the record of base-1, before it was created
	var dropped int64
	var empty []string // paths of the empty segments dropped, newest first
	for len(segs) > 0 {
		s := &segs[len(segs)-1]
		f, err := fs.OpenFile(s.path, ro)
		if err != nil {
			return openError(s.path, err)
		}
		// what damage a crash can leave depends on how the records
		// were appended: the segment says; a segment of format version
		// 1 does not, and is read as relaxed appends leave it (the
		// writer of either kind may have written it)
		strict := s.flags == flagStrictAppends
		end, lastV, err := scanSegment(f, s.path, s.base, s.size, tail, !tail, strict, l.opts.Discarding)
		for retry := 0; ro && tail && errors.Is(err, io.ErrUnexpectedEOF) && retry < 3; retry++ {
			// A writer opening beside cut the torn tail off this
			// segment after its size was taken: scan what is left.
			size, serr := f.Size()
			if serr != nil || size >= s.size || size < segmentHeaderSize {
				break // not shrunk: the short read is the error
			}
			s.size = size
			end, lastV, err = scanSegment(f, s.path, s.base, s.size, tail, !tail, strict, l.opts.Discarding)
		}
		if err != nil {
			f.Close()
			return err
		}
		tail = false
		if end < s.size {
			l.torn = &TornTail{Path: s.path, Offset: end, Bytes: s.size - end}
		}
		if end < s.size && !ro {
			if err := f.Truncate(end); err != nil {
				f.Close()
				return fmt.Errorf("wal: truncate torn tail of %s: %w", s.path, err)
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("wal: sync %s: %w", s.path, err)
			}
		}
		s.size = end
		if lastV >= s.base && dropped > 0 && lastV != dropped-1 {
			f.Close()
			return corruptAt(s.path, end, "segment ends at version %d but the next segment, %s, empty, starts at %d", lastV, segmentName(dropped), dropped)
		}
		if lastV < s.base && dropped > 0 {
			// a segment is created only after the one before it holds a
			// record: the empty one after this one was created when this
			// one held the records up to its base
			f.Close()
			return corruptAt(s.path, end, "segment holds no record but the next segment, %s, empty, starts at %d", segmentName(dropped), dropped)
		}
		if lastV >= s.base {
			last = lastV
			if ro {
				f.Close()
			} else {
				active = f
			}
			break
		}
		f.Close()
		empty = append(empty, s.path)
		dropped = s.base
		segs = segs[:len(segs)-1]
	}
	// Empty segments go once the one before them is found whole: removed
	// first, they would take with them the evidence of its lost records.
	if !ro && len(empty) > 0 {
		for _, path := range empty {
			if err := fs.Remove(path); err != nil {
				return fmt.Errorf("wal: remove empty segment %s: %w", path, err)
			}
		}
		if err := fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("wal: sync %s: %w", l.dir, err)
		}
	}

	l.mu.segments = segs
	l.mu.last, l.mu.written = last, last
	if len(segs) > 0 {
		l.mu.first = segs[0].base
	}
	if last > 0 {
		l.app.next = last + 1
	}
	if active != nil {
		s := segs[len(segs)-1]
		l.w.f, l.w.base, l.w.size, l.w.wbFrom = active, s.base, s.size, s.size
		l.w.flags = s.flags
		l.w.synced = s.size // by the fsync below, which a writable open needs
		l.w.syncedV = last
	}
	if !ro {
		// A killed writer's unsynced records and entries survive in the
		// page cache, where this open read them: they are made durable
		// before anything is built on them (the next segment, which
		// assumes the older ones durable, or an acknowledged version).
		if active != nil {
			if err := active.Sync(); err != nil {
				return fmt.Errorf("wal: sync %s: %w", segs[len(segs)-1].path, err)
			}
		}
		if err := fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("wal: sync %s: %w", l.dir, err)
		}
	}
	return nil
}

// appendsFlag is the segment header flag of this log's appends:
// flagStrictAppends for synchronous appends under SyncEveryCommit (each
// record written once the one before it is durable), flagRelaxedAppends
// otherwise.
func (l *Log) appendsFlag() uint16 {
	if l.opts.Sync == SyncEveryCommit && l.opts.AsyncBuffer == 0 {
		return flagStrictAppends
	}
	return flagRelaxedAppends
}

// TornTail describes bytes at the end of the newest segment that do not
// form a whole, valid record: what a crash in the middle of an append
// leaves, or a damaged last record, which looks the same.
type TornTail struct {
	Path   string `json:"path"`   // the segment file
	Offset int64  `json:"offset"` // where the torn bytes start
	Bytes  int64  `json:"bytes"`  // how many there are, to the end of the file
}

// TornTail returns the torn tail that Open found: ignored by a read-only
// Open, cut off by a writable one. Either way the versions in it are not
// the log's; a caller should report it, since a damaged last record looks
// the same as an append a crash interrupted.
func (l *Log) TornTail() (TornTail, bool) {
	if l.torn == nil {
		return TornTail{}, false
	}
	return *l.torn, true
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// FirstVersion returns the version of the first readable entry, or 0 when
// the log is empty. After TruncateFront it is the first version of the
// oldest remaining segment, which may be older than the version passed.
func (l *Log) FirstVersion() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.first
}

// LastVersion returns the version of the last appended entry, or 0 when the
// log is empty. In asynchronous mode the entry may still be queued; Replay
// waits for it to be written.
func (l *Log) LastVersion() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.last
}

// WrittenVersion returns the version of the last entry written to its
// segment file (not necessarily fsynced), 0 when none is. In synchronous
// mode it is LastVersion; in asynchronous mode it may lag behind it.
func (l *Log) WrittenVersion() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.written
}

// stickyErr returns the writer error, if any.
func (l *Log) stickyErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

// fail records the first writer error; every later Append, Flush, Close and
// waiting Replay reports it.
func (l *Log) fail(err error) {
	l.mu.Lock()
	if l.mu.err == nil {
		l.mu.err = err
		close(l.failed)
	}
	l.written.Broadcast()
	l.mu.Unlock()
}

// Close flushes queued entries, fsyncs what is unsynced (under every
// policy), stops and joins the background goroutine and closes the files.
// It returns the sticky writer error if there is one. It waits for running
// Replay calls to finish. Later calls return ErrClosed.
func (l *Log) Close() error {
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	l.front.Lock()
	defer l.front.Unlock()
	l.app.Lock()
	if l.app.closed {
		l.app.Unlock()
		return ErrClosed
	}
	var err error
	if l.queue != nil {
		err = l.flushQueueLocked(false)
	}
	l.app.closed = true
	l.app.Unlock()

	close(l.stop)
	l.wg.Wait()
	l.rollAhead.Wait()

	l.w.Lock()
	if err == nil {
		err = l.stickyErr()
	}
	if err == nil && l.w.f != nil && l.w.ahead && l.w.size == segmentHeaderSize {
		// a segment started ahead of a record that never came: removed,
		// so that a closed log ends with a record as it did before
		err = l.dropAheadLocked()
	}
	if l.w.f != nil {
		// after a failed write too: the entries written before it were
		// acknowledged and are intact (not after a failed fsync)
		if !l.w.syncFailed && l.w.unsynced > 0 {
			if serr := l.w.f.Sync(); serr != nil {
				if err == nil {
					err = fmt.Errorf("wal: sync %s: %w", l.segmentPath(l.w.base), fileError(serr))
				}
				l.w.syncFailed = true
				l.discardUnsyncedLocked()
			}
			l.w.unsynced = 0
		}
		if cerr := l.w.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: close %s: %w", l.segmentPath(l.w.base), fileError(cerr))
		}
		l.w.f = nil
	}
	l.w.Unlock()

	l.mu.Lock()
	l.mu.closed = true
	l.written.Broadcast()
	l.mu.Unlock()
	return err
}

// checkWritableLocked checks the preconditions of a modifying call; app
// must be held.
func (l *Log) checkWritableLocked() error {
	if l.app.closed {
		return ErrClosed
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	return l.stickyErr()
}
