package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-6dfbb450/memiavl/internal/sysstat"
	"github.com/seed-6dfbb450/memiavl/internal/workload"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// Defaults of the bench command, sized so that it takes 10-20 seconds on
// a machine with two cores.
const (
	defaultBenchBlocks   = 700
	defaultBenchInterval = 200
)

type benchOptions struct {
	dir              string
	seed             uint64
	scale            float64
	blocks           int64
	snapshotInterval int64
	asyncBuffer      int
	rateLimit        int64
	sync             string
	json             bool
}

// Latency is a summary of durations, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Rewrite is one background snapshot rewrite seen by the benchmark: the
// version it wrote and the time from the commit that started it to the
// commit that switched to it.
type Rewrite struct {
	Version    int64   `json:"version"`
	Seconds    float64 `json:"seconds"`
	SwitchedAt int64   `json:"switched_at_version"`
}

// BenchResult is what bench prints (with --json, as is).
type BenchResult struct {
	Dir              string  `json:"dir"`
	Seed             uint64  `json:"seed"`
	Scale            float64 `json:"scale"`
	Blocks           int64   `json:"blocks"`
	Stores           int     `json:"stores"`
	SnapshotInterval int64   `json:"snapshot_interval"`
	AsyncBuffer      int     `json:"async_buffer"`
	RewriteRateLimit int64   `json:"rewrite_rate_limit,omitempty"`
	Sync             string  `json:"sync"`

	GenesisPairs   int     `json:"genesis_pairs"`
	GenesisSeconds float64 `json:"genesis_seconds"`

	// Blocks 2..Blocks: applying the changesets and committing.
	Pairs          int64   `json:"pairs"`
	SyncSeconds    float64 `json:"sync_seconds"`
	UpdatesPerSec  float64 `json:"updates_per_sec"`
	BlocksPerSec   float64 `json:"blocks_per_sec"`
	CommitLatency  Latency `json:"commit_latency"`
	BlockLatency   Latency `json:"block_latency"`
	GenerateSecond float64 `json:"generate_seconds"`

	Rewrites          []Rewrite `json:"rewrites"`
	RewriteUnfinished int64     `json:"rewrite_unfinished_version,omitempty"`
	// RewriteUnfinishedCurrent: that rewrite had made its snapshot current
	// before the close (the reopen starts from it).
	RewriteUnfinishedCurrent bool `json:"rewrite_unfinished_current,omitempty"`

	CloseSeconds     float64 `json:"close_seconds"`
	OpenSeconds      float64 `json:"open_replay_seconds"`
	ReplayedVersions int64   `json:"replayed_versions"`

	DiskBytes     int64 `json:"disk_bytes"`
	SnapshotBytes int64 `json:"snapshot_bytes"`
	WALBytes      int64 `json:"wal_bytes"`
	PeakRSSBytes  int64 `json:"peak_rss_bytes"`

	Version     int64   `json:"version"`
	AppHash     string  `json:"app_hash"`
	WallSeconds float64 `json:"wall_seconds"`
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Sync a generated chain workload into a database and report throughput",
		Long: `bench generates a deterministic chain workload (bank, staking and lockup
stores; a genesis block, then blocks of a few thousand inserts, updates and
deletes at --scale 1), syncs it block by block into a database with a
background snapshot rewrite every --snapshot-interval versions, then closes
the database, reopens it (replaying the log since the last snapshot) and
reports:

  - throughput (updates/s): pairs set or deleted per second of blocks 2..N,
    counting the time spent in ApplyChangeSets and Commit (not the
    generation of the blocks);
  - commit latency (Commit alone) and block latency (apply + commit)
    percentiles p50/p90/p99/max;
  - snapshot rewrites: for each, the time from the commit that started it to
    the commit that switched to the new snapshot;
  - close time, open + replay time and the number of versions replayed;
  - disk usage (snapshots, log) and the process's peak RSS (VmHWM), which
    includes the workload generator's own memory.

Without --dir it works in a temporary directory removed at the end. With
--dir the directory must be empty or absent, and is kept. An interrupt
(Ctrl-C, SIGTERM) stops it after the block in progress, with exit code 1;
the database is closed, and the temporary directory removed. A second
interrupt ends it at once, as a crash would, leaving the directory (the
temporary one too) behind.

At its defaults it takes 10-20 seconds on a machine with two cores.`,
		Example: `  memiavl bench
  memiavl bench --scale 0.1 --blocks 200 --json
  memiavl bench --dir /tmp/bench --sync every-commit --async-buffer 16`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = argPath(o.dir)
			return runBench(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "database directory (empty or absent; default: a temporary directory, removed after)")
	f.Uint64Var(&o.seed, "seed", 1, "workload seed")
	f.Float64Var(&o.scale, "scale", 1, "workload scale: multiplies the genesis state and the pairs per block (at most 100; memory grows with it)")
	f.Int64Var(&o.blocks, "blocks", defaultBenchBlocks, "number of blocks (versions), including genesis")
	f.Int64Var(&o.snapshotInterval, "snapshot-interval", defaultBenchInterval, "versions between background snapshot rewrites (negative disables them)")
	f.IntVar(&o.asyncBuffer, "async-buffer", 0, "write-ahead log queue length (0: each commit writes its log entry before returning)")
	f.StringVar(&o.sync, "sync", "grouped", "log fsync policy: every-commit, grouped or none")
	f.Int64Var(&o.rateLimit, "rewrite-rate-limit", 0, fmt.Sprintf("bytes per second a background snapshot rewrite may write (0: no bound; else at least %d)", multitree.MinRewriteRateLimit))
	f.BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

func runBench(stdout, stderr io.Writer, o benchOptions) (err error) {
	switch {
	case o.blocks < 1:
		return usagef("--blocks must be at least 1")
	case o.snapshotInterval == 0:
		return usagef("--snapshot-interval must not be 0")
	case o.asyncBuffer < 0:
		return usagef("--async-buffer must not be negative")
	case o.rateLimit < 0 || o.rateLimit > 0 && o.rateLimit < multitree.MinRewriteRateLimit:
		return usagef("--rewrite-rate-limit must be 0 or at least %d", multitree.MinRewriteRateLimit)
	case o.scale <= 0:
		return usagef("--scale must be positive")
	}
	policy, err := parseSyncPolicy(o.sync)
	if err != nil {
		return err
	}
	gen, err := workload.New(workload.Config{Seed: o.seed, Scale: o.scale})
	if err != nil {
		return usageError{err}
	}
	// an interrupt stops the run between blocks, so that the database is
	// closed and a temporary directory removed (caught from here on, before
	// either exists)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// a second signal ends the process at once (the default action, once
	// stop ran): a large block may take long to finish
	// the message below comes from another goroutine than the progress
	stderr = &lockedWriter{w: stderr}
	done := make(chan struct{})
	defer close(done) // before stop: no message at the end of a run
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
			stop()
			select {
			case <-done:
			default:
				fmt.Fprintln(stderr, "bench: interrupted; stopping after the block in progress (interrupt again to stop at once)")
			}
		}
	}()

	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "memiavl-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "db")
	} else if err := checkDirDestination(dir); err != nil {
		return fmt.Errorf("--dir: %w", err)
	} else if db := enclosingDatabase(dir); db != "" {
		return fmt.Errorf("--dir %s is inside the database directory %s", dir, db)
	} else if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("--dir %s is not empty", dir)
	}

	wallStart := time.Now()
	res := &BenchResult{
		Dir: o.dir, Seed: o.seed, Scale: gen.Config().Scale, Blocks: o.blocks, Stores: len(gen.Stores()),
		SnapshotInterval: o.snapshotInterval, AsyncBuffer: o.asyncBuffer, Sync: policy.String(),
		RewriteRateLimit: o.rateLimit, Rewrites: []Rewrite{},
	}
	opts := multitree.Options{
		CreateIfMissing:   true,
		InitialStores:     gen.Stores(),
		SnapshotInterval:  o.snapshotInterval,
		AsyncCommitBuffer: o.asyncBuffer,
		Sync:              policy,
		RewriteRateLimit:  o.rateLimit,
	}
	db, err := multitree.Open(dir, opts)
	if err != nil {
		if errors.Is(err, multitree.ErrInvalidOptions) {
			return usageError{err} // every option comes from a flag
		}
		return err
	}
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()
	fmt.Fprintf(stderr, "bench: %d blocks (scale %g, seed %d) into %s\n", o.blocks, res.Scale, o.seed, dir)

	var (
		commitLat, blockLat []time.Duration
		genTime, syncTime   time.Duration
		pending             *Rewrite
		pendingStart        time.Time
		lastStart           int64 // version of the last rewrite started, as the database counts
		lastHash            []byte
		progressStep        = max(1, o.blocks/10)
	)
	for v := int64(1); v <= o.blocks; v++ {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted after version %d", v-1)
		}
		t0 := time.Now()
		css := gen.Block(v)
		n := 0
		for _, cs := range css {
			n += len(cs.Pairs)
		}
		t1 := time.Now()
		genTime += t1.Sub(t0)
		if err := db.ApplyChangeSets(css); err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
		t2 := time.Now()
		info, err := db.Commit()
		if err != nil {
			return fmt.Errorf("commit of version %d: %w", v, err)
		}
		t3 := time.Now()
		if v == 1 {
			res.GenesisPairs, res.GenesisSeconds = n, t3.Sub(t1).Seconds()
		} else {
			res.Pairs += int64(n)
			syncTime += t3.Sub(t1)
			commitLat = append(commitLat, t3.Sub(t2))
			blockLat = append(blockLat, t3.Sub(t1))
		}
		lastHash = info.Hash()
		// Follow the background rewrites as the database schedules them: a
		// commit first switches to a finished rewrite, then starts a new
		// one when SnapshotInterval versions have passed since the last
		// start and none is running.
		if pending != nil && db.SnapshotVersion() == pending.Version {
			pending.Seconds, pending.SwitchedAt = t3.Sub(pendingStart).Seconds(), v
			res.Rewrites = append(res.Rewrites, *pending)
			fmt.Fprintf(stderr, "bench: snapshot %d written and switched to at version %d after %.2fs\n", pending.Version, v, pending.Seconds)
			pending = nil
		}
		if o.snapshotInterval > 0 && pending == nil && v-lastStart >= o.snapshotInterval {
			pending, pendingStart, lastStart = &Rewrite{Version: v}, t3, v
		}
		if v%progressStep == 0 && v != o.blocks {
			fmt.Fprintf(stderr, "bench: version %d/%d, %.0f pairs/s\n", v, o.blocks, float64(res.Pairs)/max(syncTime.Seconds(), 1e-9))
		}
	}
	if pending != nil {
		res.RewriteUnfinished = pending.Version
	}
	res.GenerateSecond = genTime.Seconds()
	res.SyncSeconds = syncTime.Seconds()
	if syncTime > 0 {
		res.UpdatesPerSec = float64(res.Pairs) / syncTime.Seconds()
		res.BlocksPerSec = float64(o.blocks-1) / syncTime.Seconds()
	}
	res.CommitLatency, res.BlockLatency = summarize(commitLat), summarize(blockLat)
	res.Version = db.Version()
	res.AppHash = hex.EncodeToString(lastHash)

	t := time.Now()
	err = db.Close()
	db = nil
	res.CloseSeconds = time.Since(t).Seconds()
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	res.DiskBytes = sysstat.DiskUsage(dir)
	res.WALBytes = sysstat.DiskUsage(filepath.Join(dir, walDirName))
	res.SnapshotBytes = res.DiskBytes - res.WALBytes

	t = time.Now()
	db, err = multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	res.OpenSeconds = time.Since(t).Seconds()
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	res.ReplayedVersions = db.Version() - db.SnapshotVersion()
	// Close cancels a rewrite in flight, unless it had already made its
	// snapshot current (the switch of the live trees was all that was
	// left): the reopen then starts from it
	res.RewriteUnfinishedCurrent = res.RewriteUnfinished != 0 && db.SnapshotVersion() == res.RewriteUnfinished
	if got := db.LastCommitInfo().Hash(); !bytes.Equal(got, lastHash) || db.Version() != res.Version {
		return fmt.Errorf("reopened database is at version %d with app hash %x, committed %d with %x", db.Version(), got, res.Version, lastHash)
	}
	err = db.Close()
	db = nil
	if err != nil {
		return err
	}
	res.PeakRSSBytes = sysstat.PeakRSS()
	res.WallSeconds = time.Since(wallStart).Seconds()

	if o.json {
		return writeJSON(stdout, res)
	}
	printBench(stdout, res)
	return nil
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	return Latency{P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printBench(w io.Writer, r *BenchResult) {
	var t table
	dir := r.Dir
	if dir == "" {
		dir = "(temporary, removed)"
	}
	t.add("directory", "%s", dir)
	t.add("workload", "seed %d, scale %g, %d stores, %d blocks", r.Seed, r.Scale, r.Stores, r.Blocks)
	t.add("options", "snapshot interval %d, async buffer %d, sync %s", r.SnapshotInterval, r.AsyncBuffer, r.Sync)
	t.add("genesis", "%d pairs in %.2fs", r.GenesisPairs, r.GenesisSeconds)
	t.add("sync", "%d pairs in %d blocks in %.2fs (apply + commit; generation %.2fs not counted)", r.Pairs, max(r.Blocks-1, 0), r.SyncSeconds, r.GenerateSecond)
	t.add("throughput", "%.0f updates/s, %.1f blocks/s", r.UpdatesPerSec, r.BlocksPerSec)
	l := r.CommitLatency
	t.add("commit latency", "p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms", l.P50, l.P90, l.P99, l.Max)
	l = r.BlockLatency
	t.add("block latency", "p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms", l.P50, l.P90, l.P99, l.Max)
	if len(r.Rewrites) == 0 {
		t.add("snapshot rewrites", "none completed")
	} else {
		t.add("snapshot rewrites", "%d completed (start to switch):", len(r.Rewrites))
		for _, rw := range r.Rewrites {
			t.add("", "    version %d: %.2fs, switched at version %d", rw.Version, rw.Seconds, rw.SwitchedAt)
		}
	}
	switch {
	case r.RewriteUnfinishedCurrent:
		t.add("", "    version %d: written and made current, not yet switched to at the end (the reopen starts from it)", r.RewriteUnfinished)
	case r.RewriteUnfinished != 0:
		t.add("", "    version %d: still running at the end, cancelled by close", r.RewriteUnfinished)
	}
	t.add("close", "%.3fs", r.CloseSeconds)
	t.add("open + replay", "%.3fs (%d versions replayed)", r.OpenSeconds, r.ReplayedVersions)
	t.add("disk usage", "%s (snapshots %s, log %s)", formatBytes(r.DiskBytes), formatBytes(r.SnapshotBytes), formatBytes(r.WALBytes))
	t.add("peak RSS", "%s", formatBytes(r.PeakRSSBytes))
	t.add("final version", "%d, app hash %s", r.Version, r.AppHash)
	t.add("wall time", "%.1fs", r.WallSeconds)
	t.write(w)
}

// lockedWriter serializes the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
