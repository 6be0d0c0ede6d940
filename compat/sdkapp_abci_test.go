package compat_test

// A BaseApp with SetupMemIAVL against a default BaseApp
// (rootmulti over cosmos/iavl on a MemDB or goleveldb), block by block
// through ABCI, with BeginBlock/EndBlock writes to several module stores, a
// store upgrade through the store loader, an initial height above 1, the
// snapshot manager, halt heights, restarts and the IAVL options BaseApp
// passes to its multistore.
//
//	go test -count=1 -run 'TestSDKApp' ./compat/

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"cosmossdk.io/store/cache"
	pruningtypes "cosmossdk.io/store/pruning/types"
	"cosmossdk.io/store/snapshots"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	sdk "github.com/cosmos/cosmos-sdk/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// raMods describes the extra module stores of raNewApp: mounted, and the
// ones BeginBlock and EndBlock write every block.
type raMods struct {
	mounted []string
	written []string
	loader  baseapp.StoreLoader
	// loadVersion > 0: BaseApp.LoadVersion(loadVersion) instead of
	// LoadLatestVersion (as `simd export --height` loads)
	loadVersion int64
}

// raNewApp is newTestApp (auth, bank, a transient store) with extra module
// stores that BeginBlock and EndBlock write (sets, deletes, an iteration
// that reads back the block's writes, and a memory store).
func raNewApp(t *testing.T, db dbm.DB, m raMods, opts ...func(*baseapp.BaseApp)) *testApp {
	t.Helper()
	app, mm := newAuthBankApp(t, db, opts...)
	bapp := app.BaseApp
	extra := storetypes.NewKVStoreKeys(m.mounted...)
	tkeys := storetypes.NewTransientStoreKeys("transient_test")
	mkeys := storetypes.NewMemoryStoreKeys("mem_test")
	bapp.MountKVStores(extra)
	bapp.MountTransientStores(tkeys)
	bapp.MountMemoryStores(mkeys)
	tkey, mkey := tkeys["transient_test"], mkeys["mem_test"]
	bapp.SetInitChainer(func(ctx sdk.Context, req *abci.RequestInitChain) (*abci.ResponseInitChain, error) {
		if err := app.initAuthBankGenesis(ctx, mm, req); err != nil {
			return nil, err
		}
		for _, name := range m.written {
			ctx.KVStore(extra[name]).Set([]byte("genesis"), []byte(name))
		}
		return &abci.ResponseInitChain{}, nil
	})
	bapp.SetBeginBlocker(func(ctx sdk.Context) (sdk.BeginBlock, error) {
		h := ctx.BlockHeight()
		ctx.KVStore(tkey).Set([]byte("height"), sdk.Uint64ToBigEndian(uint64(h)))
		ctx.KVStore(mkey).Set(fmt.Appendf(nil, "m/%06d", h), []byte("mem"))
		for _, name := range m.written {
			st := ctx.KVStore(extra[name])
			st.Set(fmt.Appendf(nil, "b/%06d", h), fmt.Appendf(nil, "%s begin %d", name, h))
			st.Set([]byte("last"), sdk.Uint64ToBigEndian(uint64(h)))
			if !st.Has([]byte("origin")) {
				st.Set([]byte("origin"), []byte(name))
			}
			st.Delete(fmt.Appendf(nil, "b/%06d", h-4))
		}
		return mm.BeginBlock(ctx)
	})
	bapp.SetEndBlocker(func(ctx sdk.Context) (sdk.EndBlock, error) {
		h := ctx.BlockHeight()
		for _, name := range m.written {
			st := ctx.KVStore(extra[name])
			// read back this block's writes and the transient store
			n := 0
			it := st.Iterator([]byte("b/"), []byte("b0"))
			for ; it.Valid(); it.Next() {
				n++
			}
			it.Close()
			tv := ctx.KVStore(tkey).Get([]byte("height"))
			st.Set(fmt.Appendf(nil, "e/%06d", h), fmt.Appendf(nil, "%d %X", n, tv))
			if h%3 == 0 {
				st.Delete(fmt.Appendf(nil, "e/%06d", h-1))
			}
			if h%5 == 0 {
				st.Set(fmt.Appendf(nil, "empty/%06d", h), []byte{})
			}
		}
		return mm.EndBlock(ctx)
	})
	if m.loader != nil {
		bapp.SetStoreLoader(m.loader)
	}
	load := bapp.LoadLatestVersion
	if m.loadVersion > 0 {
		load = func() error { return bapp.LoadVersion(m.loadVersion) }
	}
	if err := load(); err != nil {
		t.Fatal(err)
	}
	return app
}

