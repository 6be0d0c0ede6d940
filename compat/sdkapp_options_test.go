package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"cosmossdk.io/log"
	pruningtypes "cosmossdk.io/store/pruning/types"
	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	sdk "github.com/cosmos/cosmos-sdk/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"
	"github.com/spf13/viper"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// raListener is an ADR-038 ABCI listener recording, per block, the
// FinalizeBlock request and response and the change set of the Commit.
type raListener struct {
	blocks map[int64][]byte
}

func (l *raListener) ListenFinalizeBlock(ctx context.Context, req abci.RequestFinalizeBlock, res abci.ResponseFinalizeBlock) error {
	bz, err := res.Marshal()
	if err != nil {
		return err
	}
	l.blocks[req.Height] = append(l.blocks[req.Height], bz...)
	return nil
}

func (l *raListener) ListenCommit(ctx context.Context, res abci.ResponseCommit, changeSet []*storetypes.StoreKVPair) error {
	var buf bytes.Buffer
	for _, p := range changeSet {
		bz, err := p.Marshal()
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "%d:%X;", len(bz), bz)
	}
	h := int64(-1)
	if sdkCtx, ok := ctx.(interface{ BlockHeight() int64 }); ok {
		h = sdkCtx.BlockHeight()
	}
	l.blocks[h] = append(l.blocks[h], buf.Bytes()...)
	return nil
}

// raStreaming exposes every mounted store to an ABCI listener, as
// BaseApp.RegisterStreamingServices does (AddListeners on the
// multistore), once the app is loaded.
func raStreaming(t *testing.T, n *raNode) *raListener {
	l := &raListener{blocks: map[int64][]byte{}}
	cms := n.app.CommitMultiStore()
	byName := cms.(interface {
		StoreKeysByName() map[string]storetypes.StoreKey
	}).StoreKeysByName()
	var keys []storetypes.StoreKey
	for _, k := range byName {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name() < keys[j].Name() })
	cms.AddListeners(keys)
	n.app.SetStreamingManager(storetypes.StreamingManager{ABCIListeners: []storetypes.ABCIListener{l}, StopNodeOnErr: true})
	return l
}

// TestSDKAppStreaming: ADR-038 listeners over every store (IAVL,
// transient, memory) through BaseApp's streaming manager: the change sets
// handed to ListenCommit must equal the default store's every block, with
// a synchronous log, and with zero copy, an asynchronous log and frequent
// background rewrites.
func TestSDKAppStreaming(t *testing.T) {
	zc := testConfig()
	zc.ZeroCopy = true
	zc.AsyncCommitBuffer = 2
	zc.SnapshotInterval = 2
	for name, cfg := range map[string]compat.Config{"sync": testConfig(), "zero-copy-async": zc} {
		t.Run(name, func(t *testing.T) {
			chain := lifeNewChain(t)
			mods := raMods{mounted: []string{"alpha", "beta"}, written: []string{"alpha", "beta"}}
			oracle := raNewNode(t, "default store", false, compat.Config{}, false)
			ours := raNewNode(t, "ours", true, cfg, false)
			nodes := []*raNode{oracle, ours}
			ls := map[*raNode]*raListener{}
			for _, n := range nodes {
				n.mods = mods
				n.open(t)
				ls[n] = raStreaming(t, n)
			}
			raInitChain(t, chain, 1, nodes...)
			for h := int64(1); h <= 20; h++ {
				raBlock(t, h, chain.block(t), nodes...)
				a, b := ls[ours].blocks[h], ls[oracle].blocks[h]
				if len(b) == 0 {
					t.Fatalf("block %d: nothing streamed", h)
				}
				if !bytes.Equal(a, b) {
					t.Fatalf("block %d: streamed data differs:\n ours    %.600s\n default %.600s", h, a, b)
				}
			}
		})
	}
}

