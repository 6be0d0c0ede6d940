package wal

import (
	"errors"
	"fmt"
	"io/fs"
)

var (
	// ErrCorrupt is wrapped by every error that reports damaged log data:
	// a bad segment header, a record whose checksum fails away from the
	// tail, a gap in the version sequence, a malformed entry body.
	ErrCorrupt = errors.New("wal: corrupt log")

	// ErrUnsupportedFormat reports a segment written in a format version
	// this build does not read.
	ErrUnsupportedFormat = errors.New("wal: unsupported segment format")

	// ErrClosed is returned by every operation on a closed Log.
	ErrClosed = errors.New("wal: log closed")

	// ErrReadOnly is returned by operations that would modify a Log opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("wal: log is read-only")

	// ErrVersionNotNext is returned by Append when the entry's version is
	// not the last version plus one.
	ErrVersionNotNext = errors.New("wal: entry version is not the next version")

	// ErrVersionNotFound is returned by Replay and TruncateBack when a
	// requested version is not in the log.
	ErrVersionNotFound = errors.New("wal: version not in log")

	// ErrInvalidEntry is returned for an entry that cannot be logged
	// (version below 1).
	ErrInvalidEntry = errors.New("wal: invalid entry")

	// ErrEntryTooLarge is returned for an entry whose encoding exceeds
	// MaxEntrySize.
	ErrEntryTooLarge = errors.New("wal: entry too large")

	// ErrInvalidOptions is returned by Open for options out of range.
	ErrInvalidOptions = errors.New("wal: invalid options")
)

// CorruptionError locates damaged data: the segment file and the byte offset
// of the record (or header) that failed. It wraps ErrCorrupt.
type CorruptionError struct {
	File   string // path of the segment file
	Offset int64  // byte offset of the damaged record or header in File
	Reason string
	Err    error // underlying error, if any (e.g. from DecodeEntry)
}

func (e *CorruptionError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("wal: corrupt segment %s at offset %d: %s: %v", e.File, e.Offset, e.Reason, e.Err)
	}
	return fmt.Sprintf("wal: corrupt segment %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt and the underlying error, so errors.Is matches
// ErrCorrupt (and ErrUnsupportedFormat when that is the cause).
func (e *CorruptionError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

// openError wraps the failed open of the file at path, naming the path
// once: the os package's errors name it already.
func openError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return fmt.Errorf("wal: %w", err)
	}
	return fmt.Errorf("wal: open %s: %w", path, err)
}

// fileError is the error of an operation on an open segment file, without
// the file name the os package's error carries: a segment is created under
// a temporary name and renamed, and its *os.File keeps the old name, a
// file that no longer exists. The caller names the segment.
func fileError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
