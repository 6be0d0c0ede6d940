package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/internal/workload"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// cli runs the command in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// mustCLI runs the command and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, args...)
	if code != 0 {
		t.Fatalf("memiavl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// makeDB syncs blocks 1..blocks of a small workload into a new database in
// dir, with a synchronous snapshot rewrite after each version in snapAt.
func makeDB(t testing.TB, dir string, scale float64, blocks int64, snapAt ...int64) string {
	t.Helper()
	gen, err := workload.New(workload.Config{Seed: 3, Scale: scale})
	if err != nil {
		t.Fatal(err)
	}
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: gen.Stores(), SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var hash []byte
	for v := int64(1); v <= blocks; v++ {
		if err := db.ApplyChangeSets(gen.Block(v)); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hash = info.Hash()
		for _, s := range snapAt {
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
	return hex.EncodeToString(hash)
}

func copyDir(t *testing.T, src, dst string) { testutil.CopyDir(t, src, dst) }

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {}, {"bench", "--help"}, {"rewrite-snapshot", "--help"}, {"verify", "--help"},
		{"dump", "--help"}, {"wal", "--help"}, {"wal", "dump", "--help"}, {"export", "--help"}, {"import", "--help"}, {"import-iavl", "--help"}, {"import-memiavl", "--help"},
		{"help"}, {"help", "verify"}, {"help", "wal", "dump"},
	} {
		code, out, _ := cli(t, args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("memiavl %v: exit %d, output %q", args, code, out)
		}
	}
	_, out, _ := cli(t, "--help")
	for _, c := range []string{"bench", "rewrite-snapshot", "verify", "dump", "wal", "export", "import"} {
		if !strings.Contains(out, c) {
			t.Errorf("root help does not list %s", c)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	// a source, and a link to it: the destination of an import must lie
	// outside the source, which is only read
	app := filepath.Join(dir, "application.db")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(app, link); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{
		{"import-iavl", app, app},
		{"import-iavl", "--backend", "pebbledb", app, filepath.Join(app, "memiavl.db")},
		{"import-iavl", link, filepath.Join(app, "memiavl.db")},
		{"import-iavl", app, filepath.Join(link, "x", "memiavl.db")},
		{"import-memiavl", dir, filepath.Join(dir, "memiavl.db")},
		{"nosuchcommand"},
		{"bench", "--no-such-flag"},
		{"bench", "--blocks", "x"},
		{"bench", "--sync", "sometimes"},
		{"bench", "--blocks", "0"},
		{"bench", "--rewrite-rate-limit", "-1"},
		{"bench", "--rewrite-rate-limit", "1000"},
		{"bench", "extra-arg"},
		{"verify"},
		{"verify", dir, dir},
		{"dump"},
		{"wal", "dump"},
		{"wal", "nosuch"},
		{"help", "nosuch"},
		{"help", "wal", "nosuch"},
		{"rewrite-snapshot", "--rollback", dir},
		{"rewrite-snapshot", "--progress", "fancy", dir},
		{"import", "file", dir},
		{"export", dir},
		{"bench", "--scale", "101"},
		// empty paths (an unset shell variable) are not the working directory
		{"import", "--height", "1", "file", ""},
		{"export", dir, ""},
		{"verify", ""},
		{"dump", ""},
		{"wal", "dump", ""},
		{"rewrite-snapshot", ""},
		{"import-iavl", "", dir},
		{"import-memiavl", dir, ""},
	}
	if !rocksdbBuilt {
		cases = append(cases, []string{"import-iavl", "--backend", "rocksdb", app, filepath.Join(dir, "memiavl.db")})
	}
	for _, args := range cases {
		code, out, errs := cli(t, args...)
		if code != exitUsage {
			t.Errorf("memiavl %v: exit %d, want %d\nstdout %q\nstderr %q", args, code, exitUsage, out, errs)
		}
		if out != "" {
			t.Errorf("memiavl %v: usage error printed on stdout: %q", args, out)
		}
	}
}

func TestBench(t *testing.T) {
	// every commit fsyncs, so that background rewrites (a dozen fsyncs of
	// new files each, slower than a log fsync when other tests load the
	// disk) finish within the run: 290 blocks after the first one starts.
	// A machine loaded enough to finish none in them gets a longer run.
	var res BenchResult
	for _, blocks := range []int64{300, 3000} {
		code, out, errs := cli(t, "bench", "--scale", "0.01", "--blocks", strconv.FormatInt(blocks, 10), "--snapshot-interval", "10", "--sync", "every-commit", "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		res = BenchResult{}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("bench --json output is not JSON: %v\n%s", err, out)
		}
		if res.Version != blocks || res.Pairs == 0 || res.UpdatesPerSec <= 0 || res.PeakRSSBytes <= 0 || res.DiskBytes <= 0 {
			t.Errorf("implausible result %+v", res)
		}
		if len(res.Rewrites) > 0 {
			break
		}
		t.Logf("no snapshot rewrite finished in %d blocks (the first still running at the end: %d)", blocks, res.RewriteUnfinished)
	}
	if len(res.Rewrites) == 0 {
		t.Fatalf("no snapshot rewrite recorded with interval 10: %+v", res)
	}
	for _, rw := range res.Rewrites {
		if rw.Version < 10 || rw.SwitchedAt <= rw.Version || rw.Seconds <= 0 {
			t.Errorf("implausible rewrite %+v", rw)
		}
	}
	if c := res.CommitLatency; !(c.P50 <= c.P90 && c.P90 <= c.P99 && c.P99 <= c.Max && c.Max > 0) {
		t.Errorf("latency percentiles out of order: %+v", c)
	}
	// the reopen replays from the last completed rewrite, or from one that
	// was still switching over when the database closed
	if last := res.Rewrites[len(res.Rewrites)-1].Version; res.ReplayedVersions > res.Version-last {
		t.Errorf("replayed %d versions, want at most %d", res.ReplayedVersions, res.Version-last)
	}

	// same workload, kept directory, table output: the same app hash
	dir := filepath.Join(t.TempDir(), "db")
	out := mustCLI(t, "bench", "--dir", dir, "--scale", "0.01", "--blocks", strconv.FormatInt(res.Version, 10), "--snapshot-interval", "10", "--sync", "none", "--async-buffer", "4",
		"--rewrite-rate-limit", "1000000000")
	for _, want := range []string{"throughput", "updates/s", "commit latency", "p99", "snapshot rewrites", "open + replay", "peak RSS", res.AppHash} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	mustCLI(t, "verify", dir)
	// a non-empty --dir is refused
	if code, _, _ := cli(t, "bench", "--dir", dir, "--blocks", "2"); code != exitFailure {
		t.Errorf("bench into a non-empty dir: exit %d, want %d", code, exitFailure)
	}
}

func TestDump(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 30, 20)
	out := mustCLI(t, "dump", "--json", dir)
	var res DumpResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Version != 30 || res.AppHash != hash || res.SnapshotVersion != 20 || res.WALLast != 30 || len(res.Stores) != 3 {
		t.Fatalf("dump: %+v, want version 30, app hash %s, snapshot 20", res, hash)
	}
	for _, s := range res.Stores {
		if s.Keys <= 0 || s.SnapshotBytes <= 0 || len(s.RootHash) != 64 {
			t.Errorf("store %+v", s)
		}
	}
	out = mustCLI(t, "dump", dir)
	for _, want := range []string{hash, "bank", "staking", "lockup", "KEYS"} {
		if !strings.Contains(out, want) {
			t.Errorf("dump output lacks %q:\n%s", want, out)
		}
	}
	// an older version, replayed from the kept snapshot 0
	out = mustCLI(t, "dump", "--json", "--version", "10", dir)
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Version != 10 || res.SnapshotVersion != 0 {
		t.Fatalf("dump --version 10: %v %+v, want version 10 on base snapshot 0", err, res)
	}
	if out = mustCLI(t, "dump", "--version", "10", dir); !strings.Contains(out, "base snapshot") {
		t.Errorf("dump --version 10 does not name the base snapshot:\n%s", out)
	}
	if code, _, _ := cli(t, "dump", t.TempDir()); code != exitFailure {
		t.Errorf("dump of an empty dir: exit %d", code)
	}
}

func TestWALDump(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12)
	out := mustCLI(t, "wal", "dump", dir)
	if !strings.Contains(out, "versions 1..12") || !strings.Contains(out, "version 7:") || !strings.Contains(out, "bank:") {
		t.Fatalf("wal dump:\n%s", out)
	}
	out = mustCLI(t, "wal", "dump", "--from", "5", "--to", "5", "--pairs", filepath.Join(dir, "wal"))
	if strings.Contains(out, "version 4:") || strings.Contains(out, "version 6:") || !strings.Contains(out, "set 02") {
		t.Fatalf("wal dump --from 5 --to 5 --pairs:\n%s", out)
	}
	gen, _ := workload.New(workload.Config{Seed: 3, Scale: 0.01})
	if want := hex.EncodeToString(gen.Block(5)[0].Pairs[0].Key); !strings.Contains(out, want) {
		t.Errorf("the first bank key of version 5, %s, is not printed", want)
	}
	out = mustCLI(t, "wal", "dump", "--json", "--from", "2", "--to", "3", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("wal dump --json printed %d lines", len(lines))
	}
	var e walEntryJSON
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil || e.Version != 3 || len(e.Stores) != 3 {
		t.Fatalf("wal dump --json: %v %+v", err, e)
	}
	if code, _, _ := cli(t, "wal", "dump", "--from", "50", dir); code != exitFailure {
		t.Errorf("out-of-range --from: exit %d", code)
	}
	// an unfinished rollback to 8 (its "rollback" file, in the pinned
	// small-file format of multitree/format.go): a warning
	rb := binary.LittleEndian.AppendUint32(nil, 0x4D544252)
	rb = binary.LittleEndian.AppendUint32(rb, 1)
	rb = binary.LittleEndian.AppendUint64(rb, 8)
	rb = binary.LittleEndian.AppendUint32(rb, crc32.Checksum(rb, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(filepath.Join(dir, "rollback"), rb, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cli(t, "wal", "dump", dir); code != 0 || !strings.Contains(out, "version 12:") ||
		!strings.Contains(errs, "a rollback to version 8 is unfinished") {
		t.Errorf("wal dump of a log beside an unfinished rollback: exit %d\n%s\n%s", code, out, errs)
	}
	if err := os.Remove(filepath.Join(dir, "rollback")); err != nil {
		t.Fatal(err)
	}
	// a directory that is neither a database nor a log is not an empty log
	if code, _, errs := cli(t, "wal", "dump", t.TempDir()); code != exitFailure || !strings.Contains(errs, "neither") {
		t.Errorf("wal dump of an empty directory: exit %d %s", code, errs)
	}
	// a database's empty log, given as the database or as its log
	// directory, is an empty log
	stream := filepath.Join(t.TempDir(), "state.bin")
	mustCLI(t, "export", dir, stream)
	empty := filepath.Join(t.TempDir(), "imported")
	mustCLI(t, "import", "--height", "12", stream, empty) // an empty log
	for _, d := range []string{empty, filepath.Join(empty, "wal")} {
		if out := mustCLI(t, "wal", "dump", d); !strings.Contains(out, "empty") {
			t.Errorf("wal dump %s of an empty log: %q", d, out)
		}
	}
}

// TestWALDumpBesidePrune: a segment removed between the open and the read,
// as by a node pruning the log, fails the dump with a message that says so
// and what was printed.
func TestWALDumpBesidePrune(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12)
	defer func() { walDumpOpened = nil }()
	walDumpOpened = func() {
		segs, err := filepath.Glob(filepath.Join(dir, "wal", "*"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("no segments: %v", err)
		}
		for _, s := range segs {
			if err := os.Remove(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, _, errs := cli(t, "wal", "dump", "--from", "3", dir)
	if code != exitFailure || !strings.Contains(errs, "removed while the log was read, before any version was printed") {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
}

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 30, 15)
	out := mustCLI(t, "verify", dir)
	if !strings.Contains(out, "OK") || !strings.Contains(out, hash) {
		t.Fatalf("verify:\n%s", out)
	}
	out = mustCLI(t, "verify", "--json", dir)
	var res verifyJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.Version != 30 || res.AppHash != hash {
		t.Fatalf("verify --json: %v %s", err, out)
	}
	// a directory of the reference memiavl (current is a symbolic link)
	// is named as such, not reported as damaged
	ref := t.TempDir()
	if err := os.Mkdir(filepath.Join(ref, "snapshot-00000000000000000000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("snapshot-00000000000000000000", filepath.Join(ref, "current")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ref, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", ref}, {"wal", "dump", ref}, {"wal", "dump", filepath.Join(ref, "wal")}} {
		if code, _, errs := cli(t, args...); code != exitFailure || !strings.Contains(errs, "import-memiavl") {
			t.Errorf("%v of a reference memiavl directory: exit %d %s", args, code, errs)
		}
	}
}

func TestVerifyCorruptSnapshot(t *testing.T) {
	src := t.TempDir()
	makeDB(t, src, 0.01, 30, 15)
	for _, file := range []string{"kvs", "leaves", "branches"} {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			path := filepath.Join(dir, snapshotDirName(15), "s-bank", file)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			testutil.DamageByte(t, path, fi.Size()/2)
			code, out, errs := cli(t, "verify", dir)
			if code != exitFailure {
				t.Fatalf("verify of a corrupt snapshot: exit %d\n%s%s", code, out, errs)
			}
			if !strings.Contains(errs, path) || !strings.Contains(errs, "FAILED") {
				t.Errorf("stderr does not name %s:\n%s", path, errs)
			}
			if out != "" {
				t.Errorf("failure printed on stdout: %q", out)
			}
		})
	}
}

func TestVerifyCorruptWAL(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 30, 10)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no log segment")
	}
	seg := segs[0]
	fi, _ := os.Stat(seg)
	testutil.DamageByte(t, seg, fi.Size()/3) // a record in the middle, not the tail
	code, _, errs := cli(t, "verify", dir)
	if code != exitFailure {
		t.Fatalf("verify of a corrupt log: exit %d\n%s", code, errs)
	}
	if !strings.Contains(errs, seg) || !strings.Contains(errs, "offset") {
		t.Errorf("stderr does not name the segment and offset:\n%s", errs)
	}
	// With --json the failure is also a report on stdout, with ok false,
	// also for a directory that holds no database.
	if code, out, _ := cli(t, "verify", "--json", t.TempDir()); code != exitFailure ||
		!strings.Contains(out, `"ok": false`) && !strings.Contains(out, `"ok":false`) {
		t.Errorf("verify --json of an empty directory: exit %d, stdout %q", code, out)
	}
	code, out, errs := cli(t, "verify", "--json", dir)
	var res verifyFailure
	if code != exitFailure || json.Unmarshal([]byte(out), &res) != nil || res.OK || !strings.Contains(res.Error, seg) ||
		!strings.Contains(errs, seg) {
		t.Errorf("verify --json of a corrupt log: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestVerifyTornWALTail cuts the last log record short: verify still
// succeeds at the version before it, warns about the torn tail with its
// file and offset, and leaves the file as it is.
func TestVerifyTornWALTail(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 30, 10)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no log segment")
	}
	seg := segs[len(segs)-1]
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	cut := fi.Size() - 5
	if err := os.Truncate(seg, cut); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "verify", dir)
	if !strings.Contains(out, "torn tail") || !strings.Contains(out, seg) || !strings.Contains(out, "OK") {
		t.Fatalf("verify of a log with a torn tail:\n%s", out)
	}
	var res verifyJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "verify", "--json", dir)), &res); err != nil || !res.OK || res.Version != 29 {
		t.Fatalf("verify --json: %v %+v", err, res)
	}
	if tt := res.WALTornTail; tt == nil || tt.Path != seg || tt.Offset+tt.Bytes != cut || tt.Bytes <= 0 {
		t.Fatalf("verify --json torn tail %+v, want the bytes before offset %d of %s", tt, cut, seg)
	}
	if fi, err := os.Stat(seg); err != nil || fi.Size() != cut {
		t.Fatalf("verify changed the segment: %v %v", fi, err)
	}
	// --strict fails on it
	if code, _, errs := cli(t, "verify", "--strict", dir); code != 1 || !strings.Contains(errs, "torn tail") {
		t.Fatalf("verify --strict: exit %d\n%s", code, errs)
	}
	// the read-only commands report it too, and change nothing
	if out := mustCLI(t, "dump", dir); !strings.Contains(out, "torn tail") || !strings.Contains(out, "version 29") {
		t.Fatalf("dump of a log with a torn tail:\n%s", out)
	}
	if code, _, errs := cli(t, "wal", "dump", dir); code != 0 || !strings.Contains(errs, "torn tail") {
		t.Fatalf("wal dump of a log with a torn tail: exit %d\n%s", code, errs)
	}
	stream := filepath.Join(t.TempDir(), "state.bin")
	if code, _, errs := cli(t, "export", dir, stream); code != 0 || !strings.Contains(errs, "torn tail") {
		t.Fatalf("export of a database whose log has a torn tail: exit %d\n%s", code, errs)
	}
	if fi, err := os.Stat(seg); err != nil || fi.Size() != cut {
		t.Fatalf("a read-only command changed the segment: %v %v", fi, err)
	}
	// the writer's open cuts it off and says so
	code, _, errs := cli(t, "rewrite-snapshot", "--progress", "none", dir)
	if code != 0 || !strings.Contains(errs, "torn tail") || !strings.Contains(errs, "this open cut it off") {
		t.Fatalf("rewrite-snapshot of a log with a torn tail: exit %d\n%s", code, errs)
	}
	if code, _, errs := cli(t, "verify", "--strict", dir); code != 0 {
		t.Fatalf("verify --strict after the cut: exit %d\n%s", code, errs)
	}
}

