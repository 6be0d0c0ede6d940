package benchmarks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/internal/sysstat"
	"github.com/seed-6dfbb450/memiavl/internal/workload"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestSyncComparison syncs the same workload into this database and into
// the reference memiavl, each in a child process (the test binary run
// again) so that peak RSS is measured per side, and prints a table:
//
//	MEMIAVL_BENCH_COMPARE=1 go test -run TestSyncComparison -v
//
// Both sides write their log synchronously at each commit without fsync
// (the reference fsyncs its log only when a segment fills and at close;
// this database runs with SyncNone, which fsyncs a segment when it rolls
// to the next and at close), rewrite snapshots in the background every
// MEMIAVL_BENCH_COMPARE_INTERVAL versions (default 200) and keep no older
// snapshot. The workload: MEMIAVL_BENCH_COMPARE_SCALE (default 1) and
// MEMIAVL_BENCH_COMPARE_BLOCKS (default 700), as 'memiavl bench' at its
// defaults. Measured per side:
//
//   - sync throughput: pairs of blocks 2..N per second of ApplyChangeSets +
//     Commit (block generation not counted), and commit latency p50/p99
//     and max (the max includes the commits that switch to a background
//     rewrite);
//   - background rewrites completed and their time from the commit that
//     started them to the commit that switched to them;
//   - peak RSS (VmHWM of the child; includes the workload generator), and
//     the largest anonymous (heap) and file-backed (mapped snapshots, the
//     binary) resident sets read after any commit: each is its own
//     maximum, so the two need not add up to the peak;
//   - disk usage after close;
//   - open + replay of the closed directory;
//   - a synchronous rewrite of the reopened database (offline rewrite),
//     started after a sync(2) of the file systems, its time and its extra
//     memory: the peak growth of the Go heap's objects
//     (sampled every millisecond) and of the resident set (VmHWM after a
//     reset through /proc/self/clear_refs) over their values before it.
//
// Two more children run no database: one only generates the same blocks,
// as ours' side does, the other also converts them for the reference, as
// its side does. Their peak RSS is what the test binary and the
// generator take on their own, and the table also gives each side's peak
// RSS above its own baseline (the median of as many runs as the side's),
// the database's part.
//
// Both must end with the same app hash, and after the offline rewrite,
// reopened (not timed), with the same pairs in every store (a digest of
// them). MEMIAVL_BENCH_COMPARE_RUNS (default
// 1) runs each side that many times, alternating which goes first; the
// table then gives each metric's median and range, and the ratio of the
// medians: on a noisy machine one run of each side is not enough to
// compare them.

const childEnv = "MEMIAVL_BENCH_CHILD"

// implBaseline and implBaselineRef are the comparison's children that run
// no database: the first generates the blocks as ours' side does, the
// second also converts them as the reference's side does.
const (
	implBaseline    = "baseline"
	implBaselineRef = "baseline-ref"
)

type compareResult struct {
	Impl           string    `json:"impl"`
	Pairs          int64     `json:"pairs"`
	SyncSeconds    float64   `json:"sync_seconds"`
	UpdatesPerSec  float64   `json:"updates_per_sec"`
	CommitP50ms    float64   `json:"commit_p50_ms"`
	CommitP99ms    float64   `json:"commit_p99_ms"`
	CommitMaxms    float64   `json:"commit_max_ms"`
	BlockP50ms     float64   `json:"block_p50_ms"`
	BlockP99ms     float64   `json:"block_p99_ms"`
	BlockMaxms     float64   `json:"block_max_ms"`
	Rewrites       []float64 `json:"rewrites_seconds"`
	PeakRSS        int64     `json:"peak_rss_bytes"`
	PeakAnon       int64     `json:"peak_anon_rss_bytes"`
	PeakFile       int64     `json:"peak_file_rss_bytes"`
	DiskBytes      int64     `json:"disk_bytes"`
	OpenSeconds    float64   `json:"open_replay_seconds"`
	Replayed       int64     `json:"replayed_versions"`
	RewriteSeconds float64   `json:"offline_rewrite_seconds"`
	RewriteHeap    int64     `json:"offline_rewrite_heap_growth_bytes"`
	RewriteRSS     int64     `json:"offline_rewrite_rss_growth_bytes"`
	AppHash        string    `json:"app_hash"`
	// Digest hashes every store's pairs after the offline rewrite (see
	// syncTarget.digest)
	Digest string `json:"pairs_digest"`
	// Baseline is the peak RSS of the child that runs no database (set
	// by the parent)
	Baseline int64 `json:"-"`
}

