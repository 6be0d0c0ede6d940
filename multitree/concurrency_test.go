package multitree

// Concurrent use of the public API beside a committing writer: RewriteSnapshot
// on another goroutine racing background rewrites and their switches, store
// upgrades beside views of the stores they rename, ViewAt of versions being
// pruned, read-only opens, StoreNamesAt, VerifySnapshot, LastCommitInfo and
// Close at a random moment. Every read is checked against a model of each
// version.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/wal"
)

type besideConfig struct {
	opts       Options
	versions   int64
	upgrades   bool  // store upgrades every few versions
	rewrites   bool  // RewriteSnapshot on another goroutine
	readOnly   bool  // read-only opens beside
	closeAt    int64 // Close from another goroutine once this version is committed (0: none)
	delay      int64 // DelayRewrites
	largeEvery int64 // every largeEvery-th version is committed by a snapshot
}

// besideHashes records the app hash Commit returned for each version.
type besideHashes struct {
	mu sync.Mutex
	m  map[int64][]byte
}

func (h *besideHashes) set(v int64, b []byte) {
	h.mu.Lock()
	h.m[v] = b
	h.mu.Unlock()
}

func (h *besideHashes) get(v int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[v]
}

func besideStoresAt(m *historyModel, v int64) []string {
	want := m.get(v)
	var out []string
	for s := range want {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// besideTolerated reports whether err is one a reader beside the writer (or
// beside Close) may get.
func besideTolerated(err error, closing bool) bool {
	if besideWriterErr(err) {
		return true
	}
	return closing && errors.Is(err, ErrClosed)
}

func besideRun(t *testing.T, c besideConfig) {
	baseline := runtime.NumGoroutine()
	defer func() {
		// every goroutine of the database ends with Close and the last
		// Release (the unmappings after Close run on the caller's)
		n := runtime.NumGoroutine()
		for i := 0; i < 2000 && n > baseline; i++ {
			runtime.Gosched()
			time.Sleep(time.Millisecond)
			n = runtime.NumGoroutine()
		}
		if n > baseline {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines after Close, %d before Open:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
		}
	}()
	dir := t.TempDir()
	opts := c.opts
	opts.CreateIfMissing, opts.InitialStores = true, stressStores
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if c.delay > 0 {
		DelayRewrites(db, c.delay)
	}
	if c.largeEvery > 0 {
		SetMaxLoggedEntry(db, 4<<10)
	}
	m := newHistoryModel()
	hashes := &besideHashes{m: map[int64][]byte{}}
	var (
		stop    atomic.Bool
		closing atomic.Bool
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []error
		reads   atomic.Int64
		rws     atomic.Int64
		heldMu  sync.Mutex
		held    []*View
	)
	// a RewriteSnapshot waits for a background rewrite, which DelayRewrites
	// holds until more versions are committed: once the writer stops, the
	// wait is cancelled
	rwCtx, rwCancel := context.WithCancel(context.Background())
	defer rwCancel()
	fail := func(err error) {
		errMu.Lock()
		if len(errs) < 10 {
			errs = append(errs, err)
		}
		errMu.Unlock()
		stop.Store(true)
		rwCancel()
	}
	goLoop := func(g int, fn func(r *rand.Rand) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					fail(fmt.Errorf("goroutine %d panicked: %v", g, p))
				}
			}()
			r := rand.New(rand.NewSource(int64(g)))
			for !stop.Load() {
				if err := fn(r); err != nil {
					fail(fmt.Errorf("goroutine %d: %w", g, err))
					return
				}
			}
		}()
	}
	checkInfo := func(v *View, what string) error {
		if want := hashes.get(v.Version()); want != nil && !bytes.Equal(v.CommitInfo().Hash(), want) {
			return fmt.Errorf("%s: version %d has app hash %X, Commit returned %X", what, v.Version(), v.CommitInfo().Hash(), want)
		}
		return nil
	}
	// latest views, some held (also across Close)
	goLoop(1, func(r *rand.Rand) error {
		v, err := db.View()
		if err != nil {
			if besideTolerated(err, closing.Load()) {
				return nil
			}
			return fmt.Errorf("View: %w", err)
		}
		reads.Add(1)
		if err := checkViewHistory(m, v, "View"); err != nil {
			if closing.Load() && errors.Is(err, ErrReleased) {
				v.Release()
				return nil
			}
			v.Release()
			return err
		}
		if err := checkInfo(v, "View"); err != nil {
			v.Release()
			return err
		}
		if r.Intn(4) == 0 {
			heldMu.Lock()
			held = append(held, v)
			heldMu.Unlock()
			return nil
		}
		v.Release()
		v.Release() // twice: a no-op
		return nil
	})
	// historical views, some held
	goLoop(2, func(r *rand.Rand) error {
		lv := db.Version()
		if lv < 1 {
			return nil
		}
		want := lv - r.Int63n(min(lv, 8))
		v, err := db.ViewAt(want)
		if err != nil {
			if besideTolerated(err, closing.Load()) {
				return nil
			}
			return fmt.Errorf("ViewAt(%d) (latest %d): %w", want, lv, err)
		}
		reads.Add(1)
		if v.Version() != want {
			v.Release()
			return fmt.Errorf("ViewAt(%d) returned version %d", want, v.Version())
		}
		if err := checkViewHistory(m, v, fmt.Sprintf("ViewAt(%d)", want)); err != nil {
			v.Release()
			return err
		}
		if err := checkInfo(v, fmt.Sprintf("ViewAt(%d)", want)); err != nil {
			v.Release()
			return err
		}
		if r.Intn(4) == 0 {
			heldMu.Lock()
			held = append(held, v)
			heldMu.Unlock()
			return nil
		}
		v.Release()
		return nil
	})
	// StoreNamesAt, LastCommitInfo, Version, VerifySnapshot, WaitOpenCheck
	goLoop(3, func(r *rand.Rand) error {
		info := db.LastCommitInfo()
		if info == nil {
			if closing.Load() {
				return nil
			}
			return errors.New("LastCommitInfo nil before Close")
		}
		if want := hashes.get(info.Version); want != nil && !bytes.Equal(info.Hash(), want) {
			return fmt.Errorf("LastCommitInfo of %d: hash %X, Commit returned %X", info.Version, info.Hash(), want)
		}
		if v := db.Version(); v < info.Version && !closing.Load() {
			return fmt.Errorf("Version %d after LastCommitInfo of %d", v, info.Version)
		}
		lv := info.Version
		want := lv
		if lv > 0 {
			want = lv - r.Int63n(min(lv, 6))
		}
		names, err := db.StoreNamesAt(want)
		if err != nil {
			if besideTolerated(err, closing.Load()) {
				return nil
			}
			return fmt.Errorf("StoreNamesAt(%d) (latest %d): %w", want, lv, err)
		}
		if exp := besideStoresAt(m, want); want > 0 && fmt.Sprint(names) != fmt.Sprint(exp) {
			return fmt.Errorf("StoreNamesAt(%d) = %v, want %v", want, names, exp)
		}
		if r.Intn(8) == 0 {
			if err := db.VerifySnapshot(); err != nil && !(closing.Load() && errors.Is(err, ErrClosed)) {
				return fmt.Errorf("VerifySnapshot: %w", err)
			}
		}
		if err := db.WaitOpenCheck(context.Background()); err != nil && !(closing.Load() && errors.Is(err, ErrClosed)) {
			return fmt.Errorf("WaitOpenCheck: %w", err)
		}
		return nil
	})
	if c.rewrites {
		goLoop(4, func(r *rand.Rand) error {
			err := db.RewriteSnapshot(rwCtx)
			switch {
			case err == nil:
				rws.Add(1)
				return nil
			case errors.Is(err, ErrUncommitted):
				return nil
			case stop.Load() && errors.Is(err, context.Canceled):
				return nil
			case closing.Load() && errors.Is(err, ErrClosed):
				return nil
			}
			return fmt.Errorf("RewriteSnapshot: %w", err)
		})
	}
	if c.readOnly {
		goLoop(5, func(r *rand.Rand) error {
			ro, err := Open(dir, Options{ReadOnly: true, OpenCheck: OpenCheck(r.Intn(3))})
			if err != nil {
				if besideWriterErr(err) {
					return nil
				}
				return fmt.Errorf("read-only open: %w", err)
			}
			defer ro.Close()
			v, err := ro.View()
			if err != nil {
				return err
			}
			err = checkViewHistory(m, v, "read-only open")
			if err == nil {
				err = checkInfo(v, "read-only open")
			}
			v.Release()
			if err != nil {
				return err
			}
			if lv := ro.Version(); lv > 1 {
				want := lv - 1 - r.Int63n(min(lv-1, 5))
				v, err := ro.ViewAt(want)
				if err != nil {
					if besideWriterErr(err) {
						return nil
					}
					return fmt.Errorf("read-only ViewAt(%d) of %d: %w", want, lv, err)
				}
				if err := viewIs(m, v, want, fmt.Sprintf("read-only ViewAt(%d)", want)); err != nil {
					return err
				}
				names, err := ro.StoreNamesAt(want)
				if err != nil && !besideWriterErr(err) {
					return fmt.Errorf("read-only StoreNamesAt(%d): %w", want, err)
				}
				if exp := besideStoresAt(m, want); err == nil && fmt.Sprint(names) != fmt.Sprint(exp) {
					return fmt.Errorf("read-only StoreNamesAt(%d) = %v, want %v", want, names, exp)
				}
			}
			return ro.Close()
		})
	}
	closed := make(chan error, 1)
	reached := make(chan struct{})
	if c.closeAt > 0 {
		go func() {
			<-reached
			closing.Store(true)
			closed <- db.Close()
		}()
	}
	committed := int64(0)
