package main

// Tests of the command-line tool: snapshot listings as the database's
// (linked snapshots, stray names, dangling links), rewrite-snapshot's
// reports, wal dump run inside the log directory, an interrupted export;
// dumps across store upgrades, version 0, a writer holding the lock, small
// bench runs, imports at a height below the stream's nodes.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// upgradedDB writes versions 1..11 into dir: stores a and b; version 3
// adds c, version 6 renames b to bb, version 8 deletes a; synchronous
// snapshots of versions 4 and 9 (and the initial 0) are kept.
func upgradedDB(t *testing.T, dir string) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"a", "b"}, SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v := int64(1); v <= 11; v++ {
		switch v {
		case 3:
			mustOK(t, db.ApplyUpgrades(wal.Upgrades{Added: []string{"c"}}))
		case 6:
			mustOK(t, db.ApplyUpgrades(wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "b", NewName: "bb"}}}))
		case 8:
			mustOK(t, db.ApplyUpgrades(wal.Upgrades{Deleted: []string{"a"}}))
		}
		for _, s := range db.StoreNames() {
			// distinct contents per store, so that their hashes differ
			mustOK(t, db.Set(s, []byte(fmt.Sprintf("k%02d", v)), []byte(s)))
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if v == 4 || v == 9 {
			mustOK(t, db.RewriteSnapshot(context.Background()))
		}
	}
	mustOK(t, db.Close())
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// linkSnapshotBack moves snapshot v of dir to another directory and links
// it back under its name, as README's directory layout allows ("one moved
// elsewhere and linked back under its name is read through the link").
func linkSnapshotBack(t *testing.T, dir string, v int64) {
	t.Helper()
	name := snapshotDirName(v)
	other := filepath.Join(t.TempDir(), name)
	mustOK(t, os.Rename(filepath.Join(dir, name), other))
	mustOK(t, os.Symlink(other, filepath.Join(dir, name)))
}

// verifiedSnapshots returns the kept snapshots the library reports
// (multitree.Verify, as verify --json prints them).
func verifiedSnapshots(t *testing.T, dir string) []int64 {
	t.Helper()
	rep, err := multitree.Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Snapshots
}

// TestCLIDumpLinkedSnapshot: a snapshot directory moved to another disk and
// linked back (a layout README documents) is among dump's kept snapshots,
// also as the base snapshot, as the library (verify) lists it.
func TestCLIDumpLinkedSnapshot(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 20, 10)
	linkSnapshotBack(t, dir, 10)
	want := verifiedSnapshots(t, dir) // [0 10]
	got := dumpJSON(t, dir)
	if !slices.Equal(got.Snapshots, want) {
		t.Errorf("dump --json: snapshots %v, the library (verify) lists %v", got.Snapshots, want)
	}
	if !slices.Contains(got.Snapshots, got.SnapshotVersion) {
		t.Errorf("dump --json: base snapshot %d is not among the kept snapshots %v", got.SnapshotVersion, got.Snapshots)
	}
	if out := mustCLI(t, "dump", dir); !strings.Contains(out, "(kept: [0 10])") {
		t.Errorf("dump does not list the linked snapshot 10 as kept:\n%s", out)
	}
}

// TestCLIDumpStraySnapshotName: a directory whose name parses as a negative
// version ("snapshot--0000000000000000001") is not a snapshot to dump, as to
// the library.
func TestCLIDumpStraySnapshotName(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 5)
	mustOK(t, os.Mkdir(filepath.Join(dir, "snapshot--0000000000000000001"), 0o755))
	want := verifiedSnapshots(t, dir)
	if got := dumpJSON(t, dir); !slices.Equal(got.Snapshots, want) {
		t.Errorf("dump --json: snapshots %v, the library (verify) lists %v", got.Snapshots, want)
	}
}

// TestCLIRewriteVersionRemovesLinkedNewerSnapshot: rewrite-snapshot
// --version V (no --rollback) removes the snapshots newer than V (help:
// "snapshots newer than V are removed, V becomes current"), a linked one
// too, and reports the kept ones as the library lists them.
func TestCLIRewriteVersionRemovesLinkedNewerSnapshot(t *testing.T) {
	dir := t.TempDir()
	upgradedDB(t, dir)
	linkSnapshotBack(t, dir, 9)
	out := mustCLI(t, "rewrite-snapshot", "--version", "5", dir)
	if _, err := os.Lstat(filepath.Join(dir, snapshotDirName(9))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("snapshot 9, newer than --version 5, is still there (err %v)", err)
	}
	lib := verifiedSnapshots(t, dir)
	if want := fmt.Sprintf("kept snapshots  %v", lib); !strings.Contains(out, want) {
		t.Errorf("report does not match the library's snapshots %v:\n%s", lib, out)
	}
}