type compareParams struct {
	scale    float64
	blocks   int64
	interval int64
	runs     int64
}

func compareParamsFromEnv() compareParams {
	return compareParams{
		scale:    envFloat("MEMIAVL_BENCH_COMPARE_SCALE", 1),
		blocks:   envInt("MEMIAVL_BENCH_COMPARE_BLOCKS", 700),
		interval: envInt("MEMIAVL_BENCH_COMPARE_INTERVAL", 200),
		runs:     envInt("MEMIAVL_BENCH_COMPARE_RUNS", 1),
	}
}

func TestSyncComparison(t *testing.T) {
	if os.Getenv("MEMIAVL_BENCH_COMPARE") != "1" {
		t.Skip("set MEMIAVL_BENCH_COMPARE=1 to run")
	}
	p := compareParamsFromEnv()
	if p.runs < 1 {
		t.Fatalf("MEMIAVL_BENCH_COMPARE_RUNS=%d: need at least 1", p.runs)
	}
	t.Logf("workload scale %g, %d blocks, snapshot interval %d, %d run(s) per side", p.scale, p.blocks, p.interval, p.runs)
	var ours, ref []compareResult
	for run := int64(0); run < p.runs; run++ {
		// alternate which side goes first, so that a drift of the
		// machine's speed does not favour one side
		order := []string{implOurs, implRef}
		if run%2 == 1 {
			order = []string{implRef, implOurs}
		}
		for _, impl := range order {
			r := runCompareChild(t, impl)
			if impl == implOurs {
				ours = append(ours, r)
			} else {
				ref = append(ref, r)
			}
		}
	}
	for _, r := range append(slices.Clone(ours), ref...) {
		if r.AppHash != ours[0].AppHash {
			t.Errorf("app hashes differ: %s %s, ours %s", r.Impl, r.AppHash, ours[0].AppHash)
		}
		if r.Digest != ours[0].Digest {
			t.Errorf("pairs after the offline rewrite differ: %s %s, ours %s", r.Impl, r.Digest, ours[0].Digest)
		}
	}
	// each side's baseline, as many times as each side ran: its median
	// is subtracted from the side's peak RSS
	for _, side := range []struct {
		impl, what string
		rs         []compareResult
	}{
		{implBaseline, "generating the blocks", ours},
		{implBaselineRef, "generating the blocks and converting them for the reference", ref},
	} {
		var peaks, anon, file []float64
		for run := int64(0); run < p.runs; run++ {
			b := runCompareChild(t, side.impl)
			peaks = append(peaks, float64(b.PeakRSS))
			anon = append(anon, float64(b.PeakAnon))
			file = append(file, float64(b.PeakFile))
		}
		for i := range side.rs {
			side.rs[i].Baseline = int64(median(peaks))
		}
		t.Logf("%s (the test binary %s, no database): peak RSS %.1f MiB (anonymous %.1f, file-backed %.1f), median of %d",
			side.impl, side.what, median(peaks)/(1<<20), median(anon)/(1<<20), median(file)/(1<<20), len(peaks))
	}
	t.Log("\n" + formatComparison(ours, ref))
}

// runCompareChild runs one side of the comparison in a child process and
// returns its result.
func runCompareChild(t *testing.T, impl string) compareResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+impl)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s child: %v\n%s", impl, err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if s, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r compareResult
			if err := json.Unmarshal([]byte(s), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("%s child printed no result:\n%s", impl, out.String())
	return compareResult{}
}

