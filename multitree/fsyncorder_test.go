package multitree

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// fsyncOrderVersions is how many versions the first phase of
// TestFsyncOrderChild commits.
const fsyncOrderVersions = 40

// TestFsyncOrderChild is the process TestFsyncOrder traces: it creates a
// database, commits with background rewrites every 5 versions (so that
// rewrites, switches and prunes happen), rewrites a snapshot synchronously,
// closes, reopens, commits more, closes, reopens with a rollback and commits
// again. After each step it writes a marker line to the file
// MEMIAVL_FSYNCORDER_MARK with one write(2), which the trace shows: "acked
// N" once Commit of version N returned, "closed" once Close returned, and
// "phase ..." before each step.
func TestFsyncOrderChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_FSYNCORDER_DIR")
	if dir == "" {
		t.Skip("only run as TestFsyncOrder's child process")
	}
	mf, err := os.OpenFile(os.Getenv("MEMIAVL_FSYNCORDER_MARK"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	mark := func(format string, args ...any) {
		if _, err := mf.Write([]byte(fmt.Sprintf(format, args...) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	const seed = 7
	opts := Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 5,
		SnapshotKeepRecent: 1, WALSegmentSize: 48 << 10}
	commit := func(db *DB) {
		t.Helper()
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		mark("acked %d", info.Version)
		if info.Version%10 == 6 {
			// let this interval's rewrite finish, so that the next
			// commit switches to it and prunes; the others overlap
			// the commits
			db.mu.Lock()
			job := db.mu.rewrite
			db.mu.Unlock()
			if job != nil {
				<-job.done
			}
		}
	}
	closeDB := func(db *DB) {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		mark("closed")
	}

	mark("phase create")
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	mark("phase commits")
	for db.WorkingVersion() <= fsyncOrderVersions/2 {
		commit(db)
	}
	mark("phase rewrite")
	if err := db.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	mark("phase commits")
	for db.WorkingVersion() <= fsyncOrderVersions*3/4 {
		commit(db)
	}
	mark("phase close")
	closeDB(db)

	mark("phase reopen")
	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	mark("phase commits")
	for db.WorkingVersion() <= fsyncOrderVersions {
		commit(db)
	}
	mark("phase close")
	closeDB(db)

	// below the current snapshot: the rollback moves current back to the
	// older kept snapshot, removes the newer one and cuts the log
	cur, err := readCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	target := cur - 1
	mark("phase rollback %d", target)
	ropts := opts
	ropts.TargetVersion, ropts.Rollback = target, true
	if db, err = Open(dir, ropts); err != nil {
		t.Fatal(err)
	}
	if v := db.Version(); v != target {
		t.Fatalf("rolled back to %d, want %d", v, target)
	}
	mark("phase commits")
	for db.WorkingVersion() <= target+4 {
		commit(db)
	}
	mark("phase close")
	closeDB(db)
	mark("done")
}

// TestFsyncOrder checks that the database survives a power loss, which a
// process kill (TestCrashPoints) cannot show: after a power loss only data
// that was fsynced survives, and a creation, rename or removal of a
// directory entry only if the directory was fsynced after it. It traces
// TestFsyncOrderChild with strace (-y prints the path of every descriptor)
// and replays the trace against a model of what is durable: a file's data
// is dirty from a write (or truncation) until an fsync or fdatasync of it
// that starts after the write ended; an entry is dirty from its creation
// (open with O_CREAT, mkdir, rename to it) until an fsync of its directory
// that starts after it. Calls on different threads are ordered by strace's
// lines: a call takes effect at its last line and is checked at its first.
// The rules, taken from the code's own comments:
//
//   - tmp-rename (format.go, files.go, snapshot.Writer, wal rollLocked):
//     before X is renamed to a name outside any temporary directory, with
//     X a temporary name, every file under X (or X itself) has its data
//     fsynced and every entry under X (and every removal in it) is
//     durable. A rename inside a temporary directory (a store's tree,
//     DeferSync) is checked at the rename of the outer directory.
//   - current (rewrite.go "the log must be durable up to the snapshot
//     before current points at it", format.go): when "current" is
//     replaced, the snapshot directory its new content names is durable
//     (its entry in the database directory and everything in it), and so
//     is the log up to that version; a current that moves back (a
//     rollback) requires the "rollback" file to be durable.
//   - ack (multitree doc "Durability", wal doc, SyncEveryCommit): once
//     Commit of version v returned (the child's marker), the log segments
//     holding versions up to v are durable (data fsynced, entries and the
//     wal directory's entry durable), and so is every snapshot that
//     "current" may name after a power loss (the last durable one, and
//     one renamed into place whose directory was not fsynced since), with
//     the log reaching back to just after it.
//   - remove (rewrite.go prune, files.go removeSnapshotDir, wal
//     TruncateFront): a snapshot directory is removed (or renamed to its
//     ".pruned.tmp" name) only when no "current" that may survive a power
//     loss names it; a log segment is removed from the front only when
//     every such "current" is at or past its last version; a segment
//     holding records is removed from the back, or cut (ftruncate), only
//     while a durable "rollback" file records the rollback (format.go).
//   - rollback-done (format.go "removes it once the newer snapshots are
//     gone and the log is cut back"): when the "rollback" file is
//     removed, "current" is durable, the log's cut (ftruncate) is fsynced
//     and the removals of the newer segments are durable.
//   - close (wal Close "fsyncs what is unsynced under every policy"):
//     once Close returned, everything in the database directory but LOCK
//     is durable.
//
// Also checked: the database directory's own entry, made by Open
// (CreateIfMissing), is durable in its parent before the first
// acknowledged commit; and each log segment removal is durable before the
// next one (a power loss may keep any subset of removals made under one
// fsync of the directory, which would leave a gap in the log).
//
// checkFsyncOrderModel then takes single fsyncs out of the trace and checks
// that each rule reports it. MEMIAVL_FSYNCORDER_KEEP=path keeps the trace;
// MEMIAVL_FSYNCORDER_DEBUG=1 logs what the self-checks found.
func TestFsyncOrder(t *testing.T) {
	if os.Getenv("MEMIAVL_FSYNCORDER_DIR") != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "db")
	trace := filepath.Join(tmp, "strace.out")
	markFile := filepath.Join(tmp, "markers")
	cmd := exec.Command(strace, "-f", "-y", "-x", "-s", "64", "-qq", "-o", trace,
		"-e", "trace="+fsyncOrderCalls,
		os.Args[0], "-test.run=^TestFsyncOrderChild$", "-test.v")
	cmd.Env = append(os.Environ(), "MEMIAVL_FSYNCORDER_DIR="+dir, "MEMIAVL_FSYNCORDER_MARK="+markFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if keep := os.Getenv("MEMIAVL_FSYNCORDER_KEEP"); keep != "" {
		b, _ := os.ReadFile(trace)
		_ = os.WriteFile(keep, b, 0o644)
	}
	lines, err := fsoReadLines(trace)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := fsoParseStrace(lines)
	if err != nil {
		t.Fatal(err)
	}
	m := newDurModel(dir, markFile, lines)
	m.run(calls)
	checkFsyncOrderModel(t, dir, markFile, lines, calls)

	// the checks must have seen what they check
	for _, c := range []struct {
		what   string
		n, min int
	}{
		{"acknowledged commits", m.stats.acks, fsyncOrderVersions},
		{"closes", m.stats.closes, 3},
		{"replacements of current", m.stats.currents, 6},
		{"renames of temporary names into place", m.stats.tmpRenames, 20},
		{"snapshot removals", m.stats.snapRemovals, 3},
		{"log segments removed from the front", m.stats.frontRemovals, 3},
		{"log cuts of the rollback", m.stats.cuts, 1},
		{"rollback file removals", m.stats.rollbackDone, 1},
	} {
		if c.n < c.min {
			t.Errorf("the trace shows %d %s, want at least %d: the child or the parser is off", c.n, c.what, c.min)
		}
	}
	t.Logf("checked %d acks, %d closes, %d current replacements, %d temporary renames, %d snapshot removals, %d front log removals, %d log cuts, %d fsyncs",
		m.stats.acks, m.stats.closes, m.stats.currents, m.stats.tmpRenames, m.stats.snapRemovals, m.stats.frontRemovals, m.stats.cuts, m.stats.fsyncs)
	for _, v := range m.violationList() {
		t.Error(v)
	}
}

// fsyncOrderCalls are the system calls traced: every call that changes a
// file's data or a directory's entries, or makes them durable.
const fsyncOrderCalls = "openat,open,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir," +
	"link,linkat,symlink,symlinkat,write,writev,pwrite64,pwritev,pwritev2,fsync,fdatasync,sync,syncfs," +
	"sync_file_range,ftruncate,truncate,fallocate,copy_file_range,sendfile"

func fsoReadLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n"), nil
}

// straceCall is one system call of the trace: its arguments (from its
// first line), its result (from its last) and the indexes of both lines.
type straceCall struct {
	pid        string
	name       string
	args       []string
	ret        string
	start, end int
}

// retInt returns the call's result as a number (-1 for an error).
func (c *straceCall) retInt() int64 {
	f := strings.Fields(c.ret)
	if len(f) == 0 {
		return -1
	}
	s := f[0]
	if i := strings.IndexByte(s, '<'); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return -1
	}
	return n
}

var (
	straceResumed = regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	straceCallRe  = regexp.MustCompile(`^([a-z0-9_]+)\((.*)$`)
	straceRet     = regexp.MustCompile(`\)\s*=\s*(.*)$`)
)

// fsoParseStrace parses the lines of strace -f output into calls, joining
// "<unfinished ...>" lines with their "<... resumed>" ones.
func fsoParseStrace(lines []string) ([]*straceCall, error) {
	var calls []*straceCall
	pending := map[string]*straceCall{}
	for i, line := range lines {
		pid, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		rest = strings.TrimLeft(rest, " ")
		if strings.HasPrefix(rest, "---") || strings.HasPrefix(rest, "+++") {
			continue
		}
		if m := straceResumed.FindStringSubmatch(rest); m != nil {
			c := pending[pid]
			if c == nil || c.name != m[1] {
				return nil, fmt.Errorf("trace line %d: resumed call with nothing unfinished: %s", i+1, line)
			}
			delete(pending, pid)
			c.end = i
			if r := straceRet.FindStringSubmatch(m[2]); r != nil {
				c.ret = strings.TrimSpace(r[1])
			} else {
				c.ret = "?"
			}
			continue
		}
		m := straceCallRe.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		c := &straceCall{pid: pid, name: m[1], start: i, end: i}
		args, tail, closed := fsoSplitArgs(m[2])
		c.args = args
		switch {
		case closed:
			tail = strings.TrimSpace(tail)
			c.ret = strings.TrimSpace(strings.TrimPrefix(tail, "="))
		case strings.HasSuffix(strings.TrimSpace(tail), "<unfinished ...>"):
			pending[pid] = c
		default:
			return nil, fmt.Errorf("trace line %d: cannot parse: %s", i+1, line)
		}
		calls = append(calls, c)
	}
	for pid, c := range pending {
		// a call the process exit cut short has no effect to check
		_ = pid
		c.ret = "?"
	}
	return calls, nil
}

// fsoSplitArgs splits the arguments of a call at the commas outside
// strings and brackets, up to the closing parenthesis (closed) or the end
// of the text; tail is what follows.
func fsoSplitArgs(s string) (args []string, tail string, closed bool) {
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '<':
			if strings.HasPrefix(s[i:], "<unfinished ...>") {
				if a := strings.TrimSpace(s[start:i]); a != "" {
					args = append(args, a)
				}
				return args, s[i:], false
			}
			if j := strings.IndexByte(s[i:], '>'); j >= 0 {
				i += j
			}
		case '(', '[', '{':
			depth++
		case ']', '}':
			depth--
		case ')':
			if depth == 0 {
				if a := strings.TrimSpace(s[start:i]); a != "" {
					args = append(args, a)
				}
				return args, s[i+1:], true
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if a := strings.TrimSpace(s[start:]); a != "" {
		args = append(args, a)
	}
	return args, "", false
}

var straceFdRe = regexp.MustCompile(`^(-?[0-9]+|AT_FDCWD)<(.*)>$`)

// fsoFdPath returns the path strace -y printed for a descriptor argument.
func fsoFdPath(arg string) (string, bool) {
	m := straceFdRe.FindStringSubmatch(arg)
	if m == nil {
		return "", false
	}
	p := m[2]
	if strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}

// fsoString decodes a quoted string argument; full is false when strace
// cut it short.
func fsoString(arg string) (s []byte, full bool, ok bool) {
	if !strings.HasPrefix(arg, `"`) {
		return nil, false, false
	}
	var b []byte
	i := 1
	for ; i < len(arg) && arg[i] != '"'; i++ {
		if arg[i] != '\\' || i+1 >= len(arg) {
			b = append(b, arg[i])
			continue
		}
		i++
		switch c := arg[i]; c {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'v':
			b = append(b, '\v')
		case 'f':
			b = append(b, '\f')
		case 'x':
			if i+2 < len(arg) {
				v, err := strconv.ParseUint(arg[i+1:i+3], 16, 8)
				if err == nil {
					b = append(b, byte(v))
					i += 2
					continue
				}
			}
			b = append(b, 'x')
		default:
			if c >= '0' && c <= '7' {
				j := i
				for j < len(arg) && j < i+3 && arg[j] >= '0' && arg[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(arg[i:j], 8, 8)
				b = append(b, byte(v))
				i = j - 1
				continue
			}
			b = append(b, c)
		}
	}
	return b, !strings.HasSuffix(arg[i:], "..."), true
}

// durNode is a file or directory of the database directory as the model
// sees it.
type durNode struct {
	dir bool
	// dataDirty is the trace index (+1) of the last change of the data
	// that no fsync has covered, 0 when the data is durable
	dataDirty int
	// entryDirty is the index (+1) of the call that made the entry
	// (create, mkdir, rename to it), 0 when the directory holding it was
	// fsynced since
	entryDirty int
	// removed: names removed from this directory (unlink, rename away)
	// since its last fsync, with the index (+1) of the call
	removed map[string]int
	data    []byte // the last write's bytes, when strace printed them whole
	records int    // writes after the first (a log segment's header)
}

type durViolation struct {
	rule, key string
	msg       string
	ats       []int // the checkpoints (trace indexes) it was found at
	order     int
}

// durModel replays a trace against what would survive a power loss.
type durModel struct {
	root, markFile string
	lines          []string
	nodes          map[string]*durNode // by path, root included
	// curDurable is the version the durable "current" names (-1 before
	// there is one); curPending the versions "current" was renamed to
	// since the last fsync of root, with the index (+1) of the rename
	curDurable  int64
	curPending  []pendingCur
	walWrites   int // writes to log segments since the last ack
	rootChecked bool
	startOf     map[int]int // the first line of the call that ended at a line
	phase       string
	violations  map[string]*durViolation
	stats       struct {
		acks, closes, currents, tmpRenames, snapRemovals, frontRemovals, cuts, rollbackDone, fsyncs int
	}
}

type pendingCur struct {
	v   int64
	idx int
}

func newDurModel(root, markFile string, lines []string) *durModel {
	return &durModel{root: filepath.Clean(root), markFile: markFile, lines: lines,
		nodes: map[string]*durNode{}, curDurable: -1, violations: map[string]*durViolation{}, startOf: map[int]int{}}
}

func (m *durModel) under(p string) bool {
	return p == m.root || strings.HasPrefix(p, m.root+"/")
}

func (m *durModel) rel(p string) string {
	if p == m.root {
		return "<db>"
	}
	return "<db>/" + strings.TrimPrefix(p, m.root+"/")
}

// line returns trace line idx (a 1-based index as the model stores them),
// shortened.
func (m *durModel) line(idx int) string {
	if idx <= 0 || idx > len(m.lines) {
		return "?"
	}
	end := idx
	if st, ok := m.startOf[idx]; ok {
		idx = st
	}
	l := strings.ReplaceAll(m.lines[idx-1], m.root, "<db>")
	l = regexp.MustCompile(`AT_FDCWD<[^>]*>, `).ReplaceAllString(l, "")
	if len(l) > 240 {
		l = l[:240] + "..."
	}
	if end != idx {
		return fmt.Sprintf("#%d: %s (returned at #%d)", idx, l, end)
	}
	return fmt.Sprintf("#%d: %s", idx, l)
}

func (m *durModel) violate(rule, key string, at int, format string, args ...any) {
	k := rule + "\x00" + key
	if v := m.violations[k]; v != nil {
		if v.ats[len(v.ats)-1] != at {
			v.ats = append(v.ats, at)
		}
		return
	}
	msg := fmt.Sprintf("[%s] (phase %q) at %s\n\t%s", rule, m.phase, m.line(at), fmt.Sprintf(format, args...))
	m.violations[k] = &durViolation{rule: rule, key: key, msg: msg, ats: []int{at}, order: len(m.violations)}
}

func (m *durModel) violationList() []string {
	vs := make([]*durViolation, 0, len(m.violations))
	for _, v := range m.violations {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].order < vs[j].order })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.msg
		if n := len(v.ats); n > 1 {
			out[i] += fmt.Sprintf("\n\tand at %d later checkpoints, the last %s", n-1, m.line(v.ats[n-1]))
		}
	}
	return out
}

