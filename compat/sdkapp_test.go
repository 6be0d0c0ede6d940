package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	"github.com/cosmos/cosmos-sdk/runtime"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	moduletestutil "github.com/cosmos/cosmos-sdk/types/module/testutil"
	"github.com/cosmos/cosmos-sdk/x/auth"
	authkeeper "github.com/cosmos/cosmos-sdk/x/auth/keeper"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	"github.com/cosmos/cosmos-sdk/x/bank"
	bankkeeper "github.com/cosmos/cosmos-sdk/x/bank/keeper"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// testApp is a minimal SDK v0.50 application: BaseApp with the auth and bank
// modules and a transient store, without an ante handler (transactions are
// not signed; the messages run through the real module message servers).
type testApp struct {
	*baseapp.BaseApp
	encCfg moduletestutil.TestEncodingConfig
}

const (
	testDenom   = "stake"
	testChainID = "memiavl-test"
)

// newAuthBankApp is the base of the test apps: a BaseApp on db (opts, then
// the test chain ID) with the auth and bank modules' stores mounted and their
// message services registered. The caller mounts further stores, sets the
// ABCI handlers and loads a version; mm is the two modules' manager.
func newAuthBankApp(t *testing.T, db dbm.DB, opts ...func(*baseapp.BaseApp)) (app *testApp, mm *module.Manager) {
	t.Helper()
	encCfg := moduletestutil.MakeTestEncodingConfig(auth.AppModuleBasic{}, bank.AppModuleBasic{})
	keys := storetypes.NewKVStoreKeys(authtypes.StoreKey, banktypes.StoreKey)
	logger := log.NewNopLogger()
	opts = append(opts, baseapp.SetChainID(testChainID))
	bapp := baseapp.NewBaseApp("memiavl-test", logger, db, encCfg.TxConfig.TxDecoder(), opts...)
	bapp.SetInterfaceRegistry(encCfg.InterfaceRegistry)
	bapp.MountKVStores(keys)

	ac := addresscodec.NewBech32Codec(sdk.Bech32MainPrefix)
	authority := authtypes.NewModuleAddress("gov").String()
	accountKeeper := authkeeper.NewAccountKeeper(encCfg.Codec, runtime.NewKVStoreService(keys[authtypes.StoreKey]),
		authtypes.ProtoBaseAccount, map[string][]string{}, ac, sdk.Bech32MainPrefix, authority)
	bankKeeper := bankkeeper.NewBaseKeeper(encCfg.Codec, runtime.NewKVStoreService(keys[banktypes.StoreKey]),
		accountKeeper, nil, authority, logger)
	mm = module.NewManager(
		auth.NewAppModule(encCfg.Codec, accountKeeper, nil, nil),
		bank.NewAppModule(encCfg.Codec, bankKeeper, accountKeeper, nil),
	)
	mm.SetOrderInitGenesis(authtypes.ModuleName, banktypes.ModuleName)
	if err := mm.RegisterServices(module.NewConfigurator(encCfg.Codec, bapp.MsgServiceRouter(), bapp.GRPCQueryRouter())); err != nil {
		t.Fatal(err)
	}
	return &testApp{BaseApp: bapp, encCfg: encCfg}, mm
}

// initAuthBankGenesis runs the InitGenesis of mm's modules on their parts of
// the genesis state in req.
func (a *testApp) initAuthBankGenesis(ctx sdk.Context, mm *module.Manager, req *abci.RequestInitChain) error {
	var genesis map[string]json.RawMessage
	if err := json.Unmarshal(req.AppStateBytes, &genesis); err != nil {
		return err
	}
	// the module manager's InitGenesis insists on a validator set,
	// which needs the staking module; run the two modules' directly
	for _, name := range mm.OrderInitGenesis {
		mm.Modules[name].(module.HasGenesis).InitGenesis(ctx, a.encCfg.Codec, genesis[name])
	}
	return nil
}

func newTestApp(t *testing.T, db dbm.DB, opts ...func(*baseapp.BaseApp)) *testApp {
	t.Helper()
	app, mm := newAuthBankApp(t, db, opts...)
	tkeys := storetypes.NewTransientStoreKeys("transient_test")
	app.MountTransientStores(tkeys)
	tkey := tkeys["transient_test"]
	app.SetInitChainer(func(ctx sdk.Context, req *abci.RequestInitChain) (*abci.ResponseInitChain, error) {
		if err := app.initAuthBankGenesis(ctx, mm, req); err != nil {
			return nil, err
		}
		return &abci.ResponseInitChain{}, nil
	})
	app.SetBeginBlocker(func(ctx sdk.Context) (sdk.BeginBlock, error) {
		// the transient store is written every block and never committed
		ctx.KVStore(tkey).Set([]byte("height"), sdk.Uint64ToBigEndian(uint64(ctx.BlockHeight())))
		return mm.BeginBlock(ctx)
	})
	app.SetEndBlocker(mm.EndBlock)
	if err := app.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	return app
}