// compareMetrics are the rows of the comparison table.
var compareMetrics = []struct {
	name, unit  string
	value       func(compareResult) float64
	lowerBetter bool
}{
	{"sync throughput", "updates/s", func(r compareResult) float64 { return r.UpdatesPerSec }, false},
	// a block is the changes' apply and the commit: the like-for-like
	// latency, as ours hashes a store's changes in ApplyChangeSets (in
	// parallel, stores of 64 or more pairs) and the reference in Commit
	{"block latency p50", "ms", func(r compareResult) float64 { return r.BlockP50ms }, true},
	{"block latency p99", "ms", func(r compareResult) float64 { return r.BlockP99ms }, true},
	{"block latency max", "ms", func(r compareResult) float64 { return r.BlockMaxms }, true},
	// Commit alone: not the same work on both sides (see above)
	{"commit latency p50", "ms", func(r compareResult) float64 { return r.CommitP50ms }, true},
	{"commit latency p99", "ms", func(r compareResult) float64 { return r.CommitP99ms }, true},
	{"commit latency max", "ms", func(r compareResult) float64 { return r.CommitMaxms }, true},
	{"peak RSS", "MiB", func(r compareResult) float64 { return float64(r.PeakRSS) / (1 << 20) }, true},
	{"peak RSS above the baseline", "MiB", func(r compareResult) float64 { return float64(r.PeakRSS-r.Baseline) / (1 << 20) }, true},
	{"peak RSS, anonymous part", "MiB", func(r compareResult) float64 { return float64(r.PeakAnon) / (1 << 20) }, true},
	{"peak RSS, file-backed part", "MiB", func(r compareResult) float64 { return float64(r.PeakFile) / (1 << 20) }, true},
	{"disk usage", "MiB", func(r compareResult) float64 { return float64(r.DiskBytes) / (1 << 20) }, true},
	{"open + replay", "s", func(r compareResult) float64 { return r.OpenSeconds }, true},
	{"offline rewrite", "s", func(r compareResult) float64 { return r.RewriteSeconds }, true},
	{"offline rewrite, heap growth", "MiB", func(r compareResult) float64 { return float64(r.RewriteHeap) / (1 << 20) }, true},
	{"offline rewrite, RSS growth", "MiB", func(r compareResult) float64 { return float64(r.RewriteRSS) / (1 << 20) }, true},
	{"background rewrite, mean", "s", func(r compareResult) float64 {
		if len(r.Rewrites) == 0 {
			// no rewrite completed: the run ranks as the slowest,
			// and the table shows it (+Inf in the range)
			return math.Inf(1)
		}
		return mean(r.Rewrites)
	}, true},
}

// formatComparison prints a row per metric: each side's value, or with
// several runs its median and range, and the ratio of ours to the
// reference's (of the medians).
func formatComparison(ours, ref []compareResult) string {
	var b strings.Builder
	cell := func(rs []compareResult, f func(compareResult) float64) (string, float64) {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		med := median(xs)
		if len(xs) == 1 {
			return fmt.Sprintf("%.4g", med), med
		}
		return fmt.Sprintf("%.4g (%.4g-%.4g)", med, slices.Min(xs), slices.Max(xs)), med
	}
	what := "value"
	if len(ours) > 1 {
		what = fmt.Sprintf("median (range) of %d", len(ours))
	}
	fmt.Fprintf(&b, "| %-36s | %-32s | %-32s | %8s | |\n", "metric", "ours, "+what, "refmemiavl, "+what, "ours/ref")
	fmt.Fprintf(&b, "|%s|%s|%s|%s|---|\n", strings.Repeat("-", 38), strings.Repeat("-", 34), strings.Repeat("-", 34), strings.Repeat("-", 10))
	for _, m := range compareMetrics {
		oc, ov := cell(ours, m.value)
		rc, rv := cell(ref, m.value)
		note := "higher is better"
		if m.lowerBetter {
			note = "lower is better"
		}
		fmt.Fprintf(&b, "| %-36s | %32s | %32s | %7.2fx | %s |\n", m.name+" ("+m.unit+")", oc, rc, ov/rv, note)
	}
	for i := range ours {
		fmt.Fprintf(&b, "\nrun %d: background rewrites completed: ours %d, refmemiavl %d; versions replayed at open: ours %d, refmemiavl %d",
			i+1, len(ours[i].Rewrites), len(ref[i].Rewrites), ours[i].Replayed, ref[i].Replayed)
	}
	fmt.Fprintf(&b, "\napp hash: ours %s, refmemiavl %s\n", ours[0].AppHash, ref[0].AppHash)
	fmt.Fprintf(&b, "pairs after the offline rewrite: ours %s, refmemiavl %s\n", ours[0].Digest, ref[0].Digest)
	return b.String()
}

