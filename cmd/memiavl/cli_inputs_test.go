package main

// More command-line cases: databases reached through symbolic links,
// destinations that are files or lie under one, the exit code of flag
// values that are wrong on their face, special files as export targets,
// and export and import on damaged databases and streams.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// dumpJSON runs dump --json on dir and decodes its report.
func dumpJSON(t *testing.T, dir string) DumpResult {
	t.Helper()
	out := mustCLI(t, "dump", "--json", dir)
	var res DumpResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dump --json is not JSON: %v\n%s", err, out)
	}
	return res
}

// TestCLIDumpSymlinkedLog: a database whose log directory is a symbolic
// link to another place (another disk) opens and replays from it, and
// verify and wal dump read it; dump must report the log's versions and
// size, not an empty log.
func TestCLIDumpSymlinkedLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	makeDB(t, dir, 0.01, 20, 10)
	plain := dumpJSON(t, dir)
	if plain.WALLast != 20 || plain.WALBytes == 0 {
		t.Fatalf("dump of the plain database: log %d..%d, %d bytes", plain.WALFirst, plain.WALLast, plain.WALBytes)
	}
	elsewhere := filepath.Join(t.TempDir(), "wal-on-other-disk")
	if err := os.Rename(filepath.Join(dir, walDirName), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, walDirName)); err != nil {
		t.Fatal(err)
	}
	// the database itself reads the log through the link
	mustCLI(t, "verify", dir)
	if out := mustCLI(t, "wal", "dump", dir); !strings.Contains(out, "versions 1..20") {
		t.Fatalf("wal dump through the link: %s", out)
	}
	got := dumpJSON(t, dir)
	if got.Version != 20 {
		t.Fatalf("dump: version %d", got.Version)
	}
	if got.WALFirst != plain.WALFirst || got.WALLast != plain.WALLast || got.WALBytes == 0 {
		t.Errorf("dump of the database with a linked log: wal_first %d, wal_last %d, wal_bytes %d; want %d, %d and the log's size (as without the link)",
			got.WALFirst, got.WALLast, got.WALBytes, plain.WALFirst, plain.WALLast)
	}
	if out := mustCLI(t, "dump", dir); strings.Contains(out, "empty") {
		t.Errorf("dump says the log is empty while it holds versions 1..20:\n%s", out)
	}
}