// resolve returns the path of a (directory descriptor, name) pair.
func fsoResolve(dirArg, nameArg string) (string, bool) {
	name, _, ok := fsoString(nameArg)
	if !ok {
		return "", false
	}
	if filepath.IsAbs(string(name)) {
		return filepath.Clean(string(name)), true
	}
	d, ok := fsoFdPath(dirArg)
	if !ok {
		return "", false
	}
	return filepath.Join(d, string(name)), true
}

// node returns the node at p, making a durable one for a path the trace
// has not shown created (it existed before).
func (m *durModel) node(p string) *durNode {
	n := m.nodes[p]
	if n == nil {
		n = &durNode{}
		m.nodes[p] = n
	}
	return n
}

// subtree returns the paths at or under p, sorted.
func (m *durModel) subtree(p string) []string {
	var out []string
	for q := range m.nodes {
		if q == p || strings.HasPrefix(q, p+"/") {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

func fsoIsTmpName(base string) bool {
	return strings.HasSuffix(base, ".tmp") || strings.Contains(base, ".tmp-")
}

// inTmpDir reports whether a component of p below root, p's own name
// excluded, is a temporary name.
func (m *durModel) inTmpDir(p string) bool {
	for d := filepath.Dir(p); d != m.root && m.under(d); d = filepath.Dir(d) {
		if fsoIsTmpName(filepath.Base(d)) {
			return true
		}
	}
	return false
}

// entryProblem returns why p's entry, or that of a directory above it up
// to root (excluded), may not survive a power loss, with a key naming the
// entry; "" when it will.
func (m *durModel) entryProblem(p string) (key, msg string) {
	if !m.under(p) || p == m.root {
		return "", ""
	}
	if _, ok := m.nodes[p]; !ok {
		return "missing " + m.rel(p), fmt.Sprintf("%s does not exist", m.rel(p))
	}
	for q := p; q != m.root; q = filepath.Dir(q) {
		if n := m.nodes[q]; n != nil && n.entryDirty != 0 {
			return "entry " + m.rel(q), fmt.Sprintf("the entry of %s, made by %s, was not followed by an fsync of %s", m.rel(q), m.line(n.entryDirty), m.rel(filepath.Dir(q)))
		}
	}
	return "", ""
}

// treeProblems returns why p and everything under it may not survive a
// power loss, with a key per problem.
func (m *durModel) treeProblems(p string, withOwnEntry bool) (keys, msgs []string) {
	add := func(k, msg string) { keys, msgs = append(keys, k), append(msgs, msg) }
	if withOwnEntry {
		if k, e := m.entryProblem(p); e != "" {
			add(k, e)
		}
	} else if _, ok := m.nodes[p]; !ok {
		add("missing "+m.rel(p), fmt.Sprintf("%s does not exist", m.rel(p)))
	}
	for _, q := range m.subtree(p) {
		n := m.nodes[q]
		if n.dataDirty != 0 {
			add("data "+m.rel(q), fmt.Sprintf("the data of %s, changed by %s, was not fsynced since", m.rel(q), m.line(n.dataDirty)))
		}
		if q != p && n.entryDirty != 0 {
			add("entry "+m.rel(q), fmt.Sprintf("the entry of %s, made by %s, was not followed by an fsync of %s", m.rel(q), m.line(n.entryDirty), m.rel(filepath.Dir(q))))
		}
		for name, idx := range n.removed {
			add("removed "+m.rel(filepath.Join(q, name)), fmt.Sprintf("the removal of %s by %s was not followed by an fsync of %s", m.rel(filepath.Join(q, name)), m.line(idx), m.rel(q)))
		}
	}
	return keys, msgs
}

func (m *durModel) fileProblems(p string) (keys, msgs []string) {
	if k, e := m.entryProblem(p); e != "" {
		keys, msgs = append(keys, k), append(msgs, e)
	}
	if n := m.nodes[p]; n != nil && n.dataDirty != 0 {
		keys = append(keys, "data "+m.rel(p))
		msgs = append(msgs, fmt.Sprintf("the data of %s, changed by %s, was not fsynced since", m.rel(p), m.line(n.dataDirty)))
	}
	return keys, msgs
}

func (m *durModel) snapDir(v int64) string {
	return filepath.Join(m.root, snapshotDirName(v))
}

// possibleCurrents returns the versions "current" may name after a power
// loss now.
func (m *durModel) possibleCurrents() []int64 {
	var out []int64
	if m.curDurable >= 0 {
		out = append(out, m.curDurable)
	}
	for _, p := range m.curPending {
		if !slices.Contains(out, p.v) {
			out = append(out, p.v)
		}
	}
	return out
}

// segments returns the log segments (base version to path), sorted by
// base.
func (m *durModel) segments() (bases []int64, paths map[int64]string) {
	paths = map[int64]string{}
	wal := filepath.Join(m.root, walDirName)
	for p := range m.nodes {
		if filepath.Dir(p) != wal || !strings.HasSuffix(p, ".wal") {
			continue
		}
		b, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(p), ".wal"), 10, 64)
		if err != nil {
			continue
		}
		bases = append(bases, b)
		paths[b] = p
	}
	slices.Sort(bases)
	return bases, paths
}

// checkLog checks that the segments holding versions up to v are durable
// and, for each possible current c, that the log reaches back to c+1.
func (m *durModel) checkLog(rule string, at int, v int64, why string) {
	bases, paths := m.segments()
	for _, b := range bases {
		if b > v {
			continue
		}
		keys, msgs := m.fileProblems(paths[b])
		for i := range keys {
			m.violate(rule, keys[i], at, "%s, but %s", why, msgs[i])
		}
	}
	for _, c := range m.possibleCurrents() {
		if c >= v || len(bases) == 0 && c == 0 {
			continue
		}
		if len(bases) == 0 || bases[0] > c+1 {
			m.violate(rule, fmt.Sprintf("log reach %d", c), at, "%s, but after a power loss current may name snapshot %d and the log starts at %v", why, c, bases)
		}
	}
}

func (m *durModel) checkSnapshots(rule string, at int, why string) {
	for _, c := range m.possibleCurrents() {
		keys, msgs := m.treeProblems(m.snapDir(c), true)
		for i := range keys {
			m.violate(rule, keys[i], at, "%s, and current may name snapshot %d after a power loss, but %s", why, c, msgs[i])
		}
	}
}

func (m *durModel) rollbackProblem() string {
	p := filepath.Join(m.root, rollbackFileName)
	if _, ok := m.nodes[p]; !ok {
		return "there is no rollback file"
	}
	if _, msgs := m.fileProblems(p); len(msgs) > 0 {
		return msgs[0]
	}
	return ""
}

func (m *durModel) run(calls []*straceCall) {
	// events in trace order: a call is checked at its first line and
	// takes effect at its last
	type event struct {
		idx   int
		start bool
		c     *straceCall
	}
	var evs []event
	for _, c := range calls {
		m.startOf[c.end+1] = c.start + 1
		evs = append(evs, event{c.start, true, c})
		if c.ret != "?" {
			evs = append(evs, event{c.end, false, c})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].idx != evs[j].idx {
			return evs[i].idx < evs[j].idx
		}
		return evs[i].start && !evs[j].start
	})
	for _, e := range evs {
		if e.start {
			m.check(e.c)
		} else if e.c.retInt() >= 0 {
			m.apply(e.c)
		}
	}
}

