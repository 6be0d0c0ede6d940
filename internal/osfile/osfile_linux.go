package osfile

import "golang.org/x/sys/unix"

// StartWriteback starts writing the dirty pages of the file range [off,
// off+n) of fd to disk without waiting for them (n = 0: to the end of the
// file), so that a later fsync finds the work under way. Advisory: an
// error (a file system without the call) is ignored, as the fsync follows.
func StartWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// ExchangeDirs swaps the entries a and b in one step
// (renameat2 with RENAME_EXCHANGE). A file system without it fails with
// EINVAL, ENOSYS or EOPNOTSUPP.
func ExchangeDirs(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// MountRoot reports whether dir is the root of a mount as the kernel knows
// it (statx's STATX_ATTR_MOUNT_ROOT, Linux 5.8 on), a bind mount of a
// directory of the same file system included, which a comparison of
// device numbers misses. It is false where the kernel does not say.
func MountRoot(dir string) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, 0, &st); err != nil {
		return false
	}
	return st.Attributes_mask&st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}
