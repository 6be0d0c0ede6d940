package compat_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// besideHistory records, per committed height, the pairs of every IAVL store
// and the app hash, for checks of concurrent readers.
type besideHistory struct {
	mu     sync.Mutex
	states map[int64]map[string]map[string]string
	hashes map[int64][]byte
}

func (h *besideHistory) state(v int64) map[string]map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.states[v]
}

// record records a copy of cur as the state of version v.
func (h *besideHistory) record(v int64, cur map[string]map[string]string) {
	snap := make(map[string]map[string]string, len(cur))
	for name, m := range cur {
		snap[name] = maps.Clone(m)
	}
	h.mu.Lock()
	h.states[v] = snap
	h.mu.Unlock()
}

func (h *besideHistory) hash(v int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hashes[v]
}

func besideDump(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s;", k, m[k])
	}
	return b.String()
}

// tolerated reports whether a reader's failure is one the store documents
// for a height that is no longer kept or a branch whose version was evicted.
func tolerated(x any) bool {
	err, ok := x.(error)
	return ok && (errors.Is(err, compat.ErrVersionReleased) || errors.Is(err, multitree.ErrVersion))
}

// TestSnapshotBesideCommits takes state-sync snapshots of the height
// just committed on a goroutine of its own while blocks keep committing
// (with background rewrites, switches and prunes every block or few),
// reads the held height through historical branches until
// PruneSnapshotHeight, and has other goroutines query with proofs and read
// historical branches of recent heights while query views are evicted.
// Every stream must equal rootmulti's of the same height, every value and
// iteration the height's, every proof verify against the height's app
// hash, and LastCommitID must pair a version with its own hash.
func TestSnapshotBesideCommits(t *testing.T) {
	type variant struct {
		interval  int64
		keep      int
		views     int
		zeroCopy  bool
		asyncBuff int
	}
	variants := []variant{
		{1, 0, 1, false, 0},
		{1, 0, 1, true, 0},
		{2, 1, 2, true, 0},
		{3, 2, 1, false, 2},
		{2, 0, 2, true, 3},
	}
	for _, vr := range variants {
		t.Run(fmt.Sprintf("interval=%d,keep=%d,views=%d,zc=%v,async=%d", vr.interval, vr.keep, vr.views, vr.zeroCopy, vr.asyncBuff), func(t *testing.T) {
			p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
			p.cfg.SnapshotInterval, p.cfg.SnapshotKeepRecent, p.cfg.QueryViews = vr.interval, vr.keep, vr.views
			p.cfg.ZeroCopy, p.cfg.AsyncCommitBuffer = vr.zeroCopy, vr.asyncBuff
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
			t.Cleanup(func() { p.ours.Close() })
			besideRun(t, p, 30, 0)
		})
	}
}