// median returns the median of xs (the mean of the middle two for an even
// count), NaN for none or when one is NaN (which no order ranks).
func median(xs []float64) float64 {
	if len(xs) == 0 || slices.ContainsFunc(xs, math.IsNaN) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// syncTarget is one side of the comparison.
type syncTarget interface {
	// prepare converts a block's changes to the database's own types,
	// outside the timed part; apply applies what it returned
	prepare(css []wal.ChangeSet) any
	apply(changes any) error
	commit() ([]byte, error)
	// appHash is the last commit's app hash
	appHash() []byte
	snapshotVersion() int64
	version() int64
	// digest is a hash of every store's name and pairs, in order, read
	// from the database's latest version
	digest() (string, error)
	close() error
}

// pairDigest hashes stores' names and pairs as digest does: each store
// (in name order) calls add for each pair in key order.
type pairDigest struct {
	h     hash.Hash
	pairs int
}

func newPairDigest() *pairDigest { return &pairDigest{h: sha256.New()} }

func (d *pairDigest) field(b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
}

// pairIterator is what both sides' tree iterators offer.
type pairIterator interface {
	Valid() bool
	Next()
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// store hashes the store name and the pairs of it, which it closes.
func (d *pairDigest) store(name string, it pairIterator) error {
	d.field([]byte(name))
	for ; it.Valid(); it.Next() {
		d.field(it.Key())
		d.field(it.Value())
		d.pairs++
	}
	return errors.Join(it.Error(), it.Close())
}

// sum returns the digest, with the number of pairs hashed (the workload
// always leaves some: a digest of none is an error).
func (d *pairDigest) sum() (string, error) {
	if d.pairs == 0 {
		return "", errors.New("no pairs to hash")
	}
	return fmt.Sprintf("%d pairs, sha256 %x", d.pairs, d.h.Sum(nil)), nil
}

type oursTarget struct{ db *multitree.DB }

func (o oursTarget) prepare(css []wal.ChangeSet) any { return css }
func (o oursTarget) apply(changes any) error {
	return o.db.ApplyChangeSets(changes.([]wal.ChangeSet))
}
func (o oursTarget) commit() ([]byte, error) {
	info, err := o.db.Commit()
	if err != nil {
		return nil, err
	}
	return info.Hash(), nil
}
func (o oursTarget) appHash() []byte        { return o.db.LastCommitInfo().Hash() }
func (o oursTarget) snapshotVersion() int64 { return o.db.SnapshotVersion() }
func (o oursTarget) version() int64         { return o.db.Version() }
func (o oursTarget) close() error           { return o.db.Close() }
func (o oursTarget) digest() (string, error) {
	v, err := o.db.View()
	if err != nil {
		return "", err
	}
	defer v.Release()
	d := newPairDigest()
	names := v.StoreNames()
	slices.Sort(names)
	for _, name := range names {
		if err := d.store(name, v.Tree(name).Iterator(nil, nil, true)); err != nil {
			return "", err
		}
	}
	return d.sum()
}

type refTarget struct{ db *refmemiavl.DB }

func (r refTarget) prepare(css []wal.ChangeSet) any { return RefChangeSets(css) }
func (r refTarget) apply(changes any) error {
	return r.db.ApplyChangeSets(changes.([]*refmemiavl.NamedChangeSet))
}
func (r refTarget) commit() ([]byte, error) {
	if _, err := r.db.Commit(); err != nil {
		return nil, err
	}
	return RefCommitInfo(r.db.LastCommitInfo()).Hash(), nil
}
func (r refTarget) appHash() []byte        { return RefCommitInfo(r.db.LastCommitInfo()).Hash() }
func (r refTarget) snapshotVersion() int64 { return r.db.SnapshotVersion() }
func (r refTarget) version() int64         { return r.db.Version() }
func (r refTarget) close() error           { return r.db.Close() }
func (r refTarget) digest() (string, error) {
	d := newPairDigest()
	trees := slices.Clone(r.db.Trees())
	slices.SortFunc(trees, func(a, b refmemiavl.NamedTree) int { return strings.Compare(a.Name, b.Name) })
	for _, nt := range trees {
		if err := d.store(nt.Name, nt.Tree.Iterator(nil, nil, true)); err != nil {
			return "", err
		}
	}
	return d.sum()
}

func openTarget(impl, dir string, p compareParams, stores []string, create bool) (syncTarget, error) {
	switch impl {
	case implOurs:
		db, err := multitree.Open(dir, multitree.Options{
			CreateIfMissing:  create,
			InitialStores:    stores,
			SnapshotInterval: p.interval,
			Sync:             wal.SyncNone,
		})
		return oursTarget{db}, err
	case implRef:
		db, err := refmemiavl.Load(dir, refmemiavl.Options{
			CreateIfMissing:   create,
			InitialStores:     stores,
			SnapshotInterval:  uint32(p.interval),
			AsyncCommitBuffer: -1,
			ZeroCopy:          true,
		})
		return refTarget{db}, err
	}
	return nil, fmt.Errorf("unknown implementation %q", impl)
}

// runChild runs one side of TestSyncComparison and prints its result. With
// MEMIAVL_BENCH_CHILD_CPUPROFILE set to a directory, it also writes a CPU
// profile of the whole child there, as <impl>-<pid>.pprof.
func runChild(impl string) int {
	if dir := os.Getenv("MEMIAVL_BENCH_CHILD_CPUPROFILE"); dir != "" {
		stop, err := startCPUProfile(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", impl, os.Getpid())))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", impl, err)
			return 1
		}
		defer stop()
	}
	r, err := syncChild(impl, compareParamsFromEnv())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", impl, err)
		return 1
	}
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
	return 0
}