// raNode is a node reopened on the same databases across restarts; the
// default store's on a MemDB or on goleveldb (reopened at every start, as
// BaseApp.Close closes it).
type raNode struct {
	*lifeNode
	levelDir string
	mods     raMods
}

func raNewNode(t *testing.T, name string, ours bool, cfg compat.Config, level bool) *raNode {
	n := &raNode{lifeNode: lifeNewNode(t, name, ours, cfg)}
	if level {
		n.levelDir = t.TempDir()
	}
	return n
}

func (n *raNode) open(t *testing.T, extra ...func(*baseapp.BaseApp)) *testApp {
	t.Helper()
	if n.app != nil {
		t.Fatalf("%s: open while open", n.name)
	}
	if n.levelDir != "" {
		db, err := dbm.NewGoLevelDB("application", n.levelDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		n.db = db
	}
	var opts []func(*baseapp.BaseApp)
	if n.ours {
		opts = append(opts, compat.SetupMemIAVL(n.logger, n.home, n.cfg))
	}
	opts = append(opts, extra...)
	n.app = raNewApp(t, n.db, n.mods, opts...)
	if _, ok := n.app.CommitMultiStore().(*compat.MultiStore); ok != n.ours {
		if _, rec := n.app.CommitMultiStore().(*lifeRecordingCMS); !rec || !n.ours {
			t.Fatalf("%s: multistore %T", n.name, n.app.CommitMultiStore())
		}
	}
	return n.app
}

func (n *raNode) restart(t *testing.T, extra ...func(*baseapp.BaseApp)) {
	t.Helper()
	n.close(t)
	n.open(t, extra...)
}

// raBlock runs block h on every node (FinalizeBlock and Commit), requiring
// equal app hashes, results, events and Commit responses.
func raBlock(t *testing.T, h int64, txs [][]byte, nodes ...*raNode) []byte {
	t.Helper()
	var want *abci.ResponseFinalizeBlock
	var wantBz []byte
	for i, n := range nodes {
		res, err := n.app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: h, Txs: txs})
		if err != nil {
			t.Fatalf("%s: block %d: %v", n.name, h, err)
		}
		bz, err := res.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want, wantBz = res, bz
			continue
		}
		if !bytes.Equal(res.AppHash, want.AppHash) {
			t.Fatalf("block %d: %s app hash %X, %s %X", h, n.name, res.AppHash, nodes[0].name, want.AppHash)
		}
		if !bytes.Equal(bz, wantBz) {
			t.Fatalf("block %d: %s FinalizeBlock response differs from %s's", h, n.name, nodes[0].name)
		}
	}
	for _, n := range nodes {
		if _, err := n.app.Commit(); err != nil {
			t.Fatalf("%s: commit %d: %v", n.name, h, err)
		}
		if id := n.app.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, want.AppHash) {
			t.Fatalf("%s: after commit %d: LastCommitID %v, want %X", n.name, h, id, want.AppHash)
		}
	}
	return want.AppHash
}