func besideRun(t *testing.T, p *pair, blocks int, back int) {
	r := rand.New(rand.NewSource(int64(blocks)))
	hist := &besideHistory{states: map[int64]map[string]map[string]string{}, hashes: map[int64][]byte{}}
	cur := map[string]map[string]string{"a": {}, "b": {}}
	commitBlock := func() {
		writes := map[string][][2][]byte{}
		for _, name := range []string{"a", "b"} {
			for i := 0; i < 25; i++ {
				k := fmt.Sprintf("k%03d", r.Intn(150))
				v := fmt.Sprintf("v%d", r.Int())
				writes[name] = append(writes[name], [2][]byte{[]byte(k), []byte(v)})
				cur[name][k] = v
			}
		}
		next := p.ours.LatestVersion() + 1
		hist.record(next, cur)
		// a CheckTx-like branch of the working state, read between blocks
		br := p.ours.CacheMultiStore()
		br.GetKVStore(p.keys["a"]).Get([]byte("k001"))
		id := p.commit(writes)
		hist.mu.Lock()
		hist.hashes[id.Version] = id.Hash
		hist.mu.Unlock()
	}
	commitBlock()

	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []string
		streams = map[uint64][]byte{}
		snapErr atomic.Int64
		proofs  []*types.ResponseQuery
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	readBranch := func(who string, v int64, full bool) {
		defer func() {
			if x := recover(); x != nil && !tolerated(x) {
				fail("%s: branch of %d panicked: %v", who, v, x)
			}
		}()
		b, err := p.ours.CacheMultiStoreWithVersion(v)
		if err != nil {
			if !errors.Is(err, multitree.ErrVersion) {
				fail("%s: branch of %d: %v", who, v, err)
			}
			return
		}
		want := hist.state(v)
		for _, name := range []string{"a", "b"} {
			kv := b.GetKVStore(p.keys[name])
			for _, k := range []string{"k001", "k050", "k149"} {
				got := kv.Get([]byte(k))
				w, ok := want[name][k]
				if (got == nil) == ok || string(got) != w {
					fail("%s: branch of %d: %s/%s = %q, want %q", who, v, name, k, got, w)
				}
			}
			if !full {
				continue
			}
			m := map[string]string{}
			it := kv.Iterator(nil, nil)
			for ; it.Valid(); it.Next() {
				m[string(it.Key())] = string(it.Value())
			}
			it.Close()
			if a, b := besideDump(m), besideDump(want[name]); a != b {
				fail("%s: branch of %d: store %s iterates\n %s\nwant\n %s", who, v, name, a, b)
			}
		}
	}

	// the snapshot manager: the height just committed, then its extension
	// reads the height through a branch, then the height is pruned
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			h := p.ours.LatestVersion()
			if h == last {
				continue
			}
			last = h
			if back > 0 {
				h -= int64(rand.Intn(back + 1))
				if h < 1 {
					h = 1
				}
			}
			var buf bytes.Buffer
			err := p.ours.Snapshot(uint64(h), protoio.NewDelimitedWriter(&buf))
			if err != nil {
				if !errors.Is(err, multitree.ErrVersion) {
					fail("snapshot of %d: %v", h, err)
				}
				snapErr.Add(1)
				continue
			}
			errMu.Lock()
			streams[uint64(h)] = buf.Bytes()
			errMu.Unlock()
			func() {
				defer func() {
					if x := recover(); x != nil {
						fail("held height %d: %v", h, x)
					}
				}()
				readBranch("held", h, true)
			}()
			p.ours.PruneSnapshotHeight(h)
		}
	}()
	// gRPC-like readers: historical branches and proven queries
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rr := rand.New(rand.NewSource(int64(g)))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := p.ours.LastCommitID()
				if w := hist.hash(id.Version); w != nil && !bytes.Equal(w, id.Hash) {
					fail("LastCommitID %d %X, want hash %X", id.Version, id.Hash, w)
				}
				v := id.Version - int64(rr.Intn(3+2*back))
				if v < 1 {
					v = 1
				}
				if g == 0 {
					readBranch(fmt.Sprint("reader", g), v, n%4 == 0)
					continue
				}
				k := fmt.Sprintf("k%03d", rr.Intn(150))
				h := v
				if n%5 == 0 {
					h = 0
				}
				res, err := p.ours.Query(&types.RequestQuery{Path: "/a/key", Data: []byte(k), Height: h, Prove: true})
				if err != nil {
					if !strings.Contains(err.Error(), "proof is unexpectedly empty") {
						fail("query %s at %d: %v", k, h, err)
					}
					continue
				}
				want := hist.state(res.Height)
				w, ok := want["a"][k]
				if (res.Value == nil) == ok || string(res.Value) != w {
					fail("query %s at %d (answered at %d): %q, want %q", k, h, res.Height, res.Value, w)
				}
				errMu.Lock()
				if len(proofs) < 2000 {
					proofs = append(proofs, res)
				}
				errMu.Unlock()
			}
		}(g)
	}
	for i := 1; i < blocks; i++ {
		commitBlock()
	}
	close(stop)
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	for _, res := range proofs {
		if !verifiable(t, res.ProofOps) {
			continue
		}
		if err := verifyProof("a", res, hist.hash(res.Height)); err != nil {
			t.Errorf("proof of %s at %d: %v", res.Key, res.Height, err)
		}
	}
	if len(streams) == 0 {
		t.Fatalf("no state-sync snapshot was taken (%d refused)", snapErr.Load())
	}
	for h, got := range streams {
		var want bytes.Buffer
		if err := p.oracle.Snapshot(h, protoio.NewDelimitedWriter(&want)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("state-sync stream of height %d taken beside commits: %d bytes, rootmulti's %d", h, len(got), want.Len())
		}
	}
	t.Logf("%d streams, %d snapshots refused, %d proofs", len(streams), snapErr.Load(), len(proofs))
}

