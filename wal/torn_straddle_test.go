package wal

import (
	"fmt"
	"testing"
)

// TestTornTailStraddledHeader: under SyncEveryCommit with
// synchronous appends, version 1 is acknowledged (Append returned, fsynced)
// and the Append of version 2 is in flight (written, its fsync not done)
// when the power fails. Version 2's frame header straddles the 4 KiB page
// boundary: k bytes of it in page 0, the rest (and its body) in page 1 (and
// page 2 for a large record). Each unsynced page independently reached the
// disk or not; the file's size includes the extension. Every such image is
// a torn last record: Open must succeed at version 1.
func TestTornTailStraddledHeader(t *testing.T) {
	for _, bodyPages := range []int{1, 2} {
		for k := 1; k < frameHeaderSize; k++ {
			// record 1 ends k bytes before the page boundary
			e1 := entryOfRecordSize(t, 1, unwrittenPage-k-segmentHeaderSize)
			e2 := entryOfRecordSize(t, 2, bodyPages*unwrittenPage-200)
			// the log writes the records; the crash point is right
			// before the fsync of version 2
			fs := newPLFS()
			var st *plState
			fs.onOp = func(op, p string) {
				if op == "sync" && st == nil && fs.m.get(memPath(1)) != nil && len(fs.m.get(memPath(1))) > unwrittenPage {
					st = fs.snapshotLocked("before the fsync of version 2")
				}
			}
			l := mustOpen(t, memDir, Options{fs: fs, Sync: SyncEveryCommit})
			mustAppend(t, l, e1) // acknowledged: fsynced
			if err := l.Append(e2); err != nil {
				t.Fatal(err)
			}
			mustClose(t, l)
			node := st.durable[memPath(1)]
			if node == nil || len(node.versions) != 1 {
				t.Fatalf("unexpected crash state %+v", st)
			}
			synced, written := node.synced, node.latest()
			if int64(len(synced)) != unwrittenPage-int64(k) {
				t.Fatalf("version 1 ends at %d", len(synced))
			}
			npages := (len(written) + unwrittenPage - 1) / unwrittenPage
			// every subset of the dirty pages 0..npages-1, full size
			for mask := 0; mask < 1<<npages; mask++ {
				img := make([]byte, len(written))
				for p := 0; p < npages; p++ {
					src := synced
					if mask&(1<<p) != 0 {
						src = written
					}
					copy(img[p*unwrittenPage:min((p+1)*unwrittenPage, len(img))], pageOf(src, p))
				}
				name := fmt.Sprintf("record of %d pages, %d header bytes before the boundary, pages written %0*b", bodyPages, k, npages, mask)
				mfs := newMemFS()
				mfs.put(memPath(1), img)
				r, err := Open(memDir, Options{fs: mfs})
				if err != nil {
					t.Errorf("%s: Open: %v (want a torn tail cut, LastVersion >= 1)", name, err)
					continue
				}
				if r.LastVersion() < 1 {
					t.Errorf("%s: LastVersion %d, version 1 was acknowledged", name, r.LastVersion())
				}
				checkReplay(t, r, []Entry{e1, e2})
				r.Close()
			}
		}
	}
}

// TestTornTailStraddledHeaderMinimal is the smallest form of it:
// one acknowledged record (SyncEveryCommit, fsynced), then the in-flight
// record 2, unacknowledged, whose 12-byte frame header starts k bytes
// before the 4 KiB boundary. Two power-loss images of that one write:
//
//   - "ext4 ordered": page 0 (already allocated, overwritten in place, not
//     ordered) did not reach the disk, page 1 (newly allocated, ordered
//     data) did, and the size was extended by the commit; k = 10.
//   - "size before data": page 0 reached the disk, page 1 did not, the size
//     was extended (ext4 data=writeback, xfs without barriers, a volatile
//     disk cache); k = 3.
//
// Both are a torn last record: Open must cut it and open at version 1.
func TestTornTailStraddledHeaderMinimal(t *testing.T) {
	for _, c := range []struct {
		name     string
		k        int
		page0new bool // page 0 holds the new bytes (header start)
		page1new bool // page 1 holds the new bytes (header rest, body)
	}{
		{"ext4 ordered: page 0 stale, page 1 written", 10, false, true},
		{"size before data: page 0 written, page 1 lost", 3, true, false},
	} {
		e1 := entryOfRecordSize(t, 1, unwrittenPage-c.k-segmentHeaderSize)
		e2 := entryOfRecordSize(t, 2, 500)
		fs := newMemFS()
		l := mustOpen(t, memDir, Options{fs: fs, Sync: SyncEveryCommit})
		mustAppend(t, l, e1)
		synced := fs.get(memPath(1)) // what Append(1)'s fsync made durable
		mustAppend(t, l, e2)
		written := fs.get(memPath(1)) // what the unsynced write of version 2 left in the page cache
		mustClose(t, l)

		img := make([]byte, len(written))
		copy(img, synced)
		if c.page0new {
			copy(img[:unwrittenPage], written[:unwrittenPage])
		}
		if c.page1new {
			copy(img[unwrittenPage:], written[unwrittenPage:])
		}
		mfs := newMemFS()
		mfs.put(memPath(1), img)
		r, err := Open(memDir, Options{fs: mfs})
		if err != nil {
			t.Errorf("%s: Open: %v; want the torn record 2 cut and LastVersion 1", c.name, err)
			continue
		}
		if r.LastVersion() != 1 {
			t.Errorf("%s: LastVersion %d, want 1", c.name, r.LastVersion())
		}
		checkReplay(t, r, []Entry{e1})
		r.Close()
	}
}
