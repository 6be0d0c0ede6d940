package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/seed-6dfbb450/memiavl/multitree"
)

// stopOnTmpEnv, when "1", makes rewrite-snapshot stop its own process
// (SIGSTOP) as soon as the snapshot's temporary directory has data in it, so
// that tests can kill it in the middle of a write. Not for normal use.
const stopOnTmpEnv = "MEMIAVL_TEST_STOP_DURING_REWRITE"

type rewriteOptions struct {
	version     int64
	rollback    bool
	keepRecent  int
	concurrency int
	progress    string
	skipVerify  bool
}

func newRewriteCmd() *cobra.Command {
	var o rewriteOptions
	cmd := &cobra.Command{
		Use:         "rewrite-snapshot <dir>",
		Annotations: changesFiles,
		Short:       "Write a new snapshot of a database offline and make it current",
		Long: `rewrite-snapshot opens a database as its writer (the node must be stopped),
writes a snapshot of the latest version, makes it the current snapshot, and
prunes older snapshots beyond --keep-recent together with the log entries
that only they needed. Opening the database afterwards replays nothing. The
log is removed a whole segment at a time: the segment holding the new
snapshot's version stays until the next commit starts a new one (the node's
first block after the rewrite), and is pruned then.

--version V writes the snapshot of version V instead (V must be at or after
the oldest kept snapshot). Without --rollback the versions after V stay in
the log: snapshots newer than V are removed, V becomes current and the next
open replays the log from V to the latest version, so nothing committed is
lost. With --rollback every version after V is discarded (the log is cut
back to V, newer snapshots are removed), as a node's rollback does. If V
already has a kept snapshot, nothing is written: with --rollback the
versions after V are still discarded and V becomes current; without it the
database is left as it is (but for a torn last log record, which the open
cuts off and the command reports). When the latest version (or V after a rollback)
already has the current snapshot, nothing is written either, and the older
snapshots beyond --keep-recent are still pruned. A rollback is all or nothing: V is recorded
before anything is discarded, and once it is, every open of the database
sees V as the latest version; if the command is interrupted or fails after
that, the next writer (running it again, or the node) finishes it.

Before writing, it verifies the snapshot it starts from (checksums, tree
structure, every hash; 'memiavl verify' checks the same and more): the new
snapshot copies the parts that did not change, and the older snapshots it
prunes could be the only good copies. A damaged snapshot stops the command
before anything is written or pruned. --skip-verify leaves that out, for a
snapshot just verified; the write still checks the checksums of the files
it copies from.

Interrupting it (Ctrl-C, a kill, a crash) is safe: the snapshot is written
under a temporary name and only switched to once complete and durable; the
next writer open removes the leftovers, so the command can simply be run
again. On a terminal it shows a progress bar, otherwise it logs progress
lines on stderr; --progress none turns both off, and the lines naming each
step (verifying, writing) are still printed on stderr.`,
		Example: `  memiavl rewrite-snapshot ./memiavl.db
  memiavl rewrite-snapshot --version 1000 --rollback ./memiavl.db`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			argPaths(args)
			return runRewrite(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.version, "version", 0, "version to write the snapshot of (default: the latest)")
	f.BoolVar(&o.rollback, "rollback", false, "with --version: discard every version after it")
	f.IntVar(&o.keepRecent, "keep-recent", 1, "snapshots older than the new one to keep (with the log entries after them), as a node's snapshot-keep-recent, so that a rollback of the latest block still works; 0 removes them all")
	f.IntVar(&o.concurrency, "concurrency", 0, "trees written in parallel (default: GOMAXPROCS)")
	f.StringVar(&o.progress, "progress", "auto", "progress display: auto (a bar on a terminal, else log lines), bar, log or none")
	f.BoolVar(&o.skipVerify, "skip-verify", false, "do not verify the snapshot the rewrite starts from")
	return cmd
}

func runRewrite(ctx context.Context, stdout, stderr io.Writer, dir string, o rewriteOptions) error {
	switch {
	case o.version < 0:
		return usagef("--version must not be negative")
	case o.rollback && o.version == 0:
		return usagef("--rollback needs --version (a version above 0)")
	case o.keepRecent < 0 || o.concurrency < 0:
		return usagef("--keep-recent and --concurrency must not be negative")
	}
	mode := o.progress
	switch mode {
	case "auto":
		mode = "log"
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	case "bar", "log", "none":
	default:
		return usagef("unknown --progress %q (want auto, bar, log or none)", o.progress)
	}
	if err := checkDBDir(dir); err != nil {
		return err
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	interrupted := func(what string) error {
		return fmt.Errorf("interrupted %s; no snapshot was written or pruned: %w", what, ctx.Err())
	}

	// what a rollback discards, for its report
	latestBefore, err := multitree.LatestVersion(dir)
	if err != nil {
		return err
	}
	var keptBefore []int64
	if o.rollback {
		if keptBefore, err = multitree.SnapshotVersions(dir); err != nil {
			return err
		}
	}
	if o.rollback && !o.skipVerify {
		// the writer's open rolls back: verify before anything changes
		if err := verifyBase(stderr, dir, o.version); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return interrupted("after the check")
		}
	}
	db, err := multitree.Open(dir, multitree.Options{
		TargetVersion:      o.version,
		Rollback:           o.rollback,
		SnapshotInterval:   -1,
		SnapshotKeepRecent: o.keepRecent,
		RewriteConcurrency: o.concurrency,
		// VerifySnapshot below (or verifyBase above) checks the checksums
		// among the rest, unless --skip-verify asked for no check at all
		OpenCheck: multitree.OpenCheckNone,
	})
	if err != nil {
		if errors.Is(err, multitree.ErrLocked) {
			return fmt.Errorf("%w (is a node running on it?)", err)
		}
		return err
	}
	defer db.Close()
	if ctx.Err() != nil {
		if o.rollback {
			return fmt.Errorf("interrupted after the open, which rolled the database back to version %d; no snapshot was written: %w", db.Version(), ctx.Err())
		}
		return interrupted("while the database was opened")
	}
	if tt, ok := db.LogTornTail(); ok {
		at := latestBefore // the database's latest, not the version written
		if o.rollback {
			at = db.Version()
		}
		fmt.Fprintf(stderr, "rewrite-snapshot: warning: %s\n", tornTailText(tt, at, true))
	}
	version, base := db.Version(), db.SnapshotVersion()
	if version == base {
		// the snapshots a rollback removed were kept before it; those
		// still kept after a plain open are the database's own
		kept := keptBefore
		if !o.rollback {
			if kept, err = multitree.SnapshotVersions(dir); err != nil {
				return err
			}
		}
		var newer []int64
		for _, v := range kept {
			if v > base {
				newer = append(newer, v)
			}
		}
		// without --rollback, a V before the latest version is left as
		// it is, also when its snapshot is the current one
		leftAsIs := !o.rollback && (len(newer) > 0 || version < latestBefore)
		if !leftAsIs {
			// nothing to write, but the snapshots older than the
			// current one beyond --keep-recent go, as after a write
			// (the close waits for the prune); they could be the only
			// good copies, so the current one is verified first (a
			// rollback verified it before the open)
			older := 0
			for _, v := range kept {
				if v < base {
					older++
				}
			}
			if older > o.keepRecent && !o.skipVerify && !o.rollback {
				fmt.Fprintf(stderr, "rewrite-snapshot: verifying snapshot %d before the older ones are pruned\n", base)
				if err := db.VerifySnapshot(); err != nil {
					return fmt.Errorf("nothing was written or pruned: %w", err)
				}
				if ctx.Err() != nil {
					return interrupted("during the check")
				}
			}
			if err := db.RewriteSnapshot(ctx); err != nil {
				return err
			}
		}
		if err := db.Close(); err != nil {
			if errors.Is(err, multitree.ErrRewrite) {
				// only the prune can fail so: nothing was to be written
				return fmt.Errorf("nothing to write, %s is the current snapshot, but pruning the older snapshots failed "+
					"(the next rewrite, or the node, prunes them): %w", snapshotDirName(base), err)
			}
			return err
		}
		after, err := multitree.SnapshotVersions(dir)
		if err != nil {
			return err
		}
		pruned := ""
		if removed := missingFrom(kept, after, base); len(removed) > 0 {
			pruned = fmt.Sprintf("; older snapshots pruned: %v", removed)
		}
		switch {
		case o.rollback && latestBefore > version:
			fmt.Fprintf(stdout, "rolled back from version %d to %d, whose snapshot is kept: nothing to write; snapshot %d is current, newer snapshots removed: %v%s\n",
				latestBefore, version, base, newer, pruned)
		case leftAsIs:
			current := base
			if len(newer) > 0 {
				current = newer[len(newer)-1]
			}
			fmt.Fprintf(stdout, "snapshot %d already exists: nothing to write; the database is left as it is (current snapshot %d, latest version %d)\n",
				base, current, latestBefore)
		default:
			fmt.Fprintf(stdout, "snapshot %d is already the current snapshot of version %d: nothing to write%s\n", base, version, pruned)
		}
		return nil
	}
	if !o.skipVerify && !o.rollback {
		fmt.Fprintf(stderr, "rewrite-snapshot: verifying snapshot %d, which the new one copies from\n", base)
		if err := db.VerifySnapshot(); err != nil {
			return fmt.Errorf("nothing was written or pruned: %w", err)
		}
		if ctx.Err() != nil {
			return interrupted("during the check")
		}
	}
	estimate := estimateSnapshotBytes(db, dir, base)
	tmp := filepath.Join(dir, snapshotDirName(version)+tmpSuffix)
	// the log after the base snapshot: from the version after it, or
	// from the first version of a database that began at an initial
	// version after snapshot 0
	replayed := version - base
	if first, _, err := walRange(filepath.Join(dir, walDirName), 0); err == nil && first > base+1 {
		replayed = version - first + 1
	}
	fmt.Fprintf(stderr, "rewrite-snapshot: writing the snapshot of version %d (base snapshot %d, %d versions in the log after it)\n",
		version, base, replayed)

	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchRewrite(stderr, tmp, estimate, mode, done)
	}()
	err = db.RewriteSnapshot(ctx)
	close(done)
	wg.Wait()
	elapsed := time.Since(start)
	if err != nil {
		// the writer's open already rolled back: the rollback stands
		// whatever happens to the snapshot
		rolled := ""
		if o.rollback && latestBefore > version {
			rolled = fmt.Sprintf("the database was rolled back from version %d to %d (versions %d..%d discarded) and the snapshot write did not finish; ",
				latestBefore, version, version+1, latestBefore)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; %sthe partial snapshot is removed (now or at the next open) and the command can be rerun: %w", rolled, err)
		}
		if rolled != "" {
			return fmt.Errorf("%s%w", rolled, err)
		}
		return err
	}
	var pruneErr error
	if err := db.Close(); err != nil {
		if !errors.Is(err, multitree.ErrRewrite) {
			return err
		}
		// only the prune that follows the write fails so (the database
		// runs no background rewrite): the snapshot is written, durable
		// and current
		pruneErr = fmt.Errorf("%s was written and is the current snapshot, but pruning the older snapshots failed "+
			"(the next rewrite, or the node, prunes them): %w", snapshotDirName(version), err)
	}
	if err := removeNewerSnapshots(dir, version); err != nil {
		return errors.Join(pruneErr, err)
	}
	if pruneErr != nil {
		return pruneErr
	}
	written := dirSize(filepath.Join(dir, snapshotDirName(version)))
	kept, _ := multitree.SnapshotVersions(dir)
	first, last, _ := walRange(filepath.Join(dir, walDirName), 0)
	var t table
	t.add("snapshot", "%s written: %s in %.2fs (%.1f MB/s)", snapshotDirName(version), formatBytes(written),
		elapsed.Seconds(), float64(written)/1e6/max(elapsed.Seconds(), 1e-9))
	t.add("current", "version %d", version)
	if o.rollback && latestBefore > version {
		t.add("rolled back", "versions %d..%d discarded", version+1, latestBefore)
	}
	t.add("kept snapshots", "%v", kept)
	if last == 0 {
		t.add("log", "empty")
	} else {
		t.add("log", "versions %d..%d", first, last)
	}
	t.write(stdout)
	return nil
}

