package compat_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// stressModel is the committed states and app hashes per height.
type stressModel struct{ besideHistory }

// hash returns the app hash of h, waiting a little for a Commit that has
// returned to the store's readers but not yet to the test's model.
func (m *stressModel) hash(h int64) []byte {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b := m.besideHistory.hash(h); b != nil || time.Now().After(deadline) {
			return b
		}
		runtime.Gosched()
	}
}

// stressLeafWriter collects the leaves of a state-sync stream per store and
// fails after limit messages (limit < 0: never), as a snapshot manager
// whose chunk writer was closed midway.
type stressLeafWriter struct {
	limit  int
	n      int
	store  string
	leaves map[string]map[string]string
}

var errStressAbandoned = errors.New("stress: writer closed")

func (w *stressLeafWriter) WriteMsg(msg proto.Message) error {
	if w.limit >= 0 && w.n >= w.limit {
		return errStressAbandoned
	}
	w.n++
	item := msg.(*snapshottypes.SnapshotItem)
	switch it := item.Item.(type) {
	case *snapshottypes.SnapshotItem_Store:
		w.store = it.Store.Name
		w.leaves[w.store] = map[string]string{}
	case *snapshottypes.SnapshotItem_IAVL:
		if it.IAVL.Height == 0 {
			w.leaves[w.store][string(it.IAVL.Key)] = string(it.IAVL.Value)
		}
	}
	return nil
}

func (w *stressLeafWriter) Close() error { return nil }

var _ protoio.WriteCloser = (*stressLeafWriter)(nil)

type stressVariant struct {
	keys      int // key space per store
	writes    int // writes per store per block
	seed      int64
	interval  int64
	keep      int
	views     int
	zeroCopy  bool
	asyncBuff int
}

// TestStressNodeReaders runs blocks through cache branches and Commit while
// gRPC-like readers open historical branches at recent and older heights
// (and hold iterators open across commits), ABCI queries with proofs ask at
// various heights, a snapshot manager takes state-sync snapshots (some
// abandoned midway), and other goroutines read LastCommitID and commit
// infos. Every answer must be the state of its height, and a height at or
// after the current snapshot must never be refused.
func TestStressNodeReaders(t *testing.T) {
	variants := []stressVariant{
		{200, 30, 0, 1, 0, 3, true, 2},
		{200, 30, 0, 2, 1, 2, false, 3},
		{200, 30, 0, 3, 0, 4, true, 0},
	}
	blocks := 40
	if !testing.Short() {
		blocks = 150
		variants = nil
		for seed := int64(1); seed <= int64(size(4, 2, 0)); seed++ {
			variants = append(variants,
				stressVariant{3000, 300, seed, 1, 0, 1, seed%2 == 0, int(seed % 3)},
				stressVariant{3000, 300, seed, 2, 1, 3, seed%2 == 1, 0},
				stressVariant{3000, 300, seed, 1, 2, 2, false, 2})
		}
	}
	for _, vr := range variants {
		t.Run(fmt.Sprintf("n%d,s%d,i%d,k%d,v%d,zc%v,async%d", vr.keys, vr.seed, vr.interval, vr.keep, vr.views, vr.zeroCopy, vr.asyncBuff), func(t *testing.T) {
			stressRun(t, vr, blocks)
		})
	}
}

