package multitree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestFsyncOrderGiveUpChild is the process TestFsyncOrderGiveUp traces:
// it creates a database in MEMIAVL_FSOGIVEUP_DIR with a few commits and a
// snapshot, closes it, removes it (RemoveDatabase: "removed"), then imports
// a database into the directory ("imported"). Markers go to the file
// MEMIAVL_FSOGIVEUP_MARK, as in TestFsyncOrderChild.
func TestFsyncOrderGiveUpChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_FSOGIVEUP_DIR")
	if dir == "" {
		t.Skip("only run as TestFsyncOrderGiveUp's child process")
	}
	mark := fsoMarks(t, os.Getenv("MEMIAVL_FSOGIVEUP_MARK"))

	mark("phase create")
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for db.WorkingVersion() <= 8 {
		fsoCommit(t, db, crashBlock(5, db.WorkingVersion()), mark)
		if db.Version() == 4 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	fsoClose(t, db, mark)

	mark("phase remove")
	if err := RemoveDatabase(dir); err != nil {
		t.Fatal(err)
	}
	mark("removed")

	src := fsoImportSource(t, filepath.Join(filepath.Dir(dir), "src"))
	defer src.Close()
	sources, release := fsoSources(t, src)
	defer release()
	mark("phase import")
	if _, err := Import(dir, fsoImportVersion, sources, ImportOptions{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	mark("imported")
	mark("done")
}

// fsoGiveUpRules (a fsoHook) are the rules of the import marker
// (format.go, importFileName; import.go giveUp): a database is given up
// with the marker durable before "current" is removed, and the removal
// of "current" durable before anything else of the database is removed;
// an import removes the marker only once "current" is durable. Otherwise
// a power loss leaves a directory with "current" naming a snapshot in
// part removed (which the next writer Open takes for a database stopped
// after its import), or one without "current" or the marker that holds
// an imported snapshot (which Open and Import refuse as a database that
// lost its current pointer).
type fsoGiveUpRules struct {
	m                               *durModel
	currentRemovals, markerRemovals int
	contentRemovals                 int
}

func (r *fsoGiveUpRules) check(c *straceCall, from, to string, at int) {
	m := r.m
	if !strings.HasPrefix(c.name, "unlink") && c.name != "rmdir" || c.retInt() < 0 || !m.under(from) || from == m.root {
		return
	}
	cur, marker := filepath.Join(m.root, currentFileName), filepath.Join(m.root, importFileName)
	switch {
	case from == cur:
		r.currentRemovals++
		if _, ok := m.nodes[marker]; !ok {
			m.violate("giveup-order", "no marker", at, "current is removed, but there is no import marker")
		} else if _, msgs := m.fileProblems(marker); len(msgs) > 0 {
			m.violate("giveup-order", "marker", at, "current is removed, but %s", msgs[0])
		}
	case from == marker:
		r.markerRemovals++
		if _, ok := m.nodes[cur]; ok {
			if _, msgs := m.fileProblems(cur); len(msgs) > 0 {
				m.violate("import-marker", "current", at, "the import marker is removed beside a current file, but %s", msgs[0])
			}
		}
	default:
		first, _, _ := strings.Cut(strings.TrimPrefix(from, m.root+"/"), "/")
		if _, isSnap := parseSnapshotDirName(first); !isSnap && first != walDirName {
			return
		}
		r.contentRemovals++
		if d := m.nodes[m.root]; d != nil {
			if idx, ok := d.removed[currentFileName]; ok {
				m.violate("giveup-order", "content", at, "%s is removed, but the removal of current by %s was not followed by an fsync of <db>",
					m.rel(from), m.line(idx))
			}
		}
	}
}

func (r *fsoGiveUpRules) beforeApply(*straceCall, string, string) {}
func (r *fsoGiveUpRules) afterApply(*straceCall, string, string)  {}
func (r *fsoGiveUpRules) marker([]string, int) bool               { return false }

// TestFsyncOrderGiveUp traces RemoveDatabase and an Import into the
// directory it emptied (TestFsyncOrderGiveUpChild) and checks
// fsoGiveUpRules against the durability model of TestFsyncOrder. The
// model's own rules are not reported here: it does not follow a removal
// of "current".
func TestFsyncOrderGiveUp(t *testing.T) {
	if os.Getenv("MEMIAVL_FSOGIVEUP_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "db")
	trace := filepath.Join(tmp, "strace.out")
	markFile := filepath.Join(tmp, "markers")
	attempt := 0
	tr := fsoTraceChild(t, strace, "TestFsyncOrderGiveUpChild", dir, trace, markFile,
		[]string{"MEMIAVL_FSOGIVEUP_DIR=" + dir, "MEMIAVL_FSOGIVEUP_MARK=" + markFile}, func() {
			if attempt++; attempt > 1 {
				for _, p := range []string{dir, trace, markFile, filepath.Join(tmp, "src")} {
					if err := os.RemoveAll(p); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	lines, calls := tr.lines, tr.calls
	ours := []string{"giveup-order", "import-marker"}
	run := func(calls []*straceCall) (*durModel, *fsoGiveUpRules) {
		m := newDurModel(dir, markFile, lines)
		r := &fsoGiveUpRules{m: m}
		m.hook = r
		m.run(calls)
		for k, v := range m.violations {
			if !slices.Contains(ours, v.rule) {
				delete(m.violations, k)
			}
		}
		return m, r
	}
	f := newFsoFinder(tr)
	root := filepath.Clean(dir)
	unlinkOf := func(p string) func(c *straceCall) bool {
		return func(c *straceCall) bool {
			return strings.HasPrefix(c.name, "unlink") && c.retInt() == 0 && f.path(c) == p
		}
	}
	fsoSelfCheck(t, calls, func(calls []*straceCall) []*durViolation {
		m, _ := run(calls)
		return m.violationSlice()
	}, []fsoMutation{
		{"the fsync of the database directory after the removal of current", []string{"giveup-order"}, func() []int {
			i := f.first(f.markerAt("phase remove"), unlinkOf(filepath.Join(root, currentFileName)))
			return []int{f.first(i, f.fsyncOf(root))}
		}},
		{"the fsyncs of the import's current and of the database directory before the marker's removal", []string{"import-marker"}, func() []int {
			from := f.markerAt("phase import")
			to := f.first(from, unlinkOf(filepath.Join(root, importFileName)))
			i := f.last(from, to, f.renameTo(`/`+currentFileName+`$`))
			return f.all(i, to, f.fsyncOf(root))
		}},
	})
	m, r := run(calls)
	fsoCounts(t, []fsoCount{
		{"removals of current", r.currentRemovals, 1},
		{"removals of the import marker", r.markerRemovals, 2},
		{"removals of snapshot and log files", r.contentRemovals, 5},
	})
	t.Logf("checked %d removals of current, %d of the marker, %d of the database's files", r.currentRemovals, r.markerRemovals, r.contentRemovals)
	for _, v := range m.violationList() {
		t.Error(v)
	}
}

// TestFsyncOrderFinishSwapChild is the process TestFsyncOrderFinishSwap
// traces: a writer Open of MEMIAVL_FSOSWAP_DIR, beside which an import's
// swap was interrupted between its two renames (finishSwap moves the
// staged database in), then commits and Close.
func TestFsyncOrderFinishSwapChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_FSOSWAP_DIR")
	if dir == "" {
		t.Skip("only run as TestFsyncOrderFinishSwap's child process")
	}
	mark := fsoMarks(t, os.Getenv("MEMIAVL_FSOSWAP_MARK"))
	mark("phase open")
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Version() != fsoImportVersion {
		t.Fatalf("opened at %d, want the imported %d", db.Version(), fsoImportVersion)
	}
	mark("phase commits")
	for i := 0; i < 3; i++ {
		fsoCommit(t, db, crashBlock(5, db.WorkingVersion()), mark)
	}
	fsoClose(t, db, mark)
	mark("done")
}

// TestFsyncOrderFinishSwap checks, with the rules of TestFsyncOrder, a
// writer Open that finishes an import's interrupted swap (import.go
// finishSwap): the staged database it renames to dir must be durable
// there before a commit on it is acknowledged, or a power loss takes the
// directory, and the acknowledged versions with it, back to the staging
// name, where no Open looks.
func TestFsyncOrderFinishSwap(t *testing.T) {
	if os.Getenv("MEMIAVL_FSOSWAP_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "db")
	trace := filepath.Join(tmp, "strace.out")
	markFile := filepath.Join(tmp, "markers")
	// the interrupted swap, made untraced: the old database aside, the
	// staged one whole (and durable: Import returned), nothing at dir
	var staged []string
	setup := func() {
		staged = nil
		for _, p := range []string{dir, dir + replacedSuffix, dir + stagingSuffix, filepath.Join(tmp, "src"), trace, markFile} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
		old, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		src := fsoImportSource(t, filepath.Join(tmp, "src"))
		defer src.Close()
		sources, release := fsoSources(t, src)
		defer release()
		if _, err := Import(dir+stagingSuffix, fsoImportVersion, sources, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir, dir+replacedSuffix); err != nil {
			t.Fatal(err)
		}
		if err := filepath.Walk(dir+stagingSuffix, func(p string, _ os.FileInfo, err error) error {
			staged = append(staged, p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	tr := fsoTraceChild(t, strace, "TestFsyncOrderFinishSwapChild", dir, trace, markFile,
		[]string{"MEMIAVL_FSOSWAP_DIR=" + dir, "MEMIAVL_FSOSWAP_MARK=" + markFile}, setup)
	lines, calls := tr.lines, tr.calls
	run := func(calls []*straceCall) *durModel {
		m := newDurModel(dir, markFile, lines)
		for _, p := range staged {
			m.node(p)
		}
		m.curDurable = fsoImportVersion
		m.run(calls)
		return m
	}
	f := newFsoFinder(tr)
	fsoSelfCheck(t, calls, func(calls []*straceCall) []*durViolation { return run(calls).violationSlice() }, []fsoMutation{
		{"the fsync of the parent directory after the staged database's rename to dir", []string{"ack"}, func() []int {
			i := f.first(0, func(c *straceCall) bool {
				_, dst, _ := fsoCallPaths(c)
				return strings.HasPrefix(c.name, "rename") && dst == filepath.Clean(dir)
			})
			return []int{f.first(i, f.fsyncOf(filepath.Dir(filepath.Clean(dir))))}
		}},
	})
	m := run(calls)
	fsoCounts(t, []fsoCount{{"acknowledged commits", m.stats.acks, 3}, {"closes", m.stats.closes, 1}})
	if _, err := os.Lstat(dir + replacedSuffix); err == nil {
		t.Errorf("the replaced database is left beside %s", dir)
	}
	for _, v := range m.violationList() {
		t.Error(v)
	}
}

// fsoTraceChild runs the test function child in a child process under
// strace, with env added to its environment, retrying strace's own
// failures (before runs ahead of every attempt), and returns its parsed
// trace of dir, written to the file trace, with its markers in markFile.
func fsoTraceChild(t *testing.T, strace, child, dir, trace, markFile string, env []string, before func()) *fsoTrace {
	t.Helper()
	out, err := testutil.RetryStraceFailures(t, strace, child, func() ([]byte, error) {
		before()
		cmd := exec.Command(strace, "-f", "-y", "-x", "-s", "64", "-qq", "-o", trace,
			"-e", "trace="+fsyncOrderCalls,
			os.Args[0], "-test.run=^"+child+"$", "-test.v")
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	})
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return fsoLoadTrace(t, trace, dir, markFile)
}
