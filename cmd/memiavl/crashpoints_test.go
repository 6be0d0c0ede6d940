package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCLIChild runs the command line given in MEMIAVL_CLI_CHILD_ARGS (one
// argument per line) in this process and exits with its exit code: the
// process TestCLICrashPoints kills.
func TestCLIChild(t *testing.T) {
	args := os.Getenv("MEMIAVL_CLI_CHILD_ARGS")
	if args == "" {
		t.Skip("only run as a child process")
	}
	os.Exit(run(strings.Split(args, "\n"), os.Stdout, os.Stderr))
}

// cliCrashCalls are the file-system calls TestCLICrashPoints kills the
// commands at (a rollback creates no directory).
var cliCrashCalls = []string{"renameat", "unlinkat", "mkdirat", "fsync", "pwrite64", "write"}

// TestCLICrashPoints kills the commands that change a database offline at
// each crash point: the Nth call of each of cliCrashCalls, injected by
// strace (the call fails and the process gets SIGKILL before it runs); and
// in a second pass fails that call with EIO and lets the command go on,
// which must then exit 1 with the error (or 0 where the failure does not
// matter, see cliMustReport), never crash.
//
// The commands: rewrite-snapshot, a rollback, import into a new directory
// and over an empty database, import-iavl of a node's goleveldb
// application.db, import-memiavl of a reference memiavl directory (a
// snapshot and log entries after it) into a new directory and over an
// empty database. After each kill or failure the database must be whole and
// in the state before the command or the state after it (never lost, never
// a version between), and running the command again must finish it;
// import-iavl and import-memiavl must leave their sources as they were. Every point is
// tried in the full run (MEMIAVL_FULL=1), every 4th without -short and every 12th under -short. Skipped where strace is not installed.
//
// Crash points are counted per thread by strace, so a run covers the
// points of the busiest thread of each call, and those of the others up to
// the same count.
func TestCLICrashPoints(t *testing.T) {
	if os.Getenv("MEMIAVL_CLI_CHILD_ARGS") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	// every point in the full run, every 4th without -short (inside go
	// test's default timeout), every 12th under -short
	step := testutil.Size(false, 1, 4, 12)
	// a database at version 30 with kept snapshots at 10 and 20, its
	// state-sync stream, and the app hashes of versions 10 and 30
	src := t.TempDir()
	hash30 := makeDB(t, src, 0.02, 30, 10, 20)
	hash10 := dumpOf(t, src, 10).AppHash
	stream := filepath.Join(t.TempDir(), "stream.bin")
	mustCLI(t, "export", src, stream)
	// a node's application.db at version 12 for import-iavl, which must
	// never change it
	iavlParent := t.TempDir()
	hash12 := makeIAVLApp(t, iavlParent, 12)
	appDB := filepath.Join(iavlParent, "application.db")
	appSum := testutil.DirDigest(t, appDB)
	empty := makeEmptyDB(t)
	// a directory of the reference memiavl for import-memiavl (a
	// snapshot at version 6, its log to 14), which must never change
	refDir, err := filepath.Abs(refFixture)
	if err != nil {
		t.Fatal(err)
	}
	refSum := testutil.DirDigest(t, refDir)
	hash14 := refFixtureHash(t)
	importedRef := func(t *testing.T, dir string) {
		if v, hash := dbState(t, dir); v != 14 || hash != hash14 {
			t.Fatalf("after the rerun: version %d, app hash %s", v, hash)
		}
		if testutil.DirDigest(t, refDir) != refSum {
			t.Fatal("import-memiavl changed the reference directory")
		}
	}

	ops := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		args    func(dir string) []string
		// states the database may be in after a kill: version -> app hash;
		// version 0 stands for no database
		allowed map[int64]string
		// the state the command leaves (default: version 30, hash30), and
		// whether running it again once it finished fails (import-iavl
		// refuses a destination that holds a database)
		final       func(t *testing.T, dir string)
		refusesDone bool
	}{
		{
			name:    "rewrite-snapshot",
			prepare: func(t *testing.T, dir string) { copyDir(t, src, dir) },
			args:    func(dir string) []string { return []string{"rewrite-snapshot", "--progress", "none", dir} },
			allowed: map[int64]string{30: hash30},
			final: func(t *testing.T, dir string) {
				if res := dumpOf(t, dir, 0); res.Version != 30 || res.AppHash != hash30 || res.SnapshotVersion != 30 {
					t.Fatalf("after the rerun: %+v", res)
				}
			},
		},
		{
			name:    "rollback",
			prepare: func(t *testing.T, dir string) { copyDir(t, src, dir) },
			args: func(dir string) []string {
				return []string{"rewrite-snapshot", "--progress", "none", "--version", "10", "--rollback", dir}
			},
			// all or nothing (multitree.Options.Rollback)
			allowed: map[int64]string{10: hash10, 30: hash30},
			final: func(t *testing.T, dir string) {
				if res := dumpOf(t, dir, 0); res.Version != 10 || res.AppHash != hash10 || res.SnapshotVersion != 10 {
					t.Fatalf("after the rerun: %+v", res)
				}
			},
		},
		{
			name:    "import",
			prepare: func(t *testing.T, dir string) {},
			args:    func(dir string) []string { return []string{"import", "--height", "30", stream, dir} },
			allowed: map[int64]string{0: "", 30: hash30},
		},
		{
			name:    "import over an empty database",
			prepare: func(t *testing.T, dir string) { copyDir(t, empty, dir) },
			args:    func(dir string) []string { return []string{"import", "--height", "30", stream, dir} },
			allowed: map[int64]string{-1: "", 30: hash30}, // -1: the empty database at version 0
		},
		{
			name:    "import-iavl",
			prepare: func(t *testing.T, dir string) {},
			args:    func(dir string) []string { return []string{"import-iavl", appDB, dir} },
			allowed: map[int64]string{0: "", 12: hash12},
			final: func(t *testing.T, dir string) {
				if v, hash := dbState(t, dir); v != 12 || hash != hash12 {
					t.Fatalf("after the rerun: version %d, app hash %s", v, hash)
				}
				if testutil.DirDigest(t, appDB) != appSum {
					t.Fatal("import-iavl changed the source application.db")
				}
			},
			refusesDone: true,
		},
		{
			// the replay of the reference log is part of the import:
			// a kill there leaves what the next import removes
			name:        "import-memiavl",
			prepare:     func(t *testing.T, dir string) {},
			args:        func(dir string) []string { return []string{"import-memiavl", refDir, dir} },
			allowed:     map[int64]string{0: "", 14: hash14},
			final:       importedRef,
			refusesDone: true,
		},
		{
			name:        "import-memiavl over an empty database",
			prepare:     func(t *testing.T, dir string) { copyDir(t, empty, dir) },
			args:        func(dir string) []string { return []string{"import-memiavl", refDir, dir} },
			allowed:     map[int64]string{-1: "", 14: hash14},
			final:       importedRef,
			refusesDone: true,
		},
	}
	kills, faults, unfinished := 0, 0, 0
	for _, op := range ops {
		for _, kill := range []bool{true, false} {
			name := op.name + "/eio"
			if kill {
				name = op.name + "/kill"
			}
			t.Run(name, func(t *testing.T) {
				for i, call := range cliCrashCalls {
					if !kill && call == "write" {
						// the Go runtime's own writes (the poller's
						// eventfd) treat an error as fatal
						continue
					}
					first := 1 + i%step
					n := first
					for ; ; n += step {
						var dir string
						// a new database for each run of the point
						fresh := func() []string {
							dir = filepath.Join(t.TempDir(), "db")
							op.prepare(t, dir)
							return op.args(dir)
						}
						where := fmt.Sprintf("killed at %s #%d", call, n)
						if kill {
							if !cliKilledAt(t, strace, call, n, fresh) {
								break
							}
							kills++
						} else {
							where = fmt.Sprintf("EIO at %s #%d", call, n)
							hit, out := cliFailedAt(t, strace, call, n, fresh)
							if !hit {
								break
							}
							where += fmt.Sprintf(" (the command printed %q)", out)
							faults++
						}
						v, hash := dbState(t, dir)
						if want, ok := op.allowed[v]; !ok || want != hash {
							t.Fatalf("%s: the database is at version %d with app hash %s; allowed: %v", where, v, hash, op.allowed)
						}
						if v > 0 {
							if _, err := multitree.Verify(dir); err != nil {
								t.Fatalf("%s: verify: %v", where, err)
							}
						}
						if _, err := os.Stat(filepath.Join(dir, "rollback")); err == nil {
							// stopped inside the rollback: verify reports it
							// unfinished, unless it had cut everything and
							// only the file was left to remove
							var rep verifyJSON
							out := mustCLI(t, "verify", "--json", dir)
							if err := json.Unmarshal([]byte(out), &rep); err != nil {
								t.Fatalf("%s: verify --json: %v\n%s", where, err, out)
							}
							if rep.RollbackTo == 10 {
								unfinished++
								if out := mustCLI(t, "verify", dir); !strings.Contains(out, "a rollback to version 10 is unfinished") {
									t.Fatalf("%s: verify of an unfinished rollback:\n%s", where, out)
								}
							} else if rep.RollbackTo != 0 || rep.WALLast != 10 || rep.Version != 10 {
								t.Fatalf("%s: verify of a rollback stopped before removing its file: %+v", where, rep)
							}
						}
						// running the command again finishes it
						if code, out, errs := cli(t, op.args(dir)...); code != 0 && !(op.refusesDone && hash != "") {
							t.Fatalf("%s: rerun: exit %d\n%s%s", where, code, out, errs)
						}
						if op.final != nil {
							op.final(t, dir)
						} else if v, hash := dbState(t, dir); v != 30 || hash != hash30 {
							t.Fatalf("%s: after the rerun: version %d, app hash %s", where, v, hash)
						}
						mustCLI(t, "verify", dir)
					}
					if n == first && step == 1 && !(op.name == "rollback" && call == "mkdirat") {
						t.Errorf("%s never called %s: the crash point list is stale", op.name, call)
					}
				}
			})
		}
	}
	t.Logf("%d kills at crash points, %d I/O errors injected, %d rollbacks left unfinished", kills, faults, unfinished)
}

