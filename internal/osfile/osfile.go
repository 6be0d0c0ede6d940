// Package osfile holds the file-system calls whose form differs between
// operating systems: starting the writeback of a file range without
// waiting for it, and exchanging two directories in one step. On Linux
// they are sync_file_range(2) and renameat2(2) with RENAME_EXCHANGE; on
// macOS the exchange is renamex_np(2) with RENAME_SWAP and the writeback
// is left to the fsync that follows it; elsewhere the exchange reports
// ENOSYS, which its callers take for a file system without it.
package osfile
