package compat_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestImportMemIAVLFIFO: a named pipe in place of any file of a reference
// directory that the import reads or locks (the current snapshot's, the
// log's, the lock file on Linux) fails ImportMemIAVL at once, leaving nothing where
// the database was to be: the file is never opened for a blocking read,
// which would wait forever for a writer.
func TestImportMemIAVLFIFO(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("named pipes")
	}
	for _, rel := range fixtureFiles(t) {
		t.Run(rel, func(t *testing.T) {
			ref := filepath.Join(t.TempDir(), "ref")
			testutil.CopyDir(t, refFixture, ref)
			p := filepath.Join(ref, rel)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skip(err)
			}
			dir := filepath.Join(t.TempDir(), "db")
			done := make(chan error, 1)
			go func() { done <- compat.ImportMemIAVL(ref, dir, multitree.Options{}) }()
			select {
			case err := <-done:
				// the import reads the current snapshot (6) and the log,
				// and locks LOCK on Linux
				unread := strings.HasPrefix(rel, "snapshot-00000000000000000000") || rel == "LOCK" && runtime.GOOS != "linux"
				if err == nil && !unread {
					t.Fatalf("import with %s a named pipe succeeded", rel)
				}
				if err == nil {
					return
				}
			case <-time.After(time.Minute):
				t.Fatalf("import with %s a named pipe blocks", rel)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s left after the failed import: %v", dir, err)
			}
		})
	}
}
