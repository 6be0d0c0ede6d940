package osfile

import "golang.org/x/sys/unix"

// StartWriteback does nothing on macOS, which has no call to start a
// range's writeback alone: the fsync that follows writes it.
func StartWriteback(fd uintptr, off, n int64) {}

// ExchangeDirs swaps the entries a and b in one step (renamex_np with
// RENAME_SWAP). A file system without it fails with ENOTSUP (EOPNOTSUPP)
// or EINVAL.
func ExchangeDirs(a, b string) error {
	return unix.RenamexNp(a, b, unix.RENAME_SWAP)
}

// MountRoot does not know on macOS whether dir is a mount's root: it
// reports false, and callers compare device numbers.
func MountRoot(dir string) bool { return false }
