package multitree_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestCrashSwapChild is the process TestCrashSwapKills kills: it
// replaces the database in MEMIAVL_SWAP_CRASH_DIR (version 7, s/k = "old") by an
// import at version 7 (s/k = "new") through the two-rename swap (as on a
// file system without RENAME_EXCHANGE).
func TestCrashSwapChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_SWAP_CRASH_DIR")
	if dir == "" {
		t.Skip("only run as TestCrashSwapKills's child")
	}
	multitree.RefuseExchange(t)
	if _, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "new", 7)},
		multitree.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("imported")
}

// TestCrashSwapKills kills an import that replaces a database by two
// renames at each renameat, fsync and unlinkat it makes, then checks every
// kind of reader, in the order a machine after the crash would meet them:
// LatestVersion, a read-only Open, Verify (the read-only opens of 'memiavl
// dump', 'verify', 'export', a query node), then a writable Open. Each must
// find a database at version 7 holding "old" or "new": the import promises
// that an interruption leaves dir with the database it had or the new one.
func TestCrashSwapKills(t *testing.T) {
	if os.Getenv("MEMIAVL_SWAP_CRASH_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	template := filepath.Join(t.TempDir(), "tpl")
	if _, err := multitree.Import(template, 7, map[string]multitree.NodeSource{"s": leafSource("k", "old", 7)},
		multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	value := func(db *multitree.DB) string {
		v, _ := db.Get("s", []byte("k"))
		return string(v)
	}
	good := func(v string) bool { return v == "old" || v == "new" }
	var problems []string
	for _, call := range []string{"renameat", "fsync", "unlinkat"} {
		for n := 1; ; n++ {
			parent := t.TempDir()
			dir := filepath.Join(parent, "db")
			testutil.CopyDir(t, template, dir)
			args := testutil.KillAt(strace, call, n, os.Args[0], "-test.run=^TestCrashSwapChild$", "-test.v")
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "MEMIAVL_SWAP_CRASH_DIR="+dir)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err := cmd.Output()
			if err == nil {
				if !bytes.Contains(out, []byte("imported")) {
					t.Fatalf("%s #%d: child did not import:\n%s", call, n, out)
				}
				break
			}
			if testutil.StraceFailed(strace, errb.Bytes()) {
				continue
			}
			if !testutil.KilledBySIGKILL(err) {
				t.Fatalf("%s #%d: %v\n%s%s", call, n, err, out, errb.Bytes())
			}
			where := fmt.Sprintf("killed at %s #%d", call, n)
			_, staged := os.Lstat(dir + ".import.tmp")
			_, replaced := os.Lstat(dir + ".replaced.tmp")
			_, indir := os.Lstat(dir)
			state := fmt.Sprintf("(dir exists %v, staging exists %v, replaced exists %v)", indir == nil, staged == nil, replaced == nil)

			if v, err := multitree.LatestVersion(dir); err != nil || v != 7 {
				problems = append(problems, fmt.Sprintf("%s %s: LatestVersion = %d, %v", where, state, v, err))
			}
			if db, err := multitree.Open(dir, multitree.Options{ReadOnly: true}); err != nil {
				problems = append(problems, fmt.Sprintf("%s %s: read-only Open: %v", where, state, err))
			} else {
				if db.Version() != 7 || !good(value(db)) {
					problems = append(problems, fmt.Sprintf("%s: read-only Open at %d holding %q", where, db.Version(), value(db)))
				}
				db.Close()
			}
			if _, err := multitree.Verify(dir); err != nil {
				problems = append(problems, fmt.Sprintf("%s %s: Verify: %v", where, state, err))
			}
			db, err := multitree.Open(dir, multitree.Options{})
			if err != nil {
				t.Fatalf("%s %s: writable Open: %v", where, state, err)
			}
			if db.Version() != 7 || !good(value(db)) {
				t.Fatalf("%s: writable Open at %d holding %q", where, db.Version(), value(db))
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := multitree.Verify(dir); err != nil {
				t.Fatalf("%s: Verify after the writable open: %v", where, err)
			}
			if testing.Short() && call != "renameat" {
				n += 2
			}
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("the writable Open recovered every state above (finishSwap)")
	}
}
