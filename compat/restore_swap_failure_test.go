package compat_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

var swapFailMount = mount{iavl: []string{"a", "b"}}

// TestRestoreSwapFailChild is the restore of
// TestFailedRestoreLeavesDatabase, in a child process under strace.
func TestRestoreSwapFailChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_RESTORE_FAIL_DIR")
	if dir == "" {
		t.Skip("child only")
	}
	// strace counts calls per thread: keep this goroutine's on one
	runtime.LockOSThread()
	stream, err := os.ReadFile(os.Getenv("MEMIAVL_RESTORE_FAIL_STREAM"))
	if err != nil {
		t.Fatal(err)
	}
	ms := newOurs(t, dir, testConfig(), keyring{}, swapFailMount, nil)
	defer ms.Close()
	_, err = ms.Restore(3, snapshottypes.CurrentFormat, ssReader(stream))
	if err == nil {
		fmt.Println("RESULT restored")
		return
	}
	first := strings.ReplaceAll(err.Error(), "\n", " ")
	after := ms.LastCommitID().Version
	// the SDK's snapshot manager then tries another snapshot (here the same one)
	_, err2 := ms.Restore(3, snapshottypes.CurrentFormat, ssReader(stream))
	fmt.Printf("RESULT failed: %s || version after: %d || retry: %v\n", first, after, err2)
}

// TestFailedRestoreLeavesDatabase: when MultiStore.Restore fails (an EIO
// at the nth fsync of the directory holding the database's, the swap's
// included), the multistore is back on the database it had (version 0,
// "reloaded on the database as it was"), and the SDK's retry with another
// snapshot succeeds.
func TestFailedRestoreLeavesDatabase(t *testing.T) {
	if os.Getenv("MEMIAVL_RESTORE_FAIL_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	keys := keyring{}
	src := newOracle(t, dbm.NewMemDB(), keys, swapFailMount, nil)
	for b := 0; b < 3; b++ {
		src.GetKVStore(keys["a"]).Set(fmt.Appendf(nil, "k%d", b), []byte("v"))
		src.Commit()
	}
	sf := filepath.Join(t.TempDir(), "stream")
	if err := os.WriteFile(sf, ssShapeStream(t, src, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	for n := 1; n < 20; n++ {
		dir := filepath.Join(t.TempDir(), "db")
		trace := filepath.Join(t.TempDir(), "trace")
		// EIO for the nth fsync of the directory holding the database
		// directory (the durable creation of the staging directory, and
		// the swap's fsync after it exchanged the two directories)
		args := []string{strace, "-f", "-qq", "-o", trace, "-P", filepath.Dir(dir), "-e", "trace=fsync",
			"-e", fmt.Sprintf("inject=fsync:error=EIO:when=%d", n), os.Args[0], "-test.run=^TestRestoreSwapFailChild$", "-test.v"}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "MEMIAVL_RESTORE_FAIL_DIR="+dir, "MEMIAVL_RESTORE_FAIL_STREAM="+sf)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, _ := cmd.Output()
		if testutil.StraceFailed(strace, errb.Bytes()) {
			continue
		}
		if !testutil.Injected(t, trace) {
			break
		}
		i := bytes.Index(out, []byte("RESULT failed:"))
		if i < 0 {
			continue
		}
		line := string(out[i:])
		if j := strings.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		t.Logf("fsync #%d: %s", n, line)
		if !strings.Contains(line, "version after: 0 ") || !strings.HasSuffix(line, "retry: <nil>") {
			t.Errorf("EIO at fsync #%d: %s", n, line)
		}
	}
}
