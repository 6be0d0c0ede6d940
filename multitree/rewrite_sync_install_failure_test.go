package multitree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestSyncRewriteFailedInstallChild is the RewriteSnapshot of
// TestSyncRewriteFailedInstallRemovesSnapshot, in a child under strace.
func TestSyncRewriteFailedInstallChild(t *testing.T) {
	dir := os.Getenv("SYNC_REWRITE_INSTALL_DIR")
	if dir == "" {
		t.Skip("child only")
	}
	runtime.LockOSThread()
	db, err := Open(dir, Options{SnapshotInterval: -1, SnapshotKeepRecent: 10, OpenCheck: OpenCheckNone})
	if err != nil {
		fmt.Println("open failed:", err)
		return
	}
	if err := db.Set("a", []byte("k"), []byte("v6")); err != nil {
		fmt.Println("set failed:", err)
		return
	}
	if _, err := db.Commit(); err != nil {
		fmt.Println("commit failed:", err)
		return
	}
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		fmt.Printf("REWRITEFAILED: %v\n", err)
		return // the files as the failure left them
	}
	fmt.Println("REWRITEOK")
}

// TestSyncRewriteFailedInstallRemovesSnapshot: a synchronous
// RewriteSnapshot whose install fails after the rename (the fsync of the
// database directory) removes the snapshot directory it put in place
// unless current names it, as a background rewrite's install does
// (dropUnlessCurrent): nothing would use it and no prune removes it. EIO
// is injected into the nth fsync under the database directory.
func TestSyncRewriteFailedInstallRemovesSnapshot(t *testing.T) {
	if os.Getenv("SYNC_REWRITE_INSTALL_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	template := filepath.Join(t.TempDir(), "tpl")
	db, err := Open(template, Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1, SnapshotKeepRecent: 10})
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 5; v++ {
		if err := db.Set("a", []byte("k"), []byte(fmt.Sprint("v", v))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			t.Fatal(err)
		}
		if v == 3 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for n := 1; n < 12; n++ {
		dir := filepath.Join(t.TempDir(), "db")
		testutil.CopyDir(t, template, dir)
		trace := filepath.Join(t.TempDir(), "trace")
		args := []string{strace, "-f", "-qq", "-o", trace, "-P", dir, "-e", "trace=fsync",
			"-e", fmt.Sprintf("inject=fsync:error=EIO:when=%d", n), os.Args[0], "-test.run=^TestSyncRewriteFailedInstallChild$", "-test.v"}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "SYNC_REWRITE_INSTALL_DIR="+dir)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, _ := cmd.Output()
		if testutil.StraceFailed(strace, errb.Bytes()) {
			continue
		}
		if !testutil.Injected(t, trace) {
			break
		}
		i := bytes.Index(out, []byte("REWRITEFAILED: "))
		if i < 0 {
			continue
		}
		failed++
		msg := string(out[i:])
		if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
			msg = string(out[i : i+j])
		}
		cur, err := readCurrent(dir)
		if err != nil {
			t.Fatal(err)
		}
		versions, err := listSnapshots(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range versions {
			if v > cur {
				t.Errorf("EIO at fsync #%d of the database directory: RewriteSnapshot failed (%s), yet the snapshot directory of version %d stays, which current (%d) does not name (on disk %v)", n, msg, v, cur, versions)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no injection failed the rewrite")
	}
}