// TestCLIDumpSymlinkedDatabase: dump of a database given as a symbolic
// link to its directory (a node's data/memiavl.db linked to another disk)
// reports the same disk usage as dump of the directory itself.
func TestCLIDumpSymlinkedDatabase(t *testing.T) {
	real := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	makeDB(t, real, 0.01, 20, 10)
	link := filepath.Join(t.TempDir(), "memiavl.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	want := dumpJSON(t, real)
	got := dumpJSON(t, link)
	if got.DiskBytes != want.DiskBytes || got.DiskBytes == 0 {
		t.Errorf("dump %s (a link to %s): disk_bytes %d, want %d", link, real, got.DiskBytes, want.DiskBytes)
	}
	if got.WALBytes != want.WALBytes {
		t.Errorf("dump through the link: wal_bytes %d, want %d", got.WALBytes, want.WALBytes)
	}
}

// TestCLIBenchSymlinkedDir: bench --dir given as a symbolic link to an
// empty directory reports the database's disk usage, and no negative size.
func TestCLIBenchSymlinkedDir(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "bench-db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "bench", "--scale", "0.01", "--blocks", "20", "--dir", link, "--json")
	var res BenchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if res.DiskBytes <= 0 || res.SnapshotBytes <= 0 || res.WALBytes <= 0 || res.DiskBytes != res.SnapshotBytes+res.WALBytes {
		t.Errorf("bench --dir %s (a link to an empty directory): disk_bytes %d, snapshot_bytes %d, wal_bytes %d",
			link, res.DiskBytes, res.SnapshotBytes, res.WALBytes)
	}
}

// TestCLIDestinationIsAFile: the commands that create a database or a file
// refuse a destination that is a file, or lies under one, with exit 1 and
// a message naming the destination's problem (as import does for a file
// destination), not a system call's "not a directory" on a path the
// command made up.
func TestCLIDestinationIsAFile(t *testing.T) {
	db := t.TempDir()
	makeDB(t, db, 0.01, 12, 6)
	os.Remove(filepath.Join(db, "LOCK"))
	parent := t.TempDir()
	makeIAVLApp(t, parent, 6)
	app := filepath.Join(parent, "application.db")
	ref := filepath.Join(t.TempDir(), "ref")
	copyDir(t, refFixture, ref)
	stream := filepath.Join(t.TempDir(), "state.bin")
	mustCLI(t, "export", db, stream)

	files := t.TempDir()
	afile := filepath.Join(files, "afile")
	if err := os.WriteFile(afile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(afile, "db")
	for _, args := range [][]string{
		{"import-iavl", app, afile},
		{"import-iavl", app, under},
		{"import-memiavl", ref, afile},
		{"import-memiavl", ref, under},
		{"import", "--height", "12", stream, under},
		{"export", db, under},
		{"bench", "--scale", "0.01", "--blocks", "2", "--dir", under},
	} {
		code, out, errs := cli(t, args...)
		if code != exitFailure {
			t.Errorf("memiavl %v: exit %d, want %d\nstdout %q\nstderr %q", args, code, exitFailure, out, errs)
			continue
		}
		if strings.Contains(errs, ": not a directory") {
			t.Errorf("memiavl %v: a system call's error for a message: %s", args, strings.TrimSpace(errs))
		}
	}
	if b, err := os.ReadFile(afile); err != nil || string(b) != "x" {
		t.Fatalf("the file was changed: %q, %v", b, err)
	}
}

// TestCLIImportIAVLStoresUsage: a --stores list that names a store twice,
// or holds an empty name, is wrong on its face: import refuses it as a
// usage error (exit 2), and so must import-iavl.
func TestCLIImportIAVLStoresUsage(t *testing.T) {
	db := t.TempDir()
	makeDB(t, db, 0.01, 6)
	os.Remove(filepath.Join(db, "LOCK"))
	stream := filepath.Join(t.TempDir(), "state.bin")
	mustCLI(t, "export", db, stream)
	parent := t.TempDir()
	makeIAVLApp(t, parent, 6)
	app := filepath.Join(parent, "application.db")
	for _, stores := range []string{"bank,bank", ",bank"} {
		if code, _, errs := cli(t, "import", "--height", "6", "--stores", stores, stream, filepath.Join(t.TempDir(), "d")); code != exitUsage {
			t.Fatalf("import --stores %q: exit %d (%s)", stores, code, errs)
		}
		dst := filepath.Join(t.TempDir(), "d")
		code, out, errs := cli(t, "import-iavl", "--stores", stores, app, dst)
		if code != exitUsage {
			t.Errorf("import-iavl --stores %q: exit %d, want %d (as import)\nstdout %q\nstderr %q", stores, code, exitUsage, out, errs)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Errorf("import-iavl --stores %q created %s", stores, dst)
		}
	}
}

// TestCLIExportForceSpecialFile: export --force to a named pipe (or any
// file that is not a regular file, such as /dev/stdout or /dev/null as
// root) must not replace that file with a regular one: the reader of the
// pipe gets nothing and the pipe is gone.
func TestCLIExportForceSpecialFile(t *testing.T) {
	db := t.TempDir()
	makeDB(t, db, 0.01, 6)
	os.Remove(filepath.Join(db, "LOCK"))
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	code, out, errs := cli(t, "export", "--force", db, fifo)
	fi, err := os.Lstat(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("export --force %s (a named pipe): exit %d, the pipe was replaced by a file of mode %v\nstdout %q\nstderr %q",
			fifo, code, fi.Mode(), out, errs)
	}
}

// TestCLIExportDamaged: export on damaged databases (export is not in the
// damage sweep): never a panic, exit 0 or 1, a failure leaves no file (nor
// a temporary one) beside the destination, and the database is unchanged.
// Damage to the snapshot a version is exported from fails the export.
func TestCLIExportDamaged(t *testing.T) {
	base := t.TempDir()
	makeDB(t, base, 0.01, 30, 10, 20)
	os.Remove(filepath.Join(base, "LOCK"))
	s20 := snapshotDirName(20)
	segs := segmentFiles(t, base)
	flip := func(rel string) func(string) error {
		return func(d string) error {
			p := filepath.Join(d, rel)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0x10
			return os.WriteFile(p, b, 0o644)
		}
	}
	for _, c := range []struct {
		name       string
		damage     func(string) error
		latestFail bool
	}{
		{"flip-kvs", flip(filepath.Join(s20, "s-bank", "kvs")), true},
		{"flip-leaves", flip(filepath.Join(s20, "s-bank", "leaves")), true},
		{"trunc-branches", func(d string) error { return os.Truncate(filepath.Join(d, s20, "s-staking", "branches"), 10) }, true},
		{"rm-metadata", func(d string) error { return os.Remove(filepath.Join(d, s20, "metadata")) }, true},
		{"garbage-current", func(d string) error { return os.WriteFile(filepath.Join(d, "current"), []byte("garbage"), 0o644) }, true},
		{"flip-last-segment", flip(filepath.Join("wal", filepath.Base(segs[len(segs)-1]))), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			copyDir(t, base, dir)
			if err := c.damage(dir); err != nil {
				t.Fatal(err)
			}
			before := testutil.DirDigest(t, dir)
			for _, h := range []string{"0", "30", "15"} {
				outDir := t.TempDir()
				code, _, errs := runChecked(t, "export", "--height", h, dir, filepath.Join(outDir, "state.bin"))
				ents, _ := os.ReadDir(outDir)
				switch {
				case code == 0 && len(ents) != 1:
					t.Errorf("export --height %s: exit 0 with %d files", h, len(ents))
				case code != 0 && (code != exitFailure || strings.TrimSpace(errs) == ""):
					t.Errorf("export --height %s: exit %d, stderr %q", h, code, errs)
				case code != 0 && len(ents) != 0:
					t.Errorf("export --height %s failed and left %v", h, ents[0].Name())
				case c.latestFail && h != "15" && code == 0:
					t.Errorf("export --height %s: exit 0 from a damaged snapshot", h)
				}
				if testutil.DirDigest(t, dir) != before {
					t.Fatalf("export --height %s changed the database", h)
				}
			}
		})
	}
}

// TestCLIImportBadStreams: truncated, garbage, empty and over-long stream
// files fail with exit 1, no panic, and leave the destination as it was:
// absent, or the database it held.
func TestCLIImportBadStreams(t *testing.T) {
	db := t.TempDir()
	makeDB(t, db, 0.01, 20, 10)
	os.Remove(filepath.Join(db, "LOCK"))
	files := t.TempDir()
	good := filepath.Join(files, "good.bin")
	mustCLI(t, "export", db, good)
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"empty":     nil,
		"two-bytes": raw[:2],
		"half":      raw[:len(raw)/2],
		"no-end":    raw[:len(raw)-4], // the zlib checksum cut off
		"trailing":  append(append([]byte{}, raw...), 0),
		"flipped":   append(append(append([]byte{}, raw[:len(raw)/2]...), raw[len(raw)/2]^0xff), raw[len(raw)/2+1:]...),
		"twice":     bytes.Repeat(raw, 2),
	}
	// a database at the stream's height, which an import may replace
	over := filepath.Join(t.TempDir(), "over")
	copyDir(t, db, over)
	overDigest := testutil.DirDigest(t, over)
	for name, b := range bad {
		f := filepath.Join(files, name+".bin")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fresh := filepath.Join(t.TempDir(), "new db")
		for _, dst := range []string{fresh, over} {
			code, out, errs := runChecked(t, "import", "--height", "20", f, dst)
			if code != exitFailure || out != "" || strings.TrimSpace(errs) == "" {
				t.Errorf("import of the %s stream into %s: exit %d\nstdout %q\nstderr %q", name, dst, code, out, errs)
			}
		}
		if _, err := os.Stat(fresh); err == nil {
			t.Errorf("import of the %s stream left %s", name, fresh)
		}
		os.Remove(filepath.Join(over, "LOCK")) // the writer's lock file, which the import takes
		if testutil.DirDigest(t, over) != overDigest {
			t.Fatalf("import of the %s stream changed the database it failed to replace", name)
		}
	}
}

