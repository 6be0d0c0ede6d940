package multitree

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// crOpenSeed is the seed of crashBlock's blocks the databases of
// TestCrashOpenRepairs commit.
const crOpenSeed = 7

// crOpenSegment is their log's segment size: small, so that the log has
// several segments and a cut removes some.
const crOpenSegment = 24 << 10

// crOpenCalls are the calls TestCrashOpenRepairs kills the open at.
var crOpenCalls = []string{"renameat", "fsync", "unlinkat", "ftruncate"}

// TestCrashOpenRepairChild is the process TestCrashOpenRepairs kills: it
// opens the database in MEMIAVL_CRASH_OPEN_DIR as its writer, prints "opened
// <version> <app hash>" and closes it.
func TestCrashOpenRepairChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_CRASH_OPEN_DIR")
	if dir == "" {
		t.Skip("only run as TestCrashOpenRepairs's child")
	}
	db, err := Open(dir, Options{WALSegmentSize: crOpenSegment})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Printf("opened %d %X\n", db.Version(), db.LastCommitInfo().Hash())
	if err := db.Close(); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("closed")
}

// crBuild commits crashBlock's blocks 1..upTo to a new database in dir,
// with a snapshot written (RewriteSnapshot) after each version in snaps,
// every snapshot kept, and small log segments.
func crBuild(t *testing.T, dir string, upTo int64, snaps ...int64) {
	t.Helper()
	agreeBuild(t, dir, Options{}, upTo, snaps...)
}

// crHashes returns the app hashes (hex) of crashBlock's versions 1..upTo,
// computed in memory.
func crHashes(t *testing.T, upTo int64) map[int64]string {
	t.Helper()
	ref := newCrashRef(crOpenSeed)
	out := map[int64]string{}
	for v := int64(1); v <= upTo; v++ {
		ref.advance(t, v)
		out[v] = hex.EncodeToString(ref.appHash(t, v))
	}
	return out
}

// crRepair is a damaged or unfinished state that a writable Open repairs
// or finishes.
type crRepair struct {
	name string
	// make builds the state in dir
	make func(t *testing.T, dir string)
	// want is the committed version the state stands for
	want int64
	// done checks what the repair left once a writable open finished
	done func(t *testing.T, dir string)
	// group: the test that runs it (0: TestCrashOpenRepairs, 1:
	// TestCrashOpenFinishes)
	group int
}

