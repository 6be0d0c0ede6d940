package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestExportNameDurable: export renames its finished stream file into
// place and then fsyncs the directory holding it, before it reports
// success: a power loss after the report cannot lose the file's name.
func TestExportNameDurable(t *testing.T) {
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
	renamed := -1
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, "rename") && strings.Contains(line, `"`+file+`"`) && strings.Contains(line, "= 0"):
			renamed = i
		case renamed >= 0 && strings.Contains(line, "sync(") && strings.Contains(line, "<"+out+">"):
			return // the directory's fsync after the rename
		}
	}
	if renamed < 0 {
		t.Fatalf("no rename to %s traced:\n%s", file, b)
	}
	t.Fatalf("no fsync of %s after the rename of the stream file into it:\n%s", out, b)
}
