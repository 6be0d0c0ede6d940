package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"

	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"
	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"
	tidwal "github.com/tidwall/wal"

	"github.com/seed-6dfbb450/memiavl/internal/workload"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// The chain fixture: the workload generator's blocks 1..blocks (genesis
// and regular blocks over the bank, staking and lockup stores) synced once
// per process into a directory per implementation:
//
//	ours         this database; a snapshot at snapAt, the log after it
//	refmemiavl   the reference memiavl v0.1.0, the same snapshot and log
//	iavl-fast    cosmos/iavl v1 on goleveldb with fast nodes
//	iavl-nofast  the same without fast nodes (iavl-disable-fastnode)
//
// Size: MEMIAVL_BENCH_SCALE (workload scale, default 0.2; 0.01 with
// -short) and MEMIAVL_BENCH_BLOCKS (default 300; 20 with -short).

// Implementation names used in sub-benchmark names (impl=<name>).
const (
	implOurs       = "ours"
	implRef        = "refmemiavl"
	implIAVLFast   = "iavl-fast"
	implIAVLNoFast = "iavl-nofast"
	implBTree      = "btree"
)

var chainImpls = []string{implOurs, implRef, implIAVLFast, implIAVLNoFast}

func envFloat(name string, def float64) float64 {
	if s := os.Getenv(name); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
			return v
		}
		panic(fmt.Sprintf("bad %s=%q", name, s))
	}
	return def
}

func envInt(name string, def int64) int64 {
	if s := os.Getenv(name); s != "" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
			return v
		}
		panic(fmt.Sprintf("bad %s=%q", name, s))
	}
	return def
}

// storeKey is a key of one store.
type storeKey struct {
	store int // index into gen.Stores()
	key   []byte
}

type chainFixture struct {
	gen     *workload.Generator
	stores  []string
	blocks  int64
	snapAt  int64
	appHash []byte
	pairs   int64 // pairs of blocks 1..blocks
	keys    int64 // live keys at the last version
	present []storeKey
	absent  []storeKey
	root    string // temporary directory holding the implementations' dirs
}

func (f *chainFixture) dir(impl string) string { return filepath.Join(f.root, impl) }

var (
	chainOnce sync.Once
	chainFix  *chainFixture
	chainErr  error
	buildOnce = map[string]*sync.Once{}
	buildErr  = map[string]error{}
	buildMu   sync.Mutex
)

// benchRoot is the temporary directory of this process's fixtures; removed
// by TestMain.
var benchRoot string

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	code := m.Run()
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

func tempRoot() string {
	if benchRoot == "" {
		d, err := os.MkdirTemp("", "memiavl-bench-")
		if err != nil {
			panic(err)
		}
		benchRoot = d
	}
	return benchRoot
}

// getChain returns the chain fixture with impl's directory built.
func getChain(tb testing.TB, impl string) *chainFixture {
	tb.Helper()
	chainOnce.Do(func() {
		chainFix, chainErr = newChainFixture()
		if chainErr == nil {
			logFixture(tb, chainFix)
		}
	})
	if chainErr != nil {
		tb.Fatal(chainErr)
	}
	buildMu.Lock()
	once := buildOnce[impl]
	if once == nil {
		once = new(sync.Once)
		buildOnce[impl] = once
	}
	buildMu.Unlock()
	once.Do(func() {
		var err error
		switch impl {
		case implOurs:
			err = chainFix.buildOurs(chainFix.dir(impl))
		case implRef:
			err = chainFix.buildRef(chainFix.dir(impl))
		case implIAVLFast:
			err = chainFix.buildIAVL(chainFix.dir(impl), true)
		case implIAVLNoFast:
			err = chainFix.buildIAVL(chainFix.dir(impl), false)
		default:
			err = fmt.Errorf("unknown implementation %q", impl)
		}
		buildMu.Lock()
		buildErr[impl] = err
		buildMu.Unlock()
	})
	buildMu.Lock()
	err := buildErr[impl]
	buildMu.Unlock()
	if err != nil {
		tb.Fatalf("building the %s fixture: %v", impl, err)
	}
	return chainFix
}