// missingFrom returns the versions of before, older than base, that after
// no longer holds.
func missingFrom(before, after []int64, base int64) []int64 {
	var out []int64
	for _, v := range before {
		if v < base && !slices.Contains(after, v) {
			out = append(out, v)
		}
	}
	return out
}

// removeNewerSnapshots has the database remove snapshots newer than the
// current one (left by a rewrite at an older --version): a writer open
// removes them, as it removes every leftover of an interrupted write.
func removeNewerSnapshots(dir string, current int64) error {
	kept, err := multitree.SnapshotVersions(dir)
	if err != nil || len(kept) == 0 || kept[len(kept)-1] <= current {
		return err
	}
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1, OpenCheck: multitree.OpenCheckNone})
	if err != nil {
		return err
	}
	return db.Close()
}

// estimateSnapshotBytes guesses the size of the new snapshot from the
// current one's size per leaf and the trees' sizes now; -1 if unknown.
func estimateSnapshotBytes(db *multitree.DB, dir string, base int64) int64 {
	view, err := db.View()
	if err != nil {
		return -1
	}
	defer view.Release()
	var leaves, size int64
	for _, name := range view.StoreNames() {
		t := view.Tree(name)
		n, err := t.SizeChecked()
		if err != nil {
			return -1 // the rewrite meets it and reports it
		}
		size += n
		if s := t.Snapshot(); s != nil {
			leaves += int64(s.LeafCount())
		}
	}
	cur := dirSize(filepath.Join(dir, snapshotDirName(base)))
	if leaves == 0 || cur == 0 {
		return -1
	}
	return int64(float64(cur) * float64(size) / float64(leaves))
}