func TestRewriteSnapshot(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 40, 10, 20)
	out := mustCLI(t, "rewrite-snapshot", "--progress", "log", dir)
	if !strings.Contains(out, snapshotDirName(40)+" written") {
		t.Fatalf("rewrite-snapshot:\n%s", out)
	}
	var res DumpResult
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
	// the default keeps one older snapshot, as a node does, and the log
	// after it: a rollback of the latest version still works
	if res.SnapshotVersion != 40 || res.Version != 40 || res.AppHash != hash || !equalInts(res.Snapshots, []int64{20, 40}) || res.WALFirst != 21 {
		t.Fatalf("after rewrite: %+v", res)
	}
	mustCLI(t, "verify", dir)
	// a second run has nothing to do
	if out := mustCLI(t, "rewrite-snapshot", dir); !strings.Contains(out, "nothing to write") {
		t.Errorf("second rewrite: %s", out)
	}
}

// TestRewriteSnapshotDamaged: a damaged byte in the snapshot a rewrite
// would copy from stops it before anything changes, with or without
// --rollback; --skip-verify writes anyway.
func TestRewriteSnapshotDamaged(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 40, 10, 20)
	// the lookup table: damage that the checksums find and the rewrite,
	// which builds a new table, never reads
	lookup := filepath.Join(dir, snapshotDirName(20), "s-bank", "lookup")
	fi, err := os.Stat(lookup)
	if err != nil {
		t.Fatal(err)
	}
	restore := testutil.DamageByte(t, lookup, fi.Size()/2)
	damaged := testutil.DirDigest(t, dir)
	// the refused rewrite changes no file; the database, its damaged byte
	// restored, is still at version 40 with its snapshots
	unchanged := func(what string) {
		t.Helper()
		if testutil.DirDigest(t, dir) != damaged {
			t.Fatalf("after %s: the database's files changed", what)
		}
		restore()
		var res DumpResult
		_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
		if res.Version != 40 || res.AppHash != hash || res.SnapshotVersion != 20 || !equalInts(res.Snapshots, []int64{0, 10, 20}) || res.WALLast != 40 {
			t.Fatalf("after %s: %+v", what, res)
		}
		restore = testutil.DamageByte(t, lookup, fi.Size()/2)
	}
	for _, args := range [][]string{
		{"rewrite-snapshot", dir},
		{"rewrite-snapshot", "--version", "30", "--rollback", dir},
	} {
		code, _, errs := cli(t, args...)
		if code != exitFailure || !strings.Contains(errs, "checksum") || !strings.Contains(errs, snapshotDirName(20)) {
			t.Fatalf("%v over a damaged snapshot: exit %d\n%s", args, code, errs)
		}
		unchanged(strings.Join(args[:len(args)-1], " "))
	}
	code, out, errs := cli(t, "rewrite-snapshot", "--skip-verify", "--keep-recent", "0", dir)
	if code != 0 || !strings.Contains(out, snapshotDirName(40)+" written") || strings.Contains(errs, "verifying") {
		t.Fatalf("--skip-verify: exit %d\n%s%s", code, out, errs)
	}
	mustCLI(t, "verify", dir) // the damaged snapshot is pruned
}