// fsoCallPaths returns the paths a call changes or syncs, as the model needs
// them: for a descriptor call the descriptor's, for a path call the path,
// for a rename both.
func fsoCallPaths(c *straceCall) (from, to string, ok bool) {
	a := c.args
	switch c.name {
	case "renameat", "renameat2":
		if len(a) < 4 {
			return "", "", false
		}
		f, ok1 := fsoResolve(a[0], a[1])
		t, ok2 := fsoResolve(a[2], a[3])
		return f, t, ok1 && ok2
	case "rename", "link", "symlink":
		if len(a) < 2 {
			return "", "", false
		}
		f, ok1 := fsoResolve("AT_FDCWD<"+"/"+">", a[0])
		t, ok2 := fsoResolve("AT_FDCWD<"+"/"+">", a[1])
		return f, t, ok1 && ok2
	case "linkat":
		if len(a) < 4 {
			return "", "", false
		}
		f, ok1 := fsoResolve(a[0], a[1])
		t, ok2 := fsoResolve(a[2], a[3])
		return f, t, ok1 && ok2
	case "symlinkat":
		if len(a) < 3 {
			return "", "", false
		}
		t, ok := fsoResolve(a[1], a[2])
		return "", t, ok
	case "openat", "mkdirat", "unlinkat":
		if len(a) < 2 {
			return "", "", false
		}
		p, ok := fsoResolve(a[0], a[1])
		return p, p, ok
	case "open", "creat", "mkdir", "unlink", "rmdir", "truncate":
		if len(a) < 1 {
			return "", "", false
		}
		p, ok := fsoResolve("AT_FDCWD</>", a[0])
		return p, p, ok
	case "copy_file_range":
		if len(a) < 3 {
			return "", "", false
		}
		p, ok := fsoFdPath(a[2])
		return p, p, ok
	default:
		if len(a) < 1 {
			return "", "", false
		}
		p, ok := fsoFdPath(a[0])
		return p, p, ok
	}
}