// raInfo requires equal ABCI Info (height and app hash) of every node.
func raInfo(t *testing.T, height int64, hash []byte, nodes ...*raNode) {
	t.Helper()
	for _, n := range nodes {
		info, err := n.app.Info(&abci.RequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if info.LastBlockHeight != height || !bytes.Equal(info.LastBlockAppHash, hash) {
			t.Fatalf("%s: Info: height %d app hash %X, want %d %X", n.name, info.LastBlockHeight, info.LastBlockAppHash, height, hash)
		}
	}
}

// raSame sends req to both apps and requires the same response, all fields
// (proofs byte for byte).
func raSame(t *testing.T, ours, oracle *raNode, req abci.RequestQuery) *abci.ResponseQuery {
	t.Helper()
	qa, qb := queryBoth(t, ours.app, oracle.app, req)
	sa, sb := storetypes.ResponseQuery(*qa), storetypes.ResponseQuery(*qb)
	if err := sameResponse(&sa, nil, &sb, nil); err != nil {
		t.Fatalf("%s vs %s (latest %d): query %s %q height %d prove %v: %v", ours.name, oracle.name, oracle.app.LastBlockHeight(), req.Path, req.Data, req.Height, req.Prove, err)
	}
	return qa
}

// raBalanceKey is x/bank's balance key of addr.
func raBalanceKey(addr sdk.AccAddress) []byte {
	key := append([]byte{0x02, byte(len(addr))}, addr...)
	return append(key, testDenom...)
}

// raQueries compares store queries (bank and the extra stores, with and
// without proofs) at heights 0, latest, latest-1, an older one, before the
// first height, in the future, and gRPC balance queries at those heights.
func raQueries(t *testing.T, chain *lifeChain, stores []string, h, first int64, hashes map[int64][]byte, ours, oracle *raNode) {
	t.Helper()
	heights := []int64{0, h, h - 1, h - 3, first, first - 1, 1, h + 1, h + 5}
	for _, height := range heights {
		for i, addr := range chain.addrs {
			if i%7 != int(h%7) {
				continue
			}
			for _, prove := range []bool{false, true} {
				res := raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/bank/key", Data: raBalanceKey(addr), Height: height, Prove: prove})
				if prove && res.Code == 0 && res.ProofOps != nil && hashes[res.Height] != nil && verifiable(t, res.ProofOps) {
					sr := storetypes.ResponseQuery(*res)
					if err := verifyProof("bank", &sr, hashes[res.Height]); err != nil {
						t.Fatalf("proof at %d: %v", res.Height, err)
					}
				}
			}
			q := &banktypes.QueryBalanceRequest{Address: addr.String(), Denom: testDenom}
			data, err := q.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			raSame(t, ours, oracle, abci.RequestQuery{Path: "/cosmos.bank.v1beta1.Query/Balance", Data: data, Height: height})
		}
		for _, store := range stores {
			for _, key := range []string{"last", "origin", "genesis", fmt.Sprintf("b/%06d", h), fmt.Sprintf("e/%06d", h-1), fmt.Sprintf("empty/%06d", h/5*5), "zzz"} {
				for _, prove := range []bool{false, true} {
					raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/" + store + "/key", Data: []byte(key), Height: height, Prove: prove})
				}
			}
			raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/" + store + "/subspace", Data: []byte("b/"), Height: height})
		}
	}
	raSame(t, ours, oracle, abci.RequestQuery{Path: "/app/version"})
	raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/nosuchstore/key", Data: []byte("x")})
}

func raInitChain(t *testing.T, chain *lifeChain, initial int64, nodes ...*raNode) {
	t.Helper()
	var want []byte
	for i, n := range nodes {
		res, err := n.app.InitChain(&abci.RequestInitChain{ChainId: testChainID, AppStateBytes: chain.genesis, InitialHeight: initial})
		if err != nil {
			t.Fatalf("%s: InitChain: %v", n.name, err)
		}
		if i == 0 {
			want = res.AppHash
		} else if !bytes.Equal(res.AppHash, want) {
			t.Fatalf("%s: InitChain app hash %X, %s %X", n.name, res.AppHash, nodes[0].name, want)
		}
	}
}

// TestSDKAppInitialHeight: a chain whose InitChain has an initial height
// of 50, run on our store (with background rewrites, and a restart between
// InitChain and the first block as after a crash there) beside the default
// store on goleveldb and on a MemDB: app hashes and FinalizeBlock responses
// every block, Info across restarts, and queries at heights 0, latest,
// older, before the initial height and in the future.
func TestSDKAppInitialHeight(t *testing.T) {
	for _, level := range []bool{false, true} {
		t.Run(fmt.Sprintf("goleveldb=%v", level), func(t *testing.T) {
			chain := lifeNewChain(t)
			const initial, n = 50, 30
			stores := []string{"alpha", "beta"}
			cfg := testConfig()
			cfg.SnapshotInterval = 4
			cfg.SnapshotKeepRecent = 100 // every height stays queryable, as on the default store
			oracle := raNewNode(t, "default store", false, compat.Config{}, level)
			ours := raNewNode(t, "ours", true, cfg, false)
			for _, nd := range []*raNode{oracle, ours} {
				nd.mods = raMods{mounted: stores, written: stores}
				nd.open(t)
			}
			raInitChain(t, chain, initial, oracle, ours)
			raInfo(t, 0, oracle.app.LastCommitID().Hash, oracle, ours)
			// a crash after InitChain: CometBFT sends InitChain again
			ours.restart(t)
			raInfo(t, 0, oracle.app.LastCommitID().Hash, ours)
			raInitChain(t, chain, initial, oracle, ours)
			hashes := map[int64][]byte{}
			// before the first block: height 0 stays 0 in BaseApp
			raQueries(t, chain, stores, 0, initial, hashes, ours, oracle)
			for h := int64(initial); h < initial+n; h++ {
				if h == initial+n/2 {
					ours.restart(t)
					oracle.restart(t)
					raInfo(t, h-1, hashes[h-1], oracle, ours)
				}
				hashes[h] = raBlock(t, h, chain.block(t), oracle, ours)
				raQueries(t, chain, stores, h, initial, hashes, ours, oracle)
			}
		})
	}
}

// TestSDKAppOptions: the options BaseApp passes to its multistore (IAVL
// cache size, fast nodes, inter-block cache, pruning, metrics), before and
// after SetupMemIAVL, must be accepted and change no result.
func TestSDKAppOptions(t *testing.T) {
	opts := func() []func(*baseapp.BaseApp) {
		return []func(*baseapp.BaseApp){
			baseapp.SetIAVLCacheSize(0),
			baseapp.SetIAVLCacheSize(5000),
			baseapp.SetIAVLDisableFastNode(true),
			baseapp.SetInterBlockCache(cache.NewCommitKVStoreCacheManager(cache.DefaultCommitKVStoreCacheSize)),
			baseapp.SetPruning(pruningtypes.NewCustomPruningOptions(2, 10)),
			baseapp.SetMinRetainBlocks(5),
		}
	}
	chain := lifeNewChain(t)
	stores := []string{"alpha"}
	oracle := raNewNode(t, "default store", false, compat.Config{}, true)
	before := raNewNode(t, "ours, options before SetupMemIAVL", true, testConfig(), false)
	after := raNewNode(t, "ours, options after SetupMemIAVL", true, testConfig(), false)
	plainOracle := raNewNode(t, "default store with the options", false, compat.Config{}, true)
	openAll := func() {
		for _, nd := range []*raNode{oracle, before, after, plainOracle} {
			nd.mods = raMods{mounted: stores, written: stores}
		}
		oracle.open(t)
		plainOracle.open(t, opts()...)
		after.open(t, opts()...)
		// before: the options first, then SetupMemIAVL
		o := append(opts(), compat.SetupMemIAVL(before.logger, before.home, before.cfg))
		before.app = raNewApp(t, before.db, before.mods, o...)
		if _, ok := before.app.CommitMultiStore().(*compat.MultiStore); !ok {
			t.Fatalf("multistore %T", before.app.CommitMultiStore())
		}
		for _, nd := range []*raNode{before, after} {
			if got := nd.ms().GetPruning(); got != pruningtypes.NewCustomPruningOptions(2, 10) {
				t.Fatalf("%s: pruning %+v", nd.name, got)
			}
		}
	}
	openAll()
	nodes := []*raNode{oracle, plainOracle, before, after}
	raInitChain(t, chain, 1, nodes...)
	hashes := map[int64][]byte{}
	for h := int64(1); h <= 24; h++ {
		if h == 12 {
			for _, nd := range nodes {
				nd.close(t)
			}
			openAll()
			raInfo(t, h-1, hashes[h-1], nodes...)
		}
		hashes[h] = raBlock(t, h, chain.block(t), nodes...)
		for _, ours := range []*raNode{before, after} {
			// the latest heights: the oracle with pruning has pruned the
			// others
			for _, height := range []int64{0, h} {
				for _, addr := range chain.addrs[:6] {
					raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/bank/key", Data: raBalanceKey(addr), Height: height, Prove: height > 1})
				}
				raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/alpha/key", Data: []byte("last"), Height: height, Prove: height > 1})
			}
		}
	}
}

// TestSDKAppHaltHeight: a node with a halt height refuses the block at
// it (FinalizeBlock fails) on both stores, and restarts (without the halt
// height) at the block before it with the same Info, then goes on.
func TestSDKAppHaltHeight(t *testing.T) {
	chain := lifeNewChain(t)
	stores := []string{"alpha"}
	const halt = 9
	oracle := raNewNode(t, "default store", false, compat.Config{}, true)
	cfg := testConfig()
	cfg.SnapshotInterval = 3
	cfg.SnapshotKeepRecent = 100
	ours := raNewNode(t, "ours", true, cfg, false)
	nodes := []*raNode{oracle, ours}
	for _, nd := range nodes {
		nd.mods = raMods{mounted: stores, written: stores}
		nd.open(t, baseapp.SetHaltHeight(halt))
	}
	raInitChain(t, chain, 1, nodes...)
	hashes := map[int64][]byte{}
	blocks := chain.blocks(t, 20)
	for h := int64(1); h < halt; h++ {
		hashes[h] = raBlock(t, h, blocks[h], nodes...)
	}
	for _, nd := range nodes {
		if _, err := nd.app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: halt, Txs: blocks[halt]}); err == nil {
			t.Fatalf("%s: block at the halt height accepted", nd.name)
		}
	}
	raInfo(t, halt-1, hashes[halt-1], nodes...)
	for _, nd := range nodes {
		nd.restart(t)
	}
	raInfo(t, halt-1, hashes[halt-1], nodes...)
	for h := int64(halt); h <= 20; h++ {
		hashes[h] = raBlock(t, h, blocks[h], nodes...)
		raQueries(t, chain, stores, h, 1, hashes, ours, oracle)
	}
}