func TestRewriteSnapshotVersion(t *testing.T) {
	src := t.TempDir()
	hash := makeDB(t, src, 0.01, 40, 10, 30)

	// without --rollback: snapshot 25 becomes current, versions 26..40 stay
	dir := t.TempDir()
	copyDir(t, src, dir)
	mustCLI(t, "rewrite-snapshot", "--version", "25", "--keep-recent", "1", dir)
	var res DumpResult
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
	if res.Version != 40 || res.AppHash != hash || res.SnapshotVersion != 25 || res.WALLast != 40 {
		t.Fatalf("after --version 25: %+v", res)
	}
	if want := []int64{10, 25}; !equalInts(res.Snapshots, want) {
		t.Errorf("kept snapshots %v, want %v", res.Snapshots, want)
	}
	mustCLI(t, "verify", dir)

	// with --rollback: version 25 is the latest
	dir = t.TempDir()
	copyDir(t, src, dir)
	if out := mustCLI(t, "rewrite-snapshot", "--version", "25", "--rollback", dir); !strings.Contains(out, "versions 26..40 discarded") {
		t.Errorf("rewrite-snapshot --rollback does not report what it discarded:\n%s", out)
	}
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
	if res.Version != 25 || res.SnapshotVersion != 25 || res.WALLast > 25 {
		t.Fatalf("after --version 25 --rollback: %+v", res)
	}
	mustCLI(t, "verify", dir)
	if code, _, _ := cli(t, "rewrite-snapshot", "--version", "99", dir); code != exitFailure {
		t.Errorf("--version past the latest: exit %d", code)
	}

	// --version of a kept snapshot that is not current writes nothing:
	// without --rollback the database stays as it is, with it the
	// versions after it go
	dir = t.TempDir()
	copyDir(t, src, dir)
	out := mustCLI(t, "rewrite-snapshot", "--version", "10", dir)
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
	if !strings.Contains(out, "left as it is") || res.Version != 40 || res.SnapshotVersion != 30 {
		t.Fatalf("--version 10, a kept snapshot: %q, then %+v", out, res)
	}
	out = mustCLI(t, "rewrite-snapshot", "--version", "10", "--rollback", dir)
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
	if !strings.Contains(out, "rolled back from version 40 to 10") || res.Version != 10 || res.SnapshotVersion != 10 || !equalInts(res.Snapshots, []int64{0, 10}) {
		t.Fatalf("--version 10 --rollback, a kept snapshot: %q, then %+v", out, res)
	}
	mustCLI(t, "verify", dir)
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestExportImport(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 20, 10)
	file := filepath.Join(t.TempDir(), "state.bin")
	out := mustCLI(t, "export", dir, file)
	if !strings.Contains(out, "exported version 20") {
		t.Fatalf("export: %s", out)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	out = mustCLI(t, "import", "--height", "20", file, dst)
	if !strings.Contains(strings.ToLower(out), hash) {
		t.Fatalf("import printed %q, want app hash %s", out, hash)
	}
	mustCLI(t, "verify", dst)

	// an older version
	file2 := filepath.Join(t.TempDir(), "state-15.bin")
	mustCLI(t, "export", "--height", "15", dir, file2)
	var want DumpResult
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", "--version", "15", dir)), &want)
	dst2 := filepath.Join(t.TempDir(), "restored15")
	out = mustCLI(t, "import", "--height", "15", file2, dst2)
	if !strings.Contains(strings.ToLower(out), want.AppHash) {
		t.Fatalf("import of 15 printed %q, want %s", out, want.AppHash)
	}
	// a damaged value in the current snapshot: nothing is exported
	var cur DumpResult
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &cur)
	kvs := filepath.Join(dir, snapshotDirName(cur.SnapshotVersion), "s-bank", "kvs")
	fi, err := os.Stat(kvs)
	if err != nil {
		t.Fatal(err)
	}
	restore := testutil.DamageByte(t, kvs, fi.Size()-1)
	file3 := filepath.Join(t.TempDir(), "damaged.bin")
	if code, _, errs := cli(t, "export", dir, file3); code != exitFailure || !strings.Contains(errs, kvs) {
		t.Errorf("export of a damaged snapshot: exit %d, stderr %q", code, errs)
	}
	if ents, _ := os.ReadDir(filepath.Dir(file3)); len(ents) != 0 {
		t.Errorf("export of a damaged snapshot left %v", ents)
	}
	restore()

	// a file that is not a stream
	bad := filepath.Join(t.TempDir(), "bad.bin")
	_ = os.WriteFile(bad, []byte("not a stream"), 0o644)
	if code, _, _ := cli(t, "import", "--height", "3", bad, filepath.Join(t.TempDir(), "x")); code != exitFailure {
		t.Errorf("import of garbage: exit %d", code)
	}
	// a stream with bytes after its end is refused before anything is
	// imported, and leaves no directory
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	trailing := filepath.Join(t.TempDir(), "trailing.bin")
	_ = os.WriteFile(trailing, append(b, "junk"...), 0o644)
	dst3 := filepath.Join(t.TempDir(), "x")
	if code, _, errs := cli(t, "import", "--height", "20", trailing, dst3); code != exitFailure || !strings.Contains(errs, "after the end") {
		t.Errorf("import of a stream with trailing bytes: exit %d %s", code, errs)
	}
	if _, err := os.Stat(dst3); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused import left %s: %v", dst3, err)
	}
	// a stream of no store would make a database of none: refused unless
	// --stores names the stores
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	_ = zw.Close()
	empty := filepath.Join(t.TempDir(), "empty.bin")
	_ = os.WriteFile(empty, zb.Bytes(), 0o644)
	dst4 := filepath.Join(t.TempDir(), "x")
	if code, _, errs := cli(t, "import", "--height", "4", empty, dst4); code != exitFailure || !strings.Contains(errs, "no store") {
		t.Errorf("import of a stream of no store: exit %d %s", code, errs)
	}
	if _, err := os.Stat(dst4); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused import left %s: %v", dst4, err)
	}
	if out := mustCLI(t, "import", "--height", "4", "--stores", "acc,bank", empty, dst4); !strings.Contains(out, "2 stores") {
		t.Errorf("import of a stream of no store into mounted stores: %s", out)
	}
}

