package wal

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// plEntries returns n entries whose records range from tens of bytes to a
// few KiB, so that records and frame headers cross page boundaries; with
// big set, up to about 14 KiB, so that whole pages lie inside one record's
// body (an SDK block's changeset is often larger than a page).
func plEntries(rng *rand.Rand, from, n int, big bool) []Entry {
	out := make([]Entry, n)
	for i := range out {
		v := int64(from + i)
		e := randEntry(rng, v, smallShape)
		if rng.IntN(3) > 0 {
			n := rng.IntN(2600)
			if big {
				n = rng.IntN(14000)
			}
			e.ChangeSets = append(e.ChangeSets, ChangeSet{Name: "big", Pairs: []KVPair{{Key: []byte("k"), Value: randBytes(rng, n)}}})
		}
		out[i] = e
	}
	return out
}

type plCfg struct {
	policy   SyncPolicy
	async    int
	segSize  int64
	interval time.Duration // GroupInterval; 0: an hour
	big      bool          // records of up to about 14 KiB (plEntries)
}

func (c plCfg) String() string {
	s := fmt.Sprintf("%v/async=%d/seg=%d/interval=%v", c.policy, c.async, c.segSize, c.interval)
	if c.big {
		s += "/big"
	}
	return s
}

func (c plCfg) opts() Options {
	iv := c.interval
	if iv == 0 {
		iv = time.Hour
	}
	return Options{Sync: c.policy, AsyncBuffer: c.async, SegmentSize: c.segSize, GroupCount: 3, GroupInterval: iv}
}

// plPoint is a crash point: the file system state and what was acknowledged.
type plPoint struct {
	st    *plState
	acked int64 // acknowledged by the API
	phase int   // 0: before TruncateBack, 1: during, 2: after
}

const plRollback = 20

// plWorkload runs appends, flushes, RollAt, TruncateFront and TruncateBack
// on fs, taking a crash point before every mutating operation and at the
// end.
func plWorkload(t *testing.T, cfg plCfg, fs *plFS, old, newer []Entry) []plPoint {
	var acked atomic.Int64
	var phase atomic.Int32
	var points []plPoint
	fs.onOp = func(op, p string) {
		points = append(points, plPoint{st: fs.snapshotLocked(op + " " + path.Base(p)), acked: acked.Load(), phase: int(phase.Load())})
	}
	o := cfg.opts()
	o.fs = fs
	l, err := Open(memDir, o)
	if err != nil {
		t.Fatal(err)
	}
	syncAck := cfg.policy == SyncEveryCommit && cfg.async == 0
	appendAll := func(es []Entry) {
		for i, e := range es {
			if err := l.Append(e); err != nil {
				t.Fatal(err)
			}
			if syncAck {
				acked.Store(e.Version)
			}
			if i%4 == 3 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				if cfg.policy != SyncNone {
					acked.Store(e.Version)
				}
			}
		}
	}
	appendAll(old[:10])
	l.RollAt(11)
	appendAll(old[10:15])
	l.rollAhead.Wait()
	if err := l.TruncateFront(8); err != nil {
		t.Fatal(err)
	}
	appendAll(old[15:25])
	phase.Store(1)
	if err := l.TruncateBack(plRollback); err != nil {
		t.Fatal(err)
	}
	acked.Store(plRollback)
	phase.Store(2)
	appendAll(newer[plRollback:28])
	l.RollAt(29)
	appendAll(newer[28:30])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	acked.Store(30)
	fs.mu.Lock()
	points = append(points, plPoint{st: fs.snapshotLocked("end"), acked: 30, phase: 2})
	fs.mu.Unlock()
	return points
}

