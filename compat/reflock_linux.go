//go:build linux

package compat

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/seed-6dfbb450/memiavl/internal/osfile"
)

// lockRefDir takes shared locks on the reference memiavl's lock file for
// the time of a migration, and returns the function that releases them.
// The reference's writer holds an exclusive lock on that file while its
// node runs: an open file description lock (or a POSIX record lock, which
// conflicts with one) where the kernel has them, a flock(2) lock where its
// lock library's probe of them fails. These two kinds do not conflict with
// each other, so both are taken: a running node is reported instead of
// being read while it writes, and a node started meanwhile fails to take
// its lock. The file is opened read-only and never changed; a reference
// directory without one (never opened by a writer) is not locked.
func lockRefDir(refDir string) (func(), error) {
	path := filepath.Join(refDir, "LOCK")
	f, _, err := osfile.OpenRegular(path) // a FIFO would block the open
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	if errors.Is(err, osfile.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	if err != nil {
		return nil, err
	}
	locked := fmt.Errorf("%w: the reference database %s is locked by its writer (is its node running? stop it first)", ErrMigrate, refDir)
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			f.Close()
			return nil, locked
		}
		// no such locks here (kernels before 3.15): flock(2) alone
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, locked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // releases both
}
