package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestExportDurable: export writes its stream under a temporary name,
// fsyncs that file, renames it into place and then fsyncs the directory
// holding it, all before it reports success: a power loss after the report
// can neither leave the name pointing at an empty or partial file nor lose
// the name.
func TestExportDurable(t *testing.T) {
	strace := testutil.Strace(t)
	bin := buildBinary(t)
	db := t.TempDir()
	makeDB(t, db, 0.01, 3)
	out := filepath.Join(t.TempDir(), "exports")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, "state.bin")
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, "-f", "-qq", "-y", "-o", trace, "-e", "trace=rename,renameat,renameat2,fsync,fdatasync",
		bin, "export", db, file)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, b)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	fileSynced, renamed := false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !renamed && strings.Contains(line, "sync(") && strings.Contains(line, "<"+file+".") &&
			strings.Contains(line, ".tmp>") && strings.Contains(line, "= 0"):
			fileSynced = true
		case !renamed && strings.Contains(line, "rename") && strings.Contains(line, `"`+file+`"`) && strings.Contains(line, "= 0"):
			if !fileSynced {
				t.Fatalf("the stream file was renamed to %s before its data was fsynced:\n%s", file, b)
			}
			renamed = true
		case renamed && strings.Contains(line, "sync(") && strings.Contains(line, "<"+out+">"):
			return // the directory's fsync after the rename
		}
	}
	if !renamed {
		t.Fatalf("no rename to %s traced:\n%s", file, b)
	}
	t.Fatalf("no fsync of %s after the rename of the stream file into it:\n%s", out, b)
}
