// Package wal is the database's write-ahead log: one Entry (the changesets
// and store upgrades of one version) per record, versions strictly
// consecutive, each record checksummed with CRC32C.
//
// # Files
//
// A log is a directory of segment files named after the version of their
// first record, zero-padded to 20 digits ("00000000000000000001.wal").
// The writer appends to the newest segment and starts a new one when the
// next record would take it past Options.SegmentSize, when the record is
// the one RollAt names (a database starts a segment after each snapshot's
// version, so that TruncateFront frees everything the snapshot holds), or
// when the newest segment was written with the other kind of appends (see
// below: synchronous appends under SyncEveryCommit, or any other policy or
// an asynchronous queue). Starting a segment costs fsyncs (the finished
// segment, the new one's header, the directory), so it is done ahead of the
// record when it can be, on a goroutine of the log: at RollAt when the
// record before the named one is written, at a writable Open that finds
// the newest segment of the other kind of appends, and with synchronous
// appends after a record when one as large would not fit (segments then
// end a little before SegmentSize). Such a segment stays empty until its
// record comes; Close removes it if none came, and Open drops an empty
// newest segment, once it has found the segment before it ending with the
// record just before the empty one's base (that segment was fsynced before
// the empty one was created: ending earlier, it lost durable records, and
// Open reports the damage, keeping the empty segment; so it does when the
// segment before is empty too). Every entry with a segment's name must be
// a regular file in the log's directory: Open refuses a symbolic link or a
// directory so named, whose versions it could not account for. Each
// segment starts with a header carrying a magic
// number, the format version and the kind of appends that wrote its
// records. format.go defines the bytes of the header, the record frame and
// the entry encoding. Format version 2 added the kind of appends; version
// 1 segments are read (as relaxed appends leave them, see below), but
// a build that reads only version 1 refuses a log this one has appended to
// (ErrUnsupportedFormat): the change is one way.
//
// # Appending
//
// With Options.AsyncBuffer 0 (synchronous mode) Append encodes the entry
// into the log's own buffer, keeps none of the caller's slices and writes
// the record itself. With AsyncBuffer N > 0 (asynchronous mode) it queues
// the entry itself for a background goroutine and blocks while N entries
// wait: the caller must not modify the entry's slices until Flush returns
// (see Append). The goroutine takes everything queued, encodes it into one
// buffer, writes it with one write call (records are coalesced up to a few
// MiB) and fsyncs at most once for the batch: concurrent appenders share an
// fsync (group commit). A write or fsync failure is sticky: it is returned by the
// next Append, Flush and Close, and the log must be reopened. A failed fsync
// also cuts the active segment back to what the last successful one made
// durable: Linux marks the pages of a failed fsync clean whether or not
// they reached the disk, so the reopened log would otherwise read those
// records back from the page cache and build on them. The reopened log
// ends before them (under SyncEveryCommit, none of them was acknowledged),
// and so does the failed one: WrittenVersion goes back to the last record
// kept, and a Replay of the records cut off returns the sticky error.
//
// # What a crash can lose
//
// A process crash (the program dies, the operating system survives) loses
// only records not yet handed to the operating system: in synchronous mode
// nothing whose Append returned; in asynchronous mode the entries still
// queued or being written, at most 2*AsyncBuffer+1 entries, and nothing
// appended before a Flush that returned.
//
// A machine crash (power loss, kernel panic) loses what was not fsynced.
// Per policy:
//
//   - SyncEveryCommit, synchronous: nothing whose Append returned.
//   - SyncEveryCommit, asynchronous: every batch is fsynced before the next
//     is taken, so at most the queued and in-flight entries, at most
//     2*AsyncBuffer+1, and nothing appended before a Flush that returned.
//   - SyncGrouped: the entries written since the last fsync, fewer than
//     GroupCount, plus in asynchronous mode up to 2*AsyncBuffer+1 queued or
//     in-flight entries; and no entry written more than GroupInterval ago
//     (plus the time of one fsync and scheduling delay), because a timer
//     fsyncs the oldest unsynced entry when it reaches that age. Nothing
//     appended before a Flush that returned.
//   - SyncNone: every entry of the newest segment that the operating system
//     had not yet written back, plus in asynchronous mode the queued
//     entries. Older segments are complete and durable: a segment is
//     fsynced before the next one is created. Flush does not fsync under
//     this policy; Sync and Close do. So that this fsync, in the Append that fills
//     a segment, does not wait for the whole segment to reach the disk, the
//     writer starts the writeback of every 8 MiB it writes without waiting
//     for it (sync_file_range), whatever the policy.
//
// Whatever the policy, a crash loses a suffix of the log, never an entry in
// the middle, as long as the file system persists a file's data in order
// (which fsync guarantees for fsynced data). It can leave a torn last
// record, which Open cuts off. A file system that writes back unsynced
// pages out of order can also leave a page of zeros before later unsynced
// bytes. Where that page holds a record's frame header (zeros from the
// header to the page's end; for a header that crosses into the next page,
// its part in either page zeros to that page's end), Open cuts the log
// there as a torn tail, with everything after it, which no fsync had made
// durable; when the whole page is zeros and starts inside the record
// before, whose body then fails, that record is cut too. So it does where
// the page starts inside a record (a whole page of zeros from a page
// boundary after the record's first byte, in a record whose body checksum
// fails), with whole records after it, as an unsynced batch of records
// larger than a page can leave. With synchronous appends under
// SyncEveryCommit, which write a record only once the one before it is
// durable, a lost page is cut only when no whole record follows it: one
// that does is damage, reported as corruption by Open or, for a page
// inside a record's body, by Replay. Under the other policies the cut is
// taken whatever follows:
// damage of that shape (a page of zeros where a fsynced record was) loses
// the records from it on with only a torn-tail report. Which of the two
// applies is the writer's, not the open's: each segment's header records
// how its records were appended (a writer appends only to a segment of its
// own kind of appends, and starts a new one after an open with the other
// kind), so that an open with other options (a restart under another
// policy, a read-only tool with the defaults) judges a crash's damage as
// the writer's appends leave it. A segment of format version 1, which does
// not record it, is read by every open as relaxed appends leave it (the
// build that wrote it may have run under any policy): a lost page there is
// cut as a torn tail, whatever follows it, so that every open (writable or
// read-only, under any options) reaches the same version. After a power
// loss inside
// TruncateBack, the caller that redoes the rollback passes its target as
// Options.Discarding, and Open cuts damage after it.
//
// # Reading and recovery
//
// Open checks the segment headers and the record frames of the newest
// segment, and repairs a torn tail (a record cut short, or a final record
// whose checksum fails, is cut off; the file is truncated and fsynced).
// In a segment of synchronous appends under SyncEveryCommit it reads no record body
// but the last (and, after damage in the newest segment, what deciding
// whether it is a torn tail takes: the record before it, and for a lost
// page the rest of the segment, checksummed up to twice its size), so it
// costs little however large the log. In one of another policy or of an
// asynchronous queue it verifies every record of the newest
// segment (for a lost page inside a body), holding the largest body in
// memory; and with Options.Discarding, under any policy, every record
// after that version. An older segment is read by Open only when the
// newest holds no whole record (then it is verified whole); otherwise by
// Replay and Verify. Replay verifies every record it reads, and Verify reads them all. A
// damaged record anywhere but at the tail, a damaged segment header or a
// gap in the versions is an error wrapping ErrCorrupt that names the file
// and byte offset (see CorruptionError); the log never serves a record
// whose checksum fails. Replay reads a range of versions and may run while
// entries are appended. TruncateFront drops old segments once their entries
// are in a snapshot; TruncateBack rolls the log back.
package wal