// TestCLIRollbackReportsLinkedSnapshot: a rollback to a version with a kept
// snapshot reports the newer snapshots it removed, a linked one too.
func TestCLIRollbackReportsLinkedSnapshot(t *testing.T) {
	dir := t.TempDir()
	upgradedDB(t, dir)
	linkSnapshotBack(t, dir, 9)
	out := mustCLI(t, "rewrite-snapshot", "--version", "4", "--rollback", dir)
	if _, err := os.Lstat(filepath.Join(dir, snapshotDirName(9))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the rollback left snapshot 9: %v", err)
	}
	if !strings.Contains(out, "newer snapshots removed: [9]") {
		t.Errorf("rollback report does not name the removed snapshot 9:\n%s", out)
	}
}

// TestCLIRewriteVersionKeptLinkedNewer: --version V where V has a kept
// snapshot and a newer one (linked back, or not) is current: nothing is
// written and the database is left as it is (help), which the command
// says, naming the current snapshot and the latest version.
func TestCLIRewriteVersionKeptLinkedNewer(t *testing.T) {
	plain := t.TempDir()
	upgradedDB(t, plain)
	if out := mustCLI(t, "rewrite-snapshot", "--version", "4", plain); !strings.Contains(out, "left as it is (current snapshot 9, latest version 11)") {
		t.Fatalf("without a link: %s", out)
	}
	dir := t.TempDir()
	upgradedDB(t, dir)
	linkSnapshotBack(t, dir, 9)
	out := mustCLI(t, "rewrite-snapshot", "--version", "4", dir)
	if d := dumpJSON(t, dir); d.SnapshotVersion != 9 || d.Version != 11 {
		t.Fatalf("database changed: %+v", d)
	}
	if !strings.Contains(out, "left as it is (current snapshot 9, latest version 11)") {
		t.Errorf("with snapshot 9 linked, the report is wrong (snapshot 9 is current, version 11):\n%s", out)
	}
}

// TestCLIRewriteCurrentNotLatestLeftAsIs: --version V (no --rollback) where
// V has the current snapshot but is not the latest version: "If V already
// has a kept snapshot, nothing is written: ... without it the database is
// left as it is" (help); the pruning is for the latest version's current
// snapshot. Nothing is pruned, and the report names the latest version.
func TestCLIRewriteCurrentNotLatestLeftAsIs(t *testing.T) {
	dir := t.TempDir()
	upgradedDB(t, dir)
	mustCLI(t, "rewrite-snapshot", "--version", "5", "--keep-recent", "5", dir) // current 5, kept [0 4 5], latest 11
	before := dumpJSON(t, dir)
	if before.SnapshotVersion != 5 || before.Version != 11 || !slices.Equal(before.Snapshots, []int64{0, 4, 5}) {
		t.Fatalf("setup: %+v", before)
	}
	out := mustCLI(t, "rewrite-snapshot", "--version", "5", dir) // default --keep-recent 1
	after := dumpJSON(t, dir)
	if !slices.Equal(after.Snapshots, before.Snapshots) || after.WALFirst != before.WALFirst {
		t.Errorf("--version 5 (a kept snapshot, not the latest version) changed the database: snapshots %v -> %v, log from %d -> %d\n%s",
			before.Snapshots, after.Snapshots, before.WALFirst, after.WALFirst, out)
	}
	if strings.Contains(out, "current snapshot of version 5") {
		t.Errorf("report calls 5 the version of a database at version 11:\n%s", out)
	}
}