// raSnapshotOpt is the snapshot manager (interval, keep-recent) on a
// snapshot store that lasts across restarts.
func raSnapshotOpt(t *testing.T, dir string, interval uint64, keep uint32) func(*baseapp.BaseApp) {
	return func(b *baseapp.BaseApp) {
		db, err := dbm.NewGoLevelDB("metadata", dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := snapshots.NewStore(db, filepath.Join(dir, "files"))
		if err != nil {
			t.Fatal(err)
		}
		lifeRecordSnapshots(b)
		b.SetSnapshot(st, snapshottypes.NewSnapshotOptions(interval, keep))
	}
}

// raStateSync restores src's snapshot of height into dst through ABCI.
func raStateSync(t *testing.T, src, dst *raNode, height uint64, appHash []byte) {
	t.Helper()
	lifeStateSync(t, src.lifeNode, dst.lifeNode, height, appHash)
}

// TestSDKAppStateSync: the SDK's snapshot manager (interval 5, keep
// recent 2) on one store, state sync through OfferSnapshot and
// ApplySnapshotChunk into a fresh node on the other, both directions, for a
// chain with an initial height and a module store that is never written.
// The synced node follows the chain, restarts, and answers queries as the
// default store does; both stores' snapshots of the same height must be the
// same stream.
func TestSDKAppStateSync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		srcOurs bool
		initial int64
	}{
		{"default-to-ours", false, 1},
		{"ours-to-default", true, 1},
		{"default-to-ours-initial-height", false, 30},
		{"ours-to-default-initial-height", true, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := lifeNewChain(t)
			first := tc.initial
			syncAt := first + 14 - (first+14)%5 // a snapshot height
			last := syncAt + 12
			mods := raMods{mounted: []string{"alpha", "never"}, written: []string{"alpha"}}
			cfg := testConfig()
			cfg.SnapshotInterval = 4
			cfg.SnapshotKeepRecent = 100
			kind := map[bool]string{false: "default store", true: "ours"}
			oracle := raNewNode(t, "oracle (default store)", false, compat.Config{}, false)
			src := raNewNode(t, "source ("+kind[tc.srcOurs]+")", tc.srcOurs, cfg, false)
			dst := raNewNode(t, "synced ("+kind[!tc.srcOurs]+")", !tc.srcOurs, cfg, false)
			other := raNewNode(t, "same as source, "+kind[!tc.srcOurs], !tc.srcOurs, cfg, false)
			for _, n := range []*raNode{oracle, src, dst, other} {
				n.mods = mods
			}
			oracle.open(t)
			src.open(t, raSnapshotOpt(t, t.TempDir(), 5, 2))
			other.open(t, raSnapshotOpt(t, t.TempDir(), 5, 2))
			raInitChain(t, chain, first, oracle, src, other)
			hashes := map[int64][]byte{}
			step := func(h int64, nodes ...*raNode) {
				hashes[h] = raBlock(t, h, chain.block(t), nodes...)
				for _, n := range nodes {
					if n.app.SnapshotManager() != nil && h%5 == 0 {
						// one snapshot at a time
						lifeWaitSnapshot(t, n.lifeNode, uint64(h))
					}
				}
			}
			for h := first; h <= syncAt; h++ {
				step(h, oracle, src, other)
			}
			a, b := lifeWaitSnapshot(t, src.lifeNode, uint64(syncAt)), lifeWaitSnapshot(t, other.lifeNode, uint64(syncAt))
			if a.Chunks != b.Chunks || !bytes.Equal(a.Hash, b.Hash) {
				t.Errorf("snapshots of %d differ: %s %d chunks %X, %s %d chunks %X", syncAt, src.name, a.Chunks, a.Hash, other.name, b.Chunks, b.Hash)
			}
			dst.open(t, raSnapshotOpt(t, t.TempDir(), 5, 2))
			raStateSync(t, src, dst, uint64(syncAt), hashes[syncAt])
			// a restart right after the restore, before any block
			dst.restart(t, raSnapshotOpt(t, t.TempDir(), 5, 2))
			raInfo(t, syncAt, hashes[syncAt], dst)
			for h := syncAt + 1; h <= last; h++ {
				if h == syncAt+6 {
					dst.restart(t, raSnapshotOpt(t, t.TempDir(), 5, 2))
					raInfo(t, h-1, hashes[h-1], dst)
				}
				step(h, oracle, src, other, dst)
				ours, def := src, dst
				if !tc.srcOurs {
					ours, def = dst, src
				}
				// the synced node has heights from syncAt on
				for _, height := range []int64{0, h, h - 1, syncAt} {
					for _, addr := range chain.addrs[:5] {
						raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/bank/key", Data: raBalanceKey(addr), Height: height, Prove: true})
						raSame(t, ours, def, abci.RequestQuery{Path: "/store/bank/key", Data: raBalanceKey(addr), Height: height, Prove: false})
					}
					for _, store := range []string{"alpha", "never"} {
						for _, key := range []string{"last", "genesis", "zzz"} {
							raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/" + store + "/key", Data: []byte(key), Height: height, Prove: true})
						}
					}
				}
				// before the synced height: not served by either synced node
				for _, n := range []*raNode{dst} {
					res, err := n.app.Query(context.Background(), &abci.RequestQuery{Path: "/store/bank/key", Data: raBalanceKey(chain.addrs[0]), Height: syncAt - 2})
					if err != nil {
						t.Fatal(err)
					}
					if res.Value != nil {
						t.Fatalf("%s: value at %d, before the synced height", n.name, syncAt-2)
					}
				}
			}
			// the synced node's own snapshots equal the others'
			h := uint64(last - last%5)
			sa, sb := lifeWaitSnapshot(t, src.lifeNode, h), lifeWaitSnapshot(t, dst.lifeNode, h)
			if sa.Chunks != sb.Chunks || !bytes.Equal(sa.Hash, sb.Hash) {
				t.Errorf("snapshots of %d differ: %s %X, %s %X", h, src.name, sa.Hash, dst.name, sb.Hash)
			}
		})
	}
}

