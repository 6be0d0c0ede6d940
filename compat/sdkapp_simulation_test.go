package compat_test

// The Cosmos SDK's randomized module simulation (x/simulation
// SimulateFromSeed, the operations of every module of the configurator app
// of sdkapp_full_test.go that has them) run with the same seed on two apps
// built alike but for the store: ours (in a temporary directory) and the
// default store (rootmulti over cosmos/iavl on an in-memory database).
// The default store's app runs first, then ours. Every block's
// FinalizeBlock response (with its working app hash), the commit ID after
// every Commit and the change set the ADR-038 listeners saw are recorded on
// both and compared, then the simulation's own tally of operations, every
// store's contents at the last height and at a sample of earlier ones,
// proven ABCI store queries, and our database's verification.
//
// Simulation modules: auth, authz, bank, distribution, gov, group, mint,
// params, slashing, staking. The app's other modules (consensus, genutil,
// vesting, and the runtime's tx) have no simulation in cosmos-sdk v0.50.13;
// there are no invariants to check (no crisis module, as in the other
// configurator apps).
//
//	go test -count=1 -run TestSDKSimulationAgainstRootMulti -v ./compat/
//	MEMIAVL_SEED=<seed> replays a run.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"
	_ "unsafe" // go:linkname, see simResetGlobals

	"cosmossdk.io/depinject"
	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/runtime"
	"github.com/cosmos/cosmos-sdk/testutil/sims"
	sdk "github.com/cosmos/cosmos-sdk/types"
	kvtypes "github.com/cosmos/cosmos-sdk/types/kv"
	"github.com/cosmos/cosmos-sdk/types/module"
	moduletestutil "github.com/cosmos/cosmos-sdk/types/module/testutil"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	bankkeeper "github.com/cosmos/cosmos-sdk/x/bank/keeper"
	"github.com/cosmos/cosmos-sdk/x/simulation"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

const simChainID = "memiavl-sim"

// The gov and group simulations keep, in package variables, the first
// proposal (group) ID they saw; a second simulation in the same process
// starts from the first one's value and draws differently from the same
// seed (checked: three runs on the default store with one seed, the first
// tallies other gov deposits than the next two). simResetGlobals puts them
// back to their initial value (as of cosmos-sdk v0.50.13) before each run.
//
//go:linkname govSimInitialProposalID github.com/cosmos/cosmos-sdk/x/gov/simulation.initialProposalID
var govSimInitialProposalID uint64

//go:linkname groupSimInitialGroupID github.com/cosmos/cosmos-sdk/x/group/simulation.initialGroupID
var groupSimInitialGroupID uint64

func simResetGlobals() {
	govSimInitialProposalID = 100000000000000
	groupSimInitialGroupID = 100000000000000
}

// simBlock is what one app showed of one block.
type simBlock struct {
	finalize []byte // the marshaled ResponseFinalizeBlock
	appHash  []byte // its (working) app hash
	commit   storetypes.CommitID
	changes  []*storetypes.StoreKVPair // the listeners' change set of the block
}

// simRecorder is an ABCI listener recording every block of one app.
type simRecorder struct {
	app    *runtime.App
	blocks map[int64]*simBlock
	errs   []string
}

func (r *simRecorder) block(h int64) *simBlock {
	b := r.blocks[h]
	if b == nil {
		b = &simBlock{}
		r.blocks[h] = b
	}
	return b
}

func (r *simRecorder) ListenFinalizeBlock(_ context.Context, req abci.RequestFinalizeBlock, res abci.ResponseFinalizeBlock) error {
	bz, err := res.Marshal()
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("height %d: marshal FinalizeBlock response: %v", req.Height, err))
	}
	b := r.block(req.Height)
	b.finalize = bz
	b.appHash = bytes.Clone(res.AppHash)
	return nil
}