// TestSDKAppPruningValidation: pruning options from app.toml that BaseApp
// validates at load (Init) must be refused, or accepted, alike with the
// store installed, whether the option comes before or after SetupMemIAVL.
func TestSDKAppPruningValidation(t *testing.T) {
	for _, p := range []pruningtypes.PruningOptions{
		pruningtypes.NewPruningOptions(pruningtypes.PruningDefault),
		pruningtypes.NewPruningOptions(pruningtypes.PruningEverything),
		pruningtypes.NewPruningOptions(pruningtypes.PruningNothing),
		pruningtypes.NewCustomPruningOptions(100, 10),
		pruningtypes.NewCustomPruningOptions(0, 0),  // invalid: interval 0
		pruningtypes.NewCustomPruningOptions(1, 10), // invalid: keep-recent < 2
		pruningtypes.NewPruningOptions(pruningtypes.PruningUndefined),
	} {
		load := func(opts ...func(*baseapp.BaseApp)) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			app := baseapp.NewBaseApp("prune", log.NewNopLogger(), dbm.NewMemDB(), nil, opts...)
			app.MountStores(storetypes.NewKVStoreKey("bank"))
			err = app.LoadLatestVersion()
			if c, ok := app.CommitMultiStore().(*compat.MultiStore); ok {
				_ = c.Close()
			}
			return err
		}
		want := load(baseapp.SetPruning(p))
		for _, before := range []bool{true, false} {
			setup := compat.SetupMemIAVL(log.NewNopLogger(), t.TempDir(), testConfig())
			opts := []func(*baseapp.BaseApp){setup, baseapp.SetPruning(p)}
			if before {
				opts = []func(*baseapp.BaseApp){baseapp.SetPruning(p), setup}
			}
			got := load(opts...)
			if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
				t.Errorf("pruning %v (before SetupMemIAVL: %v): load %v, default store %v", p, before, got, want)
			}
		}
	}
}

// TestSDKAppConfigFromAppToml: odd [memiavl] sections of app.toml, read
// through viper as the SDK reads app.toml, give a configuration or a clear
// ErrInvalidConfig naming the key, never a panic.
func TestSDKAppConfigFromAppToml(t *testing.T) {
	for _, c := range []struct {
		name, toml string
		want       func(compat.Config) bool
		errKey     string // "" : no error
	}{
		{"missing section", "[other]\nx = 1\n", func(c compat.Config) bool { return c == compat.DefaultConfig() }, ""},
		{"empty section", "[memiavl]\n", func(c compat.Config) bool { return c == compat.DefaultConfig() }, ""},
		{"strings for numbers", "[memiavl]\nenable = \"true\"\nsnapshot-interval = \"500\"\nsnapshot-keep-recent = \" 3 \"\nquery-views = \"4\"\n",
			func(c compat.Config) bool {
				return c.Enable && c.SnapshotInterval == 500 && c.SnapshotKeepRecent == 3 && c.QueryViews == 4
			}, ""},
		{"negative interval disables", "[memiavl]\nsnapshot-interval = -1\n", func(c compat.Config) bool { return c.SnapshotInterval == -1 }, ""},
		{"negative keep-recent", "[memiavl]\nsnapshot-keep-recent = -1\n", nil, "snapshot-keep-recent"},
		{"negative async", "[memiavl]\nasync-commit-buffer = -2\n", nil, "async-commit-buffer"},
		{"negative views", "[memiavl]\nquery-views = -3\n", nil, "query-views"},
		{"negative concurrency", "[memiavl]\nrewrite-concurrency = -1\n", nil, "rewrite-concurrency"},
		{"negative rate", "[memiavl]\nrewrite-rate-limit = -1\n", nil, "rewrite-rate-limit"},
		{"zero interval", "[memiavl]\nsnapshot-interval = 0\n", nil, "snapshot-interval"},
		{"word for number", "[memiavl]\nsnapshot-interval = \"often\"\n", nil, "snapshot-interval"},
		{"fraction", "[memiavl]\nquery-views = 2.5\n", nil, "query-views"},
		{"array", "[memiavl]\nquery-views = [1, 2]\n", nil, "query-views"},
		{"table", "[memiavl]\nenable = true\n[memiavl.query-views]\nx = 1\n", nil, "query-views"},
		{"number for bool", "[memiavl]\nzero-copy = 1\n", nil, "zero-copy"},
		{"bad fsync", "[memiavl]\nfsync = \"sometimes\"\n", nil, "fsync"},
		{"number fsync", "[memiavl]\nfsync = 3\n", nil, "fsync"},
		{"bad open-check", "[memiavl]\nopen-check = \"maybe\"\n", nil, "open-check"},
		{"huge keep-recent", "[memiavl]\nsnapshot-keep-recent = 9223372036854775807\n", func(c compat.Config) bool { return c.SnapshotKeepRecent > 0 }, ""},
		{"async over max", "[memiavl]\nasync-commit-buffer = 9223372036854775807\n", nil, "async-commit-buffer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.toml")
			if err := os.WriteFile(path, []byte(c.toml), 0o644); err != nil {
				t.Fatal(err)
			}
			v := viper.New()
			v.SetConfigFile(path)
			if err := v.ReadInConfig(); err != nil {
				t.Fatal(err)
			}
			var cfg compat.Config
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("ConfigFromAppOptions panicked: %v", r)
					}
				}()
				cfg, err = compat.ConfigFromAppOptions(v)
			}()
			if c.errKey == "" {
				if err != nil || !c.want(cfg) {
					t.Fatalf("config %+v, err %v", cfg, err)
				}
				// SetupMemIAVL accepts it
				return
			}
			if !errors.Is(err, compat.ErrInvalidConfig) || !strings.Contains(err.Error(), c.errKey) {
				t.Fatalf("error %v, want ErrInvalidConfig naming %q", err, c.errKey)
			}
		})
	}
}