// TestCLIWALDumpDotInLogDir: wal dump of the log directory given as "." (run
// inside it) warns about an unfinished rollback as it does when the same
// directory is given by its path (the database directory is "..").
func TestCLIWALDumpDotInLogDir(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12)
	writeUnfinishedRollback(t, dir, 8)
	const warn = "a rollback to version 8 is unfinished"
	if _, _, errs := cli(t, "wal", "dump", filepath.Join(dir, walDirName)); !strings.Contains(errs, warn) {
		t.Fatalf("wal dump <db>/wal: no warning: %s", errs)
	}
	restore := testutil.Chdir(t, filepath.Join(dir, walDirName))
	code, out, errs := cli(t, "wal", "dump", ".")
	restore()
	if code != exitOK || !strings.Contains(out, "version 12:") {
		t.Fatalf("wal dump .: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, warn) {
		t.Errorf("wal dump . (inside <db>/wal) does not warn about the unfinished rollback; stderr %q", errs)
	}
}

// writeUnfinishedRollback writes an unfinished rollback to version to (the
// "rollback" file of multitree/format.go).
func writeUnfinishedRollback(t *testing.T, dir string, to uint64) {
	t.Helper()
	b := make([]byte, 0, 20)
	b = append(b, 0x52, 0x42, 0x54, 0x4D) // 0x4D544252 little-endian
	b = append(b, 1, 0, 0, 0)
	for i := 0; i < 8; i++ {
		b = append(b, byte(to>>(8*i)))
	}
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	b = append(b, byte(c), byte(c>>8), byte(c>>16), byte(c>>24))
	mustOK(t, os.WriteFile(filepath.Join(dir, "rollback"), b, 0o644))
}

// TestCLIDumpAcrossUpgrades: dump at every version of a database with
// a store added, renamed and deleted, checked against the library
// (multitree.Open at the version + View): store names, key counts, heights,
// root hashes, app hash; and IN BASE is the size of the store's tree in the
// base snapshot (0 for a store renamed or added since).
func TestCLIDumpAcrossUpgrades(t *testing.T) {
	dir := t.TempDir()
	upgradedDB(t, dir)
	for v := int64(1); v <= 11; v++ {
		got := dumpOf(t, dir, v)
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v, SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		view, err := db.View()
		if err != nil {
			t.Fatal(err)
		}
		names := view.StoreNames()
		if got.Version != v || got.AppHash != hex.EncodeToString(view.CommitInfo().Hash()) || got.SnapshotVersion != db.SnapshotVersion() {
			t.Errorf("version %d: dump %+v", v, got)
		}
		if len(got.Stores) != len(names) {
			t.Fatalf("version %d: dump stores %+v, library %v", v, got.Stores, names)
		}
		for i, s := range got.Stores {
			tr := view.Tree(names[i])
			if s.Name != names[i] || s.Keys != tr.Size() || s.Height != int(tr.Height()) || s.RootHash != hex.EncodeToString(tr.RootHash()) {
				t.Errorf("version %d: store %+v, library %s keys %d height %d", v, s, names[i], tr.Size(), tr.Height())
			}
			inBase := dirSize(filepath.Join(dir, snapshotDirName(got.SnapshotVersion), treeDirName(s.Name)))
			if s.SnapshotBytes != inBase {
				t.Errorf("version %d store %s: IN BASE %d, files %d", v, s.Name, s.SnapshotBytes, inBase)
			}
		}
		view.Release()
		mustOK(t, db.Close())
	}
	// renamed since base snapshot 4: no tree under the new name
	if d := dumpOf(t, dir, 7); d.Stores[1].Name != "bb" || d.Stores[1].SnapshotBytes != 0 {
		t.Errorf("version 7: %+v", d.Stores)
	}
	out := mustCLI(t, "verify", "--json", dir)
	var rep verifyJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.OK || !slices.Equal(rep.Stores, []string{"bb", "c"}) {
		t.Errorf("verify --json: %v %s", err, out)
	}
	// wal dump --json: every line is JSON, the upgrades of versions 3, 6, 8
	out = mustCLI(t, "wal", "dump", "--json", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 11 {
		t.Fatalf("wal dump --json: %d lines", len(lines))
	}
	for i, l := range lines {
		var e walEntryJSON
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Version != int64(i+1) {
			t.Fatalf("line %d: %v %s", i, err, l)
		}
		if (e.Upgrades != nil) != (e.Version == 3 || e.Version == 6 || e.Version == 8) {
			t.Errorf("version %d: upgrades %+v", e.Version, e.Upgrades)
		}
		// upgrades in snake case, without empty lists
		want := map[int64]string{
			3: `"upgrades":{"added":["c"]}`,
			6: `"upgrades":{"renamed":[{"old_name":"b","new_name":"bb"}]}`,
			8: `"upgrades":{"deleted":["a"]}`,
		}[e.Version]
		if want != "" && !strings.Contains(l, want) {
			t.Errorf("version %d: %s, want %s", e.Version, l, want)
		}
	}
	// export and import of a version before the upgrades, at the
	// stream's height and below its nodes' versions
	stream := filepath.Join(t.TempDir(), "s5")
	mustCLI(t, "export", "--height", "5", dir, stream)
	imported := filepath.Join(t.TempDir(), "db5")
	mustCLI(t, "import", "--height", "5", stream, imported)
	if a, b := dumpJSON(t, imported), dumpOf(t, dir, 5); a.AppHash != b.AppHash || len(a.Stores) != 3 {
		t.Errorf("imported version 5: %+v, want app hash %s", a, b.AppHash)
	}
	if code, _, errs := cli(t, "import", "--height", "3", stream, filepath.Join(t.TempDir(), "db3")); code != exitFailure || !strings.Contains(errs, "outside") {
		t.Errorf("import --height 3 of a stream of version 5: exit %d %s", code, errs)
	}
}

// TestCLIVersionZero: the read-only commands on a database with
// nothing committed.
func TestCLIVersionZero(t *testing.T) {
	dir := makeEmptyDB(t)
	d := dumpJSON(t, dir)
	if d.Version != 0 || d.WALLast != 0 || len(d.Stores) != 1 || d.Stores[0].Keys != 0 || d.Stores[0].Height != 0 ||
		d.Stores[0].RootHash != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("dump of version 0: %+v", d)
	}
	out := mustCLI(t, "verify", "--json", dir)
	var rep verifyJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.OK || rep.Version != 0 || rep.AppHash != d.AppHash {
		t.Errorf("verify --json of version 0: %v %s (dump's app hash %s)", err, out, d.AppHash)
	}
	if code, out, _ := cli(t, "wal", "dump", "--json", dir); code != 0 || out != "" {
		t.Errorf("wal dump --json of an empty log: exit %d %q", code, out)
	}
	file := filepath.Join(t.TempDir(), "x")
	if code, _, errs := cli(t, "export", dir, file); code != exitFailure || !strings.Contains(errs, "no committed version") {
		t.Errorf("export of version 0: exit %d %s", code, errs)
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("export of version 0 left %s", file)
	}
}

