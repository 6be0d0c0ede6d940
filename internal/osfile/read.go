package osfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is returned by ReadRegular for a path that names anything
// but a regular file: a FIFO (whose read would block until a writer came),
// a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned by ReadRegular for a file over its limit.
var ErrTooLarge = errors.New("file larger than expected")

// OpenRegular opens the file at path for reading, which must be a regular
// file (links followed), and returns it with its information. Anything
// else is refused with ErrNotRegular (returned with the file's
// information) without being opened, so a device is not touched, and the
// open itself does not block, so a FIFO put in place of the file between
// the check and the open is refused too instead of waiting forever for a
// writer.
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, notRegular(path, fi)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, notRegular(path, fi)
	}
	return f, fi, nil
}

func notRegular(path string, fi os.FileInfo) error {
	return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
}

// ReadRegular reads the file at path, which must be a regular file (links
// followed, see OpenRegular) of at most limit bytes; limit < 0 sets no
// bound. A missing file is an error wrapping fs.ErrNotExist, as from
// os.ReadFile.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if limit >= 0 && fi.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, at most %d expected", path, ErrTooLarge, fi.Size(), limit)
	}
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit >= 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}
