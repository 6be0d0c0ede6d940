package multitree_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestImportSwapFailChild is the replacing import of
// TestFailedSwapKeepsOldDatabase, in a child process under strace.
func TestImportSwapFailChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_SWAP_FAIL_DIR")
	if dir == "" {
		t.Skip("child only")
	}
	if os.Getenv("MEMIAVL_SWAP_FAIL_RENAMES") != "" {
		multitree.RefuseExchange(t)
	}
	// strace counts calls per thread: keep this goroutine's on one
	runtime.LockOSThread()
	if _, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "new", 7)},
		multitree.ImportOptions{Replace: true}); err != nil {
		fmt.Printf("failed: %v\n", err)
		return
	}
	fmt.Println("imported")
}

// TestFailedSwapKeepsOldDatabase injects EIO into the nth fsync of the
// directory holding dir (n = 1, 2, ...: the durable creation of the staging
// directory, then the swap's fsync once the databases traded places, by
// RENAME_EXCHANGE or by two renames) during a replacing import: every
// import that reports failure must leave the database it was to replace
// ("old"), as ImportOptions.Replace and ImportContext document, and one
// that succeeds the new one.
func TestFailedSwapKeepsOldDatabase(t *testing.T) {
	if os.Getenv("MEMIAVL_SWAP_FAIL_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	template := swapTemplate(t)
	for _, renames := range []bool{false, true} {
		call := "fsync"
		for n := 1; n < 20; n++ {
			dir := filepath.Join(t.TempDir(), "db")
			testutil.CopyDir(t, template, dir)
			trace := filepath.Join(t.TempDir(), "trace")
			// EIO for the nth fsync of the directory holding dir: the
			// durable creation of the staging directory, then the swap's
			// fsync once it has exchanged the two directories
			args := []string{strace, "-f", "-qq", "-o", trace, "-P", filepath.Dir(dir), "-e", "trace=" + call,
				"-e", fmt.Sprintf("inject=%s:error=EIO:when=%d", call, n), os.Args[0], "-test.run=^TestImportSwapFailChild$", "-test.v"}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "MEMIAVL_SWAP_FAIL_DIR="+dir)
			if renames {
				cmd.Env = append(cmd.Env, "MEMIAVL_SWAP_FAIL_RENAMES=1")
			}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err := cmd.Output()
			if testutil.StraceFailed(strace, errb.Bytes()) {
				continue
			}
			if err != nil {
				t.Fatalf("%s #%d: %v\n%s%s", call, n, err, out, errb.Bytes())
			}
			if !testutil.Injected(t, trace) {
				break
			}
			if !bytes.Contains(out, []byte("failed:")) {
				if got := swapValue(dir, multitree.Options{}); got != `"new" at version 7` {
					t.Errorf("renames %v, EIO at %s #%d: the import succeeded, yet dir holds %s", renames, call, n, got)
				}
				continue
			}
			i := bytes.Index(out, []byte("failed:"))
			msg := string(out[i:])
			if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
				msg = string(out[i : i+j])
			}
			ro := swapValue(dir, multitree.Options{ReadOnly: true})
			rw := swapValue(dir, multitree.Options{})
			note := ""
			if _, err := os.Lstat(dir + ".import.tmp"); err != nil {
				note = " (and the old database, which the failed import left in " + filepath.Base(dir) + ".import.tmp, is gone after that open)"
			}
			want := `"old" at version 7`
			if ro != want || rw != want {
				t.Errorf("renames %v, EIO at %s #%d: the import failed (%s), yet dir holds: read-only open %s, writable open %s%s; want %s",
					renames, call, n, msg, ro, rw, note, want)
			}
		}
	}
}

// TestImportRenameFailChild is the replacing import of
// TestFailedTwoRenameSwapKeepsOldDatabase, in a child process under strace.
func TestImportRenameFailChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_RENAME_FAIL_DIR")
	if dir == "" {
		t.Skip("child only")
	}
	runtime.LockOSThread()
	multitree.RefuseExchange(t)
	if _, err := multitree.Import(dir, 7, map[string]multitree.NodeSource{"s": leafSource("k", "new", 7)},
		multitree.ImportOptions{Replace: true}); err != nil {
		fmt.Printf("failed: %v\n", err)
		return
	}
	fmt.Println("IMPORTOK")
}

// TestFailedTwoRenameSwapKeepsOldDatabase: the swap without
// RENAME_EXCHANGE (two renames), with every rename from the nth on failing
// (EIO), so that moving the old database back fails too: an import that
// reports failure must leave the old database (once the next writable open
// has finished the interrupted swap), one that succeeds the new one.
func TestFailedTwoRenameSwapKeepsOldDatabase(t *testing.T) {
	if os.Getenv("MEMIAVL_RENAME_FAIL_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	template := swapTemplate(t)
	for n := 1; n < 30; n++ {
		dir := filepath.Join(t.TempDir(), "db")
		testutil.CopyDir(t, template, dir)
		trace := filepath.Join(t.TempDir(), "trace")
		args := []string{strace, "-f", "-qq", "-o", trace, "-e", "trace=renameat,rename", "-e", fmt.Sprintf("inject=renameat,rename:error=EIO:when=%d+", n),
			os.Args[0], "-test.run=^TestImportRenameFailChild$", "-test.v"}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "MEMIAVL_RENAME_FAIL_DIR="+dir)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, _ := cmd.Output()
		if testutil.StraceFailed(strace, errb.Bytes()) {
			continue
		}
		if !testutil.Injected(t, trace) {
			break
		}
		ok := bytes.Contains(out, []byte("IMPORTOK"))
		ro := swapValue(dir, multitree.Options{ReadOnly: true})
		rw := swapValue(dir, multitree.Options{})
		want := `"old" at version 7`
		if ok {
			want = `"new" at version 7`
		}
		i := bytes.Index(out, []byte("failed:"))
		msg := ""
		if i >= 0 {
			msg = string(out[i:min(len(out), i+400)])
		}
		if ro != want || rw != want {
			t.Errorf("EIO from rename #%d on: the import failed=%v (%s), yet dir holds: read-only open %s, writable open %s; want %s", n, !ok, msg, ro, rw, want)
		}
	}
}

// swapTemplate returns a database at version 7 whose store "s" holds "old"
// at "k", which the replacing imports of the tests replace with "new".
func swapTemplate(t *testing.T) string {
	template := filepath.Join(t.TempDir(), "tpl")
	if _, err := multitree.Import(template, 7, map[string]multitree.NodeSource{"s": leafSource("k", "old", 7)},
		multitree.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	return template
}

// swapValue opens the database in dir with opts and tells what "k" holds
// and at which version, or why the open failed.
func swapValue(dir string, opts multitree.Options) string {
	db, err := multitree.Open(dir, opts)
	if err != nil {
		return "open: " + err.Error()
	}
	defer db.Close()
	v, _ := db.Get("s", []byte("k"))
	return fmt.Sprintf("%q at version %d", v, db.Version())
}
