//go:build !linux && !darwin

package osfile

import "syscall"

// StartWriteback does nothing here: the fsync that follows writes the
// range.
func StartWriteback(fd uintptr, off, n int64) {}

// ExchangeDirs fails with ENOSYS here: callers swap by two renames.
func ExchangeDirs(a, b string) error { return syscall.ENOSYS }

// MountRoot does not know here whether dir is a mount's root: it reports
// false, and callers compare device numbers.
func MountRoot(dir string) bool { return false }