// TestOlderHeightsBesideCommits is TestSnapshotBesideCommits with
// state-sync snapshots, queries and branches of heights a few blocks back,
// which are rebuilt from a kept snapshot and the log while rewrites switch
// and prune the snapshots they are rebuilt from.
func TestOlderHeightsBesideCommits(t *testing.T) {
	for _, vr := range []struct {
		interval int64
		keep     int
		views    int
		zeroCopy bool
	}{{1, 0, 1, false}, {2, 1, 1, true}, {3, 2, 2, false}, {1, 2, 1, true}} {
		t.Run(fmt.Sprintf("interval=%d,keep=%d,views=%d,zc=%v", vr.interval, vr.keep, vr.views, vr.zeroCopy), func(t *testing.T) {
			p := &pair{t: t, keys: keyring{}, odb: dbm.NewMemDB(), dir: t.TempDir(), cfg: testConfig()}
			p.cfg.SnapshotInterval, p.cfg.SnapshotKeepRecent, p.cfg.QueryViews = vr.interval, vr.keep, vr.views
			p.cfg.ZeroCopy = vr.zeroCopy
			p.oracle = newOracle(t, p.odb, p.keys, smallMount, nil)
			p.ours = newOurs(t, p.dir, p.cfg, p.keys, smallMount, nil)
			t.Cleanup(func() { p.ours.Close() })
			besideRun(t, p, 30, 4)
		})
	}
}