func (r *simRecorder) ListenCommit(ctx context.Context, _ abci.ResponseCommit, changeSet []*storetypes.StoreKVPair) error {
	h := sdk.UnwrapSDKContext(ctx).BlockHeight()
	b := r.block(h)
	cid := r.app.LastCommitID()
	b.commit = storetypes.CommitID{Version: cid.Version, Hash: bytes.Clone(cid.Hash)}
	for _, p := range changeSet {
		b.changes = append(b.changes, &storetypes.StoreKVPair{
			StoreKey: p.StoreKey, Delete: p.Delete, Key: bytes.Clone(p.Key), Value: bytes.Clone(p.Value),
		})
	}
	return nil
}

// simNode is one of the two apps.
type simNode struct {
	name   string
	ours   bool
	dir    string
	logger *lifeLogger
	app    *runtime.App
	cdc    codec.Codec
	bank   bankkeeper.BaseKeeper
	rec    *simRecorder
	sm     *module.SimulationManager
	out    bytes.Buffer // SimulateFromSeed's output
}

// newSimNode builds the configurator app of sdkapp_full_test.go on our
// store (ours) or on the default store over an in-memory database, with a
// recorder listening to every block and to every KV store's writes.
func newSimNode(t *testing.T, name string, ours bool, cfg compat.Config) *simNode {
	t.Helper()
	n := &simNode{name: name, ours: ours, logger: &lifeLogger{}}
	var builder *runtime.AppBuilder
	if err := depinject.Inject(fullAppConfig(), &builder, &n.cdc, &n.bank); err != nil {
		t.Fatal(err)
	}
	var opts []func(*baseapp.BaseApp)
	if ours {
		n.dir = t.TempDir()
		opts = append(opts, compat.SetupMemIAVL(n.logger, n.dir, cfg))
	}
	opts = append(opts, baseapp.SetChainID(simChainID))
	n.app = builder.Build(dbm.NewMemDB(), nil, opts...)
	if _, ok := n.app.CommitMultiStore().(*compat.MultiStore); ok != ours {
		t.Fatalf("%s: multistore %T", name, n.app.CommitMultiStore())
	}
	n.rec = &simRecorder{app: n.app, blocks: map[int64]*simBlock{}}
	n.app.SetStreamingManager(storetypes.StreamingManager{ABCIListeners: []storetypes.ABCIListener{n.rec}})
	var kv []storetypes.StoreKey
	for _, k := range n.app.GetStoreKeys() {
		if _, ok := k.(*storetypes.KVStoreKey); ok {
			kv = append(kv, k)
		}
	}
	n.app.CommitMultiStore().AddListeners(kv)
	// SDK v0.50's SimulateFromSeed delivers the operations' transactions
	// (BaseApp.SimDeliver) after FinalizeBlock, into the block's branch,
	// which FinalizeBlock has already written down and Commit does not
	// write again: without this, no operation reaches the committed state
	// (cosmos/cosmos-sdk#20541; later SDKs write the branch in the
	// simulation loop, cosmos/cosmos-sdk#20936). The precommiter, run by
	// Commit on the block's context, writes it as they do.
	n.app.SetPrecommiter(func(ctx sdk.Context) {
		ctx.MultiStore().(storetypes.CacheMultiStore).Write()
	})
	if err := n.app.Load(true); err != nil {
		t.Fatal(err)
	}
	n.sm = module.NewSimulationManagerFromAppModules(n.app.ModuleManager.Modules, nil)
	n.sm.RegisterStoreDecoders()
	cleanupNode(t, ours, n.logger, func() bool { return n.app != nil }, n.close)
	return n
}

func (n *simNode) close(t *testing.T) {
	t.Helper()
	err := closeApp(n.app)
	n.app = nil
	if err != nil {
		t.Errorf("%s: close: %v", n.name, err)
	}
}