func stressRun(t *testing.T, vr stressVariant, blocks int) {
	dir := t.TempDir()
	keys := keyring{}
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = vr.interval, vr.keep, vr.views
	cfg.ZeroCopy, cfg.AsyncCommitBuffer = vr.zeroCopy, vr.asyncBuff
	ms := newOurs(t, dir, cfg, keys, smallMount, nil)
	closed := false
	t.Cleanup(func() {
		if !closed {
			ms.Close()
		}
	})
	model := &stressModel{besideHistory{states: map[int64]map[string]map[string]string{}, hashes: map[int64][]byte{}}}
	cur := map[string]map[string]string{"a": {}, "b": {}}
	r := rand.New(rand.NewSource(vr.seed*1000 + int64(blocks) + vr.interval*7 + int64(vr.views)))
	commitBlock := func() {
		br := ms.CacheMultiStore()
		for _, name := range []string{"a", "b"} {
			kv := br.GetKVStore(keys[name])
			for i := 0; i < vr.writes; i++ {
				k := fmt.Sprintf("k%03d", r.Intn(vr.keys))
				if r.Intn(6) == 0 {
					kv.Delete([]byte(k))
					delete(cur[name], k)
					continue
				}
				v := fmt.Sprintf("v%d", r.Int())
				kv.Set([]byte(k), []byte(v))
				cur[name][k] = v
			}
		}
		br.GetKVStore(keys["t"]).Set([]byte("x"), []byte("y"))
		br.Write()
		next := ms.LatestVersion() + 1
		model.record(next, cur)
		id := ms.Commit()
		if id.Version != next {
			t.Errorf("committed %d, want %d", id.Version, next)
		}
		model.mu.Lock()
		model.hashes[id.Version] = id.Hash
		model.mu.Unlock()
	}
	for i := 0; i < 3; i++ {
		commitBlock()
	}

	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []string
		counts  [8]atomic.Int64
		refused [8]atomic.Int64
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 30 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	// kept reports whether h should be readable: at or after the current
	// snapshot, read after the refusal (snapshots only move forward)
	kept := func(h int64) bool {
		db := ms.DB()
		return db != nil && h >= db.SnapshotVersion() && h <= db.Version()
	}
	released := func(x any) bool {
		err, ok := x.(error)
		return ok && errors.Is(err, compat.ErrVersionReleased)
	}
	dump := func(kv types.KVStore, ascending bool) map[string]string {
		m := map[string]string{}
		var it types.Iterator
		if ascending {
			it = kv.Iterator(nil, nil)
		} else {
			it = kv.ReverseIterator(nil, nil)
		}
		defer it.Close()
		var prev []byte
		for ; it.Valid(); it.Next() {
			k := it.Key()
			if prev != nil && (bytes.Compare(prev, k) >= 0) == ascending {
				fail("iterator out of order: %q then %q", prev, k)
			}
			prev = append(prev[:0], k...)
			m[string(k)] = string(it.Value())
		}
		return m
	}

	// 0: gRPC readers of historical branches, latest and older
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rr := rand.New(rand.NewSource(int64(100 + g)))
			for n := 0; !stopped(); n++ {
				latest := ms.LatestVersion()
				h := latest - int64(rr.Intn(7))
				if h < 1 {
					h = 1
				}
				func() {
					defer func() {
						if x := recover(); x != nil && !released(x) {
							fail("branch of %d panicked: %v", h, x)
						}
					}()
					b, err := ms.CacheMultiStoreWithVersion(h)
					if err != nil {
						refused[0].Add(1)
						if !errors.Is(err, multitree.ErrVersion) {
							fail("branch of %d: %v", h, err)
						} else if kept(h) {
							fail("branch of kept height %d refused: %v", h, err)
						}
						return
					}
					counts[0].Add(1)
					want := model.state(h)
					for _, name := range []string{"a", "b"} {
						kv := b.GetKVStore(keys[name])
						for i := 0; i < 4; i++ {
							k := fmt.Sprintf("k%03d", rr.Intn(vr.keys))
							got := kv.Get([]byte(k))
							w, ok := want[name][k]
							if (got == nil) == ok || string(got) != w {
								fail("branch of %d: %s/%s = %q, want %q", h, name, k, got, w)
							}
							if kv.Has([]byte(k)) != ok {
								fail("branch of %d: Has %s/%s != %v", h, name, k, ok)
							}
						}
						if n%3 == 0 {
							if a, w := besideDump(dump(kv, n%2 == 0)), besideDump(want[name]); a != w {
								fail("branch of %d: store %s iterates\n %s\nwant\n %s", h, name, a, w)
							}
						}
					}
				}()
			}
		}(g)
	}
	// 1: iterators held open across commits
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr := rand.New(rand.NewSource(7))
		for n := 0; !stopped(); n++ {
			h := ms.LatestVersion() - int64(rr.Intn(2))
			if h < 1 {
				h = 1
			}
			func() {
				defer func() {
					if x := recover(); x != nil && !released(x) {
						fail("held iterator of %d panicked: %v", h, x)
					}
				}()
				b, err := ms.CacheMultiStoreWithVersion(h)
				if err != nil {
					refused[1].Add(1)
					if kept(h) {
						fail("held: branch of kept height %d refused: %v", h, err)
					}
					return
				}
				name := []string{"a", "b"}[n%2]
				asc := n%3 != 0
				var it types.Iterator
				if asc {
					it = b.GetKVStore(keys[name]).Iterator(nil, nil)
				} else {
					it = b.GetKVStore(keys[name]).ReverseIterator(nil, nil)
				}
				defer it.Close()
				got := map[string]string{}
				steps := 0
				for ; it.Valid(); it.Next() {
					got[string(it.Key())] = string(it.Value())
					steps++
					if steps%40 == 0 {
						// wait for a commit while the iterator is open
						at := ms.LatestVersion()
						deadline := time.Now().Add(50 * time.Millisecond)
						for ms.LatestVersion() == at && time.Now().Before(deadline) && !stopped() {
							runtime.Gosched()
						}
					}
				}
				counts[1].Add(1)
				if a, w := besideDump(got), besideDump(model.state(h)[name]); a != w {
					fail("held iterator of %d (%s, asc %v) across commits:\n %s\nwant\n %s", h, name, asc, a, w)
				}
			}()
		}
	}()
	// 2: ABCI queries with proofs at various heights
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr := rand.New(rand.NewSource(9))
		for n := 0; !stopped(); n++ {
			latest := ms.LatestVersion()
			h := latest - int64(rr.Intn(6))
			if n%4 == 0 {
				h = 0
			}
			if h < 0 {
				h = 0
			}
			name := []string{"a", "b"}[n%2]
			k := fmt.Sprintf("k%03d", rr.Intn(vr.keys))
			res, err := ms.Query(&types.RequestQuery{Path: "/" + name + "/key", Data: []byte(k), Height: h, Prove: n%3 != 0})
			if err != nil {
				refused[2].Add(1)
				if !strings.Contains(err.Error(), "proof is unexpectedly empty") {
					fail("query %s/%s at %d: %v", name, k, h, err)
				} else if h != 0 && kept(h) {
					fail("proven query of kept height %d refused: %v", h, err)
				}
				continue
			}
			if res.Log != "" {
				refused[2].Add(1)
				if h != 0 && kept(h) {
					fail("query of kept height %d: log %q", h, res.Log)
				}
				continue
			}
			if h != 0 && res.Height != h {
				fail("query at %d answered at %d", h, res.Height)
			}
			if h == 0 && res.Height != latest && res.Height != latest-1 && res.Height < latest {
				fail("query at 0 (latest %d) answered at %d", latest, res.Height)
			}
			counts[2].Add(1)
			w, ok := model.state(res.Height)[name][k]
			if (res.Value == nil) == ok || string(res.Value) != w {
				fail("query %s/%s at %d (answered at %d): %q, want %q", name, k, h, res.Height, res.Value, w)
				continue
			}
			if res.ProofOps != nil && verifiable(t, res.ProofOps) {
				if perr := verifyProof(name, res, model.hash(res.Height)); perr != nil {
					fail("proof of %s/%s at %d: %v", name, k, res.Height, perr)
				}
			}
		}
	}()
	// 3: the state-sync snapshot manager, some snapshots abandoned midway;
	// an extension reads the held height through a branch
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr := rand.New(rand.NewSource(11))
		var last int64
		for n := 0; !stopped(); n++ {
			h := ms.LatestVersion()
			if h == last {
				runtime.Gosched()
				continue
			}
			last = h
			if n%3 == 1 && h > 2 {
				h -= int64(rr.Intn(3))
			}
			w := &stressLeafWriter{limit: -1, leaves: map[string]map[string]string{}}
			if n%2 == 0 {
				w.limit = rr.Intn(60)
			}
			err := ms.Snapshot(uint64(h), w)
			if w.limit >= 0 && errors.Is(err, errStressAbandoned) {
				counts[3].Add(1)
				ms.PruneSnapshotHeight(h)
				continue
			}
			if err != nil {
				refused[3].Add(1)
				if !errors.Is(err, multitree.ErrVersion) {
					fail("snapshot of %d (limit %d): %v", h, w.limit, err)
				} else if kept(h) {
					fail("snapshot of kept height %d refused: %v", h, err)
				}
				ms.PruneSnapshotHeight(h)
				continue
			}
			counts[3].Add(1)
			want := model.state(h)
			for _, name := range []string{"a", "b"} {
				if a, b := besideDump(w.leaves[name]), besideDump(want[name]); a != b {
					fail("snapshot of %d: store %s leaves\n %s\nwant\n %s", h, name, a, b)
				}
			}
			func() {
				defer func() {
					if x := recover(); x != nil {
						fail("extension read of held height %d panicked: %v", h, x)
					}
				}()
				b, err := ms.CacheMultiStoreWithVersion(h)
				if err != nil {
					fail("extension: branch of held height %d: %v", h, err)
					return
				}
				for i := 0; i < 3; i++ {
					// blocks go on while the extension reads
					time.Sleep(time.Millisecond)
					if a, w := besideDump(dump(b.GetKVStore(keys["a"]), true)), besideDump(want["a"]); a != w {
						fail("extension of held height %d iterates other pairs", h)
					}
				}
			}()
			ms.PruneSnapshotHeight(h)
		}
	}()
	// 4: LatestVersion, LastCommitID and commit infos
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr := rand.New(rand.NewSource(13))
		for !stopped() {
			id := ms.LastCommitID()
			if w := model.hash(id.Version); w == nil || !bytes.Equal(w, id.Hash) {
				fail("LastCommitID %d %X, want %X", id.Version, id.Hash, w)
			}
			lv := ms.LatestVersion()
			if lv < id.Version {
				fail("LatestVersion %d after LastCommitID %d", lv, id.Version)
			}
			h := lv - int64(rr.Intn(8))
			if h < 1 {
				h = 1
			}
			ci, err := ms.GetCommitInfo(h)
			if err != nil {
				refused[4].Add(1)
				if kept(h) {
					fail("commit info of kept height %d: %v", h, err)
				}
				continue
			}
			counts[4].Add(1)
			if ci.Version != h || !bytes.Equal(ci.Hash(), model.hash(h)) {
				fail("commit info of %d: version %d hash %X, want %X", h, ci.Version, ci.Hash(), model.hash(h))
			}
			if li := ms.LastCommitInfo(); li == nil || !bytes.Equal(li.Hash(), model.hash(li.Version)) {
				fail("LastCommitInfo %v", li)
			}
		}
	}()

	for i := 0; i < blocks; i++ {
		commitBlock()
		// let the readers in between blocks on 2 cores
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("readers did not stop:\n%s", buf[:n])
	}
	for _, e := range errs {
		t.Error(e)
	}
	var c, rf []int64
	for i := 0; i < 5; i++ {
		c = append(c, counts[i].Load())
		rf = append(rf, refused[i].Load())
	}
	t.Logf("answered %v, refused %v", c, rf)
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if m, fds := mappedFiles(t, dir); m > 0 || fds > 0 {
		t.Fatalf("%d mappings and %d descriptors of the closed database remain", m, fds)
	}
}

