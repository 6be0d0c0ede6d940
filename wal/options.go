package wal

import (
	"fmt"
	"time"
)

// SyncPolicy says when the log calls fsync. The package documentation lists
// what a crash can lose under each policy.
type SyncPolicy int

const (
	// SyncEveryCommit fsyncs before an entry is acknowledged: in
	// synchronous mode before Append returns, in asynchronous mode after
	// every batch the writer writes, and always before Flush returns.
	SyncEveryCommit SyncPolicy = iota
	// SyncGrouped fsyncs once GroupCount entries are unsynced or the oldest
	// unsynced entry is GroupInterval old, whichever comes first, and
	// before Flush returns.
	SyncGrouped
	// SyncNone never fsyncs entries on the append path; write-back is left
	// to the operating system. Segment rollover, repair, truncation and
	// Close still fsync.
	SyncNone
)

func (p SyncPolicy) String() string {
	switch p {
	case SyncEveryCommit:
		return "every-commit"
	case SyncGrouped:
		return "grouped"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// Defaults filled in by Open for zero option fields.
const (
	DefaultSegmentSize   = 64 << 20
	DefaultGroupInterval = 10 * time.Millisecond
	DefaultGroupCount    = 64
)

// MaxAsyncBuffer bounds Options.AsyncBuffer: the queue's slots are
// allocated when the log opens.
const MaxAsyncBuffer = 1 << 16

// MinSegmentSize is the smallest SegmentSize: one byte more than a
// segment's header.
const MinSegmentSize = segmentHeaderSize + 1

// Options configure a Log. The zero value is valid: 64 MiB segments,
// SyncEveryCommit, synchronous appends.
type Options struct {
	// SegmentSize is the size at which the writer starts a new segment
	// file. A segment holds at least one record, so an entry larger than
	// SegmentSize gets a segment of its own. With synchronous appends the
	// next segment is started once a record as large as the last would not
	// fit (see the package documentation). 0 means DefaultSegmentSize.
	SegmentSize int64

	// Sync is the fsync policy.
	Sync SyncPolicy

	// GroupInterval bounds how long an entry stays unsynced under
	// SyncGrouped. 0 means DefaultGroupInterval.
	GroupInterval time.Duration

	// GroupCount bounds how many entries stay unsynced under SyncGrouped.
	// 0 means DefaultGroupCount.
	GroupCount int

	// AsyncBuffer selects the append mode. 0: Append writes (and fsyncs
	// per policy) before it returns. N > 0: Append checks and sizes the
	// entry and queues the entry itself (its slices are not copied) for a
	// background writer, which encodes and writes it; at most N entries
	// wait in the queue, and Append blocks while the queue is full. At
	// most MaxAsyncBuffer.
	AsyncBuffer int

	// ReadOnly opens the log for Replay only: no file is created, repaired
	// or removed, and a torn tail is ignored rather than truncated.
	ReadOnly bool

	// Discarding, when positive, tells Open that the entries after this
	// version are being discarded (a rollback to it, which TruncateBack
	// did not finish, is redone after Open): damage in the newest segment
	// after this version's record is then a torn tail, not corruption. A
	// power loss while TruncateBack cut a segment can leave a zeroed page
	// before the records it was dropping.
	Discarding int64

	// fs replaces the operating system's file system (tests inject faults
	// and simulate crashes through it). nil means the real one.
	fs fileSystem
}

// withDefaults returns a copy of o with defaults filled in, or an error
// wrapping ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	if o.Discarding < 0 {
		return o, fmt.Errorf("%w: Discarding %d is negative", ErrInvalidOptions, o.Discarding)
	}
	if o.SegmentSize < 0 {
		return o, fmt.Errorf("%w: SegmentSize %d is negative", ErrInvalidOptions, o.SegmentSize)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.SegmentSize <= segmentHeaderSize {
		return o, fmt.Errorf("%w: SegmentSize %d does not exceed the %d-byte segment header", ErrInvalidOptions, o.SegmentSize, segmentHeaderSize)
	}
	switch o.Sync {
	case SyncEveryCommit, SyncGrouped, SyncNone:
	default:
		return o, fmt.Errorf("%w: unknown sync policy %d", ErrInvalidOptions, int(o.Sync))
	}
	if o.GroupInterval < 0 {
		return o, fmt.Errorf("%w: GroupInterval %v is negative", ErrInvalidOptions, o.GroupInterval)
	}
	if o.GroupInterval == 0 {
		o.GroupInterval = DefaultGroupInterval
	}
	if o.GroupCount < 0 {
		return o, fmt.Errorf("%w: GroupCount %d is negative", ErrInvalidOptions, o.GroupCount)
	}
	if o.GroupCount == 0 {
		o.GroupCount = DefaultGroupCount
	}
	if o.AsyncBuffer < 0 {
		return o, fmt.Errorf("%w: AsyncBuffer %d is negative", ErrInvalidOptions, o.AsyncBuffer)
	}
	if o.AsyncBuffer > MaxAsyncBuffer {
		return o, fmt.Errorf("%w: AsyncBuffer %d above the maximum of %d", ErrInvalidOptions, o.AsyncBuffer, MaxAsyncBuffer)
	}
	if o.fs == nil {
		o.fs = osFS{}
	}
	return o, nil
}