// check runs the rules at the start of a call.
func (m *durModel) check(c *straceCall) {
	at := c.start + 1
	from, to, ok := fsoCallPaths(c)
	if !ok {
		return
	}
	switch c.name {
	case "write", "pwrite64":
		if from == m.markFile && len(c.args) > 1 {
			b, _, _ := fsoString(c.args[1])
			m.marker(strings.TrimSpace(string(b)), at)
		}
	case "renameat", "renameat2", "rename":
		if !m.under(from) || !m.under(to) {
			return
		}
		if strings.Contains(c.args[len(c.args)-1], "RENAME_EXCHANGE") {
			m.violate("model", "exchange "+m.rel(to), at, "RENAME_EXCHANGE is not modelled")
		}
		fb, tb := filepath.Base(from), filepath.Base(to)
		if strings.Contains(tb, prunedSuffix) {
			if v, isSnap := parseSnapshotDirName(fb); isSnap {
				m.checkSnapRemoval(v, at)
			}
			return
		}
		if fsoIsTmpName(fb) && !fsoIsTmpName(tb) && !m.inTmpDir(to) {
			m.stats.tmpRenames++
			keys, msgs := m.treeProblems(from, false)
			for i := range keys {
				m.violate("tmp-rename", keys[i], at, "%s is renamed to %s, but %s", m.rel(from), m.rel(to), msgs[i])
			}
		}
		if to == filepath.Join(m.root, currentFileName) {
			m.checkCurrent(from, at)
		}
	case "unlinkat", "unlink", "rmdir":
		if !m.under(from) {
			return
		}
		rel := strings.TrimPrefix(from, m.root+"/")
		first, _, _ := strings.Cut(rel, "/")
		if v, isSnap := parseSnapshotDirName(first); isSnap && m.nodes[from] != nil {
			m.checkSnapRemoval(v, at)
		}
		if filepath.Dir(from) == filepath.Join(m.root, walDirName) && strings.HasSuffix(from, ".wal") && m.nodes[from] != nil {
			m.checkSegmentRemoval(from, at)
		}
		if from == filepath.Join(m.root, rollbackFileName) && m.nodes[from] != nil {
			m.checkRollbackDone(at)
		}
	case "ftruncate", "truncate":
		if m.under(from) && filepath.Dir(from) == filepath.Join(m.root, walDirName) {
			m.stats.cuts++
			if p := m.rollbackProblem(); p != "" {
				m.violate("remove", "cut "+m.rel(from), at, "the log segment %s is cut, but %s", m.rel(from), p)
			}
		}
	}
}