// cliMustReport are the calls whose failure a command must report (exit 1):
// its writes, their fsyncs, its renames and new directories. A failed
// unlink of a leftover may pass. (write(2) is not failed in this pass: the
// Go runtime dies on a failed write to its poller's eventfd.)
var cliMustReport = map[string]bool{"fsync": true, "pwrite64": true, "renameat": true, "mkdirat": true}

// cliFailedAt runs the command line that fresh prepares (a new database
// and the arguments) in a child process under strace, failing its nth call
// of call with EIO, and reports whether the fault was injected (false: the
// command finished first). A run where strace failed on its own is run
// again on a new database (testutil.RetryStraceFailures). The command must
// not crash: it exits 0, or 1 with the error (always 1 for a call in
// cliMustReport).
func cliFailedAt(t *testing.T, strace, call string, n int, fresh func() []string) (bool, string) {
	t.Helper()
	var args []string
	var trace string
	out, err := testutil.RetryStraceFailures(t, strace, fmt.Sprintf("EIO at %s #%d", call, n), func() ([]byte, error) {
		args = fresh()
		trace = filepath.Join(t.TempDir(), "strace.out")
		return runCLIChild(args, func(argv ...string) []string { return testutil.FailAt(strace, call, n, trace, argv...) })
	})
	if !testutil.Injected(t, trace) {
		if err != nil {
			t.Fatalf("memiavl %v: no fault injected, yet: %v\n%s", args, err, out)
		}
		return false, ""
	}
	code := exitCode(err)
	if bytes.Contains(out, []byte("panic:")) || (code != exitOK && code != exitFailure) ||
		(code == exitOK && cliMustReport[call]) {
		tr, _ := os.ReadFile(trace)
		t.Fatalf("memiavl %v with EIO at %s #%d: exit %d\n%s\nstrace:\n%s", args, call, n, code, out, tr)
	}
	return true, string(out)
}