func crRepairs() []crRepair {
	return []crRepair{
		{
			// a machine crash under a relaxed fsync policy that lost log
			// entries the current snapshot covers: Open removes the
			// older snapshots and empties the log (Reset)
			name: "log-ends-before-snapshot",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 20, 10, 20)
				crCutLog(t, dir, 14)
			},
			want: 20,
			done: func(t *testing.T, dir string) {
				crWantSnapshots(t, dir, 20)
				if first, last := crLogRange(t, dir); last != 0 {
					t.Fatalf("the log holds %d..%d after the repair", first, last)
				}
			},
		},
		{
			// the same, with the log emptied
			name: "log-empty-behind-snapshot",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 20, 10, 20)
				crCutLog(t, dir, 0)
			},
			want: 20,
			done: func(t *testing.T, dir string) { crWantSnapshots(t, dir, 20) },
		},
		{
			// a crash inside an append: the last record is torn, Open
			// cuts it off (ftruncate, fsync)
			name: "torn-tail",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 20, 10)
				crTearLast(t, dir, 9)
			},
			want: 19,
			done: func(t *testing.T, dir string) {
				crWantSnapshots(t, dir, 0, 10)
				if _, last := crLogRange(t, dir); last != 19 {
					t.Fatalf("the log ends at %d after the repair", last)
				}
			},
		},
		{
			// a crash while the log started new segments: an empty
			// segment after the last record and a segment being
			// created; Open removes them
			name: "empty-segments",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 20, 10)
				crEmptySegments(t, dir, 21)
				tmp := filepath.Join(dir, walDirName, fmt.Sprintf("%020d.wal", 22)+tmpSuffix)
				if err := os.WriteFile(tmp, []byte("partial"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: 20,
			done: func(t *testing.T, dir string) {
				crWantSnapshots(t, dir, 0, 10)
				ents, err := os.ReadDir(filepath.Join(dir, walDirName))
				if err != nil {
					t.Fatal(err)
				}
				if last := ents[len(ents)-1].Name(); last != fmt.Sprintf("%020d.wal", 20) {
					t.Fatalf("the log's newest file is %s", last)
				}
			},
		},
		{
			// a switch to an older snapshot (a rewrite at an older
			// version, a rollback) that left the newer snapshot and
			// temporary entries: Open removes them (removeLeftovers)
			name: "leftovers-after-switch",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 30, 10, 20, 30)
				if err := writeFileAtomic(dir, currentFileName, encodeCurrent(20)); err != nil {
					t.Fatal(err)
				}
				// a rewrite's staged snapshot, a removal's, temporary
				// pointer files
				testutil.CopyDir(t, filepath.Join(dir, snapshotDirName(10)), filepath.Join(dir, snapshotDirName(25)+tmpSuffix))
				testutil.CopyDir(t, filepath.Join(dir, snapshotDirName(10)), filepath.Join(dir, snapshotDirName(5)+prunedSuffix+tmpSuffix))
				for _, name := range []string{currentFileName, rollbackFileName} {
					if err := os.WriteFile(filepath.Join(dir, name+tmpSuffix), []byte("x"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: 30,
			done: func(t *testing.T, dir string) {
				crWantSnapshots(t, dir, 0, 10, 20)
				crWantNoTemporary(t, dir)
			},
			group: 1,
		},
		{
			// a rollback to 15, recorded and not begun: the next writer
			// switches current to snapshot 10, removes snapshot 20 and
			// cuts the log back to 15
			name: "unfinished-rollback-older-snapshot",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 30, 10, 20)
				crStopRollback(t, dir, 15)
			},
			want: 15,
			done: func(t *testing.T, dir string) {
				crWantSnapshots(t, dir, 0, 10)
				crWantNoRollback(t, dir)
				if _, last := crLogRange(t, dir); last != 15 {
					t.Fatalf("the log ends at %d after the rollback", last)
				}
			},
			group: 1,
		},
		{
			// a rollback to 25 (after current's 20), recorded and not
			// begun: only the log is cut
			name: "unfinished-rollback-current-snapshot",
			make: func(t *testing.T, dir string) {
				crBuild(t, dir, 30, 10, 20)
				crStopRollback(t, dir, 25)
			},
			want: 25,
			done: func(t *testing.T, dir string) {
				crWantSnapshots(t, dir, 0, 10, 20)
				crWantNoRollback(t, dir)
				if _, last := crLogRange(t, dir); last != 25 {
					t.Fatalf("the log ends at %d after the rollback", last)
				}
			},
			group: 1,
		},
	}
}

// crCutLog cuts dir's log back to version v (0: empties it), as a machine
// crash that lost its tail would.
func crCutLog(t *testing.T, dir string, v int64) {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{SegmentSize: crOpenSegment})
	if err != nil {
		t.Fatal(err)
	}
	if v == 0 {
		err = l.Reset(1)
	} else {
		err = l.TruncateBack(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// crTearLast cuts cut bytes off the end of dir's newest log segment: a
// torn last record.
func crTearLast(t *testing.T, dir string, cut int64) {
	t.Helper()
	walDir := filepath.Join(dir, walDirName)
	ents, err := os.ReadDir(walDir)
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), tmpSuffix) {
			newest = e.Name() // names sort by base version
		}
	}
	path := filepath.Join(walDir, newest)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-cut); err != nil {
		t.Fatal(err)
	}
}