// simulate runs SimulateFromSeed on the node (sims.SimulationOperations and
// sims.AppStateFn as simapp's TestFullAppSimulation, without its
// invariants: the app has no crisis module). maxAccounts caps the number
// of random accounts the simulation draws (up to 2,500).
func (n *simNode) simulate(t *testing.T, config simtypes.Config, maxAccounts int) {
	t.Helper()
	simState := module.SimulationState{
		AppParams: make(simtypes.AppParams),
		Cdc:       n.cdc,
		TxConfig:  moduletestutil.MakeTestTxConfig(),
		BondDenom: sdk.DefaultBondDenom,
	}
	//lint:ignore SA1019 the legacy proposals, as sims.SimulationOperations gives them
	simState.LegacyProposalContents = n.sm.GetProposalContents(simState)
	simState.ProposalMsgs = n.sm.GetProposalMsgs(simState)
	ops := n.sm.WeightedOperations(simState)
	simResetGlobals()
	randAccs := func(r *rand.Rand, k int) []simtypes.Account {
		return simtypes.RandomAccounts(r, min(k, maxAccounts))
	}
	appStateFn := sims.AppStateFn(n.cdc, n.sm, n.app.DefaultGenesis())
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: the simulation panicked: %v\n%s\nsimulation output (tail):\n%s", n.name, p, debug.Stack(), simTail(n.out.String(), 4000))
		}
	}()
	stopEarly, _, err := simulation.SimulateFromSeed(t, &n.out, n.app.BaseApp, appStateFn, randAccs, ops,
		n.bank.GetBlockedAddresses(), config, n.cdc)
	if err != nil {
		t.Fatalf("%s: simulation: %v", n.name, err)
	}
	if stopEarly {
		t.Logf("%s: the simulation stopped early", n.name)
	}
}

func simTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// simStats returns the simulation's tally of operations (module -> message
// -> "ok"/"failure" -> count) from its output.
func simStats(out string) (map[string]map[string]map[string]int, error) {
	i := strings.Index(out, "Simulation complete")
	if i < 0 {
		return nil, fmt.Errorf("no end of simulation in the output")
	}
	j := strings.Index(out[i:], "{")
	if j < 0 {
		return nil, fmt.Errorf("no statistics in the output")
	}
	var st map[string]map[string]map[string]int
	err := json.Unmarshal([]byte(out[i+j:]), &st)
	return st, err
}

// diffChanges describes the first difference between two change sets.
func diffChanges(a, b []*storetypes.StoreKVPair) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		x, y := a[i], b[i]
		if x.StoreKey != y.StoreKey || x.Delete != y.Delete || !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Value, y.Value) {
			return fmt.Sprintf("write %d: store %s delete %v key %X value %X; default store: store %s delete %v key %X value %X",
				i, x.StoreKey, x.Delete, x.Key, x.Value, y.StoreKey, y.Delete, y.Key, y.Value)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d writes, default store %d", len(a), len(b))
	}
	return ""
}

// compareSimStores compares every pair of every IAVL store of two
// branches, of our app (oursApp) and of the default store's, returning how
// many pairs were compared.
func compareSimStores(t *testing.T, what string, sm *module.SimulationManager, oursApp, oracleApp *runtime.App, ours, oracle storetypes.MultiStore) int {
	t.Helper()
	pairs := 0
	for _, k := range oracleApp.GetStoreKeys() {
		kv, ok := k.(*storetypes.KVStoreKey)
		if !ok {
			continue
		}
		a, b := ours.GetKVStore(oursApp.UnsafeFindStoreKey(kv.Name())), oracle.GetKVStore(kv)
		ia, ib := a.Iterator(nil, nil), b.Iterator(nil, nil)
		n, bad := 0, 0
		for ; ia.Valid() || ib.Valid(); n++ {
			switch {
			case !ia.Valid():
				t.Errorf("%s: store %s: key %X (value %X) only in the default store", what, kv.Name(), ib.Key(), ib.Value())
				bad++
				ib.Next()
				continue
			case !ib.Valid():
				t.Errorf("%s: store %s: key %X (value %X) only in ours", what, kv.Name(), ia.Key(), ia.Value())
				bad++
				ia.Next()
				continue
			}
			switch c := bytes.Compare(ia.Key(), ib.Key()); {
			case c < 0:
				t.Errorf("%s: store %s: key %X (value %X) only in ours", what, kv.Name(), ia.Key(), ia.Value())
				bad++
				ia.Next()
			case c > 0:
				t.Errorf("%s: store %s: key %X (value %X) only in the default store", what, kv.Name(), ib.Key(), ib.Value())
				bad++
				ib.Next()
			default:
				if !bytes.Equal(ia.Value(), ib.Value()) {
					dec := ""
					if _, ok := sm.StoreDecoders[kv.Name()]; ok {
						func() {
							defer func() { _ = recover() }() // a decoder may not know the key
							dec = "\n" + sims.GetSimulationLog(kv.Name(), sm.StoreDecoders,
								[]kvtypes.Pair{{Key: ia.Key(), Value: ia.Value()}}, []kvtypes.Pair{{Key: ib.Key(), Value: ib.Value()}})
						}()
					}
					t.Errorf("%s: store %s: key %X: value %X, default store %X%s", what, kv.Name(), ia.Key(), ia.Value(), ib.Value(), dec)
					bad++
				}
				ia.Next()
				ib.Next()
			}
			if bad >= 8 {
				t.Fatalf("%s: store %s: too many differences", what, kv.Name())
			}
		}
		if err := ia.Close(); err != nil {
			t.Errorf("%s: store %s: close our iterator: %v", what, kv.Name(), err)
		}
		if err := ib.Close(); err != nil {
			t.Errorf("%s: store %s: close the default store's iterator: %v", what, kv.Name(), err)
		}
		pairs += n
	}
	return pairs
}