// plClassify describes where img differs from what the program had written
// (the latest contents of each file).
func plClassify(img plImage) string {
	var names []string
	for n := range img.files {
		if _, ok := parseSegmentName(path.Base(n)); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		d, latest := img.files[name], img.nodes[name].latest()
		if len(d) > len(latest) {
			return "longer-than-written " + path.Base(name)
		}
		diff := -1
		for i := range d {
			if d[i] != latest[i] {
				diff = i
				break
			}
		}
		if diff < 0 {
			continue
		}
		offs, _ := plRecords(latest)
		offs = append(offs, int64(len(latest)))
		r := sort.Search(len(offs), func(i int) bool { return offs[i] > int64(diff) }) - 1
		if r < 0 {
			return "header-of-segment " + path.Base(name)
		}
		off := offs[r]
		var recEnd int64
		if r+1 < len(offs) {
			recEnd = offs[r+1]
		} else {
			recEnd = int64(len(latest))
		}
		later := false
		for i := recEnd; i < int64(len(d)); i++ {
			if d[i] != 0 {
				later = true
				break
			}
		}
		where := "body"
		if int64(diff) < off+frameHeaderSize {
			where = "frame-header"
			if pe := (off/unwrittenPage + 1) * unwrittenPage; pe < off+frameHeaderSize {
				where = fmt.Sprintf("frame-header-straddling-page(%d bytes before the boundary)", pe-off)
			}
		}
		after := "last-record"
		if later {
			after = "records-after"
		}
		return fmt.Sprintf("%s damaged %s/%s at %d (record at %d)", path.Base(name), where, after, diff, off)
	}
	return "prefix-of-written"
}

type plResult struct {
	images int
	fails  map[string][]string // class -> examples
}

func (r *plResult) fail(class, msg string) {
	if r.fails == nil {
		r.fails = map[string][]string{}
	}
	key := class
	if i := strings.Index(key, " at "); i >= 0 {
		key = key[:i]
	}
	// group by kind, not by offset
	if i := strings.Index(key, " damaged "); i >= 0 {
		key = key[i+1:]
	}
	if len(r.fails[key]) < 3 {
		r.fails[key] = append(r.fails[key], msg)
	} else {
		r.fails[key] = append(r.fails[key], "")
	}
}

// plOtherAppends returns options of the other kind of appends than o's
// (synchronous under SyncEveryCommit, or not): a node restarted under
// another policy, or a tool that opens with the defaults.
func plOtherAppends(o Options) Options {
	if o.Sync == SyncEveryCommit && o.AsyncBuffer == 0 {
		o.Sync = SyncGrouped
	} else {
		o.Sync, o.AsyncBuffer = SyncEveryCommit, 0
	}
	return o
}

// plCheck opens one crash image and checks the contract. Every other image
// is opened with the other kind of appends than the workload's: the
// segment's header records how its records were appended, which decides
// what damage a crash can leave.
func plCheck(cfg plCfg, pt plPoint, img plImage, old, newer []Entry, res *plResult, deep bool) {
	res.images++
	class := plClassify(img)
	lb := max(pt.acked, pt.st.syncedLast())
	if pt.phase == 1 {
		lb = min(lb, plRollback)
	}
	o := cfg.opts()
	other := res.images%2 == 0
	if other {
		o = plOtherAppends(o)
	}
	ctx := fmt.Sprintf("%v at %q (acked %d, lb %d, phase %d, opened with the other kind of appends: %v) image %s: %s", cfg, pt.st.label, pt.acked, lb, pt.phase, other, img.desc, class)
	defer func() {
		if r := recover(); r != nil {
			res.fail("panic", fmt.Sprintf("PANIC %v: %s", r, ctx))
		}
	}()
	o.fs = imageFS(img)
	if pt.phase == 1 {
		// the caller knows the rollback it was doing (multitree's
		// rollback file) and redoes it after Open
		o.Discarding = plRollback
	}
	l, err := Open(memDir, o)
	if err != nil {
		res.fail(class, fmt.Sprintf("open: %v; %s", err, ctx))
		return
	}
	defer l.Close()
	first, last := l.FirstVersion(), l.LastVersion()
	if last < lb {
		res.fail("lost-acknowledged", fmt.Sprintf("LastVersion %d < %d; %s", last, lb, ctx))
		return
	}
	if last == 0 {
		return
	}
	got, err := collect(l, first, last)
	if err != nil {
		res.fail("replay "+class, fmt.Sprintf("replay %d..%d: %v; %s", first, last, err, ctx))
		return
	}
	match := func(h []Entry) bool {
		if int(last) > len(h) || len(got) != int(last-first+1) {
			return false
		}
		for i, e := range got {
			if entryDiff(h[int(first)-1+i], e) != "" {
				return false
			}
		}
		return true
	}
	hist := old
	switch {
	case pt.phase == 0 && match(old):
	case pt.phase == 1 && (match(old) || match(newer)):
		if !match(old) {
			hist = newer
		}
	case pt.phase == 2 && match(newer):
		hist = newer
	default:
		res.fail("wrong-entries", fmt.Sprintf("replay %d..%d matches no allowed history; %s", first, last, ctx))
		return
	}
	if !deep || int(last) >= len(hist) {
		return
	}
	// the recovered log takes the next version and reopens
	if err := l.Append(hist[last]); err != nil {
		res.fail("append-after-recovery", fmt.Sprintf("append %d: %v; %s", last+1, err, ctx))
		return
	}
	if err := l.Close(); err != nil {
		res.fail("close-after-recovery", fmt.Sprintf("close: %v; %s", err, ctx))
		return
	}
	l2, err := Open(memDir, o)
	if err != nil {
		res.fail("reopen-after-recovery", fmt.Sprintf("reopen: %v; %s", err, ctx))
		return
	}
	defer l2.Close()
	if l2.LastVersion() != last+1 {
		res.fail("reopen-after-recovery", fmt.Sprintf("reopen LastVersion %d want %d; %s", l2.LastVersion(), last+1, ctx))
		return
	}
	if err := l2.Verify(); err != nil {
		res.fail("reopen-after-recovery", fmt.Sprintf("verify: %v; %s", err, ctx))
	}
}

