package multitree

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Directory layout of a database:
//
//	<dir>/LOCK                      held (flock) by the writer
//	<dir>/current                   name of the current snapshot directory (see below)
//	<dir>/rollback                  present while a rollback runs: its target (see below)
//	<dir>/rollbacks                 how many rollbacks were begun, once there was one (see below)
//	<dir>/import                    present while an import writes the database, or while it is removed (see below)
//	<dir>/first                     the database's first version (see below)
//	<dir>/snapshot-<version>/       one per kept snapshot; <version> is 20 zero-padded digits
//	    metadata                    the version, initial version and the stores' root hashes
//	    <tree dir>/                 one snapshot (package snapshot) per store
//	<dir>/wal/                      the changeset log (package wal)
//
// A snapshot directory is written under "<name>.tmp", each file fsynced, then
// renamed into place and the parent directory fsynced; "current" is replaced
// the same way. A pruned snapshot directory is first renamed to
// "<name>.pruned.tmp", then removed, so that readers list it whole or not at
// all. The database's leftover ".tmp" entries (of snapshot directories and of
// current, rollback and rollbacks) are removed by the next writer Open; other
// entries are left alone.
//
// An import makes "import" (an empty file, fsynced with the directory)
// before anything else it writes in the directory, and removes it once "current" is written and the database
// opens. Giving a database up (a failed import, RemoveDatabase) writes it
// before removing "current" and removes it after the rest. A directory without
// "current" that holds a snapshot other than snapshot 0, or a log with
// entries, is a database that lost "current" unless "import" is there to
// say that an interrupted import left them: Open and Import refuse it
// (ErrCorrupt), where they would otherwise take it for empty and remove its
// snapshots. A writer Open of a database with "current" removes an
// "import" left by an import stopped after writing "current".
//
// An import with a last step that commits versions on the imported
// database before it is complete (ImportOptions.Finish) writes "import"
// with the content "finishing\n" (10 bytes) instead, and removes it once
// that step has ended and the database is closed. Every Open and
// LatestVersion refuse a directory with "current" and such an "import"
// (ErrUnfinishedImport): the database there is not the import's result.
// The next import into the directory, and RemoveDatabase, give it up.
// Any other content than none or "finishing\n" can only be damage (the
// marker is made durable before anything of the database is written), and
// counts as an unfinished import as well (ErrUnfinishedImport and
// ErrCorrupt).
// (Builds before this content existed take it for an import stopped after
// writing "current".)
//
// The "first" file (little-endian):
//
//	0       4     magic 0x4D545346 ("FSTM" on disk)
//	4       4     format version (1)
//	8       8     the database's first version (int64): of its first commit, or of its import
//	16      4     CRC32C of the preceding 16 bytes
//
// The first commit of a database at snapshot 0 writes it (atomically, as
// "current") before it appends the version to the log. While snapshot 0 is
// the snapshot an open starts from, the log must begin with that version:
// a log that begins later has lost its first segment, which nothing else
// would show, since a database's first version may be any (its initial
// version). Databases written before the file existed have none and are
// not checked. An import at a version above 0 writes it (before
// "current") with that version. A version before it was never committed
// here: once the snapshots before a version are pruned, the file tells such
// a version (ErrBeforeFirstVersion) from one that was (ErrVersion).
// Databases imported before imports wrote the file have none, and report
// ErrVersion for the versions before their import.
//
// A store's tree directory is "s-" followed by its name when the name consists
// only of [A-Za-z0-9_.-] (and is at most 100 bytes), else "x-" and the name in
// lower-case hex.
//
// The metadata file (little-endian):
//
//	offset  size  field
//	0       4     magic 0x4D544D44 ("DMTM" on disk)
//	4       4     format version (1)
//	8       8     version of the snapshot (int64)
//	16      8     initial version of the database (int64)
//	24      4     store count N
//	28      ...   N stores sorted by name, each:
//	                2   name length L
//	                L   name
//	                32  root hash of the store's tree at the version
//	end-4   4     CRC32C (Castagnoli) of every preceding byte
//
// The "current" file (little-endian):
//
//	0       4     magic 0x4D544350 ("PCTM" on disk)
//	4       8     version of the current snapshot (int64)
//	12      4     CRC32C of the preceding 12 bytes
//
// The "rollback" file (little-endian):
//
//	0       4     magic 0x4D544252 ("RBTM" on disk)
//	4       4     format version (1)
//	8       8     target: the version after which the rollback discards all (int64)
//	16      4     CRC32C of the preceding 16 bytes
//
// A writer Open with Rollback writes it (atomically, as "current") before it
// changes anything and removes it once the newer snapshots are gone and the
// log is cut back; while it exists, every Open treats the target as the
// latest version and a writer Open finishes the rollback first, so that an
// interrupted rollback is seen whole or not at all.
//
// The "rollbacks" file (little-endian):
//
//	0       4     magic 0x4D434252 ("RBCM" on disk)
//	4       4     format version (1)
//	8       8     count of the rollbacks begun in the database (uint64)
//	16      4     CRC32C of the preceding 16 bytes
//
// A writer Open that rolls back writes the count plus one (atomically, as
// "current") before the "rollback" file; a missing file counts 0. A
// rollback cuts the log back in place and the next commits write other
// versions where the discarded ones were, changing neither "current" nor
// the kept snapshots when the cut is at or after the current snapshot; the
// count is what readers beside the writer (read-only opens, their
// historical views, Verify, LatestVersion) compare before and after they
// read, to know that what they read is still the database's history. They
// fail with ErrCorrupt on a damaged file, which the next writer Open
// replaces with a count taken from the clock (any count a reader does not
// hold will do).
const (
	metadataMagic   uint32 = 0x4D544D44
	metadataFormat  uint32 = 1
	currentMagic    uint32 = 0x4D544350
	currentFileSize        = 16
	rollbackMagic   uint32 = 0x4D544252
	rollbackFormat  uint32 = 1
	rollbacksMagic  uint32 = 0x4D434252
	rollbacksFormat uint32 = 1
	firstMagic      uint32 = 0x4D545346
	firstFormat     uint32 = 1
	smallFileSize          = 20 // of "rollback" and "rollbacks"
	hashSize               = 32
	// maxStoreName bounds a store name: its tree directory's name
	// ("x-" and the name in hex, see treeDirName), with the suffix of the
	// temporary name it is written under (".tmp-" and up to 10 digits),
	// must fit the 255 bytes file systems allow
	maxStoreName = 120

	lockFileName     = "LOCK"
	currentFileName  = "current"
	rollbackFileName = "rollback"
	rollbacksName    = "rollbacks"
	importFileName   = "import"
	firstFileName    = "first"
	walDirName       = "wal"
	metadataFileName = "metadata"
	snapshotPrefix   = "snapshot-"
	tmpSuffix        = ".tmp"
	prunedSuffix     = ".pruned" // before tmpSuffix: a snapshot directory being removed
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// storeInfo is one store's entry in a snapshot's metadata.
type storeInfo struct {
	Name string
	Hash []byte
}

// metadata describes a snapshot directory.
type metadata struct {
	Version        int64
	InitialVersion int64
	Stores         []storeInfo // sorted by name
}

func (m *metadata) encode() []byte {
	stores := append([]storeInfo(nil), m.Stores...)
	sort.Slice(stores, func(i, j int) bool { return stores[i].Name < stores[j].Name })
	b := make([]byte, 28, 64+len(stores)*64)
	binary.LittleEndian.PutUint32(b[0:], metadataMagic)
	binary.LittleEndian.PutUint32(b[4:], metadataFormat)
	binary.LittleEndian.PutUint64(b[8:], uint64(m.Version))
	binary.LittleEndian.PutUint64(b[16:], uint64(m.InitialVersion))
	binary.LittleEndian.PutUint32(b[24:], uint32(len(stores)))
	for _, s := range stores {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Name)))
		b = append(b, s.Name...)
		b = append(b, s.Hash...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeMetadata(path string, b []byte) (*metadata, error) {
	bad := badAt(path)
	if len(b) < 32 {
		return nil, bad(0, "file is %d bytes, shorter than the minimum 32", len(b))
	}
	if got, want := crc32.Checksum(b[:len(b)-4], castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, bad(len(b)-4, "checksum %08x, computed %08x", want, got)
	}
	if m := binary.LittleEndian.Uint32(b); m != metadataMagic {
		return nil, bad(0, "magic %08x, want %08x", m, metadataMagic)
	}
	if f := binary.LittleEndian.Uint32(b[4:]); f != metadataFormat {
		return nil, bad(4, "format version %d, this build reads %d", f, metadataFormat)
	}
	m := &metadata{
		Version:        int64(binary.LittleEndian.Uint64(b[8:])),
		InitialVersion: int64(binary.LittleEndian.Uint64(b[16:])),
	}
	if m.Version < 0 || m.InitialVersion < 0 {
		return nil, bad(8, "negative version")
	}
	n := int(binary.LittleEndian.Uint32(b[24:]))
	off, end := 28, len(b)-4
	for i := 0; i < n; i++ {
		if off+2 > end {
			return nil, bad(off, "store %d of %d truncated", i, n)
		}
		l := int(binary.LittleEndian.Uint16(b[off:]))
		if l == 0 || l >= maxStoreName {
			// as validateStoreName: the writer never records such a
			// name, and an empty one breaks the SDK's commit info
			return nil, bad(off, "store %d of %d: name of %d bytes, not 1 to %d", i, n, l, maxStoreName-1)
		}
		off += 2
		if off+l+hashSize > end {
			return nil, bad(off, "store %d of %d truncated", i, n)
		}
		s := storeInfo{Name: string(b[off : off+l]), Hash: bytes.Clone(b[off+l : off+l+hashSize])}
		if i > 0 && s.Name <= m.Stores[i-1].Name {
			return nil, bad(off, "store names out of order")
		}
		m.Stores = append(m.Stores, s)
		off += l + hashSize
	}
	if off != end {
		return nil, bad(off, "%d trailing bytes", end-off)
	}
	return m, nil
}

func encodeCurrent(version int64) []byte {
	b := make([]byte, 12, currentFileSize)
	binary.LittleEndian.PutUint32(b, currentMagic)
	binary.LittleEndian.PutUint64(b[4:], uint64(version))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCurrent(path string, b []byte) (int64, error) {
	if len(b) != currentFileSize || binary.LittleEndian.Uint32(b) != currentMagic ||
		crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, fmt.Errorf("%w: %s is not a valid current-snapshot pointer", ErrCorrupt, path)
	}
	v := int64(binary.LittleEndian.Uint64(b[4:]))
	if v < 0 {
		return 0, fmt.Errorf("%w: %s names negative version %d", ErrCorrupt, path, v)
	}
	return v, nil
}

// encodeSmall returns the bytes of a small file of this format: magic,
// format version, an 8-byte value, and the CRC32C of the 16 bytes before
// it (the "rollback" and "rollbacks" files).
func encodeSmall(magic, format uint32, v uint64) []byte {
	b := make([]byte, 16, smallFileSize)
	binary.LittleEndian.PutUint32(b, magic)
	binary.LittleEndian.PutUint32(b[4:], format)
	binary.LittleEndian.PutUint64(b[8:], v)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSmall checks the bytes of a small file written by encodeSmall and
// returns its value; bad reports damage at an offset.
func decodeSmall(b []byte, magic, format uint32, bad func(off int, format string, args ...any) error) (uint64, error) {
	if len(b) != smallFileSize {
		return 0, bad(0, "file is %d bytes, want %d", len(b), smallFileSize)
	}
	if got, want := crc32.Checksum(b[:16], castagnoli), binary.LittleEndian.Uint32(b[16:]); got != want {
		return 0, bad(16, "checksum %08x, computed %08x", want, got)
	}
	if m := binary.LittleEndian.Uint32(b); m != magic {
		return 0, bad(0, "magic %08x, want %08x", m, magic)
	}
	if f := binary.LittleEndian.Uint32(b[4:]); f != format {
		return 0, bad(4, "format version %d, this build reads %d", f, format)
	}
	return binary.LittleEndian.Uint64(b[8:]), nil
}

// badAt returns the reporter of damage in the file at path.
func badAt(path string) func(off int, format string, args ...any) error {
	return func(off int, format string, args ...any) error {
		return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, path, off, fmt.Sprintf(format, args...))
	}
}

func encodeRollback(target int64) []byte {
	return encodeSmall(rollbackMagic, rollbackFormat, uint64(target))
}

func decodeRollback(path string, b []byte) (int64, error) {
	return decodeVersionFile(path, b, rollbackMagic, rollbackFormat, "rollback target")
}

func encodeFirst(v int64) []byte {
	return encodeSmall(firstMagic, firstFormat, uint64(v))
}

func decodeFirst(path string, b []byte) (int64, error) {
	return decodeVersionFile(path, b, firstMagic, firstFormat, "first version")
}

// decodeVersionFile decodes a small file whose value is a version (what
// names it in errors).
func decodeVersionFile(path string, b []byte, magic, format uint32, what string) (int64, error) {
	bad := badAt(path)
	u, err := decodeSmall(b, magic, format, bad)
	if err != nil {
		return 0, err
	}
	if v := int64(u); v <= 0 {
		return 0, bad(8, "%s %d is not a version", what, v)
	}
	return int64(u), nil
}

func encodeRollbacks(count uint64) []byte {
	return encodeSmall(rollbacksMagic, rollbacksFormat, count)
}

func decodeRollbacks(path string, b []byte) (uint64, error) {
	bad := badAt(path)
	n, err := decodeSmall(b, rollbacksMagic, rollbacksFormat, bad)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, bad(8, "count 0: the file is written by a rollback")
	}
	return n, nil
}

func snapshotDirName(version int64) string {
	return fmt.Sprintf("%s%020d", snapshotPrefix, version)
}

// parseSnapshotDirName returns the version of a snapshot directory name.
func parseSnapshotDirName(name string) (int64, bool) {
	if !strings.HasPrefix(name, snapshotPrefix) || len(name) != len(snapshotPrefix)+20 {
		return 0, false
	}
	v, err := strconv.ParseInt(name[len(snapshotPrefix):], 10, 64)
	// only the database's own spelling: ParseInt takes a sign too, and a
	// name like "snapshot-+0000000000000000012" would sort before the
	// others, which the listing relies on
	return v, err == nil && v >= 0 && snapshotDirName(v) == name
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,100}$`)

func treeDirName(store string) string {
	if plainName.MatchString(store) {
		return "s-" + store
	}
	return "x-" + hex.EncodeToString([]byte(store))
}

func validateStoreName(name string) error {
	if name == "" || len(name) >= maxStoreName {
		return fmt.Errorf("%w: store name %q must be 1 to %d bytes", ErrInvalidOptions, name, maxStoreName-1)
	}
	return nil
}