// TestCLIRewriteNothingToWritePrunes: rewrite-snapshot when the latest
// version already has the current snapshot writes nothing, and still prunes
// the older snapshots beyond --keep-recent (with the log only they needed),
// as a write would; the database keeps its version and app hash.
func TestCLIRewriteNothingToWritePrunes(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 30, 10, 20, 30)
	os.Remove(filepath.Join(dir, "LOCK"))
	before := dumpJSON(t, dir)
	out := mustCLI(t, "rewrite-snapshot", "--keep-recent", "1", dir)
	if !strings.Contains(out, "nothing to write") || !strings.Contains(out, "pruned: [0 10]") {
		t.Fatalf("rewrite-snapshot --keep-recent 1: %s", out)
	}
	if kept, err := multitree.SnapshotVersions(dir); err != nil || !slices.Equal(kept, []int64{20, 30}) {
		t.Fatalf("kept snapshots %v (%v), want [20 30]", kept, err)
	}
	out = mustCLI(t, "rewrite-snapshot", "--keep-recent", "0", dir)
	if !strings.Contains(out, "pruned: [20]") {
		t.Fatalf("rewrite-snapshot --keep-recent 0: %s", out)
	}
	if kept, err := multitree.SnapshotVersions(dir); err != nil || !slices.Equal(kept, []int64{30}) {
		t.Fatalf("kept snapshots %v (%v), want [30]", kept, err)
	}
	out = mustCLI(t, "rewrite-snapshot", "--keep-recent", "0", dir)
	if !strings.Contains(out, "nothing to write") || strings.Contains(out, "pruned") {
		t.Fatalf("rewrite-snapshot with nothing to prune: %s", out)
	}
	after := dumpJSON(t, dir)
	if after.Version != before.Version || after.AppHash != before.AppHash {
		t.Fatalf("version %d app hash %s after the prunes, was %d %s", after.Version, after.AppHash, before.Version, before.AppHash)
	}
	mustCLI(t, "verify", dir)
}
