package multitree_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestUnswapFailureSaysWhereDatabasesAre: the two-rename swap's fsync
// fails and so does a step of its undo (EIO injected into the nth fsync
// and the kth rename; the import runs in TestImportRenameFailChild). The
// error must say where the databases are: the imported one in place, or
// dir holding none and its next writable open moving the old one back or
// the imported one in; read-only and writable opens then serve that
// database. Before, every failed undo was reported as "the imported
// database is in place", also where the undo had moved it out and marked
// it unfinished, so that the next open served the old one.
func TestUnswapFailureSaysWhereDatabasesAre(t *testing.T) {
	if os.Getenv("MEMIAVL_RENAME_FAIL_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	template := swapTemplate(t)
	found := false
	for n := 1; n <= 3; n++ {
		for k := 1; k <= 5; k++ {
			dir := filepath.Join(t.TempDir(), "db")
			testutil.CopyDir(t, template, dir)
			trace := filepath.Join(t.TempDir(), "trace")
			args := []string{strace, "-f", "-qq", "-o", trace, "-P", filepath.Dir(dir), "-P", dir,
				"-e", "trace=fsync,rename,renameat,renameat2",
				"-e", fmt.Sprintf("inject=fsync:error=EIO:when=%d", n),
				"-e", fmt.Sprintf("inject=rename,renameat,renameat2:error=EIO:when=%d", k),
				os.Args[0], "-test.run=^TestImportRenameFailChild$", "-test.v"}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "MEMIAVL_RENAME_FAIL_DIR="+dir)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, _ := cmd.Output()
			if testutil.StraceFailed(strace, errb.Bytes()) {
				continue
			}
			i := bytes.Index(out, []byte("failed: "))
			if i < 0 {
				continue
			}
			msg := string(out[i:])
			if j := strings.IndexByte(msg, '\n'); j >= 0 {
				msg = msg[:j]
			}
			if !strings.Contains(msg, "nor undone") && !strings.Contains(msg, "nor wholly undone") {
				continue
			}
			var want string
			switch {
			case strings.Contains(msg, "imported database is in place"), strings.Contains(msg, "moves the imported one in"):
				want = `"new" at version 7`
			case strings.Contains(msg, "moves the old one back"):
				want = `"old" at version 7`
				found = true
			default:
				t.Errorf("fsync #%d, rename #%d: the error does not say where the databases are: %q", n, k, msg)
				continue
			}
			ro := swapValue(dir, multitree.Options{ReadOnly: true})
			rw := swapValue(dir, multitree.Options{})
			if ro != want || rw != want {
				t.Errorf("fsync #%d, rename #%d: the import failed with %q, yet a read-only open serves %s and the next writable open %s, want %s", n, k, msg, ro, rw, want)
			}
		}
	}
	if !found {
		t.Fatal("no injection failed the undo's move of the old database back")
	}
}