// TestSDKAppLoadOlderVersion: a node loaded at an older height without
// committing (`simd export --height`, BaseApp.LoadVersion) reports that
// height and its state as the default store does; the next start with
// LoadLatestVersion resumes at the latest height on both, and the chain
// goes on.
func TestSDKAppLoadOlderVersion(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			chain := lifeNewChain(t)
			mods := raMods{mounted: []string{"alpha"}, written: []string{"alpha"}}
			cfg := testConfig()
			cfg.SnapshotInterval = 4
			cfg.SnapshotKeepRecent = 100
			if async {
				cfg.AsyncCommitBuffer = 3
			}
			oracle := raNewNode(t, "default store", false, compat.Config{}, true)
			ours := raNewNode(t, "ours", true, cfg, false)
			nodes := []*raNode{oracle, ours}
			for _, n := range nodes {
				n.mods = mods
				n.open(t)
			}
			raInitChain(t, chain, 1, nodes...)
			hashes := map[int64][]byte{}
			const latest = 18
			for h := int64(1); h <= latest; h++ {
				hashes[h] = raBlock(t, h, chain.block(t), nodes...)
			}
			for _, old := range []int64{13, 6} {
				for _, n := range nodes {
					n.close(t)
					n.mods.loadVersion = old
					n.open(t)
				}
				raInfo(t, old, hashes[old], nodes...)
				for _, addr := range chain.addrs[:8] {
					raSame(t, ours, oracle, abci.RequestQuery{Path: "/store/bank/key", Data: raBalanceKey(addr), Height: old, Prove: true})
				}
				// the export reads the working state, the loaded height's
				a := ours.app.CommitMultiStore().CacheMultiStore()
				b := oracle.app.CommitMultiStore().CacheMultiStore()
				for _, name := range []string{"alpha", "bank", "acc"} {
					ka := ours.ms().StoreKeysByName()[name]
					kb := oracle.app.CommitMultiStore().(interface {
						StoreKeysByName() map[string]storetypes.StoreKey
					}).StoreKeysByName()[name]
					ia, ib := a.GetKVStore(ka).Iterator(nil, nil), b.GetKVStore(kb).Iterator(nil, nil)
					for ; ia.Valid() && ib.Valid(); ia.Next() {
						if !bytes.Equal(ia.Key(), ib.Key()) || !bytes.Equal(ia.Value(), ib.Value()) {
							t.Fatalf("loaded at %d: store %s: %X=%X, default store %X=%X", old, name, ia.Key(), ia.Value(), ib.Key(), ib.Value())
						}
						ib.Next()
					}
					if ia.Valid() || ib.Valid() {
						t.Fatalf("loaded at %d: store %s: iterators end apart", old, name)
					}
					ia.Close()
					ib.Close()
				}
			}
			for _, n := range nodes {
				n.close(t)
				n.mods.loadVersion = 0
				n.open(t)
			}
			raInfo(t, latest, hashes[latest], nodes...)
			for h := int64(latest + 1); h <= latest+6; h++ {
				hashes[h] = raBlock(t, h, chain.block(t), nodes...)
				raQueries(t, chain, []string{"alpha"}, h, 1, hashes, ours, oracle)
			}
		})
	}
}

// TestSDKAppTracer: a store tracer (SetCommitMultiStoreTracer, after
// SetupMemIAVL as documented) with ADR-038 listeners: the traced
// operations of every block, with BaseApp's tracing context, must equal the
// default store's.
func TestSDKAppTracer(t *testing.T) {
	chain := lifeNewChain(t)
	mods := raMods{mounted: []string{"alpha"}, written: []string{"alpha"}}
	oracle := raNewNode(t, "default store", false, compat.Config{}, false)
	ours := raNewNode(t, "ours", true, testConfig(), false)
	nodes := []*raNode{oracle, ours}
	bufs := map[*raNode]*bytes.Buffer{}
	for _, n := range nodes {
		n.mods = mods
		bufs[n] = &bytes.Buffer{}
		w := bufs[n]
		n.open(t, func(b *baseapp.BaseApp) { b.SetCommitMultiStoreTracer(w) })
		raStreaming(t, n)
	}
	raInitChain(t, chain, 1, nodes...)
	// cachemulti writes its stores back in map order: compare the traced
	// operations as sorted lines
	lines := func(n *raNode) []string {
		ls := strings.Split(bufs[n].String(), "\n")
		bufs[n].Reset()
		sort.Strings(ls)
		return ls
	}
	check := func(what string) {
		a, b := lines(ours), lines(oracle)
		if len(a) < 2 {
			t.Fatalf("%s: nothing traced", what)
		}
		for i := 0; i < len(a) || i < len(b); i++ {
			var la, lb string
			if i < len(a) {
				la = a[i]
			}
			if i < len(b) {
				lb = b[i]
			}
			if la != lb {
				t.Fatalf("%s: traces differ (%d and %d lines), sorted line %d:\n ours    %.600s\n default %.600s", what, len(a), len(b), i, la, lb)
			}
		}
	}
	check("InitChain")
	for h := int64(1); h <= 12; h++ {
		raBlock(t, h, chain.block(t), nodes...)
		check(fmt.Sprintf("block %d", h))
	}
}