func newChainFixture() (*chainFixture, error) {
	scale, blocks := envFloat("MEMIAVL_BENCH_SCALE", 0.2), envInt("MEMIAVL_BENCH_BLOCKS", 300)
	if testing.Short() {
		scale, blocks = envFloat("MEMIAVL_BENCH_SCALE", 0.01), envInt("MEMIAVL_BENCH_BLOCKS", 20)
	}
	gen, err := workload.New(workload.Config{Seed: 42, Scale: scale})
	if err != nil {
		return nil, err
	}
	f := &chainFixture{gen: gen, stores: gen.Stores(), blocks: blocks, snapAt: max(1, blocks-blocks/4), root: tempRoot()}
	// the live keys at the last version, for the read benchmarks
	live := make([]map[string]struct{}, len(f.stores))
	for i := range live {
		live[i] = map[string]struct{}{}
	}
	for v := int64(1); v <= blocks; v++ {
		for i, cs := range gen.Block(v) {
			f.pairs += int64(len(cs.Pairs))
			for _, p := range cs.Pairs {
				if p.Delete {
					delete(live[i], string(p.Key))
				} else {
					live[i][string(p.Key)] = struct{}{}
				}
			}
		}
	}
	for i, m := range live {
		f.keys += int64(len(m))
		for k := range m {
			f.present = append(f.present, storeKey{i, []byte(k)})
			absent := append([]byte(k), 0x00)
			if _, ok := m[string(absent)]; !ok {
				f.absent = append(f.absent, storeKey{i, absent})
			}
		}
	}
	sortKeys := func(ks []storeKey) {
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].store != ks[j].store {
				return ks[i].store < ks[j].store
			}
			return bytes.Compare(ks[i].key, ks[j].key) < 0
		})
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
	}
	sortKeys(f.present)
	sortKeys(f.absent)
	const maxSample = 100_000
	f.present, f.absent = f.present[:min(len(f.present), maxSample)], f.absent[:min(len(f.absent), maxSample)]
	return f, nil
}

func (f *chainFixture) checkHash(impl string, got []byte) error {
	if f.appHash == nil {
		f.appHash = got
		return nil
	}
	if !bytes.Equal(f.appHash, got) {
		return fmt.Errorf("%s app hash %X differs from %X: the implementations disagree", impl, got, f.appHash)
	}
	return nil
}

// ---- ours

func openOurs(dir string, create bool, stores []string) (*multitree.DB, error) {
	return multitree.Open(dir, multitree.Options{
		CreateIfMissing:  create,
		InitialStores:    stores,
		SnapshotInterval: -1,
		Sync:             wal.SyncNone, // the reference never fsyncs its log
	})
}

func (f *chainFixture) buildOurs(dir string) error {
	db, err := openOurs(dir, true, f.stores)
	if err != nil {
		return err
	}
	defer db.Close()
	var info *storetypes.CommitInfo
	for v := int64(1); v <= f.blocks; v++ {
		if err := db.ApplyChangeSets(f.gen.Block(v)); err != nil {
			return err
		}
		if info, err = db.Commit(); err != nil {
			return err
		}
		if v == f.snapAt {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				return err
			}
		}
	}
	if err := f.checkHash(implOurs, info.Hash()); err != nil {
		return err
	}
	return db.Close()
}

// ---- the reference memiavl

func refOptions(create bool, stores []string) refmemiavl.Options {
	return refmemiavl.Options{
		CreateIfMissing:   create,
		InitialStores:     stores,
		SnapshotInterval:  math.MaxUint32, // snapshots are taken explicitly
		AsyncCommitBuffer: -1,             // synchronous log writes, as ours
		ZeroCopy:          true,
	}
}

