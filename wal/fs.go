package wal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
)

// fileSystem is the seam through which the log does all its file I/O, so
// tests can inject write and sync failures and simulate crashes that keep
// only what was fsynced. Paths are full paths.
type fileSystem interface {
	MkdirAll(dir string) error
	// ReadDir returns the names of the entries in dir.
	ReadDir(dir string) ([]string, error)
	// Create creates (or truncates) a file for reading and writing.
	Create(path string) (file, error)
	// OpenFile opens an existing file, for writing too unless readOnly.
	OpenFile(path string, readOnly bool) (file, error)
	Rename(oldPath, newPath string) error
	Remove(path string) error
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
}

// file is an open file. The log writes with WriteAt at offsets it tracks.
type file interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
}

// osFS is the operating system's file system.
type osFS struct{}

type osFile struct{ *os.File }

// writebackChunk is how many bytes written to a segment start their
// writeback (see writebacker).
const writebackChunk = 8 << 20

// writebacker is a file that can start writing a range back to disk without
// waiting for it. Advisory: a file system without the call changes
// nothing, as the fsyncs still come.
type writebacker interface {
	startWriteback(off, n int64)
}

func (f osFile) startWriteback(off, n int64) {
	osfile.StartWriteback(f.Fd(), off, n)
}

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		} else if IsSegmentFile(e.Name()) {
			// skipped, a segment linked in from elsewhere would lose its
			// versions (and let the writer append them anew); a directory
			// would fail the roll onto its name
			return nil, fmt.Errorf("%s is not a regular file (%s): a log segment must be one, in the log's directory",
				filepath.Join(dir, e.Name()), e.Type())
		}
	}
	return names, nil
}

func (osFS) Create(path string) (file, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenFile(path string, readOnly bool) (file, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Rename(oldPath, newPath string) error { return os.Rename(oldPath, newPath) }

func (osFS) Remove(path string) error { return os.Remove(path) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// A file system that refuses fsync on directories (EINVAL) cannot make
	// a new segment's name durable: reported, as the database's own
	// directory fsyncs report it.
	return err
}