func plRun(t *testing.T, cfg plCfg, seed uint64, perPoint int) *plResult {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	old := plEntries(rng, 1, 30, cfg.big)
	newer := append(append([]Entry(nil), old[:plRollback]...), plEntries(rng, plRollback+1, 30-plRollback, cfg.big)...)
	fs := newPLFS()
	points := plWorkload(t, cfg, fs, old, newer)
	res := &plResult{}
	for i, pt := range points {
		for j, img := range pt.st.images(rng, perPoint) {
			plCheck(cfg, pt, img, old, newer, res, (i+j)%7 == 0)
		}
	}
	return res
}

// TestPowerLossSweep runs the power-loss model over every policy and mode.
// It reports (t.Error) every contract violation class it finds.
// MEMIAVL_WAL_POWERLOSS_SEEDS sets the number of workloads per configuration.
func TestPowerLossSweep(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	per := 24
	if testing.Short() {
		per = 8
	}
	var cfgs []plCfg
	for _, policy := range []SyncPolicy{SyncEveryCommit, SyncGrouped, SyncNone} {
		for _, async := range []int{0, 3, 8} {
			for _, seg := range []int64{6000, 1 << 20} {
				cfgs = append(cfgs, plCfg{policy, async, seg, 0, false})
			}
		}
		for _, async := range []int{0, 3} {
			cfgs = append(cfgs, plCfg{policy, async, 40000, 0, true})
		}
	}
	// the grouped timer fsyncs (nondeterministic; syncedLast bounds them)
	cfgs = append(cfgs, plCfg{SyncGrouped, 0, 6000, 200 * time.Microsecond, false}, plCfg{SyncGrouped, 8, 1 << 20, 200 * time.Microsecond, false})
	for _, cfg := range cfgs {
		t.Run(cfg.String(), func(t *testing.T) {
			res := &plResult{}
			for k := range uint64(plSeeds()) {
				r := plRun(t, cfg, seed+k, per)
				res.images += r.images
				for c, ex := range r.fails {
					if res.fails == nil {
						res.fails = map[string][]string{}
					}
					for _, e := range ex {
						if e == "" || len(res.fails[c]) >= 2 {
							res.fails[c] = append(res.fails[c], "")
						} else {
							res.fails[c] = append(res.fails[c], e+fmt.Sprintf(" [seed %d]", seed+k))
						}
					}
				}
			}
			t.Logf("%v: %d images", cfg, res.images)
			res.report(t)
		})
	}
}

// report fails t with each class of violation found, and up to two
// examples of it.
func (r *plResult) report(t *testing.T) {
	t.Helper()
	keys := make([]string, 0, len(r.fails))
	for k := range r.fails {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var shown []string
		for _, e := range r.fails[k] {
			if e != "" {
				shown = append(shown, e)
			}
		}
		t.Errorf("%d images: %s\n  e.g. %s", len(r.fails[k]), k, strings.Join(shown, "\n  e.g. "))
	}
}

// plSeeds is how many workloads (seeds) each configuration runs
// (MEMIAVL_WAL_POWERLOSS_SEEDS; default 40, 2 with -short).
func plSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("MEMIAVL_WAL_POWERLOSS_SEEDS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 2
	}
	return 40
}