// startCPUProfile starts a CPU profile into path and returns the function
// that stops it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func syncChild(impl string, p compareParams) (*compareResult, error) {
	gen, err := workload.New(workload.Config{Seed: 1, Scale: p.scale})
	if err != nil {
		return nil, err
	}
	if impl == implBaseline || impl == implBaselineRef {
		return baselineChild(impl, gen, p), nil
	}
	tmp, err := os.MkdirTemp("", "memiavl-compare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, impl)
	tg, err := openTarget(impl, dir, p, gen.Stores(), true)
	if err != nil {
		return nil, err
	}
	res := &compareResult{Impl: impl}
	var (
		commits, blocks []time.Duration
		busy            time.Duration
		hash            []byte
		pending         int64
		pendingAt       time.Time
		lastStart       int64
	)
	for v := int64(1); v <= p.blocks; v++ {
		css := gen.Block(v)
		n := 0
		for _, cs := range css {
			n += len(cs.Pairs)
		}
		in := tg.prepare(css)
		t0 := time.Now()
		if err := tg.apply(in); err != nil {
			return nil, fmt.Errorf("version %d: %w", v, err)
		}
		t1 := time.Now()
		if hash, err = tg.commit(); err != nil {
			return nil, fmt.Errorf("commit %d: %w", v, err)
		}
		t2 := time.Now()
		// sampled after each commit, outside the timed part: the peak's
		// anonymous memory (the heap) and file-backed memory (mapped
		// snapshots and the binary), which VmHWM does not tell apart
		res.PeakAnon = max(res.PeakAnon, sysstat.ProcStatus("RssAnon:"))
		res.PeakFile = max(res.PeakFile, sysstat.ProcStatus("RssFile:"))
		if v > 1 {
			res.Pairs += int64(n)
			busy += t2.Sub(t0)
			commits = append(commits, t2.Sub(t1))
			blocks = append(blocks, t2.Sub(t0))
		}
		// both databases switch to a finished background rewrite in a
		// commit; see startsRewrite for when they start one
		if pending != 0 && tg.snapshotVersion() == pending {
			res.Rewrites = append(res.Rewrites, t2.Sub(pendingAt).Seconds())
			pending = 0
		}
		if pending == 0 && startsRewrite(impl, v, lastStart, p.interval) {
			pending, pendingAt, lastStart = v, t2, v
		}
	}
	res.SyncSeconds = busy.Seconds()
	res.UpdatesPerSec = float64(res.Pairs) / busy.Seconds()
	res.CommitP50ms, res.CommitP99ms, res.CommitMaxms = pct(commits, 0.5), pct(commits, 0.99), pct(commits, 1)
	res.BlockP50ms, res.BlockP99ms, res.BlockMaxms = pct(blocks, 0.5), pct(blocks, 0.99), pct(blocks, 1)
	res.AppHash = hex.EncodeToString(hash)
	if err := tg.close(); err != nil {
		return nil, err
	}
	res.DiskBytes = sysstat.DiskUsage(dir)

	t := time.Now()
	tg, err = openTarget(impl, dir, compareParams{interval: math.MaxInt32}, nil, false)
	if err != nil {
		return nil, err
	}
	res.OpenSeconds = time.Since(t).Seconds()
	res.Replayed = tg.version() - tg.snapshotVersion()
	if res.Replayed == 0 {
		// the offline rewrite would write nothing (ours) or fail (the
		// reference): the last background rewrite holds the last version
		return nil, fmt.Errorf("the snapshot holds the last version %d: nothing for the offline rewrite to write (take a number of blocks that is not a multiple of the interval)", tg.version())
	}
	if h := hex.EncodeToString(tg.appHash()); h != res.AppHash {
		return nil, fmt.Errorf("app hash after open + replay %s, committed %s", h, res.AppHash)
	}
	if o, ok := tg.(oursTarget); ok {
		// the open's check of the snapshot files (which the reference
		// does not have) runs in the background: it ends before the
		// rewrite is timed, which reads and checks the files itself
		if err := o.db.WaitOpenCheck(context.Background()); err != nil {
			return nil, err
		}
	}
	// both sides start the rewrite with no dirty data of their own
	// waiting for the disk (the sync run's log, written without fsyncs
	// by both): the rewrite's fsyncs pay only for what it writes
	syscall.Sync()
	runtime.GC()    // both sides start the rewrite from their live heap
	peak := vmHWM() // the reset below forgets it
	rssBefore := resetPeakRSS()
	heapGrowth := sampleHeap()
	t = time.Now()
	switch x := tg.(type) {
	case oursTarget:
		err = x.db.RewriteSnapshot(context.Background())
	case refTarget:
		if err = x.db.RewriteSnapshot(); err == nil {
			err = x.db.Reload()
		}
	}
	res.RewriteSeconds = time.Since(t).Seconds()
	res.RewriteHeap = heapGrowth()
	if rssBefore > 0 {
		res.RewriteRSS = vmHWM() - rssBefore
	}
	if err != nil {
		return nil, err
	}
	res.PeakRSS = max(peak, vmHWM())
	// Not timed: the rewritten snapshot is opened again, which must give
	// the committed app hash, and its pairs are hashed (Digest), which
	// the parent compares between the sides: a rewrite is only fast if
	// it wrote the right trees. (Right after the rewrite, ours still
	// reports the commit info it had before.)
	if err := tg.close(); err != nil {
		return nil, err
	}
	if tg, err = openTarget(impl, dir, compareParams{interval: math.MaxInt32}, nil, false); err != nil {
		return nil, fmt.Errorf("open after the offline rewrite: %w", err)
	}
	if tg.snapshotVersion() != tg.version() {
		return nil, fmt.Errorf("after the offline rewrite the snapshot is at version %d, the database at %d", tg.snapshotVersion(), tg.version())
	}
	if h := hex.EncodeToString(tg.appHash()); h != res.AppHash {
		return nil, fmt.Errorf("app hash after the offline rewrite %s, committed %s", h, res.AppHash)
	}
	if res.Digest, err = tg.digest(); err != nil {
		return nil, fmt.Errorf("pairs after the offline rewrite: %w", err)
	}
	if err := tg.close(); err != nil {
		return nil, err
	}
	return res, nil
}