// watchRewrite reports the bytes written under tmp until done is closed.
func watchRewrite(w io.Writer, tmp string, estimate int64, mode string, done <-chan struct{}) {
	stopOnTmp := os.Getenv(stopOnTmpEnv) == "1"
	interval := 200 * time.Millisecond
	if stopOnTmp {
		interval = time.Millisecond
	}
	var bar *progressbar.ProgressBar
	if mode == "bar" {
		bar = progressbar.NewOptions64(estimate,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("writing "+filepath.Base(tmp)),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		defer func() {
			_ = bar.Finish()
			fmt.Fprintln(w)
		}()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		n := dirSize(tmp)
		if stopOnTmp && n > 0 {
			fmt.Fprintf(w, "rewrite-snapshot: stopping during the write (%s)\n", stopOnTmpEnv)
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			stopOnTmp = false
		}
		switch mode {
		case "bar":
			if estimate > 0 && n > estimate {
				n = estimate
			}
			_ = bar.Set64(n)
		case "log":
			if time.Since(lastLog) >= 2*time.Second {
				lastLog = time.Now()
				if estimate > 0 {
					fmt.Fprintf(w, "rewrite-snapshot: %s of about %s written (%.0f%%)\n", formatBytes(n), formatBytes(estimate),
						min(100, 100*float64(n)/float64(estimate)))
				} else {
					fmt.Fprintf(w, "rewrite-snapshot: %s written\n", formatBytes(n))
				}
			}
		}
	}
}

// verifyBase verifies the snapshot a database opened at version (0: the
// latest) starts from, through a read-only open that changes nothing.
func verifyBase(stderr io.Writer, dir string, version int64) error {
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: version, SnapshotInterval: -1, ViewCacheSize: -1,
		OpenCheck: multitree.OpenCheckNone}) // VerifySnapshot checks them
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stderr, "rewrite-snapshot: verifying snapshot %d, which the new one copies from\n", db.SnapshotVersion())
	if err := db.VerifySnapshot(); err != nil {
		return fmt.Errorf("nothing was rolled back, written or pruned: %w", err)
	}
	return db.Close()
}