// TestCLIBesideWriter: with a writer holding the LOCK, the read-only
// commands work, and those that write name the lock.
func TestCLIBesideWriter(t *testing.T) {
	dir := t.TempDir()
	hash := makeDB(t, dir, 0.01, 12, 6)
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d := dumpJSON(t, dir); d.Version != 12 || d.AppHash != hash {
		t.Errorf("dump beside a writer: %+v", d)
	}
	mustCLI(t, "verify", dir)
	mustCLI(t, "wal", "dump", "--from", "12", dir)
	stream := filepath.Join(t.TempDir(), "s")
	mustCLI(t, "export", dir, stream)
	for _, args := range [][]string{
		{"rewrite-snapshot", dir},
		{"rewrite-snapshot", "--version", "8", "--rollback", "--skip-verify", dir},
		{"import", "--height", "12", stream, dir},
	} {
		code, _, errs := cli(t, args...)
		if code != exitFailure || !strings.Contains(errs, "LOCK") {
			t.Errorf("memiavl %v beside a writer: exit %d, stderr %q", args, code, errs)
		}
	}
	mustOK(t, db.Close())
	if d := dumpJSON(t, dir); d.Version != 12 || d.AppHash != hash {
		t.Errorf("the refused commands changed the database: %+v", d)
	}
}