// TestExportImportDestinations: export refuses, before any work, a file
// inside a database directory (its own included) and an existing file
// unless --force; import refuses a directory inside a database; wal dump
// refuses a database's subdirectory that is not its log.
func TestExportImportDestinations(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 10)
	before := testutil.DirDigest(t, dir)
	for _, dst := range []string{filepath.Join(dir, "current"), filepath.Join(dir, "state.bin"), filepath.Join(dir, "wal", "state.bin")} {
		if code, _, errs := cli(t, "export", dir, dst); code != exitFailure || !strings.Contains(errs, "inside the database") {
			t.Errorf("export to %s: exit %d %s", dst, code, errs)
		}
	}
	if got := testutil.DirDigest(t, dir); got != before {
		t.Fatal("a refused export changed the database directory")
	}
	out := t.TempDir()
	file := filepath.Join(out, "state.bin")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli(t, "export", dir, file); code != exitFailure || !strings.Contains(errs, "--force") {
		t.Errorf("export over an existing file: exit %d %s", code, errs)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("a refused export replaced the file")
	}
	if code, _, errs := cli(t, "export", dir, out); code != exitFailure || !strings.Contains(errs, "is a directory") {
		t.Errorf("export to a directory: exit %d %s", code, errs)
	}
	mustCLI(t, "export", "--force", dir, file)
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("export left %d entries beside its file", len(ents))
	}
	if code, _, errs := cli(t, "import", "--height", "12", file, filepath.Join(dir, "wal")); code != exitFailure || !strings.Contains(errs, "inside the database") {
		t.Errorf("import into a database's log directory: exit %d %s", code, errs)
	}
	if code, _, errs := cli(t, "wal", "dump", filepath.Join(dir, snapshotDirName(10))); code != exitFailure || !strings.Contains(errs, "neither") {
		t.Errorf("wal dump of a snapshot directory: exit %d %s", code, errs)
	}
	// the same destinations through a symbolic link, and for the other
	// commands that create a database
	link := filepath.Join(out, "link")
	if err := os.Symlink(filepath.Join(dir, "wal"), link); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"export", dir, filepath.Join(link, "00000000000000000013.wal")},
		{"import", "--height", "12", file, filepath.Join(link, "sub")},
		{"import-iavl", t.TempDir(), filepath.Join(dir, snapshotDirName(20))},
		{"import-memiavl", t.TempDir(), filepath.Join(dir, snapshotDirName(20))},
		{"bench", "--blocks", "2", "--scale", "0.01", "--dir", filepath.Join(link, "bench")},
	} {
		if code, _, errs := cli(t, args...); code != exitFailure || !strings.Contains(errs, "inside the database") {
			t.Errorf("%s: exit %d %s", strings.Join(args, " "), code, errs)
		}
	}
	if got := testutil.DirDigest(t, dir); got != before {
		t.Fatal("a refused command changed the database directory")
	}
	// a log directory that is a link to another disk: a path through
	// the database's name is inside it, though the link resolves outside
	elsewhere := filepath.Join(t.TempDir(), "wal")
	if err := os.Rename(filepath.Join(dir, "wal"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "wal")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"export", dir, filepath.Join(dir, "wal", "00000000000000000013.wal")},
		{"import", "--height", "12", file, filepath.Join(dir, "wal", "sub")},
		{"bench", "--blocks", "2", "--scale", "0.01", "--dir", filepath.Join(dir, "wal", "bench")},
	} {
		if code, _, errs := cli(t, args...); code != exitFailure || !strings.Contains(errs, "inside the database") {
			t.Errorf("%s (log directory linked): exit %d %s", strings.Join(args, " "), code, errs)
		}
	}
	mustCLI(t, "verify", dir)
}