// TestQueriesBesideRestore queries the multistore from other
// goroutines (as gRPC queries do while a node state-syncs) while Restore
// replaces its database and reloads it: CacheMultiStoreWithVersion and
// GetCommitInfo are documented as usable from any goroutine; no data race,
// and every branch that opens reads the restored state (the load publishes
// the stores it built whole before the database they belong to).
func TestQueriesBesideRestore(t *testing.T) {
	srcDir := t.TempDir()
	keys := keyring{}
	src := newOurs(t, srcDir, testConfig(), keys, smallMount, nil)
	for v := 0; v < 6; v++ {
		for i := 0; i < 20; i++ {
			src.GetKVStore(keys["a"]).Set([]byte(fmt.Sprintf("k%02d", i)), []byte(fmt.Sprintf("v%d.%d", v, i)))
		}
		src.Commit()
	}
	var stream bytes.Buffer
	if err := src.Snapshot(6, protoio.NewDelimitedWriter(&stream)); err != nil {
		t.Fatal(err)
	}
	src.Close()
	rounds := 30
	if !raceEnabled {
		rounds = 300 // a map read beside a map write can also be a fatal error without the detector
	}
	for round := 0; round < rounds; round++ {
		dir := t.TempDir()
		ms := newOurs(t, dir, testConfig(), keys, smallMount, nil)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var bad atomic.Value
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					func() {
						defer func() {
							if x := recover(); x != nil {
								if err, ok := x.(error); !ok || !(errors.Is(err, compat.ErrVersionReleased) || errors.Is(err, compat.ErrNotLoaded)) {
									bad.Store(fmt.Sprint("panic: ", x))
								}
							}
						}()
						if g == 0 || !raceEnabled {
							b, err := ms.CacheMultiStoreWithVersion(6)
							if err == nil {
								if got := b.GetKVStore(keys["a"]).Get([]byte("k03")); string(got) != "v5.3" {
									bad.Store(fmt.Sprintf("branch of 6 read %q", got))
								}
							}
						} else {
							_, _ = ms.GetCommitInfo(6)
							_ = ms.LatestVersion()
						}
					}()
				}
			}(g)
		}
		runtime.Gosched()
		_, err := ms.Restore(6, snapshottypes.CurrentFormat, ssReader(stream.Bytes()))
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if x := bad.Load(); x != nil {
			t.Fatalf("round %d: %v", round, x)
		}
		ms.Close()
	}
}
