package snapshot

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt reports a snapshot whose bytes break the format: a bad
	// magic, a length or count that does not add up, an index or offset out
	// of range, a wrong hash. The wrapping error names the file and offset.
	ErrCorrupt = errors.New("snapshot: corrupt")
	// ErrChecksum reports a CRC32C mismatch. It is always returned together
	// with ErrCorrupt (errors.Is matches both).
	ErrChecksum = errors.New("snapshot: checksum mismatch")
	// ErrFormatVersion reports a meta file of a format version this package
	// does not read.
	ErrFormatVersion = errors.New("snapshot: unsupported format version")
	// ErrOutOfRange reports a leaf range argument outside the snapshot.
	ErrOutOfRange = errors.New("snapshot: index out of range")
	// ErrClosed reports use of a closed Snapshot or a finished Writer.
	ErrClosed = errors.New("snapshot: closed")

	// ErrExists reports that the directory a Writer should create exists.
	ErrExists = errors.New("snapshot: directory already exists")
	// ErrKeyOrder reports a leaf whose key is not greater than the previous one.
	ErrKeyOrder = errors.New("snapshot: keys not strictly increasing")
	// ErrTreeShape reports writer input that is not the post-order of a
	// balanced binary tree: a branch without two pending subtrees, a wrong
	// size or height, unbalanced children, or more than one subtree left at
	// Finish.
	ErrTreeShape = errors.New("snapshot: invalid tree shape")
	// ErrInvalidNode reports a node the format cannot hold: a hash that is
	// not HashSize bytes, a version outside [1, tree version], a key or value
	// longer than 2^32-1 bytes, more than MaxLeaves leaves.
	ErrInvalidNode = errors.New("snapshot: invalid node")
)

// corruptAt returns an ErrCorrupt error naming the file path and the byte
// offset in it.
func corruptAt(path string, off uint64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, path, off, fmt.Sprintf(format, args...))
}

// checksumError returns an error matching both ErrCorrupt and ErrChecksum.
func checksumError(path string, want, got uint32) error {
	return fmt.Errorf("%w: %w: %s: crc32c %#08x, meta records %#08x", ErrCorrupt, ErrChecksum, path, got, want)
}