// TestCLIBenchSmall: bench with one block and with two blocks at
// snapshot interval 1: the summary's figures agree with the run.
func TestCLIBenchSmall(t *testing.T) {
	for _, c := range []struct {
		args   []string
		blocks int64
	}{
		{[]string{"--blocks", "1"}, 1},
		{[]string{"--blocks", "2", "--snapshot-interval", "1"}, 2},
		{[]string{"--blocks", "3", "--snapshot-interval", "-1"}, 3},
	} {
		dir := filepath.Join(t.TempDir(), "db")
		args := append([]string{"bench", "--json", "--scale", "0.01", "--dir", dir}, c.args...)
		var res BenchResult
		if err := json.Unmarshal([]byte(mustCLI(t, args...)), &res); err != nil {
			t.Fatal(err)
		}
		if res.Version != c.blocks || res.Blocks != c.blocks || res.GenesisPairs == 0 {
			t.Errorf("%v: %+v", c.args, res)
		}
		if c.blocks == 1 && (res.Pairs != 0 || res.UpdatesPerSec != 0 || res.CommitLatency != (Latency{})) {
			t.Errorf("%v: figures for blocks 2..1: %+v", c.args, res)
		}
		if c.blocks > 1 && (res.Pairs == 0 || res.CommitLatency.Max <= 0) {
			t.Errorf("%v: %+v", c.args, res)
		}
		d := dumpJSON(t, dir)
		if d.Version != res.Version || d.AppHash != res.AppHash {
			t.Errorf("%v: bench reports version %d app hash %s, dump %d %s", c.args, res.Version, res.AppHash, d.Version, d.AppHash)
		}
		if res.ReplayedVersions != d.Version-d.SnapshotVersion {
			t.Errorf("%v: replayed %d, dump: version %d on snapshot %d", c.args, res.ReplayedVersions, d.Version, d.SnapshotVersion)
		}
		if c.blocks == 3 && (len(res.Rewrites) != 0 || res.RewriteUnfinished != 0 || d.SnapshotVersion != 0) {
			t.Errorf("%v: rewrites with background rewrites disabled: %+v", c.args, res)
		}
	}
}

// TestCLIExportInterruptedCleansUp: an interrupt (SIGINT) of export while it
// writes leaves nothing beside <file> (no temporary file) and exits 1, as
// the other commands that write files (rewrite-snapshot, the imports,
// bench) do.
func TestCLIExportInterruptedCleansUp(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	makeDB(t, dir, 0.5, 2) // about 80,000 pairs: an export of a few hundred ms
	for attempt := 0; attempt < 5; attempt++ {
		outDir := t.TempDir()
		file := filepath.Join(outDir, "state.bin")
		cmd := exec.Command(bin, "export", dir, file)
		var errb strings.Builder
		cmd.Stderr = &errb
		mustOK(t, cmd.Start())
		caught := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
			if m, _ := filepath.Glob(file + ".*.tmp"); len(m) > 0 {
				if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 0 {
					caught = cmd.Process.Signal(os.Interrupt) == nil
					break
				}
			}
			if cmd.ProcessState != nil {
				break
			}
		}
		err := cmd.Wait()
		if !caught {
			continue
		}
		if _, serr := os.Stat(file); serr == nil {
			continue // it had finished before the signal arrived
		}
		left, _ := filepath.Glob(filepath.Join(outDir, "*"))
		if len(left) > 0 {
			t.Errorf("export interrupted by SIGINT (%v, stderr %q) left %v", err, errb.String(), left)
		}
		if code := exitCode(err); code != exitFailure {
			t.Errorf("export interrupted by SIGINT: exit %d (%v), want %d as the other commands", code, err, exitFailure)
		}
		return
	}
	t.Skip("could not interrupt export while it wrote")
}

// TestCLIVerifyDanglingSnapshotLink: a kept snapshot moved to another disk
// and linked back whose target is gone (the disk not mounted) is damage
// verify reports (exit 1 naming the link): the versions it served can no
// longer be read.
func TestCLIVerifyDanglingSnapshotLink(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 20, 10)
	if d := dumpOf(t, dir, 5); d.SnapshotVersion != 0 {
		t.Fatalf("setup: version 5 from snapshot %d", d.SnapshotVersion)
	}
	linkSnapshotBack(t, dir, 0)
	target, err := os.Readlink(filepath.Join(dir, snapshotDirName(0)))
	mustOK(t, err)
	mustOK(t, os.RemoveAll(target))
	if code, _, _ := cli(t, "dump", "--version", "5", dir); code != exitFailure {
		t.Fatalf("dump --version 5 with snapshot 0 gone: exit %d", code)
	}
	code, out, errs := cli(t, "verify", dir)
	if code != exitFailure || !strings.Contains(errs, snapshotDirName(0)) {
		t.Errorf("verify with the kept snapshot 0 a dangling link: exit %d\n%s%s", code, out, errs)
	}
}