// TestImportIntoWorkingDirectory: an import into "." run inside a
// database replaces it (the staging directory goes beside it, not inside
// it), and the new database is the one reported.
func TestImportIntoWorkingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	makeDB(t, dir, 0.01, 12, 10)
	file := filepath.Join(t.TempDir(), "state.bin")
	mustCLI(t, "export", dir, file)
	mustCLI(t, "rewrite-snapshot", dir) // something the import replaces
	restore := testutil.Chdir(t, dir)
	out := mustCLI(t, "import", "--height", "12", file, ".")
	restore()
	if !strings.Contains(out, "into "+dir+" at version 12") {
		t.Errorf("import into .: %s", out)
	}
	ents, err := os.ReadDir(filepath.Dir(dir))
	if err != nil || len(ents) != 1 {
		t.Errorf("beside the database after the import: %v %v", ents, err)
	}
	mustCLI(t, "verify", dir)
}

// TestResultsNotWritten: a command whose report cannot be written to
// stdout fails, in text as in JSON; one whose work is the files it wrote
// succeeds with a warning.
func TestResultsNotWritten(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 5)
	for _, args := range [][]string{{"dump", dir}, {"dump", "--json", dir}, {"wal", "dump", dir}, {"verify", dir}} {
		var errb bytes.Buffer
		if code := run(args, failingWriter{}, &errb); code != exitFailure || !strings.Contains(errb.String(), "disk full") {
			t.Errorf("%s with stdout failing: exit %d %s", strings.Join(args, " "), code, errb.String())
		}
	}
	file := filepath.Join(t.TempDir(), "state.bin")
	var errb bytes.Buffer
	if code := run([]string{"export", dir, file}, failingWriter{}, &errb); code != exitOK || !strings.Contains(errb.String(), "warning") {
		t.Errorf("export with stdout failing: exit %d %s", code, errb.String())
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("export with stdout failing: %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// ---- the built binary

var binPath string

func buildBinary(t *testing.T) string {
	t.Helper()
	if binPath != "" {
		return binPath
	}
	out := filepath.Join(os.TempDir(), "memiavl-cli-test-"+strings.ReplaceAll(t.Name(), "/", "_"))
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	binPath = out
	return out
}

func TestMain(m *testing.M) {
	testutil.QuickByDefault() // a plain go test runs as one with -short
	code := m.Run()
	if binPath != "" {
		os.Remove(binPath)
	}
	os.Exit(code)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func TestBinaryExitCodes(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 20, 10)
	bad := t.TempDir()
	copyDir(t, dir, bad)
	testutil.DamageByte(t, filepath.Join(bad, snapshotDirName(10), "s-staking", "kvs"), 7)

	for _, c := range []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{[]string{"--help"}, 0, "Usage:", ""},
		{[]string{"verify", dir}, 0, "OK", ""},
		{[]string{"dump", dir}, 0, "staking", ""},
		{[]string{"verify", bad}, 1, "", "kvs"},
		{[]string{"verify"}, 2, "", "takes 1 argument"},
		{[]string{"bench", "--nope"}, 2, "", "unknown flag"},
		{[]string{"nosuch"}, 2, "", "unknown command"},
	} {
		cmd := exec.Command(bin, c.args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := exitCode(cmd.Run())
		if code != c.code || !strings.Contains(out.String(), c.inStdout) || !strings.Contains(errb.String(), c.inStderr) {
			t.Errorf("memiavl %v: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)",
				c.args, code, c.code, out.String(), c.inStdout, errb.String(), c.inStderr)
		}
	}
}

// startScanStderr starts cmd and returns a scanner of the lines of its
// standard error.
func startScanStderr(t *testing.T, cmd *exec.Cmd) *bufio.Scanner {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return bufio.NewScanner(stderr)
}

// TestBenchInterruptedTwice: an interrupt during a block says that the
// block in progress is finished first, and a second one ends the process
// at once, by the signal's default action. The first interrupt is sent
// once the database is open; when it lands before the first block begins,
// the bench stops there without the message (exit code 1), which is
// checked too, and the run is repeated.
func TestBenchInterruptedTwice(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses SIGINT")
	}
	bin := buildBinary(t)
	for attempt := 1; !interruptBenchTwice(t, bin); attempt++ {
		if attempt == 10 {
			t.Fatalf("in %d runs, no interrupt landed during the block", attempt)
		}
	}
}

// interruptBenchTwice runs one bench of TestBenchInterruptedTwice and
// reports false when its first interrupt landed before the block began.
func interruptBenchTwice(t *testing.T, bin string) bool {
	t.Helper()
	cmd := exec.Command(bin, "bench", "--scale", "2", "--blocks", "1") // a block of about a second
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	sc := startScanStderr(t, cmd)
	var seen strings.Builder
	// signal sends SIGINT after the line holding after and reports whether
	// that line came
	signal := func(after string) bool {
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), after) {
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
				return true
			}
		}
		return false
	}
	if !signal("bench: 1 blocks") {
		cmd.Wait()
		t.Fatalf("no line %q:\n%s", "bench: 1 blocks", seen.String())
	}
	if !signal("interrupt again to stop at once") {
		code := exitCode(cmd.Wait())
		if code != exitFailure || !strings.Contains(seen.String(), "interrupted after version 0") {
			t.Fatalf("bench interrupted before its first block: exit %d\n%s", code, seen.String())
		}
		return false
	}
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Fatalf("bench interrupted twice: %v, want an end by SIGINT\n%s", err, seen.String())
	}
	return true
}