// TestSDKAppUpgrade: a store upgrade through the store loader (x/upgrade's
// UpgradeStoreLoader) at a snapshot height, with BeginBlock and EndBlock
// writing the added and renamed stores in the upgrade block; a crash after
// the upgrade's load (the loader runs again at the restart); state sync of
// the upgrade height and a later one in both directions; queries of every
// store before and after the upgrade.
func TestSDKAppUpgrade(t *testing.T) {
	for _, initial := range []int64{1, 20} {
		t.Run(fmt.Sprintf("initial=%d", initial), func(t *testing.T) {
			chain := lifeNewChain(t)
			upgradeAt := initial + 10 - (initial+10)%5 // a snapshot height
			last := upgradeAt + 12
			before := raMods{mounted: []string{"alpha", "beta", "gamma"}, written: []string{"alpha", "beta", "gamma"}}
			up := &storetypes.StoreUpgrades{
				Added:   []string{"delta"},
				Renamed: []storetypes.StoreRename{{OldKey: "beta", NewKey: "betanew"}},
				Deleted: []string{"gamma"},
			}
			after := raMods{mounted: []string{"alpha", "betanew", "delta"}, written: []string{"alpha", "betanew", "delta"}, loader: lifeUpgradeStoreLoader(upgradeAt, up)}
			cfg := testConfig()
			cfg.SnapshotInterval = 3
			cfg.SnapshotKeepRecent = 100
			oracle := raNewNode(t, "default store", false, compat.Config{}, false)
			ours := raNewNode(t, "ours", true, cfg, false)
			nodes := []*raNode{oracle, ours}
			snapDirs := map[*raNode]string{oracle: t.TempDir(), ours: t.TempDir()}
			for _, n := range nodes {
				n.mods = before
				n.open(t, raSnapshotOpt(t, snapDirs[n], 5, 0))
			}
			raInitChain(t, chain, initial, nodes...)
			hashes := map[int64][]byte{}
			step := func(h int64, nodes ...*raNode) {
				hashes[h] = raBlock(t, h, chain.block(t), nodes...)
				for _, n := range nodes {
					if n.app.SnapshotManager() != nil && h%5 == 0 {
						lifeWaitSnapshot(t, n.lifeNode, uint64(h))
					}
				}
			}
			for h := initial; h < upgradeAt; h++ {
				step(h, nodes...)
				raQueries(t, chain, []string{"alpha", "beta", "gamma"}, h, initial, hashes, ours, oracle)
			}
			// the upgrade binary; it crashes once after the load
			for _, n := range nodes {
				n.close(t)
				n.mods = after
				n.open(t, raSnapshotOpt(t, snapDirs[n], 5, 0))
				raInfo(t, upgradeAt-1, hashes[upgradeAt-1], n)
				n.restart(t, raSnapshotOpt(t, snapDirs[n], 5, 0))
				raInfo(t, upgradeAt-1, hashes[upgradeAt-1], n)
			}
			for h := upgradeAt; h <= last; h++ {
				step(h, nodes...)
				raQueries(t, chain, []string{"alpha", "betanew", "delta"}, h, upgradeAt, hashes, ours, oracle)
				if h == upgradeAt+6 {
					for _, n := range nodes {
						n.restart(t, raSnapshotOpt(t, snapDirs[n], 5, 0))
						raInfo(t, h, hashes[h], n)
					}
				}
			}
			for _, height := range []int64{upgradeAt, upgradeAt + 5, upgradeAt + 10} {
				sa, sb := lifeWaitSnapshot(t, ours.lifeNode, uint64(height)), lifeWaitSnapshot(t, oracle.lifeNode, uint64(height))
				if sa.Chunks != sb.Chunks || !bytes.Equal(sa.Hash, sb.Hash) {
					t.Errorf("snapshots of %d differ: ours %X, default store %X", height, sa.Hash, sb.Hash)
				}
			}
			// fresh nodes of the upgraded binary state-sync from either
			for _, height := range []int64{upgradeAt, upgradeAt + 5} {
				for _, srcOurs := range []bool{false, true} {
					src, dst := oracle, raNewNode(t, fmt.Sprintf("ours synced at %d", height), true, cfg, false)
					if srcOurs {
						src, dst = ours, raNewNode(t, fmt.Sprintf("default synced at %d", height), false, compat.Config{}, false)
					}
					dst.mods = after
					dst.open(t, raSnapshotOpt(t, t.TempDir(), 5, 0))
					raStateSync(t, src, dst, uint64(height), hashes[height])
					for _, store := range []string{"alpha", "betanew", "delta", "bank"} {
						for _, key := range []string{"last", "origin", "genesis"} {
							q := abci.RequestQuery{Path: "/store/" + store + "/key", Data: []byte(key), Height: height, Prove: true}
							if srcOurs {
								raSame(t, ours, dst, q)
							} else {
								raSame(t, dst, oracle, q)
							}
						}
					}
				}
			}
		})
	}
}
