//go:build linux

package compat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockRefDir takes a shared lock on the reference memiavl's lock file for
// the time of a migration, and returns the function that releases it. The
// reference's writer holds an exclusive lock on that file (an open
// file description lock, or a POSIX record lock, which conflict with this
// one) while its node runs: a running node is reported instead of being
// read while it writes, and a node started meanwhile fails to take its
// lock. The file is opened read-only and never changed; a reference
// directory without one (never opened by a writer) is not locked.
func lockRefDir(refDir string) (func(), error) {
	path := filepath.Join(refDir, "LOCK")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: the reference database %s is locked by its writer (is its node running? stop it first)", ErrMigrate, refDir)
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			return func() {}, nil // no such locks here (kernels before 3.15)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