// TestCloseBesideHeldSnapshotAndIterations closes the multistore while
// a state-sync snapshot holds its height and its extension iterates a
// branch of it, while other goroutines iterate branches, query with proofs
// and "/subspace" at the default height, and read LastCommitID and commit
// infos: no data race, every read that succeeds returns its height's data,
// failures are only those of a closed store, and nothing stays mapped.
func TestCloseBesideHeldSnapshotAndIterations(t *testing.T) {
	for round := 0; round < 4; round++ {
		dir := t.TempDir()
		keys := keyring{}
		cfg := testConfig()
		// a rewrite every block, the one before the current snapshot
		// kept: the current one is at most 9 (switched to by the commit
		// of 10), so heights 8 to 10 stay readable however far the
		// background rewrites got (with none kept, a switch to 9 pruned 8)
		cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = 1, 1, 1
		cfg.ZeroCopy = round%2 == 1
		ms := newOurs(t, dir, cfg, keys, smallMount, nil)
		r := rand.New(rand.NewSource(int64(round)))
		states := map[int64]map[string]string{}
		hashes := map[int64][]byte{}
		cur := map[string]string{}
		for v := 0; v < 10; v++ {
			for i := 0; i < 100; i++ {
				k, val := fmt.Sprintf("k%04d", r.Intn(400)), fmt.Sprintf("v%d", r.Int())
				ms.GetKVStore(keys["a"]).Set([]byte(k), []byte(val))
				cur[k] = val
			}
			id := ms.Commit()
			c := make(map[string]string, len(cur))
			for k, v := range cur {
				c[k] = v
			}
			states[id.Version], hashes[id.Version] = c, id.Hash
		}
		closed := func(x any) bool {
			err, ok := x.(error)
			return ok && (errors.Is(err, compat.ErrNotLoaded) || errors.Is(err, multitree.ErrClosed) ||
				errors.Is(err, compat.ErrVersionReleased))
		}
		var mu sync.Mutex
		var errs []string
		fail := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if len(errs) < 10 {
				errs = append(errs, fmt.Sprintf(format, args...))
			}
		}
		iterate := func(b types.CacheMultiStore, h int64) {
			m := map[string]string{}
			it := b.GetKVStore(keys["a"]).Iterator(nil, nil)
			defer it.Close()
			for ; it.Valid(); it.Next() {
				m[string(it.Key())] = string(it.Value())
			}
			if a, w := besideDump(m), besideDump(states[h]); a != w {
				fail("branch of %d iterated other pairs", h)
			}
		}
		var wg sync.WaitGroup
		var progress [3]atomic.Int64
		stop := make(chan struct{})
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					h := int64(8 + (n+g)%3)
					progress[g].Add(1)
					func() {
						defer func() {
							if x := recover(); x != nil && !closed(x) {
								fail("goroutine %d height %d: panic %v", g, h, x)
							}
						}()
						switch g {
						case 0: // the snapshot manager and an extension
							var buf bytes.Buffer
							if err := ms.Snapshot(uint64(h), protoio.NewDelimitedWriter(&buf)); err != nil {
								if !closed(err) {
									fail("snapshot of %d: %v", h, err)
								}
								return
							}
							defer ms.PruneSnapshotHeight(h)
							b, err := ms.CacheMultiStoreWithVersion(h)
							if err != nil {
								if !closed(err) {
									fail("held branch of %d: %v", h, err)
								}
								return
							}
							iterate(b, h)
						case 1:
							b, err := ms.CacheMultiStoreWithVersion(h)
							if err != nil {
								if !closed(err) {
									fail("branch of %d: %v", h, err)
								}
								return
							}
							iterate(b, h)
						case 2:
							id := ms.LastCommitID()
							if !bytes.Equal(id.Hash, hashes[id.Version]) {
								fail("LastCommitID %v", id)
							}
							if ci, err := ms.GetCommitInfo(h); err == nil && !bytes.Equal(ci.Hash(), hashes[h]) {
								fail("commit info of %d: hash %X", h, ci.Hash())
							}
							k := fmt.Sprintf("k%04d", n%400)
							res, err := ms.Query(&types.RequestQuery{Path: "/a/key", Data: []byte(k), Prove: true})
							if err == nil {
								w, ok := states[res.Height][k]
								if (res.Value == nil) == ok || string(res.Value) != w {
									fail("query of %s at %d: %q, want %q", k, res.Height, res.Value, w)
								} else if verifiable(t, res.ProofOps) {
									if perr := verifyProof("a", res, hashes[res.Height]); perr != nil {
										fail("proof of %s at %d: %v", k, res.Height, perr)
									}
								}
							} else if !closed(err) && !strings.Contains(err.Error(), "proof is unexpectedly empty") {
								fail("query: %v", err)
							}
							if _, err := ms.Query(&types.RequestQuery{Path: "/a/subspace", Data: []byte("k00")}); err != nil && !closed(err) {
								fail("subspace: %v", err)
							}
						}
					}()
				}
			}(g)
		}
		// every goroutine is under way before Close
		for g := range progress {
			for progress[g].Load() < int64(2+round) {
				runtime.Gosched()
			}
		}
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
		for g := range progress {
			for n := progress[g].Load(); progress[g].Load() < n+2; {
				runtime.Gosched()
			}
		}
		close(stop)
		wg.Wait()
		for _, e := range errs {
			t.Errorf("round %d: %s", round, e)
		}
		if m, fds := mappedFiles(t, dir); m > 0 || fds > 0 {
			t.Fatalf("round %d: %d mappings and %d descriptors of the closed database remain", round, m, fds)
		}
	}
}