// startsRewrite reports whether the commit of version v starts a
// background rewrite, lastStart being the version that started the last
// one (0: none), when none is running: ours starts one once interval
// versions have passed since the last; the reference only at the
// multiples of the interval (a rewrite still running then is not
// started later).
func startsRewrite(impl string, v, lastStart, interval int64) bool {
	if impl == implRef {
		return v%interval == 0
	}
	return v-lastStart >= interval
}

// baselineChild generates the blocks as syncChild does, with no database,
// and returns the peak resident sets. For impl implBaselineRef it also
// converts them for the reference, as the reference's side does.
func baselineChild(impl string, gen *workload.Generator, p compareParams) *compareResult {
	res := &compareResult{Impl: impl}
	var keep any
	for v := int64(1); v <= p.blocks; v++ {
		css := gen.Block(v)
		keep = css
		if impl == implBaselineRef {
			keep = RefChangeSets(css) // as the reference's prepare
		}
		res.PeakAnon = max(res.PeakAnon, sysstat.ProcStatus("RssAnon:"))
		res.PeakFile = max(res.PeakFile, sysstat.ProcStatus("RssFile:"))
	}
	runtime.KeepAlive(keep)
	res.PeakRSS = vmHWM()
	return res
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, max(0, int(p*float64(len(s))+0.5)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

func TestFormatComparison(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3, 1, 2: %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 4, 1, 3, 2: %v", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	res := func(impl string, ups float64, rss int64) compareResult {
		return compareResult{Impl: impl, UpdatesPerSec: ups, PeakRSS: rss << 20, AppHash: "h"}
	}
	out := formatComparison(
		[]compareResult{res(implOurs, 300, 400), res(implOurs, 100, 500), res(implOurs, 200, 450)},
		[]compareResult{res(implRef, 100, 900), res(implRef, 50, 800), res(implRef, 150, 1000)})
	for _, want := range []string{
		"200 (100-300)", "100 (50-150)", "2.00x", // throughput: medians and their ratio
		"450 (400-500)", "900 (800-1000)", "0.50x", // peak RSS
		"median (range) of 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// a run with no completed background rewrite ranks as the slowest
	// (it had ranked as the fastest: a NaN mean, sorted first)
	rw := func(impl string, rewrites ...float64) compareResult {
		return compareResult{Impl: impl, UpdatesPerSec: 1, Rewrites: rewrites, AppHash: "h"}
	}
	out = formatComparison([]compareResult{rw(implOurs, 0.5), rw(implOurs, 0.6), rw(implOurs)},
		[]compareResult{rw(implRef, 0.7), rw(implRef, 0.7), rw(implRef, 0.7)})
	if !strings.Contains(out, "0.6 (0.5-+Inf)") {
		t.Errorf("a run with no completed rewrite is not the slowest:\n%s", out)
	}
	if !math.IsNaN(median([]float64{1, math.NaN(), 2})) {
		t.Error("median with a NaN is not NaN")
	}
	one := formatComparison([]compareResult{res(implOurs, 300, 400)}, []compareResult{res(implRef, 100, 800)})
	if strings.Contains(one, "range") || !strings.Contains(one, "3.00x") {
		t.Errorf("one run's table:\n%s", one)
	}
}