// compareSimQueries compares ABCI store queries with proofs
// ("/store/<store>/key") of both apps, for keys present and absent in every
// IAVL store, at the last height, an older one and height 0, verifying the
// proofs against the recorded app hashes, and a subspace query per store;
// it returns how many queries it compared.
func compareSimQueries(t *testing.T, r *rand.Rand, ours, oracle *simNode, last int64) int {
	t.Helper()
	query := func(n *simNode, req abci.RequestQuery) storetypes.ResponseQuery {
		t.Helper()
		res, err := n.app.Query(context.Background(), &req)
		if err != nil {
			t.Fatalf("%s: query %s %X at %d: %v", n.name, req.Path, req.Data, req.Height, err)
		}
		return storetypes.ResponseQuery(*res)
	}
	older := max(2, last-1-int64(r.Intn(4))) // BaseApp refuses proofs at heights up to 1
	n, bad := 0, 0
	for _, k := range oracle.app.GetStoreKeys() {
		sk, ok := k.(*storetypes.KVStoreKey)
		if !ok {
			continue
		}
		it := oracle.app.CommitMultiStore().CacheMultiStore().GetKVStore(sk).Iterator(nil, nil)
		var keys [][]byte
		for ; it.Valid(); it.Next() {
			keys = append(keys, bytes.Clone(it.Key()))
		}
		it.Close()
		var probe [][]byte
		for i := 0; i < 3 && len(keys) > 0; i++ {
			probe = append(probe, keys[r.Intn(len(keys))])
		}
		if len(keys) > 0 {
			probe = append(probe, append(bytes.Clone(keys[r.Intn(len(keys))]), 0)) // absent, between two keys
		} else {
			probe = append(probe, []byte{0x01})
		}
		for _, key := range probe {
			for _, h := range []int64{last, older, 0} {
				req := abci.RequestQuery{Path: "/store/" + sk.Name() + "/key", Data: key, Height: h, Prove: true}
				a, b := query(ours, req), query(oracle, req)
				n++
				if err := sameResponse(&a, nil, &b, nil); err != nil {
					t.Errorf("store %s key %X at height %d: %v", sk.Name(), key, h, err)
					if bad++; bad >= 8 {
						t.FailNow()
					}
					continue
				}
				if a.Code != 0 {
					t.Fatalf("store %s key %X at height %d failed on both: %s", sk.Name(), key, h, a.Log)
				}
				if blk := oracle.rec.blocks[a.Height]; blk != nil && verifiable(t, a.ProofOps) {
					if err := verifyProof(sk.Name(), &a, blk.commit.Hash); err != nil {
						t.Errorf("store %s key %X at height %d: proof: %v", sk.Name(), key, h, err)
					}
				}
			}
		}
		if len(keys) > 0 {
			req := abci.RequestQuery{Path: "/store/" + sk.Name() + "/subspace", Data: keys[r.Intn(len(keys))][:1]}
			a, b := query(ours, req), query(oracle, req)
			n++
			if err := sameResponse(&a, nil, &b, nil); err != nil {
				t.Errorf("store %s subspace %X: %v", sk.Name(), req.Data, err)
			}
		}
	}
	return n
}

