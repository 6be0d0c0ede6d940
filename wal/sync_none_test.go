package wal

import (
	"fmt"
	"testing"
)

// TestSyncWhateverPolicy: Sync makes every entry appended before it
// durable under every policy, SyncNone included, in synchronous and
// asynchronous mode (unlike Flush, which under SyncNone only writes); a
// power loss right after it loses none of them.
func TestSyncWhateverPolicy(t *testing.T) {
	for _, sync := range []SyncPolicy{SyncNone, SyncGrouped, SyncEveryCommit} {
		for _, async := range []int{0, 3} {
			t.Run(fmt.Sprintf("%v/async=%d", sync, async), func(t *testing.T) {
				rng := newRand(t)
				entries := makeEntries(rng, 5, smallShape)
				fs := newMemFS()
				l := mustOpen(t, memDir, Options{fs: fs, Sync: sync, AsyncBuffer: async, GroupCount: 100})
				mustAppend(t, l, entries...)
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				// power loss now, the log not closed
				c := mustOpen(t, memDir, Options{fs: fs.crash()})
				defer mustClose(t, c)
				if got := c.LastVersion(); got != int64(len(entries)) {
					t.Fatalf("after Sync and a power loss: LastVersion %d, want %d", got, len(entries))
				}
				checkReplay(t, c, entries)
			})
		}
	}
}