func (m *durModel) marker(text string, at int) {
	f := strings.Fields(text)
	switch {
	case len(f) == 0:
	case f[0] == "phase":
		m.phase = strings.Join(f[1:], " ")
	case f[0] == "acked" && len(f) == 2:
		v, _ := strconv.ParseInt(f[1], 10, 64)
		m.stats.acks++
		if m.walWrites == 0 {
			m.violate("ack", fmt.Sprintf("nowrite %d", v), at, "version %d is acknowledged, but no write to a log segment came since the previous one", v)
		}
		m.walWrites = 0
		why := fmt.Sprintf("Commit of version %d returned", v)
		m.checkLog("ack", at, v, why)
		m.checkSnapshots("ack", at, why)
		m.checkCurrentFile("ack", at, why)
		if !m.rootChecked {
			m.rootChecked = true
			if n := m.nodes[m.root]; n != nil && n.entryDirty != 0 {
				m.violate("ack", "root entry", at, "the database directory %s was made by %s and its parent %s was not fsynced before the first acknowledged commit: a power loss may lose the whole directory",
					m.root, m.line(n.entryDirty), filepath.Dir(m.root))
			}
		}
	case f[0] == "closed":
		m.stats.closes++
		keys, msgs := m.treeProblems(m.root, false)
		for i := range keys {
			switch {
			case keys[i] == "entry "+m.rel(filepath.Join(m.root, lockFileName)):
				// the lock file holds nothing
			case strings.HasPrefix(keys[i], "removed "):
				// a removal that may be undone loses nothing
			default:
				m.violate("close", keys[i], at, "Close returned, but %s", msgs[i])
			}
		}
		m.checkSnapshots("close", at, "Close returned")
	}
}

