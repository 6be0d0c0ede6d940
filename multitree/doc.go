// Package multitree is the database: a set of named IAVL trees (one per
// module store of a Cosmos SDK chain) committed together, with a write-ahead
// log, memory-mapped snapshots rewritten in the background, and read views
// that never wait for the writer.
//
// # Lifecycle
//
// Open maps the current snapshot (see the directory layout in format.go),
// verifies the root hashes its metadata records against each tree's meta
// file and root record (one record read per tree), and replays the log
// entries written after the snapshot. Each block then applies its changes
// (Set, Delete, ApplyChangeSets, ApplyUpgrades), and Commit saves every tree,
// appends the block's changes to the log and returns the SDK CommitInfo whose
// Hash() is the app hash rootmulti computes over cosmos/iavl stores with the
// same contents.
//
// Every SnapshotInterval versions a background goroutine writes a snapshot of
// the just committed, immutable version (trees in parallel) and maps it.
// While a goroutine of its own makes the snapshot durable, renames it into
// place and points "current" at it (the fsyncs wait on the disk), the
// rewrite catches up with the versions committed meanwhile by rebasing the
// latest committed trees onto the new snapshot (memiavl.Rebaser): nodes up
// to the snapshot's version become references into it, and only the nodes
// created since are copied, once; once the snapshot is current, more
// rounds catch up with the versions committed while that took. A
// later Commit switches to the new trees after rebasing the few versions
// committed since the last catch-up round, a pause that depends on the
// changes of those versions, not on the state's size. Across store upgrades
// the catch-up replays the log instead. Old snapshots beyond
// SnapshotKeepRecent and the log entries before the oldest kept snapshot
// are then removed in the background, as they are after a synchronous
// RewriteSnapshot. Open prunes no snapshot older than the current one
// (except when the log no longer reaches back to them: see below): it
// cannot tell those a crash kept from a prune from those a larger
// SnapshotKeepRecent kept, so both stay until the next rewrite's prune.
// Close cancels and joins all of it, and returns a failure of it that no
// Commit has reported. RewriteRateLimit paces the background rewrite's
// file writes (all trees together) so that it leaves the disk and the page
// cache to a running node; the synchronous RewriteSnapshot is not paced.
//
// # Durability
//
// A version is durable when its log entry is: with AsyncCommitBuffer 0 and
// wal.SyncEveryCommit, before Commit returns. With an asynchronous buffer or
// another sync policy, a crash may lose the last versions as package wal
// documents; reopening then lands on the last durable version, never on a
// corrupt one. Snapshots are written under temporary names, fsynced and
// renamed, so a crash during a rewrite leaves the previous snapshot current
// and the leftovers are removed by the next writer Open. A rewrite writes
// every store's snapshot inside one temporary directory and fsyncs all
// their files and directories at once (snapshot.SyncGroup) before renaming
// it into place: one round of fsyncs instead of a chain per store.
//
// These hold across a power loss, where only fsynced data and directory
// entries fsynced in their parent survive, not only across a killed
// process: the database directory and the log's are fsynced in their
// parents when created, each rename into place is followed by an fsync of
// the directory before anything depends on it, the log's segments are
// removed one durable removal at a time, so that what survives is a
// contiguous run of versions, and a writer Open first makes durable what a
// killed writer left in the page cache (renames in the directory, the
// log's last records) before it acts on it (TestFsyncOrder replays traced
// processes against that model).
//
// A version whose changes encode to more than one log record holds
// (wal.MaxEntrySize, 1 GiB), such as a large genesis or an upgrade that
// migrates a whole store, is made durable by a snapshot instead: its Commit
// drops a background rewrite in progress, flushes the log, writes a
// snapshot of the version synchronously, makes it current and empties the
// log, which resumes with the next version. Such a Commit takes as long as
// an offline rewrite. The emptied log could no longer roll the older
// snapshots forward, so they are removed first, whatever SnapshotKeepRecent
// says: ViewAt and TargetVersion refuse the versions before the large one
// with ErrVersion. Open handles a log that is empty or ends before the
// current snapshot (a crash inside such a Commit, or a log whose end was
// lost) the same way: it removes the older snapshots, then empties the log.
// Under every fsync policy the log is fsynced up to a snapshot before
// current names it, so a machine crash under a relaxed policy loses only
// log entries after the snapshot current names. A read beside the writer (a read-only Open, a
// ViewAt) that finds, after its replay, that the snapshot it started from
// was removed meanwhile starts again from a kept one, as the log it read
// may no longer have reached back to it.
//
// Reads are served from the snapshot files as they are, so Open checks
// their checksums (Options.OpenCheck): by default on a goroutine of the
// database after Open returns, so that a restart costs no full read, with
// damage reported by the next Commit (after it commits its version, as an
// error wrapping ErrCorrupt), by WaitOpenCheck, or by Close if the check
// had ended (Close stops a check still running); or before
// Open returns (OpenCheckSync); or not at all. The check reads the files
// with read(2), not through their mappings, so it adds nothing to the
// process's resident memory; RewriteRateLimit paces the background one. It
// opens the files of one store at a time; the background check keeps the
// snapshot mapped until it ends (a switch meanwhile unmaps it then).
//
// A write that fails (a full disk, an I/O error) is reported, never
// half-applied. A rewrite checks the checksums of the snapshot files it
// copies from while it writes and fails with ErrCorrupt on a mismatch, so
// damaged bytes never get checksums of their own in a new snapshot (and the
// older snapshots are not pruned). A failed background rewrite is reported
// by the next Commit, wrapped as ErrRewrite along with the version that
// Commit did commit; the database keeps working from its previous snapshot
// and tries again one interval later. A Commit that cannot write the log
// returns the error and the database refuses every later change and commit
// with ErrBroken: the versions committed before stay readable, except
// that ViewAt fails with ErrVersion for the versions whose log records
// the failure lost (with an AsyncCommitBuffer, those still queued; after a
// failed fsync under the relaxed fsync policies, those written since the
// last fsync, which the log cuts off) unless their view is cached or is
// the latest, and reopening the database continues from the last version
// the log holds.
//
// # Reads
//
// View returns a reference-counted view of the latest committed version; it is
// published with an atomic pointer, so readers never take the writer's lock.
// ViewAt rebuilds an older version from the newest kept snapshot at or below
// it plus the log, and caches a few. A view pins the snapshots it reads:
// files are unmapped only when the last view of them is released, even after
// the database switched snapshots or deleted the directories. A version
// rebuilt from a snapshot the database maps already (its current one,
// another view's) shares that mapping: a database maps a snapshot directory once at
// a time, up to 5 memory maps per store that holds keys, however many
// views read it (a process may hold only vm.max_map_count maps). The unmapping
// runs on a goroutine of its own: its time grows with the pages mapped, so
// neither the Commit nor the reader that releases the last reference waits
// for it. Close waits for the unmappings under way.
//
// An iterator of a working tree (WorkingTree) holds the snapshots of the
// trees it was made on in the same way until its Close (or, if it is
// never closed, until the garbage collector finds it unreachable), so
// that it may be kept across Commits, switches to new snapshots and
// Close: after the DB replaced its tree it reads the tree as it was last
// changed, and it keeps that tree's in-memory nodes reachable meanwhile.
//
// A point read (Get, Has) of a key that no version since the snapshot has
// changed goes straight to the snapshot's lookup table: each tree keeps a
// filter of the keys changed since its snapshot (a chain of Bloom filters;
// a key it has never been given has certainly not changed), and only the
// keys it reports descend the in-memory nodes. A background rewrite starts
// the filter of the trees it will switch to when it starts, so that the
// switch hands it over without rebuilding it.
//
// # Memory model
//
//   - Snapshot data is mapped, not read: it lives in the page cache and is
//     not counted against the heap. The pages a process has touched count
//     in its resident size; random updates touch every page of the current
//     snapshot within a few blocks. Around a background switch two
//     snapshots are resident: the catch-up's first round reads the new one
//     all over (the hash of each node it maps into it, the keys of the
//     branches it copies) while the working trees still read the old one,
//     which is unmapped once the switch and its last view release it. For
//     the time of the catch-up, a fraction of a second on the comparison
//     workload, the resident snapshot pages are about twice a snapshot.
//   - The working trees hold the nodes changed since their snapshot: per
//     changed key, the leaf and the inner nodes on its path (112 bytes each,
//     plus the key and value bytes, which are the caller's and are not
//     copied, except a value that is a slice of a snapshot or a View, which
//     Set copies, and the bytes a replay reads, below). This grows with the
//     number of changed nodes between snapshots.
//   - A background rewrite's catch-up copies the nodes created since the
//     snapshot's version onto the new snapshot's trees, until the switch
//     drops the old trees: for that time those nodes exist twice (their key
//     and value bytes once), and copies made by earlier catch-up rounds
//     stay reachable from the rebaser until the switch.
//   - When a Commit switches to a background rewrite's trees, the old trees'
//     in-memory nodes become garbage once no view and no open iterator of
//     them holds them, most of the heap at once, while the collector's
//     pace still follows the heap before the switch: the heap would grow
//     to about twice that size before the next collection found them. The
//     unmapping goroutine of the old snapshots therefore runs one garbage
//     collection (runtime.GC) per background switch, which keeps the peak
//     near the live heap.
//   - The filter of changed keys takes 2 bytes per key changed since the
//     snapshot (16 bits at a filter's capacity; after Open the first is
//     sized for a quarter of the snapshot's keys, 8 KiB to 2 MiB; a
//     version rebuilt by ViewAt starts at 8 KiB per store, as only its
//     replay changes it), twice that during a background rewrite, which
//     fills the next one beside it; past about 10 million keys (21 MiB;
//     the bound is 32 MiB) a tree's filter stops growing and reports every
//     key, so reads descend as they would without it.
//   - A view of an older version (ViewAt) that is not cached is rebuilt
//     from a kept snapshot plus the log: it holds the nodes changed between
//     that snapshot and the version until released (and while cached, up
//     to ViewCacheSize of them). At most two versions are rebuilt at once,
//     and callers of a version being rebuilt wait for it, so concurrent
//     queries of old heights do not hold a rebuild each.
//   - A read view, a background rewrite and every published version share
//     those nodes with the working trees (copy-on-write): taking a view or
//     starting a rewrite copies nothing.
//   - The background rewrite streams each tree to disk in post-order with
//     memory bounded by the tree height plus write buffers. It records each
//     written in-memory node's new index in the node itself (a spare field),
//     so no map of the written nodes is allocated.
//   - The working version's log entry holds its writes, as given to
//     ApplyChangeSets, except that a Set of a key already set in the
//     version (and not deleted since) gives that earlier pair its value
//     instead of adding one: a key written by every transaction of a block
//     holds one value until Commit, as its leaf does, not one per write.
//     The first such Set of a store indexes the store's pending pairs by
//     key (a map entry and a copy of the key per pair) until Commit.
//   - The log holds no second copy of values: synchronously it encodes an
//     entry into a reused buffer while Commit runs; with AsyncCommitBuffer N
//     its queue holds up to N entries that reference the same key and value
//     slices as the trees, and the background writer encodes the entries it
//     takes at once into one buffer just before writing them. Each mode
//     keeps one such buffer for reuse, and only while it is at most 16 MiB.
//   - Replaying the log (at Open, in a catch-up, for ViewAt) copies each
//     replayed key and value into an allocation of its own, as a caller's
//     Set hands them over: the bytes the log reads alias the buffer of the
//     whole record, and keeping them would keep every record that still has
//     one live value, so the heap after a reopen would hold the log since
//     the snapshot, overwritten values included (TestReplayHoldsOnlyLiveValues:
//     83.6 MB instead of 1.0 MB for 200 versions of hot keys). The copies cost the
//     replay about 7% of its time.
package multitree