// TestBenchInterrupted interrupts a bench without --dir once its database
// is open: it stops with exit code 1 and removes its temporary directory.
func TestBenchInterrupted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses SIGINT")
	}
	bin := buildBinary(t)
	tmp := t.TempDir()
	cmd := exec.Command(bin, "bench", "--scale", "0.02", "--blocks", "1000000", "--snapshot-interval", "20")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	sc := startScanStderr(t, cmd)
	var seen strings.Builder
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "bench: 1000000 blocks") {
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
	}
	if code := exitCode(cmd.Wait()); code != exitFailure || !strings.Contains(seen.String(), "interrupted after version") {
		t.Fatalf("interrupted bench: exit %d\n%s", code, seen.String())
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("an interrupted bench left %v in its temporary directory", ents)
	}
}

// TestRewriteKilled kills a rewrite-snapshot process in the middle of the
// write, checks that the database is untouched but for the temporary
// directory, reruns the command and verifies the result.
func TestRewriteKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses SIGSTOP/SIGKILL")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	scale, blocks := 0.2, int64(30)
	if testing.Short() {
		scale, blocks = 0.08, 20
	}
	hash := makeDB(t, dir, scale, blocks, 5)

	cmd := exec.Command(bin, "rewrite-snapshot", "--progress", "none", "--concurrency", "1", dir)
	cmd.Env = append(os.Environ(), stopOnTmpEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "stopping during the write") {
				seen = true
				stopped <- true
			}
		}
		if !seen {
			stopped <- false
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var midWrite bool
	select {
	case midWrite = <-stopped:
	case <-time.After(2 * time.Minute):
		t.Fatal("rewrite-snapshot neither stopped nor finished")
	}
	if midWrite {
		// wait until the process is really stopped, then kill it
		for i := 0; i < 1000; i++ {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
			if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "T" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	_ = cmd.Wait()
	if midWrite {
		tmp := filepath.Join(dir, snapshotDirName(blocks)+tmpSuffix)
		if _, err := os.Stat(tmp); err != nil {
			t.Fatalf("killed mid-write, but no temporary directory %s: %v", tmp, err)
		}
		if _, err := os.Stat(filepath.Join(dir, snapshotDirName(blocks))); err == nil {
			t.Fatal("killed mid-write, yet the final snapshot directory exists")
		}
		// the database still opens at its latest version from the old snapshot
		var res DumpResult
		_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
		if res.Version != blocks || res.AppHash != hash || res.SnapshotVersion != 5 {
			t.Fatalf("after the kill: %+v", res)
		}
	} else {
		t.Log("the write finished before the process could be stopped; checking the rerun only")
	}
	out := mustCLI(t, "rewrite-snapshot", "--progress", "none", dir)
	if midWrite && !strings.Contains(out, "written") {
		t.Fatalf("rerun: %s", out)
	}
	var res DumpResult
	_ = json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &res)
	if res.Version != blocks || res.AppHash != hash || res.SnapshotVersion != blocks {
		t.Fatalf("after the rerun: %+v", res)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*"+tmpSuffix)); len(m) != 0 {
		t.Errorf("leftovers after the rerun: %v", m)
	}
	mustCLI(t, "verify", dir)
}

// TestRewriteInterruptedEarly: an interrupt that arrives before the
// snapshot write starts (during the open or the check of the snapshot it
// copies from) stops the command there, with no snapshot written.
func TestRewriteInterruptedEarly(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 14, 10)
	before := testutil.DirDigest(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	err := runRewrite(ctx, &out, &errb, dir, rewriteOptions{progress: "none"})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("rewrite-snapshot interrupted before its write: %v\n%s", err, errb.String())
	}
	if strings.Contains(errb.String(), "writing the snapshot") {
		t.Fatalf("the interrupted command went on to write:\n%s", errb.String())
	}
	if got := testutil.DirDigest(t, dir); got != before {
		t.Fatal("the interrupted command changed the database directory")
	}
}

