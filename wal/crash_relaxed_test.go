package wal

import (
	"fmt"
	"testing"
	"time"
)

// TestRelaxedCrashAtEveryOperation is TestCrashAtEveryOperation (which
// runs under SyncEveryCommit only) for the relaxed policies, SyncGrouped and
// SyncNone, synchronous and asynchronous, with both kinds of crash at every
// mutating file-system operation of a workload of appends, rolls (one ahead
// of its record, RollAt), TruncateFront, TruncateBack and Flush:
//
//   - a process crash (memFS.clone: everything written survives): the
//     package doc promises nothing whose Append returned is lost in
//     synchronous mode, at most 2*AsyncBuffer+1 entries in asynchronous
//     mode, and nothing appended before a Flush that returned;
//   - a machine crash (memFS.crash: only fsynced data under fsynced names):
//     nothing appended before a Flush that returned, unless SyncNone; under
//     SyncGrouped with synchronous appends, fewer than GroupCount entries
//     written since the last fsync.
//
// Each time the log must reopen (with Options.Discarding set to the
// rollback's target when the crash came inside TruncateBack, as the doc
// asks of the caller), hold a contiguous prefix of one of the two
// histories, hold every entry the bound says is safe, and take the next
// entry. Every few points, the reopen's own repair is crashed in turn at
// each of its operations (a double crash), and the same must hold after a
// third open.
func TestRelaxedCrashAtEveryOperation(t *testing.T) {
	const groupCount = 3
	for _, policy := range []SyncPolicy{SyncGrouped, SyncNone} {
		for _, buf := range []int{0, 3} {
			name := fmt.Sprintf("%v/async%d", policy, buf)
			rng := newRand(t)
			old := makeEntries(rng, 25, smallShape)
			newer := append(append([]Entry(nil), old[:20]...), makeEntries(rng, 23, smallShape)[20:]...)
			opts := Options{SegmentSize: 400, AsyncBuffer: buf, Sync: policy, GroupCount: groupCount, GroupInterval: time.Hour}

			type outcome struct {
				appended   int64 // last version whose Append returned nil
				flushed    int64 // last version appended before a Flush that returned nil
				syncedMin  int64 // power loss: appended before a Flush that fsyncs
				inTrunc    bool  // the crash came inside TruncateBack(20)
				rolledBack bool
			}
			workload := func(fs *memFS) (o outcome) {
				op := opts
				op.fs = fs
				l, err := Open(memDir, op)
				if err != nil {
					return o
				}
				defer l.Close()

				appendAll := func(es []Entry) bool {
					for i, e := range es {
						if l.Append(e) != nil {
							return false
						}
						o.appended = e.Version

						if i%4 == 3 || i == len(es)-1 {
							if l.Flush() != nil {
								return false
							}
							o.flushed = e.Version
							if policy != SyncNone {
								o.syncedMin = e.Version
							}
						}
					}
					return true
				}
				if !appendAll(old[:10]) {
					return o
				}
				l.RollAt(11)
				if !appendAll(old[10:15]) || l.TruncateFront(8) != nil || !appendAll(old[15:25]) {
					return o
				}
				o.inTrunc = true
				if l.TruncateBack(20) != nil {
					return o
				}
				o.inTrunc, o.rolledBack = false, true
				o.appended, o.flushed, o.syncedMin = min(o.appended, 20), min(o.flushed, 20), min(o.syncedMin, 20)

				appendAll(newer[20:23])
				return o
			}

			// check reopens img and checks it against the bound, then
			// appends the next entry and closes. It returns the number
			// of mutating operations of that recovery.
			check := func(where string, img *memFS, o outcome, need int64) int {
				op := opts
				op.fs = img
				if o.inTrunc {
					op.Discarding = 20
				}
				l, err := Open(memDir, op)
				if err != nil {
					t.Fatalf("%s %s: reopen: %v", name, where, err)
				}
				if o.inTrunc {
					need = min(need, 20) // a rollback under way may have taken effect
				}
				first, last := l.FirstVersion(), l.LastVersion()
				if last < need {
					t.Fatalf("%s %s: LastVersion %d, but %d is safe by the doc (%+v)", name, where, last, need, o)
				}
				got, err := collect(l, first, last)
				if last > 0 && err != nil {
					t.Fatalf("%s %s: replay %d..%d: %v", name, where, first, last, err)
				}
				okNew := holdsRange(got, first, last, newer)
				if !okNew && (o.rolledBack || !holdsRange(got, first, last, old)) {
					t.Fatalf("%s %s: recovered %d..%d matches no history (%+v)", name, where, first, last, o)
				}
				hist := old
				if okNew {
					hist = newer
				}
				if last < int64(len(hist)) {
					if err := l.Append(hist[last]); err != nil {
						t.Fatalf("%s %s: append %d after the reopen: %v", name, where, last+1, err)
					}
				}
				if err := l.Close(); err != nil {
					t.Fatalf("%s %s: close after the reopen: %v", name, where, err)
				}
				return img.ops
			}

			dry := newMemFS()
			workload(dry)
			total := dry.ops
			doubles := 0
			for k := 1; k <= total; k++ {
				fs := newMemFS()
				fs.crashAt = k
				o := workload(fs)

				// process crash: what was written survives
				procNeed := o.appended
				if buf > 0 {
					procNeed = max(o.flushed, o.appended-int64(2*buf+1))
				}
				check(fmt.Sprintf("process crash at op %d of %d", k, total), fs.clone(), o, procNeed)

				// machine crash
				plNeed := o.syncedMin
				if policy == SyncGrouped {
					// fewer than GroupCount entries written since
					// the last fsync, plus the queued and in-flight
					plNeed = max(plNeed, o.flushed, o.appended-int64(groupCount-1))
					if buf > 0 {
						plNeed = max(o.flushed, o.appended-int64(groupCount-1)-int64(2*buf+1))
					}
				}
				img := fs.crash()
				base := img.clone()
				n := check(fmt.Sprintf("power loss at op %d of %d", k, total), img, o, plNeed)
				if k%3 != 0 {
					continue
				}
				// double crash: a power loss at each operation of the
				// recovery itself
				for k2 := 1; k2 <= n; k2++ {
					again := base.clone()
					again.crashAt = k2
					op := opts
					op.fs = again
					if o.inTrunc {
						op.Discarding = 20
					}
					if l, err := Open(memDir, op); err == nil {
						_ = l.Close()
					}
					check(fmt.Sprintf("power loss at op %d, then at op %d of the recovery", k, k2), again.crash(), o, plNeed)
					doubles++
				}
			}
			t.Logf("%s: crashed at each of %d operations, %d double crashes", name, total, doubles)
		}
	}
}