// runCLIChild runs the command line args in a child process (this test
// binary's TestCLIChild) under the command that wrap makes of the child's
// argv (strace's arguments, say), and returns its combined output.
func runCLIChild(args []string, wrap func(argv ...string) []string) ([]byte, error) {
	argv := wrap(os.Args[0], "-test.run=^TestCLIChild$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "MEMIAVL_CLI_CHILD_ARGS="+strings.Join(args, "\n"))
	return cmd.CombinedOutput()
}

// cliKilledAt runs the command line that fresh prepares in a child process
// under strace, killing it at the nth call of call, and reports whether it
// was killed (false: it finished first, successfully). A run where strace
// failed on its own is run again on a new database
// (testutil.RetryStraceFailures).
func cliKilledAt(t *testing.T, strace, call string, n int, fresh func() []string) bool {
	t.Helper()
	var args []string
	out, err := testutil.RetryStraceFailures(t, strace, fmt.Sprintf("crash point %s #%d", call, n), func() ([]byte, error) {
		args = fresh()
		return runCLIChild(args, func(argv ...string) []string { return testutil.KillAt(strace, call, n, argv...) })
	})
	if err == nil {
		return false
	}
	if !testutil.KilledBySIGKILL(err) {
		t.Fatalf("memiavl %v (crash point %s #%d): %v\n%s", args, call, n, err, out)
	}
	return true
}

// refFixture is a directory written by the reference memiavl v0.1.0 (see
// testdata/README.md).
const refFixture = "../../testdata/refmemiavl-v0.1.0"

// refFixtureHash returns the app hash (hex) recorded for refFixture's
// version 14.
func refFixtureHash(t *testing.T) string {
	t.Helper()
	v, h := testutil.ReadAppHashRecord(t, refFixture+".apphash")
	if v != 14 {
		t.Fatalf("%s.apphash: version %d", refFixture, v)
	}
	return hex.EncodeToString(h)
}

// makeEmptyDB creates a database with the store bank and nothing
// committed (version 0, as a node's first start leaves) in a new directory,
// and returns the directory.
func makeEmptyDB(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: []string{"bank"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dbState opens dir read-only and returns its version and app hash; 0 and
// "" when it holds no database (or only what an import killed before it
// finished left, which every open refuses and the next import removes),
// -1 for a database at version 0.
func dbState(t *testing.T, dir string) (int64, string) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, SnapshotInterval: -1})
	if errors.Is(err, multitree.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, multitree.ErrUnfinishedImport) {
		return 0, ""
	}
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer db.Close()
	if db.Version() == 0 {
		return -1, ""
	}
	return db.Version(), hex.EncodeToString(db.LastCommitInfo().Hash())
}

// dumpOf returns what dump --json prints for dir at version (0: the
// latest).
func dumpOf(t *testing.T, dir string, version int64) DumpResult {
	t.Helper()
	var res DumpResult
	out := mustCLI(t, "dump", "--json", "--version", fmt.Sprint(version), dir)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dump --json: %v\n%s", err, out)
	}
	return res
}
