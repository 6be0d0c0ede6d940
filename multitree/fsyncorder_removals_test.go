package multitree

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// fsoRemovalRules adds two rules to the main case's model (a fsoHook),
// taken from the code's comments, that the model of TestFsyncOrder does
// not check:
//
//   - pruned-rename (files.go removeSnapshotDir: "the rename must be
//     durable before the files go: a power loss could otherwise keep the
//     removals inside and lose the rename, leaving a snapshot in part
//     under its own name"): when anything under a "<snapshot>.pruned.tmp"
//     directory is removed, the rename that made that directory is
//     durable.
//   - rollback-removed (format.go: while the "rollback" file exists,
//     every Open treats its target as the latest version): once a Commit
//     returned, the removal of the "rollback" file is durable, or a power
//     loss brings the file back and the next Open discards the versions
//     acknowledged after the rollback.
type fsoRemovalRules struct {
	m                         *durModel
	prunedRemovals, afterRoll int
}

func (r *fsoRemovalRules) check(c *straceCall, from, to string, at int) {
	m := r.m
	switch c.name {
	case "unlinkat", "unlink", "rmdir":
	default:
		return
	}
	if !m.under(from) || from == m.root || c.retInt() < 0 {
		return
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(from, m.root+"/"), "/")
	if !strings.HasSuffix(first, prunedSuffix+tmpSuffix) {
		return
	}
	gone := filepath.Join(m.root, first)
	r.prunedRemovals++
	if n := m.nodes[gone]; n != nil && n.entryDirty != 0 {
		m.violate("pruned-rename", "pruned "+m.rel(gone), at,
			"%s is removed, but the rename that made %s, by %s, was not followed by an fsync of <db>: a power loss may keep the removal and undo the rename, leaving a snapshot in part under its own name",
			m.rel(from), m.rel(gone), m.line(n.entryDirty))
	}
}

func (r *fsoRemovalRules) beforeApply(*straceCall, string, string) {}
func (r *fsoRemovalRules) afterApply(*straceCall, string, string)  {}

func (r *fsoRemovalRules) marker(f []string, at int) bool {
	m := r.m
	if !m.active || len(f) < 2 || f[0] != "acked" {
		return false
	}
	if d := m.nodes[m.root]; d != nil {
		if idx, ok := d.removed[rollbackFileName]; ok {
			r.afterRoll++
			m.violate("rollback-removed", "rollback "+f[1], at,
				"Commit of version %s returned, but the removal of the rollback file by %s was not followed by an fsync of <db>: a power loss brings it back, and the next Open rolls back again past this version",
				f[1], m.line(idx))
		}
	}
	return false // the model's own rules run too
}

// TestFsyncOrderRemovals replays the main case of TestFsyncOrderChild
// against the model with fsoRemovalRules, and takes the fsyncs these rules
// depend on out of the trace to check that they report it.
func TestFsyncOrderRemovals(t *testing.T) {
	strace := testutil.Strace(t)
	tr := fsoRunChild(t, strace, "main", filepath.Join(t.TempDir(), "db"))
	run := func(calls []*straceCall) (*durModel, *fsoRemovalRules) {
		m := newDurModel(tr.dir, tr.markFile, tr.lines)
		r := &fsoRemovalRules{m: m}
		m.hook = r
		m.run(calls)
		return m, r
	}
	f := newFsoFinder(tr)
	root := filepath.Clean(tr.dir)
	fsoSelfCheck(t, tr.calls, func(calls []*straceCall) []*durViolation {
		m, _ := run(calls)
		return m.violationSlice()
	}, []fsoMutation{
		{"the fsync of the database directory after a snapshot's rename to its pruned name", []string{"pruned-rename"}, func() []int {
			i := f.first(0, f.renameTo(`/snapshot-[0-9]{20}`+prunedSuffix+`\.tmp$`))
			return []int{f.first(i, f.fsyncOf(root))}
		}},
		{"the fsync of the database directory after the rollback file's removal", []string{"rollback-removed"}, func() []int {
			i := f.first(0, func(c *straceCall) bool {
				return strings.HasPrefix(c.name, "unlink") && c.retInt() == 0 && f.path(c) == filepath.Join(root, rollbackFileName)
			})
			return []int{f.first(i, f.fsyncOf(root))}
		}},
	})
	m, r := run(tr.calls)
	fsoCounts(t, []fsoCount{
		{"removals under a pruned snapshot directory", r.prunedRemovals, 3},
		{"rollback file removals", m.stats.rollbackDone, 1},
	})
	t.Logf("checked %d removals under pruned snapshot directories, %d acks", r.prunedRemovals, m.stats.acks)
	for _, v := range m.violationList() {
		t.Error(v)
	}
}