// checkCurrentFile checks that "current" itself is durable: its data, and
// its entry unless it was just renamed (then either version may survive,
// which checkSnapshots covers).
func (m *durModel) checkCurrentFile(rule string, at int, why string) {
	p := filepath.Join(m.root, currentFileName)
	n := m.nodes[p]
	if n == nil {
		m.violate(rule, "no current", at, "%s, but there is no current file", why)
		return
	}
	if n.dataDirty != 0 {
		m.violate(rule, "data "+m.rel(p), at, "%s, but the data of current, changed by %s, was not fsynced", why, m.line(n.dataDirty))
	}
}

func (m *durModel) checkCurrent(from string, at int) {
	m.stats.currents++
	n := m.nodes[from]
	if n == nil || len(n.data) != currentFileSize {
		m.violate("current", "content "+m.line(at), at, "cannot tell what %s names: its last write was not seen whole", m.rel(from))
		return
	}
	v, err := decodeCurrent(from, n.data)
	if err != nil {
		m.violate("current", "content "+m.line(at), at, "%v", err)
		return
	}
	why := fmt.Sprintf("current is replaced to name snapshot %d", v)
	keys, msgs := m.treeProblems(m.snapDir(v), true)
	for i := range keys {
		m.violate("current", keys[i], at, "%s, but %s", why, msgs[i])
	}
	m.checkLog("current", at, v, why)
	for _, c := range m.possibleCurrents() {
		if v < c {
			if p := m.rollbackProblem(); p != "" {
				m.violate("current", fmt.Sprintf("back %d", v), at, "%s, back from %d, but %s", why, c, p)
			}
			break
		}
	}
}

func (m *durModel) checkSnapRemoval(v int64, at int) {
	m.stats.snapRemovals++
	if slices.Contains(m.possibleCurrents(), v) {
		m.violate("remove", fmt.Sprintf("snapshot %d", v), at, "snapshot %d is removed, but current may name it after a power loss (durable current: %d, renamed since the last fsync of <db>: %v)",
			v, m.curDurable, m.curPending)
	}
}

func (m *durModel) checkSegmentRemoval(p string, at int) {
	// each removal durable before the next, so that a power loss leaves
	// a contiguous run of segments (wal's TruncateFront, TruncateBack)
	if d := m.nodes[filepath.Dir(p)]; d != nil {
		for name, idx := range d.removed {
			if strings.HasSuffix(name, ".wal") {
				m.violate("remove", "contiguous "+m.rel(p), at, "a log segment is removed while the removal of %s by %s is not durable yet (no fsync of <db>/wal between them): "+
					"a power loss may keep the later removal and undo the earlier one, leaving a gap in the log", name, m.line(idx))
				break
			}
		}
	}
	n := m.nodes[p]
	if n.records == 0 {
		return // a segment started ahead, with no record
	}
	bases, _ := m.segments()
	b, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(p), ".wal"), 10, 64)
	i := slices.Index(bases, b)
	if i == 0 && len(bases) > 1 {
		m.stats.frontRemovals++
		last := bases[1] - 1
		for _, c := range m.possibleCurrents() {
			if last > c {
				m.violate("remove", "front "+m.rel(p), at, "the log segment %s (versions %d..%d) is removed, but current may name snapshot %d after a power loss", m.rel(p), b, last, c)
			}
		}
		return
	}
	if prob := m.rollbackProblem(); prob != "" {
		m.violate("remove", "back "+m.rel(p), at, "the log segment %s, holding records, is removed from the back of the log, but %s", m.rel(p), prob)
	}
}

