package multitree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestFIFOInPlaceOfDatabaseFiles: a named pipe in place of one of the
// database's small files ("current", "first", "rollback", "rollbacks",
// "import", a snapshot's "metadata") makes Open (writable and read-only)
// and Verify fail with ErrCorrupt naming it, at once: the file is never
// opened for a blocking read, which would wait forever for a writer. The
// exception is a writable open with "rollbacks", a change counter for
// readers that a writer replaces when damaged.
func TestFIFOInPlaceOfDatabaseFiles(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("named pipes")
	}
	base := t.TempDir()
	db, err := Open(base, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 6)
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, 1, 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{currentFileName, firstFileName, rollbackFileName, rollbacksName, importFileName,
		filepath.Join(snapshotDirName(6), metadataFileName)} {
		for _, call := range []string{"open", "open-readonly", "verify"} {
			t.Run(name+"/"+call, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "db")
				testutil.CopyDir(t, base, dir)
				p := filepath.Join(dir, name)
				_ = os.Remove(p)
				if err := syscall.Mkfifo(p, 0o644); err != nil {
					t.Skip(err)
				}
				done := make(chan error, 1)
				go func() {
					switch call {
					case "verify":
						_, err := Verify(dir)
						done <- err
					default:
						db, err := Open(dir, Options{ReadOnly: call == "open-readonly"})
						if err == nil {
							db.Close()
						}
						done <- err
					}
				}()
				select {
				case err := <-done:
					if name == rollbacksName && call == "open" {
						// only a change counter, which a writer replaces
						// when damaged (countRollback)
						if err != nil {
							t.Fatalf("writable open with %s a named pipe: %v", name, err)
						}
						if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
							t.Fatalf("%s not replaced by a regular file: %v", name, err)
						}
						return
					}
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("%s with %s a named pipe: %v, want ErrCorrupt", call, name, err)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%s with %s a named pipe blocks", call, name)
				}
			})
		}
	}
}