// crEmptySegments creates a log segment of dir holding only its header,
// as the log writes when it starts a segment, for each base in bases.
func crEmptySegments(t *testing.T, dir string, bases ...int64) {
	t.Helper()
	walDir := filepath.Join(dir, walDirName)
	ents, err := os.ReadDir(walDir)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 20)
	f, err := os.Open(filepath.Join(walDir, ents[len(ents)-1].Name()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(hdr, 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range bases {
		binary.LittleEndian.PutUint64(hdr[8:16], uint64(base))
		binary.LittleEndian.PutUint32(hdr[16:20], crc32.Checksum(hdr[:16], crc32.MakeTable(crc32.Castagnoli)))
		if err := os.WriteFile(filepath.Join(walDir, fmt.Sprintf("%020d.wal", base)), hdr, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// crStopRollback has a writer open dir for a rollback to v and stops it
// right after it recorded the rollback (duringRollback), as a crash would.
func crStopRollback(t *testing.T, dir string, v int64) {
	t.Helper()
	stop := errors.New("stopped")
	duringRollback = func(*DB, int64) error { return stop }
	defer func() { duringRollback = nil }()
	if _, err := Open(dir, Options{TargetVersion: v, Rollback: true, WALSegmentSize: crOpenSegment}); !errors.Is(err, stop) {
		t.Fatalf("rollback open: %v", err)
	}
	if p, err := readRollback(dir); err != nil || p != v {
		t.Fatalf("rollback file: %d, %v", p, err)
	}
}

func crLogRange(t *testing.T, dir string) (int64, int64) {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.FirstVersion(), l.LastVersion()
}

func crWantSnapshots(t *testing.T, dir string, want ...int64) {
	t.Helper()
	got, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("snapshots %v, want %v", got, want)
	}
}

func crWantNoTemporary(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if ownTemporary(e.Name()) {
			t.Fatalf("%s is left", e.Name())
		}
	}
}

func crWantNoRollback(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, rollbackFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rollback file is left: %v", err)
	}
}

// crRunOpenChild runs TestCrashOpenRepairChild on dir, under strace killing it
// at the nth call of call when strace is set, and reports whether it was
// killed (false: it opened and closed the database, at the version and
// app hash it returns).
func crRunOpenChild(t *testing.T, strace, call string, n int, dir string) (killed bool, version int64, hash string) {
	t.Helper()
	args := []string{os.Args[0], "-test.run=^TestCrashOpenRepairChild$", "-test.v"}
	if strace != "" {
		args = testutil.KillAt(strace, call, n, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "MEMIAVL_CRASH_OPEN_DIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	closed := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "opened":
			version, _ = strconv.ParseInt(f[1], 10, 64)
			hash = strings.ToLower(f[2])
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("child at %s #%d: %s", call, n, line)
		case len(f) == 1 && f[0] == "closed":
			closed = true
		}
	}
	if closed {
		return false, version, hash // (maybe killed after, in the framework's output)
	}
	if strace != "" && (testutil.KilledBySIGKILL(err) || testutil.StraceFailed(strace, stderr.Bytes())) {
		return true, 0, ""
	}
	t.Fatalf("child at %s #%d: %v\n%s%s", call, n, err, out, stderr.Bytes())
	return false, 0, ""
}

// crCheckState checks that dir, as a writable open's kill left it, stands
// for version want with app hash hash: LatestVersion, a read-only open and
// then a writable open find it; once the writer closed it, it verifies, and
// a writer commits the next block with the right app hash.
func crCheckState(t *testing.T, dir string, want int64, hashes map[int64]string, where string) {
	t.Helper()
	if v, err := LatestVersion(dir); err != nil || v != want {
		t.Fatalf("%s: LatestVersion %d, %v; want %d", where, v, err, want)
	}
	ro, err := Open(dir, Options{ReadOnly: true, WALSegmentSize: crOpenSegment})
	if err != nil {
		t.Fatalf("%s: read-only open: %v", where, err)
	}
	v, h := ro.Version(), hex.EncodeToString(ro.LastCommitInfo().Hash())
	_ = ro.Close()
	if v != want || h != hashes[want] {
		t.Fatalf("%s: read-only open at %d (app hash %s), want %d (%s)", where, v, h, want, hashes[want])
	}
	db, err := Open(dir, Options{WALSegmentSize: crOpenSegment})
	if err != nil {
		t.Fatalf("%s: writable open: %v", where, err)
	}
	v, h = db.Version(), hex.EncodeToString(db.LastCommitInfo().Hash())
	if v != want || h != hashes[want] {
		_ = db.Close()
		t.Fatalf("%s: writable open at %d (app hash %s), want %d (%s)", where, v, h, want, hashes[want])
	}
	if err := db.Close(); err != nil {
		t.Fatalf("%s: close: %v", where, err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("%s: verify after the writable open: %v", where, err)
	}
	db, err = Open(dir, Options{WALSegmentSize: crOpenSegment})
	if err != nil {
		t.Fatalf("%s: second writable open: %v", where, err)
	}
	if err := db.ApplyChangeSets(crashBlock(crOpenSeed, want+1)); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatalf("%s: commit of %d: %v", where, want+1, err)
	}
	if got := hex.EncodeToString(info.Hash()); got != hashes[want+1] {
		t.Fatalf("%s: version %d committed with app hash %s, want %s", where, want+1, got, hashes[want+1])
	}
	if err := db.Close(); err != nil {
		t.Fatalf("%s: close: %v", where, err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("%s: verify after a commit: %v", where, err)
	}
}

// TestCrashOpenRepairs kills a writable Open at each renameat, fsync,
// unlinkat and ftruncate while it repairs what a crash left in the log (see
// crRepairs, group 0 and the empty segments): a log that ends before the
// current snapshot, or is empty, a torn log tail, empty segments. Every kill
// of the repair must leave a directory that a clean open finds at the
// committed state the damaged one stood for, with its app hash, read only
// or as a writer; that then verifies and takes the next block; Verify of
// what a kill left passes where it passed on the damaged state. Every
// third kill is followed by a second kill of the next open, at the same
// call (a repair interrupted twice). Every point is tried at the largest
// size (MEMIAVL_FULL=1 or -multitree.fullcrash), every 2nd without -short,
// every 7th under -short.
func TestCrashOpenRepairs(t *testing.T) { crOpenSweep(t, 0) }

// TestCrashOpenFinishes is TestCrashOpenRepairs for what a writable
// Open finishes (crRepairs, group 1): the removal of the leftovers of a
// switch to an older snapshot (removeLeftovers), an unfinished rollback.
func TestCrashOpenFinishes(t *testing.T) { crOpenSweep(t, 1) }

func crOpenSweep(t *testing.T, group int) {
	if os.Getenv("MEMIAVL_CRASH_OPEN_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	step := crashSize(1, 2, 7)
	hashes := crHashes(t, 31)
	kills := 0
	for _, rep := range crRepairs() {
		if rep.group != group {
			continue
		}
		t.Run(rep.name, func(t *testing.T) {
			template := filepath.Join(t.TempDir(), "db")
			rep.make(t, template)
			_, verr := Verify(template)
			// the open run to the end
			ref := filepath.Join(t.TempDir(), "db")
			testutil.CopyDir(t, template, ref)
			if killed, v, h := crRunOpenChild(t, "", "", 0, ref); killed || v != rep.want || h != hashes[rep.want] {
				t.Fatalf("the open run to the end: version %d (app hash %s), want %d (%s)", v, h, rep.want, hashes[rep.want])
			}
			rep.done(t, ref)
			crCheckState(t, ref, rep.want, hashes, "after a whole open")
			for i, call := range crOpenCalls {
				// under -short the first two points of each call, then
				// every step-th
				n := 1
				for ; ; n++ {
					if n > 2 && n%step != i%step {
						continue
					}
					dir := filepath.Join(t.TempDir(), "db")
					testutil.CopyDir(t, template, dir)
					killed, _, _ := crRunOpenChild(t, strace, call, n, dir)
					if !killed {
						break
					}
					kills++
					where := fmt.Sprintf("%s: killed at %s #%d", rep.name, call, n)
					if n%3 == 0 {
						// and the next open too, earlier in its run
						m := 1 + n/3
						if again, _, _ := crRunOpenChild(t, strace, call, m, dir); again {
							kills++
							where += fmt.Sprintf(", then at %s #%d", call, m)
						}
					}
					if verr == nil {
						if _, err := Verify(dir); err != nil {
							t.Errorf("%s: Verify passed on the state before the open, fails after the kill: %v", where, err)
						}
					}
					crCheckState(t, dir, rep.want, hashes, where)
				}
				t.Logf("%s: the open was killed at %s up to #%d", rep.name, call, n-1)
			}
		})
	}
	t.Logf("%d kills", kills)
}
