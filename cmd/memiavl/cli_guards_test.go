package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReferenceFormatDir: a directory of the reference (cronos)
// memiavl, whose 'current' is a symbolic link to its snapshot directory,
// is refused by every read-only command with the plain message naming
// 'memiavl import-memiavl' (not a system call's error about a file that
// is not regular), exit 1, and is left untouched.
func TestReferenceFormatDir(t *testing.T) {
	dir := t.TempDir()
	snap := snapshotDirName(0)
	if err := os.Mkdir(filepath.Join(dir, snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(snap, filepath.Join(dir, currentName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, walDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	// a segment of the reference's log (tidwall/wal names: 20 digits)
	if err := os.WriteFile(filepath.Join(dir, walDirName, "00000000000000000001"), []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, beforeLines := dirDigest(t, dir)
	for _, args := range [][]string{
		{"dump", dir}, {"dump", "--json", dir}, {"verify", dir}, {"verify", "--json", dir},
		{"wal", "dump", dir},
	} {
		code, _, errs := cli(t, args...)
		if code != exitFailure || !strings.Contains(errs, "import-memiavl") {
			t.Errorf("memiavl %s on a reference-format directory: exit %d, want 1 with a message naming import-memiavl:\n%s",
				strings.Join(args, " "), code, errs)
		}
	}
	if after, afterLines := dirDigest(t, dir); after != before {
		t.Errorf("a read-only command changed the directory:\n%s", digestDiff(beforeLines, afterLines))
	}
}

// TestWALDumpRangeOutsideLog: 'wal dump' refuses a range the log does
// not hold (--to after its last version) rather than print less than was
// asked with exit 0, and --from after --to is a usage error (exit 2).
func TestWALDumpRangeOutsideLog(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 5)
	code, out, errs := cli(t, "wal", "dump", "--from", "2", "--to", "9", dir)
	if code != exitFailure || !strings.Contains(errs, "the log holds versions 1..5") {
		t.Errorf("wal dump --to 9 of a log of versions 1..5: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, errs = cli(t, "wal", "dump", "--from", "4", "--to", "3", dir)
	if code != exitUsage {
		t.Errorf("wal dump --from 4 --to 3: exit %d, want %d (usage)\nstdout:\n%s\nstderr:\n%s", code, exitUsage, out, errs)
	}
}

// TestShortWriteFails: a report that reaches stdout only in part (a
// writer that writes less than asked without an error, against io.Writer's
// contract) fails the command as a failed write does.
func TestShortWriteFails(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 3)
	for _, args := range [][]string{{"dump", dir}, {"verify", "--json", dir}} {
		var errb bytes.Buffer
		if code := run(args, shortWriter{}, &errb); code != exitFailure || !strings.Contains(errb.String(), "short write") {
			t.Errorf("%s with stdout writing short: exit %d %s", strings.Join(args, " "), code, errb.String())
		}
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

// TestImportIAVLDestinationInsideSource: import-iavl into a directory
// inside the application database it reads is a usage error (exit 2),
// before anything is written: the source is only read, and a new database
// inside it would change it.
func TestImportIAVLDestinationInsideSource(t *testing.T) {
	parent := t.TempDir()
	makeIAVLApp(t, parent, 3)
	src := filepath.Join(parent, "application.db")
	before, beforeLines := dirDigest(t, src)
	dest := filepath.Join(src, "memiavl.db")
	code, out, errs := cli(t, "import-iavl", src, dest)
	if code != exitUsage || !strings.Contains(errs, "inside the application database") {
		t.Errorf("import-iavl into %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", dest, code, exitUsage, out, errs)
	}
	if after, afterLines := dirDigest(t, src); after != before {
		t.Errorf("import-iavl changed its source:\n%s", digestDiff(beforeLines, afterLines))
	}
}

// TestImportMemIAVLOfOwnFormat: import-memiavl of a database of this
// format (its 'current' a file, not a link) is refused with a message that
// says so, and no database is created at the destination.
func TestImportMemIAVLOfOwnFormat(t *testing.T) {
	src := t.TempDir()
	makeDB(t, src, 0.01, 3)
	dest := filepath.Join(t.TempDir(), "new.db")
	code, _, errs := cli(t, "import-memiavl", src, dest)
	if code != exitFailure || !strings.Contains(errs, "a database of this format already") {
		t.Errorf("import-memiavl of a database of this format: exit %d, want 1 with a message saying so:\n%s", code, errs)
	}
	if _, err := os.Lstat(filepath.Join(dest, currentName)); err == nil {
		t.Errorf("import-memiavl of a database of this format created a database in %s", dest)
	}
}

// TestVerifyJSONFields: verify --json reports the database as dump
// --json does: the version, app hash, kept snapshots, stores and the log's
// first and last versions, with "ok": true.
func TestVerifyJSONFields(t *testing.T) {
	dir := t.TempDir()
	makeDB(t, dir, 0.01, 12, 4, 8)
	var d DumpResult
	if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", dir)), &d); err != nil {
		t.Fatal(err)
	}
	var v verifyJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "verify", "--json", dir)), &v); err != nil {
		t.Fatal(err)
	}
	if d.WALFirst >= d.WALLast || d.WALLast != 12 {
		t.Fatalf("dump --json: log %d..%d, want it to end at 12", d.WALFirst, d.WALLast)
	}
	var stores []string
	for _, s := range d.Stores {
		stores = append(stores, s.Name)
	}
	if !v.OK || v.Version != d.Version || v.AppHash != d.AppHash || v.WALFirst != d.WALFirst || v.WALLast != d.WALLast ||
		!slices.Equal(v.Snapshots, d.Snapshots) || !slices.Equal(v.Stores, stores) {
		t.Errorf("verify --json %+v disagrees with dump --json (version %d, app hash %s, snapshots %v, stores %v, log %d..%d)",
			v, d.Version, d.AppHash, d.Snapshots, stores, d.WALFirst, d.WALLast)
	}
}

// TestImportIAVLSourceName: import-iavl wants the application
// database directory itself, named <name>.db: the backends open
// <parent>/<name>.db, so a database directory under another name is
// refused with that explanation (not read as, or confused with, the
// <name>.db beside it), and no database is created.
func TestImportIAVLSourceName(t *testing.T) {
	parent := t.TempDir()
	makeIAVLApp(t, parent, 3)
	src := filepath.Join(parent, "application")
	if err := os.Rename(filepath.Join(parent, "application.db"), src); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "memiavl.db")
	code, _, errs := cli(t, "import-iavl", src, dest)
	if code != exitFailure || !strings.Contains(errs, "named <name>.db") {
		t.Errorf("import-iavl of %s: exit %d, want 1 with the <name>.db explanation:\n%s", src, code, errs)
	}
	if _, err := os.Lstat(filepath.Join(dest, currentName)); err == nil {
		t.Errorf("import-iavl of %s created a database", src)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("import-iavl of %s left files beside it: %v", src, ents)
	}
}