func (f *chainFixture) buildRef(dir string) error {
	db, err := refmemiavl.Load(dir, refOptions(true, f.stores))
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			db.Close() // the reference's Close must not be called twice
		}
	}()
	for v := int64(1); v <= f.blocks; v++ {
		if err := db.ApplyChangeSets(RefChangeSets(f.gen.Block(v))); err != nil {
			return err
		}
		if _, err := db.Commit(); err != nil {
			return err
		}
		if v == f.snapAt {
			if err := db.RewriteSnapshot(); err != nil {
				return err
			}
			if err := db.Reload(); err != nil {
				return err
			}
		}
	}
	if err := f.checkHash(implRef, RefCommitInfo(db.LastCommitInfo()).Hash()); err != nil {
		return err
	}
	closed = true
	if err := db.Close(); err != nil {
		return err
	}
	// Its rewrite and reload leave the log whole (its background rewrite
	// prunes it): cut it before the snapshot, as ours is, so that an
	// open of either replays the same versions from logs of the same
	// length. Its log indexes are its versions (initial version 0).
	log, err := refmemiavl.OpenWAL(filepath.Join(dir, "wal"), &tidwal.Options{NoCopy: true})
	if err != nil {
		return err
	}
	if err := log.TruncateFront(uint64(f.snapAt) + 1); err != nil {
		log.Close()
		return err
	}
	return log.Close()
}

// ---- cosmos/iavl

// iavlStores is one goleveldb database holding a tree per store under the
// rootmulti store's prefixes.
type iavlStores struct {
	db    dbm.DB
	trees []*iavl.MutableTree
}

const iavlCacheSize = 100_000

func openIAVL(dir string, stores []string, fast bool) (*iavlStores, error) {
	db, err := dbm.NewGoLevelDB("application", dir, nil)
	if err != nil {
		return nil, err
	}
	s := &iavlStores{db: db}
	for _, name := range stores {
		pdb := dbm.NewPrefixDB(db, []byte("s/k:"+name+"/"))
		t := iavl.NewMutableTree(iavldb.NewWrapper(pdb), iavlCacheSize, !fast, iavl.NewNopLogger())
		if _, err := t.Load(); err != nil {
			db.Close()
			return nil, err
		}
		s.trees = append(s.trees, t)
	}
	return s, nil
}

func (s *iavlStores) apply(css []wal.ChangeSet, stores []string) error {
	for _, cs := range css {
		i := sort.SearchStrings(stores, cs.Name)
		t := s.trees[i]
		for _, p := range cs.Pairs {
			var err error
			if p.Delete {
				_, _, err = t.Remove(p.Key)
			} else {
				_, err = t.Set(p.Key, p.Value)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *iavlStores) commit(stores []string) (*storetypes.CommitInfo, error) {
	info := &storetypes.CommitInfo{}
	for i, t := range s.trees {
		h, v, err := t.SaveVersion()
		if err != nil {
			return nil, err
		}
		info.Version = v
		info.StoreInfos = append(info.StoreInfos, storetypes.StoreInfo{Name: stores[i], CommitId: storetypes.CommitID{Version: v, Hash: h}})
	}
	return info, nil
}

func (s *iavlStores) close() error { return s.db.Close() }

func (f *chainFixture) buildIAVL(dir string, fast bool) error {
	s, err := openIAVL(dir, f.stores, fast)
	if err != nil {
		return err
	}
	defer s.close()
	var info *storetypes.CommitInfo
	for v := int64(1); v <= f.blocks; v++ {
		if err := s.apply(f.gen.Block(v), f.stores); err != nil {
			return err
		}
		if info, err = s.commit(f.stores); err != nil {
			return err
		}
	}
	return f.checkHash("iavl", info.Hash())
}

// ---- copies for the benchmarks that write

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// freshCopy copies impl's fixture directory into a new temporary directory.
func (f *chainFixture) freshCopy(tb testing.TB, impl string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), impl)
	if err := copyTree(f.dir(impl), dst); err != nil {
		tb.Fatal(err)
	}
	return dst
}

func logFixture(tb testing.TB, f *chainFixture) {
	tb.Helper()
	tb.Logf("chain fixture: %d stores, %d blocks (%d pairs), %d live keys, snapshot at %d; scale %g",
		len(f.stores), f.blocks, f.pairs, f.keys, f.snapAt, f.gen.Config().Scale)
}