func (m *durModel) checkRollbackDone(at int) {
	m.stats.rollbackDone++
	why := "the rollback file is removed"
	if len(m.curPending) > 0 {
		m.violate("rollback-done", "current", at, "%s, but the replacement of current by %s was not followed by an fsync of <db>", why, m.line(m.curPending[len(m.curPending)-1].idx))
	}
	wal := filepath.Join(m.root, walDirName)
	keys, msgs := m.treeProblems(wal, true)
	for i := range keys {
		m.violate("rollback-done", keys[i], at, "%s, but %s", why, msgs[i])
	}
}

// apply makes a successful call's effect on the model.
func (m *durModel) apply(c *straceCall) {
	idx := c.end + 1
	from, to, ok := fsoCallPaths(c)
	if !ok {
		if c.name == "sync" {
			m.syncAll(c.start + 1)
		}
		return
	}
	switch c.name {
	case "fsync", "fdatasync":
		m.stats.fsyncs++
		if !m.under(from) && from != filepath.Dir(m.root) {
			return
		}
		m.fsync(from, c.start+1)
	case "syncfs":
		m.syncAll(c.start + 1)
	case "write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "truncate", "fallocate", "copy_file_range", "sendfile":
		if !m.under(from) {
			return
		}
		n := m.node(from)
		n.dataDirty = idx
		if c.name == "write" || c.name == "pwrite64" {
			if b, full, ok := fsoString(c.args[1]); ok && full {
				n.data = b
			} else {
				n.data = nil
			}
		}
		if c.name != "ftruncate" && c.name != "truncate" {
			if strings.HasSuffix(from, ".wal") {
				n.records++
				m.walWrites++
			}
		}
	case "openat", "open", "creat":
		if !m.under(from) {
			return
		}
		flags := ""
		if len(c.args) > 2 && c.name == "openat" {
			flags = c.args[2]
		} else if len(c.args) > 1 {
			flags = c.args[1]
		}
		n, existed := m.nodes[from]
		if !existed && (strings.Contains(flags, "O_CREAT") || c.name == "creat") {
			n = &durNode{entryDirty: idx}
			m.nodes[from] = n
			m.created(from)
		} else if existed && strings.Contains(flags, "O_TRUNC") {
			n.dataDirty, n.data = idx, nil
		}
		if n != nil && strings.Contains(flags, "O_DIRECTORY") {
			n.dir = true
		}
	case "mkdirat", "mkdir":
		if !m.under(from) {
			return
		}
		m.nodes[from] = &durNode{dir: true, entryDirty: idx}
		m.created(from)
	case "unlinkat", "unlink", "rmdir":
		if !m.under(from) {
			return
		}
		for _, p := range m.subtree(from) {
			delete(m.nodes, p)
		}
		m.removedFrom(from, idx)
	case "renameat", "renameat2", "rename":
		if !m.under(from) && !m.under(to) {
			return
		}
		if to == filepath.Join(m.root, currentFileName) {
			if n := m.nodes[from]; n != nil && len(n.data) == currentFileSize {
				if v, err := decodeCurrent(from, n.data); err == nil {
					m.curPending = append(m.curPending, pendingCur{v: v, idx: idx})
				}
			}
		}
		moved := map[string]*durNode{}
		for _, p := range m.subtree(from) {
			moved[to+strings.TrimPrefix(p, from)] = m.nodes[p]
			delete(m.nodes, p)
		}
		for _, p := range m.subtree(to) {
			delete(m.nodes, p)
		}
		for p, n := range moved {
			if m.under(p) {
				m.nodes[p] = n
			}
		}
		if m.under(from) {
			m.removedFrom(from, idx)
		}
		if m.under(to) {
			n := m.node(to)
			n.entryDirty = idx
			m.created(to)
		}
	case "linkat", "link", "symlinkat", "symlink":
		if m.under(to) {
			m.nodes[to] = &durNode{entryDirty: idx}
			m.created(to)
		}
	}
}

// created notes that p's entry appeared in its directory: a name removed
// before and made again is no longer a pending removal there.
func (m *durModel) created(p string) {
	if d := m.nodes[filepath.Dir(p)]; d != nil && d.removed != nil {
		delete(d.removed, filepath.Base(p))
	}
	if p != m.root {
		m.node(filepath.Dir(p)).dir = true
	}
}

func (m *durModel) removedFrom(p string, idx int) {
	if p == m.root {
		return
	}
	d := m.node(filepath.Dir(p))
	d.dir = true
	if d.removed == nil {
		d.removed = map[string]int{}
	}
	d.removed[filepath.Base(p)] = idx
}

// fsync applies an fsync of p that started at trace index start: what
// changed before it started is durable.
func (m *durModel) fsync(p string, start int) {
	// the entries in p, also where p is not tracked itself (the parent of
	// the database directory)
	for q, c := range m.nodes {
		if q != p && filepath.Dir(q) == p && c.entryDirty != 0 && c.entryDirty < start {
			c.entryDirty = 0
		}
	}
	n := m.nodes[p]
	if n == nil {
		return
	}
	if n.dataDirty != 0 && n.dataDirty < start {
		n.dataDirty = 0
	}
	for name, idx := range n.removed {
		if idx < start {
			delete(n.removed, name)
		}
	}
	if p == m.root {
		var keep []pendingCur
		for _, pc := range m.curPending {
			if pc.idx < start {
				m.curDurable = pc.v
			} else {
				keep = append(keep, pc)
			}
		}
		m.curPending = keep
	}
}