// TestWALDumpEdges: a segment file given for the log is refused with the
// directory to give instead; a log whose only record is torn is reported
// with the database's version (its snapshot's), not the empty log's; and
// a range asked of an empty log is an error, as one outside a log is.
func TestWALDumpEdges(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 11, 10)
	mustCLI(t, "rewrite-snapshot", "--keep-recent", "1", dir) // of 11: the log before it goes
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v %v, want the one holding version 11", segs, err)
	}
	if code, _, errs := cli(t, "wal", "dump", segs[0]); code != exitFailure || !strings.Contains(errs, "is a file") {
		t.Errorf("wal dump of a segment file: exit %d %s", code, errs)
	}
	// a log directory outside any database: its own last version
	bare := filepath.Join(t.TempDir(), "mylog")
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bare, filepath.Base(segs[0])), append(b, "garbage"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli(t, "wal", "dump", bare); code != exitOK || !strings.Contains(errs, "is at version 11") {
		t.Errorf("wal dump of a bare log with a torn tail: exit %d %s", code, errs)
	}
	if err := os.Truncate(segs[0], 24); err != nil { // the header and 4 bytes of the record
		t.Fatal(err)
	}
	code, out, errs := cli(t, "wal", "dump", dir)
	if code != exitOK || !strings.Contains(out, "is empty") || !strings.Contains(errs, "the database is at version 11") {
		t.Errorf("wal dump of a log whose only record is torn: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := cli(t, "wal", "dump", "--from", "5", dir); code != exitFailure || !strings.Contains(errs, "holds no versions") {
		t.Errorf("wal dump --from of an empty log: exit %d %s", code, errs)
	}
}
