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
	calls := joinStraceCalls(strings.Split(string(b), "\n"))
	syncedAt, renamed := -1, -1 // the fsync's end, the rename's start and end
	renameEnd := -1
	for _, c := range calls {
		switch {
		case syncedAt < 0 && strings.Contains(c.text, "sync(") && strings.Contains(c.text, "<"+file+".") &&
			strings.Contains(c.text, ".tmp>") && strings.HasSuffix(c.text, "= 0"):
			syncedAt = c.end
		case renamed < 0 && strings.Contains(c.text, "rename") && strings.Contains(c.text, `"`+file+`"`) && strings.HasSuffix(c.text, "= 0"):
			renamed, renameEnd = c.start, c.end
		}
	}
	switch {
	case renamed < 0:
		t.Fatalf("no rename to %s traced:\n%s", file, b)
	case syncedAt < 0 || syncedAt > renamed:
		t.Fatalf("the stream file was renamed to %s before its data was fsynced:\n%s", file, b)
	}
	for _, c := range calls {
		if c.start > renameEnd && strings.Contains(c.text, "sync(") && strings.Contains(c.text, "<"+out+">") && strings.HasSuffix(c.text, "= 0") {
			return // the directory's fsync after the rename
		}
	}
	t.Fatalf("no fsync of %s after the rename of the stream file into it:\n%s", out, b)
}

// straceCall is one system call of an strace -f trace: its line with an
// "<unfinished ...>" part joined to its "<... resumed>" one, and the
// indices of the lines where it started and ended.
type straceCall struct {
	text       string
	start, end int
}

// joinStraceCalls returns the calls of an strace -f trace (lines of "pid
// call"), in the order they started. A call that another thread's calls
// interrupt is split over two lines ("<unfinished ...>" and "<... name
// resumed>"); its start is the first and its end the second.
func joinStraceCalls(lines []string) []*straceCall {
	var calls []*straceCall
	pending := map[string]*straceCall{}
	for i, line := range lines {
		pid, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "<... ") {
			if c := pending[pid]; c != nil {
				_, tail, _ := strings.Cut(rest, " resumed>")
				c.text, c.end = strings.TrimSpace(c.text+tail), i
				delete(pending, pid)
			}
			continue
		}
		c := &straceCall{text: rest, start: i, end: i}
		if head, ok := strings.CutSuffix(rest, "<unfinished ...>"); ok {
			c.text = strings.TrimSpace(head)
			pending[pid] = c
		}
		calls = append(calls, c)
	}
	return calls
}

// TestJoinStraceCalls: a call split by another thread's calls is joined,
// with its start at its first line and its end at its resumed one.
func TestJoinStraceCalls(t *testing.T) {
	lines := []string{
		`19507 fsync(3</x/state.bin.1-2.tmp> <unfinished ...>`,
		`19503 --- SIGURG {si_signo=SIGURG} ---`,
		`19507 <... fsync resumed>)              = 0`,
		`19508 renameat(AT_FDCWD, "/x/state.bin.1-2.tmp", AT_FDCWD, "/x/state.bin") = 0`,
		``,
	}
	calls := joinStraceCalls(lines)
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3: %+v", len(calls), calls)
	}
	if c := calls[0]; c.text != `fsync(3</x/state.bin.1-2.tmp>)              = 0` || c.start != 0 || c.end != 2 {
		t.Errorf("joined call %+v", *c)
	}
	if c := calls[2]; !strings.HasPrefix(c.text, "renameat(") || c.start != 3 || c.end != 3 {
		t.Errorf("rename %+v", *c)
	}
}