func (m *durModel) syncAll(start int) {
	for p := range m.nodes {
		m.fsync(p, start)
	}
}

// checkFsyncOrderModel checks that the model has teeth: with one fsync (or
// a few) of the real trace taken out, as if it had not been made, each rule
// must report a violation.
func checkFsyncOrderModel(t *testing.T, dir, markFile string, lines []string, calls []*straceCall) {
	t.Helper()
	root := filepath.Clean(dir)
	path := func(c *straceCall) string {
		p, _, _ := fsoCallPaths(c)
		return p
	}
	isFsync := func(c *straceCall) bool { return c.name == "fsync" || c.name == "fdatasync" }
	marker := func(c *straceCall) string {
		if c.name != "write" || path(c) != markFile || len(c.args) < 2 {
			return ""
		}
		b, _, _ := fsoString(c.args[1])
		return strings.TrimSpace(string(b))
	}
	// first returns the index of the first call from i on that matches
	first := func(from int, match func(c *straceCall) bool) int {
		if from < 0 {
			return -1
		}
		for i := from; i < len(calls); i++ {
			if match(calls[i]) {
				return i
			}
		}
		return -1
	}
	renameTo := func(re string) func(c *straceCall) bool {
		r := regexp.MustCompile(re)
		return func(c *straceCall) bool {
			if !strings.HasPrefix(c.name, "rename") {
				return false
			}
			_, to, _ := fsoCallPaths(c)
			return r.MatchString(to)
		}
	}
	fsyncOf := func(p string) func(c *straceCall) bool {
		return func(c *straceCall) bool { return isFsync(c) && path(c) == p }
	}
	type mutation struct {
		name  string
		rules []string // one of them must be reported
		drop  func() []int
	}
	firstAck := first(0, func(c *straceCall) bool { return strings.HasPrefix(marker(c), "acked ") })
	muts := []mutation{
		{"the fsyncs of the log between two acknowledged commits", []string{"ack"}, func() []int {
			a := first(firstAck, func(c *straceCall) bool { return marker(c) == "acked 12" })
			prev := first(firstAck, func(c *straceCall) bool { return marker(c) == "acked 11" })
			if a < 0 || prev < 0 {
				return nil
			}
			var out []int
			for i := prev + 1; i < a; i++ {
				if isFsync(calls[i]) && strings.HasSuffix(path(calls[i]), ".wal") {
					out = append(out, i)
				}
			}
			return out
		}},
		{"the fsync of current.tmp", []string{"tmp-rename"}, func() []int {
			return []int{first(firstAck, fsyncOf(filepath.Join(root, currentFileName+tmpSuffix)))}
		}},
		{"a snapshot file's fsync in a sync group", []string{"tmp-rename"}, func() []int {
			r := regexp.MustCompile(`/snapshot-[0-9]{20}\.tmp/s-[^/]+/kvs$`)
			return []int{first(firstAck, func(c *straceCall) bool { return isFsync(c) && r.MatchString(path(c)) })}
		}},
		{"the fsync of the database directory after a snapshot's rename", []string{"current"}, func() []int {
			i := first(firstAck, renameTo(`/snapshot-[0-9]{20}$`))
			return []int{first(i, fsyncOf(root))}
		}},
		{"the fsync of the log directory after a segment's rename", []string{"ack"}, func() []int {
			i := first(firstAck, renameTo(`/wal/[0-9]{20}\.wal$`))
			return []int{first(i, fsyncOf(filepath.Join(root, walDirName)))}
		}},
		{"the fsync of the database directory after the rollback file's rename", []string{"remove", "current"}, func() []int {
			i := first(0, renameTo(`/`+rollbackFileName+`$`))
			return []int{first(i, fsyncOf(root))}
		}},
		{"the fsync of the database directory after the rollback moved current back", []string{"remove"}, func() []int {
			i := first(0, renameTo(`/`+rollbackFileName+`$`))
			i = first(i, renameTo(`/`+currentFileName+`$`))
			return []int{first(i, fsyncOf(root))}
		}},
		{"the fsync of the log segment the rollback cut", []string{"rollback-done"}, func() []int {
			i := first(0, func(c *straceCall) bool { return c.name == "ftruncate" && strings.HasSuffix(path(c), ".wal") })
			if i < 0 {
				return nil
			}
			return []int{first(i, fsyncOf(path(calls[i])))}
		}},
	}
	for _, mu := range muts {
		drop := mu.drop()
		if len(drop) == 0 || slices.Contains(drop, -1) {
			t.Errorf("self-check %q: the trace has no such fsync", mu.name)
			continue
		}
		mutated := make([]*straceCall, len(calls))
		for i, c := range calls {
			mutated[i] = c
			if slices.Contains(drop, i) {
				cc := *c
				cc.ret = "-1 EIO (taken out by the self-check)"
				mutated[i] = &cc
			}
		}
		mm := newDurModel(dir, markFile, lines)
		mm.run(mutated)
		found := false
		for _, v := range mm.violations {
			found = found || slices.Contains(mu.rules, v.rule)
		}
		if os.Getenv("MEMIAVL_FSYNCORDER_DEBUG") != "" {
			for _, v := range mm.violationList() {
				if !strings.Contains(v, "<db>/wal, made by") {
					t.Logf("self-check %q: %s", mu.name, v)
				}
			}
		}
		if !found {
			t.Errorf("self-check: without %s (trace line %d), no %v violation is reported", mu.name, calls[drop[0]].start+1, mu.rules)
		}
	}
}