// TestSDKAppOptimisticExecution: BaseApp's optimistic execution runs a
// block on a goroutine of its own from ProcessProposal, outside the ABCI
// lock, while the node serves queries (simulations read the check state,
// a branch of the working stores) and CheckTx. App hashes must equal the
// default store's, also when the proposal is aborted (FinalizeBlock of
// another hash). (Under -race the SDK's own signer cache, cosmossdk.io/x/tx
// signing.Context, reports races between CheckTx and the optimistic run,
// on either store; none is in this module.)
func TestSDKAppOptimisticExecution(t *testing.T) {
	if raceEnabled {
		t.Skip("the SDK's signer cache (cosmossdk.io/x/tx signing.Context) races with itself under optimistic execution, on either store")
	}
	chain := lifeNewChain(t)
	mods := raMods{mounted: []string{"alpha"}, written: []string{"alpha"}}
	cfg := testConfig()
	cfg.SnapshotInterval = 3
	oracle := raNewNode(t, "default store", false, compat.Config{}, false)
	ours := raNewNode(t, "ours", true, cfg, false)
	nodes := []*raNode{oracle, ours}
	for _, n := range nodes {
		n.mods = mods
		n.open(t, baseapp.SetOptimisticExecution())
	}
	raInitChain(t, chain, 1, nodes...)
	simTx := chain.enc.sendTx(t, banktypes.NewMsgSend(chain.addrs[1], chain.addrs[2], sdk.NewCoins(sdk.NewInt64Coin(testDenom, 1))))
	for _, n := range nodes {
		// the SDK's signer cache fills lazily, racing with itself (not
		// a store matter): fill it before any concurrency
		if _, err := n.app.CheckTx(&abci.RequestCheckTx{Tx: simTx, Type: abci.CheckTxType_New}); err != nil {
			t.Fatal(err)
		}
	}
	for h := int64(1); h <= 25; h++ {
		txs := chain.block(t)
		hash := []byte(fmt.Sprintf("block-%032d", h))
		var want []byte
		for i, n := range nodes {
			pp, err := n.app.ProcessProposal(&abci.RequestProcessProposal{Height: h, Txs: txs, Hash: hash})
			if err != nil || pp.Status != abci.ResponseProcessProposal_ACCEPT {
				t.Fatalf("%s: ProcessProposal %d: %v %v", n.name, h, pp, err)
			}
			// queries and CheckTx while the block runs optimistically
			done := make(chan struct{})
			go func() {
				defer close(done)
				for j := 0; j < 5; j++ {
					res, err := n.app.Query(context.Background(), &abci.RequestQuery{Path: "/app/simulate", Data: simTx})
					if err != nil || (h > 1 && res.Code != 0) {
						t.Errorf("%s: simulate at %d: %v %v", n.name, h, res, err)
						return
					}
				}
			}()
			for j := 0; j < 3; j++ {
				if _, err := n.app.CheckTx(&abci.RequestCheckTx{Tx: simTx, Type: abci.CheckTxType_New}); err != nil {
					t.Fatal(err)
				}
			}
			<-done
			fhash := hash
			if h%4 == 0 {
				fhash = []byte("another block") // the optimistic run is aborted
			}
			res, err := n.app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: h, Txs: txs, Hash: fhash})
			if err != nil {
				t.Fatalf("%s: FinalizeBlock %d: %v", n.name, h, err)
			}
			if i == 0 {
				want = res.AppHash
			} else if !bytes.Equal(res.AppHash, want) {
				t.Fatalf("block %d: %s app hash %X, %s %X", h, n.name, res.AppHash, nodes[0].name, want)
			}
		}
		for _, n := range nodes {
			if _, err := n.app.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