writer:
	for v := int64(1); v <= c.versions && !stop.Load(); v++ {
		if c.upgrades {
			if u, ok := cycleUpgrades(v, m.stores(), 6, 1, 3, 5); ok {
				if err := db.ApplyUpgrades(u); err != nil {
					if closing.Load() && errors.Is(err, ErrClosed) {
						break writer
					}
					t.Fatalf("ApplyUpgrades at %d: %v", v, err)
				}
				m.applyUpgrades(u)
			}
		}
		css := stressBlockIn(v, m.stores())
		if c.largeEvery > 0 && v%c.largeEvery == 0 {
			pairs := append([]wal.KVPair(nil), css[0].Pairs...)
			css[0].Pairs = append(pairs, wal.KVPair{Key: stressKey(stressKeys - 1), Value: bytes.Repeat([]byte{byte(v)}, 8<<10)})
		}
		if err := db.ApplyChangeSets(css); err != nil {
			if closing.Load() && errors.Is(err, ErrClosed) {
				break
			}
			t.Fatalf("ApplyChangeSets at %d: %v", v, err)
		}
		m.apply(v, css)
		info, err := db.Commit()
		if err != nil {
			if closing.Load() && errors.Is(err, ErrClosed) {
				break
			}
			fail(fmt.Errorf("commit %d: %w", v, err))
			break
		}
		hashes.set(v, info.Hash())
		committed = v
		if v == c.closeAt {
			close(reached)
		}
	}
	if c.closeAt > 0 && committed >= c.closeAt {
		if err := <-closed; err != nil {
			t.Errorf("Close: %v", err)
		}
		// every call after Close fails cleanly
		if _, err := db.View(); !errors.Is(err, ErrClosed) {
			t.Errorf("View after Close: %v", err)
		}
	}
	stop.Store(true)
	rwCancel()
	wg.Wait()
	// held views serve their versions until released, even after Close
	heldMu.Lock()
	for _, v := range held {
		if err := checkViewHistory(m, v, fmt.Sprintf("held view %d", v.Version())); err != nil {
			t.Error(err)
		}
		v.Release()
		v.Release()
	}
	heldMu.Unlock()
	if err := db.Close(); err != nil && c.closeAt == 0 {
		t.Errorf("close: %v", err)
	}
	for _, err := range errs {
		t.Error(err)
	}
	if c.closeAt == 0 && !t.Failed() {
		// what was committed is what a reopen finds
		ro, err := Open(dir, Options{OpenCheck: OpenCheckSync})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if ro.Version() != committed || !bytes.Equal(ro.LastCommitInfo().Hash(), hashes.get(committed)) {
			t.Errorf("reopened at %d %X, committed %d %X", ro.Version(), ro.LastCommitInfo().Hash(), committed, hashes.get(committed))
		}
	}
	t.Logf("committed %d, %d reads, %d RewriteSnapshot, %d held", committed, reads.Load(), rws.Load(), len(held))
}