// TestSDKSimulationAgainstRootMulti runs the SDK's randomized simulation of
// the configurator app's modules with one seed on our store and on the
// default store and compares the two runs block by block.
func TestSDKSimulationAgainstRootMulti(t *testing.T) {
	start := time.Now()
	seed := testutil.Seed(t)
	r := rand.New(rand.NewSource(seed))

	cfg := testConfig()
	cfg.SnapshotInterval = 5 // background rewrites during the run
	if r.Intn(2) == 0 {
		cfg.AsyncCommitBuffer = 1 + r.Intn(3)
		cfg.Fsync = []string{"every-commit", "grouped"}[r.Intn(2)]
	}
	// sizes: -short (a plain go test), -short=false, -compat.full or MEMIAVL_FULL=1
	blocks := size(400, 200, 25)
	blockSize := size(50, 40, 12)
	maxAccounts := size(1000, 300, 100)
	t.Logf("%d blocks, average block size %d operations, at most %d accounts; async commit buffer %d, fsync %s",
		blocks, blockSize, maxAccounts, cfg.AsyncCommitBuffer, cfg.Fsync)

	config := simtypes.Config{
		ChainID:            simChainID,
		Seed:               seed,
		InitialBlockHeight: 1,
		NumBlocks:          blocks,
		BlockSize:          blockSize,
		Commit:             true,
		Lean:               true,
	}

	oracle := newSimNode(t, "default store", false, cfg)
	ours := newSimNode(t, "ours", true, cfg)
	if got := len(oracle.sm.Modules); got == 0 {
		t.Fatal("no simulation modules")
	}
	var simModules []string
	for _, m := range oracle.sm.Modules {
		if n, ok := m.(interface{ Name() string }); ok {
			simModules = append(simModules, n.Name())
		}
	}
	t.Logf("simulation modules: %s", strings.Join(simModules, " "))

	t0 := time.Now()
	oracle.simulate(t, config, maxAccounts)
	tOracle := time.Since(t0)
	t0 = time.Now()
	ours.simulate(t, config, maxAccounts)
	tOurs := time.Since(t0)

	for _, n := range []*simNode{oracle, ours} {
		for _, e := range n.rec.errs {
			t.Errorf("%s: %s", n.name, e)
		}
	}

	// block by block
	last := oracle.app.LastBlockHeight()
	if got := ours.app.LastBlockHeight(); got != last {
		t.Errorf("last block height %d, default store %d", got, last)
	}
	if last < 2 {
		t.Fatalf("the simulation committed %d blocks", last)
	}
	if len(ours.rec.blocks) != len(oracle.rec.blocks) {
		t.Errorf("%d blocks recorded, default store %d", len(ours.rec.blocks), len(oracle.rec.blocks))
	}
	var writes int
	later := map[string]int{} // writes per store after the first block
	for h := int64(1); h <= last; h++ {
		a, b := ours.rec.blocks[h], oracle.rec.blocks[h]
		if a == nil || b == nil {
			t.Fatalf("height %d: recorded ours %v, default store %v", h, a != nil, b != nil)
		}
		writes += len(b.changes)
		if h > 1 {
			for _, p := range b.changes {
				later[p.StoreKey]++
			}
		}
		bad := false
		if !bytes.Equal(a.appHash, b.appHash) {
			t.Errorf("height %d: FinalizeBlock app hash %X, default store %X", h, a.appHash, b.appHash)
			bad = true
		}
		if !bytes.Equal(a.finalize, b.finalize) {
			var ra, rb abci.ResponseFinalizeBlock
			_ = ra.Unmarshal(a.finalize)
			_ = rb.Unmarshal(b.finalize)
			t.Errorf("height %d: FinalizeBlock responses differ: %s", h, fullDiff(&ra, &rb))
			bad = true
		}
		if a.commit.Version != b.commit.Version || !bytes.Equal(a.commit.Hash, b.commit.Hash) {
			t.Errorf("height %d: commit %d %X, default store %d %X", h, a.commit.Version, a.commit.Hash, b.commit.Version, b.commit.Hash)
			bad = true
		}
		if d := diffChanges(a.changes, b.changes); d != "" {
			t.Errorf("height %d: change sets differ: %s", h, d)
			bad = true
		}
		if bad {
			t.Fatalf("the runs differ from height %d on (seed %d)", h, seed)
		}
	}
	if a, b := ours.app.LastCommitID(), oracle.app.LastCommitID(); a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
		t.Fatalf("last commit %v, default store %v", a, b)
	}

	// the simulations' tallies
	stA, errA := simStats(ours.out.String())
	stB, errB := simStats(oracle.out.String())
	if errA != nil || errB != nil {
		t.Fatalf("statistics: ours %v, default store %v", errA, errB)
	}
	jA, _ := json.Marshal(stA)
	jB, _ := json.Marshal(stB)
	if !bytes.Equal(jA, jB) {
		t.Errorf("operation tallies differ:\nours          %s\ndefault store %s", jA, jB)
	}
	var okOps, failedOps int
	var kinds []string
	for mod, msgs := range stB {
		if mod == "begin_block" { // the mock CometBFT's evidence and signatures
			continue
		}
		for msg, res := range msgs {
			okOps += res["ok"]
			failedOps += res["failure"]
			if res["ok"] > 0 {
				kinds = append(kinds, fmt.Sprintf("%s:%s=%d", mod, msg[strings.LastIndex(msg, ".")+1:], res["ok"]))
			}
		}
	}
	if okOps == 0 {
		t.Errorf("no operation succeeded: %s", jB)
	}
	// The transactions' writes are committed (see the precommiter) and
	// compared with the default store's, block by block above and in the
	// stores below. (Every successful transaction writes its signer's
	// sequence to the accounts store, but a short run may have all of them
	// in the first block, whose writes include the genesis accounts: the
	// writes after it are only logged.)
	t.Logf("writes to the accounts after the first block: %d", later[authtypes.StoreKey])

	// store contents at the last height and a sample of earlier ones
	pairs := compareSimStores(t, fmt.Sprintf("height %d", last), oracle.sm, ours.app, oracle.app,
		ours.app.CommitMultiStore().CacheMultiStore(), oracle.app.CommitMultiStore().CacheMultiStore())
	heights := []int64{last - 1, last - 2 - int64(r.Intn(3)), last - 5 - int64(r.Intn(4))} // within testConfig's views
	for _, h := range heights {
		if h < 1 {
			continue
		}
		a, err := ours.app.CommitMultiStore().CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Errorf("ours: branch at height %d: %v", h, err)
			continue
		}
		b, err := oracle.app.CommitMultiStore().CacheMultiStoreWithVersion(h)
		if err != nil {
			t.Fatalf("default store: branch at height %d: %v", h, err)
		}
		pairs += compareSimStores(t, fmt.Sprintf("height %d", h), oracle.sm, ours.app, oracle.app, a, b)
	}

	queries := compareSimQueries(t, r, ours, oracle, last)

	// our database verifies, at the last height and app hash
	hash := ours.app.LastCommitID().Hash
	ours.close(t)
	report, err := multitree.Verify(compat.DBDir(ours.dir))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if report.Version != last || !bytes.Equal(report.AppHash, hash) {
		t.Errorf("verify: version %d app hash %X, want %d %X", report.Version, report.AppHash, last, hash)
	}

	t.Logf("%d blocks, %d operations (%d ok, %d failed), %d writes seen by the listeners, %d store pairs compared (heights %d and %v), %d proven store queries; "+
		"simulation %v on the default store, %v on ours; total %v",
		last, okOps+failedOps, okOps, failedOps, writes, pairs, last, heights, queries, tOracle.Round(time.Millisecond), tOurs.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
	sort.Strings(kinds)
	t.Logf("operations succeeded: %s", strings.Join(kinds, " "))
	t.Logf("writes per store after the first block: %v", later)
}