func testAccounts(n int) []sdk.AccAddress {
	addrs := make([]sdk.AccAddress, n)
	for i := range addrs {
		addrs[i] = sdk.AccAddress(fmt.Appendf(nil, "memiavl-test-acct-%03d", i)[:20])
	}
	return addrs
}

func genesisState(t *testing.T, cdc moduletestutil.TestEncodingConfig, addrs []sdk.AccAddress) []byte {
	var accs authtypes.GenesisAccounts
	var balances []banktypes.Balance
	supply := sdk.NewCoins()
	for i, a := range addrs {
		accs = append(accs, authtypes.NewBaseAccount(a, nil, uint64(i), 0))
		coins := sdk.NewCoins(sdk.NewCoin(testDenom, math.NewInt(int64(100_000+i*37))))
		balances = append(balances, banktypes.Balance{Address: a.String(), Coins: coins})
		supply = supply.Add(coins...)
	}
	state := map[string]json.RawMessage{
		authtypes.ModuleName: cdc.Codec.MustMarshalJSON(authtypes.NewGenesisState(authtypes.DefaultParams(), accs)),
		banktypes.ModuleName: cdc.Codec.MustMarshalJSON(banktypes.NewGenesisState(banktypes.DefaultParams(), balances, supply, nil, nil)),
	}
	bz, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

// sendTx encodes an unsigned transaction of bank sends.
func (a *testApp) sendTx(t *testing.T, msgs ...sdk.Msg) []byte {
	b := a.encCfg.TxConfig.NewTxBuilder()
	if err := b.SetMsgs(msgs...); err != nil {
		t.Fatal(err)
	}
	b.SetGasLimit(1_000_000)
	bz, err := a.encCfg.TxConfig.TxEncoder()(b.GetTx())
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

// TestSDKAppAgainstDefaultStore runs the same chain on a BaseApp with the
// default store (rootmulti over cosmos/iavl) and on one with our multistore
// installed by SetupMemIAVL, comparing the app hash of every block, ABCI
// store queries with proofs and gRPC queries at past heights.
func TestSDKAppAgainstDefaultStore(t *testing.T) {
	r := testutil.Rand(t)
	home := t.TempDir()
	cfg := testConfig()
	oracleDB := dbm.NewMemDB()
	oracle := newTestApp(t, oracleDB)
	ours := newTestApp(t, dbm.NewMemDB(), compat.SetupMemIAVL(log.NewNopLogger(), home, cfg))
	if _, ok := ours.CommitMultiStore().(*compat.MultiStore); !ok {
		t.Fatalf("SetupMemIAVL did not install the multistore: %T", ours.CommitMultiStore())
	}
	defer func() { ours.CommitMultiStore().(*compat.MultiStore).Close() }()

	addrs := testAccounts(40)
	genesis := genesisState(t, oracle.encCfg, addrs)
	for _, a := range []*testApp{oracle, ours} {
		if _, err := a.InitChain(&abci.RequestInitChain{ChainId: testChainID, AppStateBytes: genesis, InitialHeight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	blocks := 120
	var failed, ok int
	for h := int64(1); h <= int64(blocks); h++ {
		if h == int64(blocks)/2 {
			// restart both apps on their databases
			ours.CommitMultiStore().(*compat.MultiStore).Close()
			oracle = newTestApp(t, oracleDB)
			ours = newTestApp(t, dbm.NewMemDB(), compat.SetupMemIAVL(log.NewNopLogger(), home, cfg))
			if a, b := ours.LastCommitID(), oracle.LastCommitID(); a.Version != b.Version || !bytes.Equal(a.Hash, b.Hash) {
				t.Fatalf("after restart: %v, default store %v", a, b)
			}
		}
		var txs [][]byte
		for i := 0; i < 1+r.Intn(12); i++ {
			var msgs []sdk.Msg
			for j := 0; j < 1+r.Intn(3); j++ {
				from, to := addrs[r.Intn(len(addrs))], addrs[r.Intn(len(addrs))]
				if r.Intn(8) == 0 {
					to = sdk.AccAddress(fmt.Appendf(nil, "memiavl-new-acct-%03d", r.Intn(1000))[:20])
				}
				n := 1 + r.Int63n(400)
				if r.Intn(12) == 0 {
					n = 1_000_000_000 // more than any balance: the transaction fails
				}
				amount := sdk.NewCoins(sdk.NewCoin(testDenom, math.NewInt(n)))
				msgs = append(msgs, banktypes.NewMsgSend(from, to, amount))
			}
			txs = append(txs, oracle.sendTx(t, msgs...))
		}
		req := &abci.RequestFinalizeBlock{Height: h, Txs: txs}
		ra, err := ours.FinalizeBlock(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := oracle.FinalizeBlock(req)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ra.AppHash, rb.AppHash) {
			t.Fatalf("block %d: app hash %X, default store %X", h, ra.AppHash, rb.AppHash)
		}
		for i := range ra.TxResults {
			if ra.TxResults[i].Code != rb.TxResults[i].Code {
				t.Fatalf("block %d tx %d: code %d, default store %d", h, i, ra.TxResults[i].Code, rb.TxResults[i].Code)
			}
			if ra.TxResults[i].Code == 0 {
				ok++
			} else {
				failed++
			}
		}
		if _, err := ours.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := oracle.Commit(); err != nil {
			t.Fatal(err)
		}
		if h > 2 {
			compareAppQueries(t, r, ours, oracle, addrs, h, ra.AppHash)
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("expected both successful and failing transactions, got %d and %d", ok, failed)
	}
	t.Logf("%d blocks, %d transactions executed, %d rejected by the bank module; app hashes equal", blocks, ok, failed)
}

// compareAppQueries compares ABCI store queries with proofs (BaseApp's
// "/store/<name>/key" path) and gRPC balance queries at the latest and an
// older height.
func compareAppQueries(t *testing.T, r *rand.Rand, ours, oracle *testApp, addrs []sdk.AccAddress, h int64, appHash []byte) {
	t.Helper()
	addr := addrs[r.Intn(len(addrs))]
	key := append([]byte{0x02, byte(len(addr))}, addr...) // x/bank balances prefix | len | address
	key = append(key, testDenom...)
	if r.Intn(4) == 0 {
		key = append(key, 'x') // absent
	}
	for _, height := range []int64{h, h - 1} {
		qa, qb := queryBoth(t, ours, oracle, abci.RequestQuery{Path: "/store/bank/key", Data: key, Height: height, Prove: true})
		sa, sb := storetypes.ResponseQuery(*qa), storetypes.ResponseQuery(*qb)
		if err := sameResponse(&sa, nil, &sb, nil); err != nil {
			t.Fatalf("store query at %d: %v", height, err)
		}
		if qa.Code != 0 {
			t.Fatalf("store query at %d failed: %s", height, qa.Log)
		}
		if height == h && verifiable(t, sa.ProofOps) {
			// (the bank module's denom index holds empty values, which
			// ics23 cannot prove as neighbours; such proofs fail alike)
			if err := verifyProof("bank", &sa, appHash); err != nil {
				t.Fatalf("proof at %d: %v", height, err)
			}
		}
	}
	// a gRPC query at a past height goes through CacheMultiStoreWithVersion
	q := &banktypes.QueryBalanceRequest{Address: addr.String(), Denom: testDenom}
	data, err := q.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	height := h - int64(r.Intn(3))
	qa, qb := queryBoth(t, ours, oracle, abci.RequestQuery{Path: "/cosmos.bank.v1beta1.Query/Balance", Data: data, Height: height})
	if qa.Code != 0 || qb.Code != 0 || !bytes.Equal(qa.Value, qb.Value) {
		t.Fatalf("gRPC balance at %d: code %d %X (%s), default store code %d %X (%s)", height, qa.Code, qa.Value, qa.Log, qb.Code, qb.Value, qb.Log)
	}
}

// queryBoth sends the same ABCI query to both apps (each its own copy, as
// BaseApp may fill in the height) and returns their responses.
func queryBoth(t *testing.T, ours, oracle *testApp, req abci.RequestQuery) (a, b *abci.ResponseQuery) {
	t.Helper()
	ra, rb := req, req
	a, err := ours.Query(context.Background(), &ra)
	if err != nil {
		t.Fatal(err)
	}
	b, err = oracle.Query(context.Background(), &rb)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}