func TestConcurrentAPI(t *testing.T) {
	cases := []struct {
		name string
		c    besideConfig
	}{
		{"rewrites_i1k0", besideConfig{opts: Options{SnapshotInterval: 1, SnapshotKeepRecent: 0}, versions: 60, rewrites: true}},
		{"rewrites_i2k1_async", besideConfig{opts: Options{SnapshotInterval: 2, SnapshotKeepRecent: 1, AsyncCommitBuffer: 3}, versions: 60, rewrites: true, delay: 1}},
		{"upgrades_i1k0", besideConfig{opts: Options{SnapshotInterval: 1, SnapshotKeepRecent: 0}, versions: 60, upgrades: true, rewrites: true}},
		{"upgrades_i3k2_async_ro", besideConfig{opts: Options{SnapshotInterval: 3, SnapshotKeepRecent: 2, AsyncCommitBuffer: 2}, versions: 60, upgrades: true, rewrites: true, readOnly: true}},
		{"large_i2k1", besideConfig{opts: Options{SnapshotInterval: 2, SnapshotKeepRecent: 1}, versions: 60, rewrites: true, largeEvery: 5, upgrades: true}},
		{"large_i1k0_async_ro", besideConfig{opts: Options{SnapshotInterval: 1, SnapshotKeepRecent: 0, AsyncCommitBuffer: 2}, versions: 60, rewrites: true, largeEvery: 4, readOnly: true}},
		{"ro_i1k0", besideConfig{opts: Options{SnapshotInterval: 1, SnapshotKeepRecent: 0, AsyncCommitBuffer: 1}, versions: 60, readOnly: true, rewrites: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { besideRun(t, tc.c) })
	}
}

func TestCloseBesideEverything(t *testing.T) {
	cases := []struct {
		name string
		c    besideConfig
	}{
		{"i1k0", besideConfig{opts: Options{SnapshotInterval: 1, SnapshotKeepRecent: 0}, versions: 80, rewrites: true, closeAt: 25}},
		{"i2k1_async_upgrades", besideConfig{opts: Options{SnapshotInterval: 2, SnapshotKeepRecent: 1, AsyncCommitBuffer: 3}, versions: 80, rewrites: true, upgrades: true, closeAt: 30}},
		{"large_i2k0", besideConfig{opts: Options{SnapshotInterval: 2, SnapshotKeepRecent: 0}, versions: 80, rewrites: true, largeEvery: 3, closeAt: 20}},
		{"i3k2_delay", besideConfig{opts: Options{SnapshotInterval: 3, SnapshotKeepRecent: 2}, versions: 80, rewrites: true, closeAt: 20, delay: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { besideRun(t, tc.c) })
	}
}
