package multitree

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// agreeResult is what an entry point reports: a version and app hash, or an
// error.
type agreeResult struct {
	version int64
	hash    string
	err     error
}

func (r agreeResult) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("%d %s", r.version, r.hash)
}

// agreeWriter opens a copy of dir for writing, as a node would.
func agreeWriter(t *testing.T, dir string, opts Options) agreeResult {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "w")
	testutil.CopyDir(t, dir, cp)
	db, err := Open(cp, opts)
	if err != nil {
		return agreeResult{err: err}
	}
	defer db.Close()
	return agreeResult{version: db.Version(), hash: hex.EncodeToString(db.LastCommitInfo().Hash())}
}

// agreeBuild builds the database of crBuild, with opts (their log segment
// size crOpenSegment unless given).
func agreeBuild(t *testing.T, dir string, opts Options, upTo int64, snaps ...int64) {
	t.Helper()
	opts.CreateIfMissing, opts.InitialStores, opts.SnapshotInterval = true, crashStores, -1
	opts.SnapshotKeepRecent = 100
	if opts.WALSegmentSize == 0 {
		opts.WALSegmentSize = crOpenSegment
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= upTo; v++ {
		if err := db.ApplyChangeSets(crashBlock(crOpenSeed, v)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			if s == v {
				if err := db.RewriteSnapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func agreeSegments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, walDirName, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// agreeLosePage zeros, in the newest segment of dir, the first whole page
// that starts inside a record's body and ends before the last record: a
// page a relaxed log's writer had not written back when the power went.
func agreeLosePage(t *testing.T, dir string) {
	t.Helper()
	segs := agreeSegments(t, dir)
	path := segs[len(segs)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := testutil.LogRecords(b)
	last := offs[len(offs)-1]
	for i := len(offs) / 2; i+1 < len(offs); i++ {
		p := (offs[i]/4096 + 1) * 4096
		if p > offs[i]+12 && p < offs[i+1] && p+4096 < last {
			clear(b[p : p+4096])
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("layout: no page to lose in %s (records at %v)", path, offs)
}

// agreeToV1 rewrites the header of every log segment of dir to format
// version 1, as a build before the header's flags wrote it.
func agreeToV1(t *testing.T, dir string) {
	t.Helper()
	for _, path := range agreeSegments(t, dir) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint16(b[4:6], 1)
		binary.LittleEndian.PutUint16(b[6:8], 0)
		binary.LittleEndian.PutUint32(b[16:20], crc32.Checksum(b[:16], crc32.MakeTable(crc32.Castagnoli)))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLatestVersionV1RelaxedLostPage: a log of format version 1 (written by
// a build before the segment header recorded how its records were
// appended) under a relaxed fsync policy, after a power loss that lost a
// page inside an unsynced record with later records on disk. The writer's
// Open, with the node's relaxed options, cuts the log at that record
// (version 10); LatestVersion, "the version Open would open dir at", which
// the compat multistore asks before each load (and the SDK's upgrade store
// loader through LastCommitID), reports 10 too: its read-only open of the
// log reads such a segment as relaxed appends leave it, not as strict ones
// (where 20 would be a version no open reaches).
func TestLatestVersionV1RelaxedLostPage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	opts := Options{Sync: wal.SyncGrouped, WALSegmentSize: 1 << 20}
	agreeBuild(t, dir, opts, 20)
	agreeToV1(t, dir)
	agreeLosePage(t, dir)
	w := agreeWriter(t, dir, opts)
	if w.err != nil || w.version != 10 {
		t.Fatalf("layout: the writer's open gives %v, want version 10", w)
	}
	if v, err := LatestVersion(dir); err != nil || v != w.version {
		t.Errorf("LatestVersion: %d, %v; the writer's open reaches %d", v, err, w.version)
	}
}

// TestLatestVersionRefusedAsOpen: directories that every Open refuses as
// corrupt (the log directory missing; a database still at snapshot 0 whose
// log lost its first segment) are refused by LatestVersion with ErrCorrupt
// too, not given a version that the compat multistore's LastCommitID would
// report before a load that fails.
func TestLatestVersionRefusedAsOpen(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, dir string)
	}{
		{"log-dir-missing", func(t *testing.T, dir string) {
			crBuild(t, dir, 20, 10)
			if err := os.RemoveAll(filepath.Join(dir, walDirName)); err != nil {
				t.Fatal(err)
			}
		}},
		{"first-segment-lost", func(t *testing.T, dir string) {
			crBuild(t, dir, 20)
			if err := os.Remove(agreeSegments(t, dir)[0]); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			c.make(t, dir)
			w := agreeWriter(t, dir, Options{WALSegmentSize: crOpenSegment})
			if !errors.Is(w.err, ErrCorrupt) {
				t.Fatalf("layout: the writer's open gives %v, want ErrCorrupt", w)
			}
			if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("layout: the read-only open gives %v, want ErrCorrupt", err)
			}
			if v, err := LatestVersion(dir); !errors.Is(err, ErrCorrupt) {
				t.Errorf("LatestVersion: %d, %v; every open fails: %v", v, err, w.err)
			}
		})
	}
}

// TestV1LostPageEveryOpenAgrees: a log of segment format version 1 (which
// does not record how its records were appended), after a power loss that
// lost a page inside a record with later records on disk: every entry
// point reads it as relaxed appends leave it and reaches the same version
// (10), the writer's Open with the default options (SyncEveryCommit, a
// node's) and under SyncGrouped, Verify, LatestVersion and a read-only
// Open; none calls the database corrupt where another opens it.
func TestV1LostPageEveryOpenAgrees(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	agreeBuild(t, dir, Options{WALSegmentSize: 1 << 20}, 20)
	agreeToV1(t, dir)
	agreeLosePage(t, dir)
	const want = 10
	for _, o := range []Options{{}, {Sync: wal.SyncGrouped}} {
		if w := agreeWriter(t, dir, o); w.err != nil || w.version != want {
			t.Errorf("writer open %+v: %v, want version %d", o, w, want)
		}
	}
	if rep, err := Verify(dir); err != nil || rep.Version != want {
		t.Errorf("Verify: %v, %v; want version %d", rep, err, want)
	}
	if v, err := LatestVersion(dir); err != nil || v != want {
		t.Errorf("LatestVersion: %d, %v; want %d", v, err, want)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer ro.Close()
	if v := ro.Version(); v != want {
		t.Errorf("read-only open at %d, want %d", v, want)
	}
}
