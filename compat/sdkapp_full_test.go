package compat_test

// A realistic multi-module SDK v0.50 application (built with depinject from
// the SDK's test configurator: auth, bank, staking, slashing, distribution,
// mint, gov, params, consensus, tx, genutil, vesting, authz, group) run block
// by block on our store and on the default store (rootmulti over cosmos/iavl
// in memory), with signed transactions through the real ante handler,
// validator votes and absences, block times, a restart, and comparisons of
// every ABCI response and of store and gRPC queries.
//
//	go test -count=1 -run TestFullSDKApp ./compat/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/depinject"
	"cosmossdk.io/log"
	"cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	cmtcrypto "github.com/cometbft/cometbft/crypto"
	cryptoenc "github.com/cometbft/cometbft/crypto/encoding"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	cmttypes "github.com/cometbft/cometbft/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/crypto/keys/ed25519"
	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/runtime"
	"github.com/cosmos/cosmos-sdk/testutil/configurator"
	"github.com/cosmos/cosmos-sdk/testutil/sims"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authkeeper "github.com/cosmos/cosmos-sdk/x/auth/keeper"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	vestingtypes "github.com/cosmos/cosmos-sdk/x/auth/vesting/types"
	"github.com/cosmos/cosmos-sdk/x/authz"
	bankkeeper "github.com/cosmos/cosmos-sdk/x/bank/keeper"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"
	consensustypes "github.com/cosmos/cosmos-sdk/x/consensus/types"
	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"
	govkeeper "github.com/cosmos/cosmos-sdk/x/gov/keeper"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	govv1 "github.com/cosmos/cosmos-sdk/x/gov/types/v1"
	"github.com/cosmos/cosmos-sdk/x/group"
	minttypes "github.com/cosmos/cosmos-sdk/x/mint/types"
	slashingkeeper "github.com/cosmos/cosmos-sdk/x/slashing/keeper"
	slashingtypes "github.com/cosmos/cosmos-sdk/x/slashing/types"
	stakingkeeper "github.com/cosmos/cosmos-sdk/x/staking/keeper"
	stakingtypes "github.com/cosmos/cosmos-sdk/x/staking/types"

	_ "github.com/cosmos/cosmos-sdk/x/auth"           // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/auth/tx/config" // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/auth/vesting"   // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/authz/module"   // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/bank"           // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/consensus"      // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/distribution"   // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/genutil"        // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/gov"            // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/group/module"   // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/mint"           // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/params"         // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/slashing"       // app wiring
	_ "github.com/cosmos/cosmos-sdk/x/staking"        // app wiring

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

const (
	fullChainID  = "memiavl-full"
	fullDenom    = "stake" // sdk.DefaultBondDenom, the bond and mint denomination
	fullDenom2   = "photon"
	fullGas      = 2_000_000
	fullAccounts = 20 // accounts funded at genesis; 0..3 operate the genesis validators
	fullSpare    = 4  // keys without a genesis account (vesting accounts are created for them)
	fullVals     = 4  // genesis validators
	fullNewVal   = 4  // account (and consensus key) of the validator created by a transaction
	fullFlaky    = 3  // the validator that misses most blocks (and gets jailed)
)

// fullApp is the application: a runtime.App built by depinject, with the
// keepers the transaction generator reads (on the default store's app only).
type fullApp struct {
	*runtime.App
	cdc      codec.Codec
	txConfig client.TxConfig
	accounts authkeeper.AccountKeeper
	bank     bankkeeper.BaseKeeper
	staking  *stakingkeeper.Keeper
	slashing slashingkeeper.Keeper
	gov      *govkeeper.Keeper
}

func fullAppConfig() depinject.Config {
	return depinject.Configs(
		configurator.NewAppConfig(
			configurator.AuthModule(),
			configurator.BankModule(),
			configurator.StakingModule(),
			configurator.SlashingModule(),
			configurator.DistributionModule(),
			configurator.MintModule(),
			configurator.GovModule(),
			configurator.ParamsModule(),
			configurator.ConsensusModule(),
			configurator.TxModule(),
			configurator.GenutilModule(),
			configurator.VestingModule(),
			configurator.AuthzModule(),
			configurator.GroupModule(),
		),
		depinject.Supply(log.NewNopLogger()),
	)
}

// newFullApp builds the app on db as sims.SetupWithConfiguration does, with
// opts before the modules' BaseApp options, and loads the latest version.
func newFullApp(t *testing.T, db dbm.DB, opts ...func(*baseapp.BaseApp)) *fullApp {
	t.Helper()
	var (
		a       fullApp
		builder *runtime.AppBuilder
	)
	if err := depinject.Inject(fullAppConfig(), &builder, &a.cdc, &a.txConfig, &a.accounts, &a.bank, &a.staking, &a.slashing, &a.gov); err != nil {
		t.Fatal(err)
	}
	opts = append(opts, baseapp.SetChainID(fullChainID))
	a.App = builder.Build(db, nil, opts...)
	if err := a.Load(true); err != nil {
		t.Fatal(err)
	}
	return &a
}

// fullNode is one node, reopened on the same databases across restarts: the
// app on our store (home directory dir, database memiavl.db) or on the
// default store (rootmulti over cosmos/iavl on an in-memory cosmos-db, which
// survives BaseApp.Close). The default store's reference is the in-memory
// backend, as in the other equivalence tests: over goleveldb, cosmos/iavl
// cannot read back the empty root it saves for an empty store (goleveldb
// returns an empty value as absent), so there every historical branch
// (CacheMultiStoreWithVersion, hence every gRPC query) and every proven
// query of a store never written fails with "version does not exist"
// (cosmos/iavl#939, cosmos/cosmos-sdk#20254).
type fullNode struct {
	name   string
	ours   bool
	dir    string // ours: the node's home
	db     dbm.DB // BaseApp's database (unused with our store)
	cfg    compat.Config
	logger *lifeLogger
	app    *fullApp
}

func newFullNode(t *testing.T, name string, ours bool, cfg compat.Config) *fullNode {
	n := &fullNode{name: name, ours: ours, db: dbm.NewMemDB(), cfg: cfg, logger: &lifeLogger{}}
	if ours {
		n.dir = t.TempDir()
	}
	cleanupNode(t, ours, n.logger, func() bool { return n.app != nil }, n.close)
	return n
}

func (n *fullNode) open(t *testing.T) {
	t.Helper()
	var opts []func(*baseapp.BaseApp)
	if n.ours {
		opts = append(opts, compat.SetupMemIAVL(n.logger, n.dir, n.cfg))
	}
	n.app = newFullApp(t, n.db, opts...)
	if _, ok := n.app.CommitMultiStore().(*compat.MultiStore); ok != n.ours {
		t.Fatalf("%s: multistore %T", n.name, n.app.CommitMultiStore())
	}
}

// close closes the app with closeApp.
func (n *fullNode) close(t *testing.T) {
	t.Helper()
	err := closeApp(n.app)
	n.app = nil
	if err != nil {
		t.Fatalf("%s: close: %v", n.name, err)
	}
}

// fullCmtVal is a member of CometBFT's validator set.
type fullCmtVal struct {
	pub   cmtcrypto.PubKey
	power int64
}

// fullTx is a signed transaction with the message kind counted for it and
// what to record when it succeeds.
type fullTx struct {
	kind string
	bz   []byte
	onOK func(res *abci.ExecTxResult)
}

type fullGrant struct {
	granter, grantee int
	typ              string // "send", "delegate" or "vote"
}

type fullPolicy struct {
	addr    string
	members []int
}

type fullGroupProposal struct {
	id     uint64
	policy int
}

// fullChain drives both nodes: the genesis, the validator set as CometBFT
// tracks it, the blocks' transactions, and the comparisons.
type fullChain struct {
	t            *testing.T
	r            *rand.Rand
	ours, oracle *fullNode

	keys     []*secp256k1.PrivKey
	addrs    []sdk.AccAddress
	consKeys []*ed25519.PrivKey // validator i's consensus key; account i operates it
	consIdx  map[string]int     // consensus address -> validator index

	genesisTime time.Time
	valsets     map[int64][]fullCmtVal // CometBFT's validator set by height
	times       map[int64]time.Time
	hashes      map[int64][]byte

	// generator state
	grants         []fullGrant
	policies       []fullPolicy
	groupProposals []fullGroupProposal
	createdVal     bool
	noFault        bool   // sign without a fault (the forced transactions)
	forcedDel      string // the validator of the forced delegation

	// per block, read from the default store's committed state
	ctx       sdk.Context
	blockTime time.Time
	seq       map[int]uint64
	acct      map[int]sdk.AccountI
	vals      []stakingtypes.Validator
	proposals []govv1.Proposal

	stats      map[string]*[2]int // per message kind: succeeded, failed
	events     map[string]int
	updates    int
	queries    [3]int // store queries, gRPC queries answered and gRPC queries failing alike
	mismatches int
}

func newFullChain(t *testing.T, r *rand.Rand, cfg compat.Config) *fullChain {
	c := &fullChain{
		t: t, r: r,
		ours:        newFullNode(t, "ours", true, cfg),
		oracle:      newFullNode(t, "default store", false, cfg),
		consIdx:     map[string]int{},
		genesisTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		valsets:     map[int64][]fullCmtVal{},
		times:       map[int64]time.Time{},
		hashes:      map[int64][]byte{},
		stats:       map[string]*[2]int{},
		events:      map[string]int{},
	}
	seed := r.Int63()
	for i := 0; i < fullAccounts+fullSpare; i++ {
		k := secp256k1.GenPrivKeyFromSecret(fmt.Appendf(nil, "memiavl-full-%d-account-%d", seed, i))
		c.keys = append(c.keys, k)
		c.addrs = append(c.addrs, sdk.AccAddress(k.PubKey().Address()))
	}
	for i := 0; i <= fullNewVal; i++ {
		k := ed25519.GenPrivKeyFromSecret(fmt.Appendf(nil, "memiavl-full-%d-validator-%d", seed, i))
		c.consKeys = append(c.consKeys, k)
		c.consIdx[string(k.PubKey().Address())] = i
	}
	return c
}

// genesis returns the app state: the funded accounts (two of them vesting),
// the validators (unbonded, so that the staking module bonds them at
// InitGenesis with its hooks), delegations, and short staking, slashing and
// governance periods so that unbondings, jailing and proposals end within
// the run.
func (c *fullChain) genesis() []byte {
	app := c.oracle.app
	cdc := app.cdc
	state := app.DefaultGenesis()

	var accs authtypes.GenesisAccounts
	var balances []banktypes.Balance
	for i := 0; i < fullAccounts; i++ {
		base := authtypes.NewBaseAccount(c.addrs[i], nil, uint64(i), 0)
		coins := sdk.NewCoins(sdk.NewInt64Coin(fullDenom, 100_000_000_000), sdk.NewInt64Coin(fullDenom2, 1_000_000_000))
		locked := sdk.NewCoins(sdk.NewInt64Coin(fullDenom, 50_000_000_000))
		var acc authtypes.GenesisAccount = base
		var err error
		switch i {
		case fullAccounts - 1:
			acc, err = vestingtypes.NewDelayedVestingAccount(base, locked, c.genesisTime.Add(100*time.Second).Unix())
		case fullAccounts - 2:
			acc, err = vestingtypes.NewContinuousVestingAccount(base, locked, c.genesisTime.Unix(), c.genesisTime.Add(400*time.Second).Unix())
		}
		if err != nil {
			c.t.Fatal(err)
		}
		accs = append(accs, acc)
		balances = append(balances, banktypes.Balance{Address: c.addrs[i].String(), Coins: coins})
	}

	var vals []stakingtypes.Validator
	var dels []stakingtypes.Delegation
	notBonded := math.ZeroInt()
	for i := 0; i < fullVals; i++ {
		valoper := sdk.ValAddress(c.addrs[i]).String()
		v, err := stakingtypes.NewValidator(valoper, c.consKeys[i].PubKey(), stakingtypes.NewDescription(fmt.Sprintf("validator-%d", i), "", "", "", ""))
		if err != nil {
			c.t.Fatal(err)
		}
		v.Commission = stakingtypes.NewCommission(math.LegacyNewDecWithPrec(int64(5+i), 2), math.LegacyNewDecWithPrec(20, 2), math.LegacyNewDecWithPrec(1, 2))
		v.MinSelfDelegation = math.NewInt(1_000_000)
		self := math.NewInt(int64(40-8*i) * 1_000_000_000)
		other := math.NewInt(2_000_000_000)
		dels = append(dels,
			stakingtypes.NewDelegation(c.addrs[i].String(), valoper, math.LegacyNewDecFromInt(self)),
			stakingtypes.NewDelegation(c.addrs[fullNewVal+1+i].String(), valoper, math.LegacyNewDecFromInt(other)))
		v.Tokens = self.Add(other)
		v.DelegatorShares = math.LegacyNewDecFromInt(v.Tokens)
		vals = append(vals, v)
		notBonded = notBonded.Add(v.Tokens)
	}
	balances = append(balances, banktypes.Balance{
		Address: authtypes.NewModuleAddress(stakingtypes.NotBondedPoolName).String(),
		Coins:   sdk.NewCoins(sdk.NewCoin(fullDenom, notBonded)),
	})
	supply := sdk.NewCoins()
	for _, b := range balances {
		supply = supply.Add(b.Coins...)
	}

	stakingParams := stakingtypes.DefaultParams()
	stakingParams.UnbondingTime = 90 * time.Second
	slashingParams := slashingtypes.NewParams(20, math.LegacyNewDecWithPrec(5, 1), 60*time.Second,
		math.LegacyNewDecWithPrec(5, 2), math.LegacyNewDecWithPrec(1, 2))
	gov := govv1.DefaultGenesisState()
	deposit, voting, expedited := 60*time.Second, 60*time.Second, 30*time.Second
	gov.Params.MinDeposit = sdk.NewCoins(sdk.NewInt64Coin(fullDenom, 1_000_000))
	gov.Params.ExpeditedMinDeposit = sdk.NewCoins(sdk.NewInt64Coin(fullDenom, 5_000_000))
	gov.Params.MaxDepositPeriod, gov.Params.VotingPeriod, gov.Params.ExpeditedVotingPeriod = &deposit, &voting, &expedited

	state[authtypes.ModuleName] = cdc.MustMarshalJSON(authtypes.NewGenesisState(authtypes.DefaultParams(), accs))
	state[banktypes.ModuleName] = cdc.MustMarshalJSON(banktypes.NewGenesisState(banktypes.DefaultParams(), balances, supply, nil, nil))
	state[stakingtypes.ModuleName] = cdc.MustMarshalJSON(stakingtypes.NewGenesisState(stakingParams, vals, dels))
	state[slashingtypes.ModuleName] = cdc.MustMarshalJSON(slashingtypes.NewGenesisState(slashingParams, nil, nil))
	state[govtypes.ModuleName] = cdc.MustMarshalJSON(gov)
	bz, err := json.Marshal(state)
	if err != nil {
		c.t.Fatal(err)
	}
	return bz
}

// applyUpdates returns set with CometBFT validator updates applied.
func (c *fullChain) applyUpdates(set []fullCmtVal, ups []abci.ValidatorUpdate) []fullCmtVal {
	out := append([]fullCmtVal(nil), set...)
	for _, u := range ups {
		pk, err := cryptoenc.PubKeyFromProto(u.PubKey)
		if err != nil {
			c.t.Fatal(err)
		}
		if _, ok := c.consIdx[string(pk.Address())]; !ok {
			c.t.Fatalf("validator update for an unknown key %X", pk.Address())
		}
		i := sort.Search(len(out), func(i int) bool { return bytes.Compare(out[i].pub.Address(), pk.Address()) >= 0 })
		found := i < len(out) && bytes.Equal(out[i].pub.Address(), pk.Address())
		switch {
		case u.Power == 0 && found:
			out = append(out[:i], out[i+1:]...)
		case u.Power != 0 && found:
			out[i].power = u.Power
		case u.Power != 0:
			out = append(out[:i], append([]fullCmtVal{{pub: pk, power: u.Power}}, out[i:]...)...)
		}
	}
	return out
}

func fullValsetHash(set []fullCmtVal) []byte {
	vals := make([]*cmttypes.Validator, len(set))
	for i, v := range set {
		vals[i] = cmttypes.NewValidator(v.pub, v.power)
	}
	return cmttypes.NewValidatorSet(vals).Hash()
}

func (c *fullChain) initChain() {
	c.t.Helper()
	genesis := c.genesis()
	req := &abci.RequestInitChain{
		Time:            c.genesisTime,
		ChainId:         fullChainID,
		ConsensusParams: sims.DefaultConsensusParams,
		AppStateBytes:   genesis,
		InitialHeight:   1,
	}
	ra, err := c.ours.app.InitChain(req)
	if err != nil {
		c.t.Fatal(err)
	}
	rb, err := c.oracle.app.InitChain(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if d := fullDiff(ra, rb); d != "" {
		c.t.Fatalf("InitChain: %s", d)
	}
	if len(rb.Validators) != fullVals {
		c.t.Fatalf("InitChain: %d validators", len(rb.Validators))
	}
	c.valsets[1] = c.applyUpdates(nil, rb.Validators)
	c.valsets[2] = c.valsets[1]
	c.times[0] = c.genesisTime
}

// fullDiff describes how two ABCI responses differ ("" when their encodings
// are equal).
func fullDiff(a, b interface{ Marshal() ([]byte, error) }) string {
	ab, err := a.Marshal()
	if err != nil {
		return err.Error()
	}
	bb, err := b.Marshal()
	if err != nil {
		return err.Error()
	}
	if bytes.Equal(ab, bb) {
		return ""
	}
	fa, okA := a.(*abci.ResponseFinalizeBlock)
	fb, okB := b.(*abci.ResponseFinalizeBlock)
	if okA && okB {
		switch {
		case !bytes.Equal(fa.AppHash, fb.AppHash):
			return fmt.Sprintf("app hash %X, default store %X", fa.AppHash, fb.AppHash)
		case len(fa.TxResults) != len(fb.TxResults):
			return fmt.Sprintf("%d tx results, default store %d", len(fa.TxResults), len(fb.TxResults))
		}
		for i := range fa.TxResults {
			ta, tb := fa.TxResults[i], fb.TxResults[i]
			if d := fullDiff(ta, tb); d != "" {
				return fmt.Sprintf("tx %d: code %d gas %d/%d log %q, default store code %d gas %d/%d log %q",
					i, ta.Code, ta.GasUsed, ta.GasWanted, ta.Log, tb.Code, tb.GasUsed, tb.GasWanted, tb.Log)
			}
		}
		if len(fa.Events) != len(fb.Events) {
			return fmt.Sprintf("%d block events, default store %d", len(fa.Events), len(fb.Events))
		}
		for i := range fa.Events {
			if ea, eb := fa.Events[i].String(), fb.Events[i].String(); ea != eb {
				return fmt.Sprintf("block event %d: %s, default store %s", i, ea, eb)
			}
		}
	}
	return fmt.Sprintf("%v\ndefault store %v", a, b)
}

// ---------------------------------------------------------------------------
// Transactions

// beginGen reads what the generator needs from the default store's last
// committed state (its check state, reset at every commit).
func (c *fullChain) beginGen(h int64) {
	app := c.oracle.app
	c.ctx = app.NewContext(true)
	c.blockTime = c.times[h]
	c.seq = map[int]uint64{}
	c.acct = map[int]sdk.AccountI{}
	var err error
	if c.vals, err = app.staking.GetAllValidators(c.ctx); err != nil {
		c.t.Fatal(err)
	}
	c.proposals = nil
	err = app.gov.Proposals.Walk(c.ctx, nil, func(_ uint64, p govv1.Proposal) (bool, error) {
		if p.Status == govv1.StatusDepositPeriod || p.Status == govv1.StatusVotingPeriod {
			c.proposals = append(c.proposals, p)
		}
		return false, nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *fullChain) account(i int) sdk.AccountI {
	if a, ok := c.acct[i]; ok {
		return a
	}
	a := c.oracle.app.accounts.GetAccount(c.ctx, c.addrs[i])
	c.acct[i] = a
	return a
}

// signer picks an account that exists.
func (c *fullChain) signer() int {
	for {
		i := c.r.Intn(len(c.keys))
		if i == fullNewVal && !c.createdVal {
			continue // its funds are for its self-delegation
		}
		if i < fullAccounts || c.account(i) != nil {
			return i
		}
	}
}

func (c *fullChain) other(i int) int {
	for {
		if j := c.r.Intn(len(c.keys)); j != i {
			return j
		}
	}
}

// recipient picks a genesis account, a group policy or a new address (the
// spare keys get their accounts from vesting/create).
func (c *fullChain) recipient() sdk.AccAddress {
	switch n := c.r.Intn(12); {
	case n == 0:
		return c.newAddress()
	case n == 1 && len(c.policies) > 0:
		return sdk.MustAccAddressFromBech32(c.policies[c.r.Intn(len(c.policies))].addr)
	}
	return c.addrs[c.r.Intn(fullAccounts)]
}

func (c *fullChain) newAddress() sdk.AccAddress {
	b := make([]byte, 20)
	c.r.Read(b)
	return b
}

// delegator picks a signer with delegations (if one is found in a few
// tries) and returns them.
func (c *fullChain) delegator() (int, []stakingtypes.Delegation) {
	from := c.signer()
	for try := 0; try < 6; try++ {
		if dels := c.delegations(from); len(dels) > 0 || c.r.Intn(10) == 0 {
			return from, dels
		}
		from = c.signer()
	}
	return from, c.delegations(from)
}

func (c *fullChain) balance(i int, denom string) math.Int {
	return c.oracle.app.bank.GetBalance(c.ctx, c.addrs[i], denom).Amount
}

// upTo returns a random amount in [1, max], or 1.
func (c *fullChain) upTo(max math.Int) math.Int {
	if !max.IsInt64() || max.Int64() <= 1 {
		if max.IsInt64() {
			return math.OneInt()
		}
		return math.NewInt(1 + c.r.Int63n(1<<62))
	}
	return math.NewInt(1 + c.r.Int63n(max.Int64()))
}

func (c *fullChain) stake(n math.Int) sdk.Coins { return sdk.NewCoins(sdk.NewCoin(fullDenom, n)) }

func (c *fullChain) valoper(i int) string { return sdk.ValAddress(c.addrs[i]).String() }

func (c *fullChain) validator(valoper string) (stakingtypes.Validator, bool) {
	for _, v := range c.vals {
		if v.OperatorAddress == valoper {
			return v, true
		}
	}
	return stakingtypes.Validator{}, false
}

func (c *fullChain) randomValidator() stakingtypes.Validator { return c.vals[c.r.Intn(len(c.vals))] }

func (c *fullChain) operatorOf(valoper string) int {
	for i := range c.addrs {
		if c.valoper(i) == valoper {
			return i
		}
	}
	c.t.Fatalf("no key operates %s", valoper)
	return -1
}

func (c *fullChain) indexOf(addr string) int {
	for i, a := range c.addrs {
		if a.String() == addr {
			return i
		}
	}
	return -1
}

func (c *fullChain) delegations(i int) []stakingtypes.Delegation {
	d, err := c.oracle.app.staking.GetDelegatorDelegations(c.ctx, c.addrs[i], 100)
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

// sign signs msgs for signer i with the account's number and next sequence,
// a random fee and memo. One transaction in 10 (but the validator's
// creation and the forced transactions) has a fault: a wrong sequence, a
// signature for another chain, a fee above the balance, or too little gas.
func (c *fullChain) sign(kind string, i int, msgs []sdk.Msg, onOK func(*abci.ExecTxResult)) fullTx {
	var num, seq uint64
	if a := c.account(i); a != nil {
		num, seq = a.GetAccountNumber(), a.GetSequence()
	}
	if s, ok := c.seq[i]; ok {
		seq = s
	}
	fee := sdk.NewCoins(sdk.NewInt64Coin(fullDenom, c.r.Int63n(5000)))
	gas := uint64(fullGas)
	chainID := fullChainID
	useSeq, next := seq, seq+1
	fault := c.r.Intn(40)
	if kind == "staking/create-validator" || c.noFault {
		fault = -1
	}
	switch fault {
	case 0:
		useSeq, next = seq+1, seq
	case 1:
		chainID, next = "another-chain", seq
	case 2:
		fee, next = sdk.NewCoins(sdk.NewInt64Coin(fullDenom, 1_000_000_000_000)), seq
	case 3:
		gas, next = 30_000, seq
	}
	tx, err := sims.GenSignedMockTx(c.r, c.oracle.app.txConfig, msgs, fee, gas, chainID, []uint64{num}, []uint64{useSeq}, c.keys[i])
	if err != nil {
		c.t.Fatal(err)
	}
	bz, err := c.oracle.app.txConfig.TxEncoder()(tx)
	if err != nil {
		c.t.Fatal(err)
	}
	c.seq[i] = next
	return fullTx{kind: kind, bz: bz, onOK: onOK}
}

// fullGen makes one transaction of its kind.
type fullGen struct {
	kind   string
	weight int
	gen    func(c *fullChain) fullTx
}

var fullGens = []fullGen{
	{"bank/send", 20, (*fullChain).genSend},
	{"bank/multisend", 3, (*fullChain).genMultiSend},
	{"staking/delegate", 8, (*fullChain).genDelegate},
	{"staking/undelegate", 6, (*fullChain).genUndelegate},
	{"staking/redelegate", 5, (*fullChain).genRedelegate},
	{"staking/cancel-unbonding", 2, (*fullChain).genCancelUnbonding},
	{"staking/edit-validator", 1, (*fullChain).genEditValidator},
	{"distr/withdraw-rewards", 6, (*fullChain).genWithdrawRewards},
	{"distr/withdraw-commission", 2, (*fullChain).genWithdrawCommission},
	{"distr/set-withdraw-address", 1, (*fullChain).genSetWithdrawAddress},
	{"distr/fund-community-pool", 1, (*fullChain).genFundCommunityPool},
	{"gov/submit-proposal", 3, (*fullChain).genSubmitProposal},
	{"gov/deposit", 3, (*fullChain).genDeposit},
	{"gov/vote", 8, (*fullChain).genVote},
	{"gov/cancel-proposal", 1, (*fullChain).genCancelProposal},
	{"slashing/unjail", 2, (*fullChain).genUnjail},
	{"authz/grant", 3, (*fullChain).genGrant},
	{"authz/exec", 3, (*fullChain).genExec},
	{"authz/revoke", 1, (*fullChain).genRevoke},
	{"vesting/create", 2, (*fullChain).genVesting},
	{"group/create", 1, (*fullChain).genGroupCreate},
	{"group/submit-proposal", 2, (*fullChain).genGroupSubmit},
	{"group/vote", 3, (*fullChain).genGroupVote},
	{"group/exec", 1, (*fullChain).genGroupExec},
}

// block returns the transactions of block h: a random mix of all kinds, and
// the creation of a fifth validator at createAt.
func (c *fullChain) block(h, createAt int64) []fullTx {
	if h == 1 {
		return nil // the genesis state is committed by block 1
	}
	c.beginGen(h)
	var txs []fullTx
	if h == createAt {
		txs = append(txs, c.genCreateValidator())
	}
	// whatever the seed, one successful transaction of each kind the run
	// asserts and the random mix can leave out (seed 1796294049479470016
	// drew no grant in 40 blocks; seed 1796358328496857124 had no vote
	// succeed): signed without a fault, from funded genesis accounts
	switch h {
	case 2:
		// a proposal that enters its voting period at once
		txs = append(txs, c.forced(c.genVotingProposal))
	case 3:
		// a vote on it, before any random cancellation in the block
		if tx, ok := c.genVoteOnVoting(); ok {
			txs = append(txs, tx)
		}
	case 4:
		txs = append(txs, c.forced(func() fullTx { return c.grantFrom(9) }))
	case 5:
		txs = append(txs, c.forced(c.genForcedMultiSend), c.forced(c.genForcedDelegate), c.forced(c.genForcedRedelegate))
	}
	total := 0
	for _, g := range fullGens {
		total += g.weight
	}
	for n := c.r.Intn(13); n > 0; n-- {
		w := c.r.Intn(total)
		for _, g := range fullGens {
			if w -= g.weight; w < 0 {
				txs = append(txs, g.gen(c))
				break
			}
		}
	}
	return txs
}

func (c *fullChain) genSend() fullTx {
	from := c.signer()
	var msgs []sdk.Msg
	for n := 1 + c.r.Intn(2); n > 0; n-- {
		amount := c.upTo(c.balance(from, fullDenom).QuoRaw(20))
		if c.r.Intn(10) == 0 {
			amount = c.balance(from, fullDenom).AddRaw(1) // more than the balance: fails
		}
		coins := c.stake(amount)
		if c.r.Intn(3) == 0 {
			coins = coins.Add(sdk.NewCoin(fullDenom2, c.upTo(c.balance(from, fullDenom2).QuoRaw(10))))
		}
		msgs = append(msgs, banktypes.NewMsgSend(c.addrs[from], c.recipient(), coins))
	}
	return c.sign("bank/send", from, msgs, nil)
}

func (c *fullChain) genMultiSend() fullTx {
	from := c.signer()
	var outs []banktypes.Output
	total := sdk.NewCoins()
	for n := 2 + c.r.Intn(3); n > 0; n-- {
		coins := c.stake(c.upTo(c.balance(from, fullDenom).QuoRaw(50)))
		outs = append(outs, banktypes.NewOutput(c.recipient(), coins))
		total = total.Add(coins...)
	}
	return c.sign("bank/multisend", from, []sdk.Msg{banktypes.NewMsgMultiSend(banktypes.NewInput(c.addrs[from], total), outs)}, nil)
}

func (c *fullChain) genDelegate() fullTx {
	from := c.signer()
	amount := c.upTo(c.balance(from, fullDenom).QuoRaw(8))
	if c.r.Intn(12) == 0 {
		amount = c.balance(from, fullDenom).MulRaw(2)
	}
	msg := stakingtypes.NewMsgDelegate(c.addrs[from].String(), c.randomValidator().OperatorAddress, sdk.NewCoin(fullDenom, amount))
	return c.sign("staking/delegate", from, []sdk.Msg{msg}, nil)
}

// delegationAmount returns part of delegation d's tokens (at most a quarter
// of an operator's self-delegation, so that validators keep theirs), or
// sometimes more than it holds.
func (c *fullChain) delegationAmount(from int, d stakingtypes.Delegation) (stakingtypes.Validator, math.Int) {
	v, ok := c.validator(d.ValidatorAddress)
	if !ok {
		c.t.Fatalf("delegation to unknown validator %s", d.ValidatorAddress)
	}
	tokens := v.TokensFromShares(d.Shares).TruncateInt()
	if c.r.Intn(10) == 0 {
		return v, tokens.AddRaw(1_000_000)
	}
	if c.valoper(from) == d.ValidatorAddress {
		tokens = tokens.QuoRaw(4)
	}
	return v, c.upTo(tokens)
}

func (c *fullChain) genUndelegate() fullTx {
	from, dels := c.delegator()
	if len(dels) == 0 {
		msg := stakingtypes.NewMsgUndelegate(c.addrs[from].String(), c.randomValidator().OperatorAddress, sdk.NewInt64Coin(fullDenom, 1000))
		return c.sign("staking/undelegate", from, []sdk.Msg{msg}, nil)
	}
	d := dels[c.r.Intn(len(dels))]
	_, amount := c.delegationAmount(from, d)
	msg := stakingtypes.NewMsgUndelegate(d.DelegatorAddress, d.ValidatorAddress, sdk.NewCoin(fullDenom, amount))
	return c.sign("staking/undelegate", from, []sdk.Msg{msg}, nil)
}

func (c *fullChain) genRedelegate() fullTx {
	from, dels := c.delegator()
	src := c.randomValidator().OperatorAddress
	amount := math.NewInt(1000)
	if len(dels) > 0 {
		d := dels[c.r.Intn(len(dels))]
		src = d.ValidatorAddress
		_, amount = c.delegationAmount(from, d)
	}
	dst := c.randomValidator().OperatorAddress
	if dst == src && c.r.Intn(4) != 0 {
		dst = c.randomValidator().OperatorAddress
	}
	msg := stakingtypes.NewMsgBeginRedelegate(c.addrs[from].String(), src, dst, sdk.NewCoin(fullDenom, amount))
	return c.sign("staking/redelegate", from, []sdk.Msg{msg}, nil)
}

func (c *fullChain) genCancelUnbonding() fullTx {
	var from int
	var ubds []stakingtypes.UnbondingDelegation
	for try := 0; try < 8 && len(ubds) == 0; try++ {
		from = c.signer()
		var err error
		if ubds, err = c.oracle.app.staking.GetUnbondingDelegations(c.ctx, c.addrs[from], 100); err != nil {
			c.t.Fatal(err)
		}
	}
	valoper, height, amount := c.randomValidator().OperatorAddress, int64(1), math.NewInt(1000)
	if len(ubds) > 0 {
		u := ubds[c.r.Intn(len(ubds))]
		e := u.Entries[c.r.Intn(len(u.Entries))]
		valoper, height, amount = u.ValidatorAddress, e.CreationHeight, c.upTo(e.Balance)
		if c.r.Intn(8) == 0 {
			amount = e.Balance.AddRaw(1)
		}
	}
	msg := stakingtypes.NewMsgCancelUnbondingDelegation(c.addrs[from].String(), valoper, height, sdk.NewCoin(fullDenom, amount))
	return c.sign("staking/cancel-unbonding", from, []sdk.Msg{msg}, nil)
}

func (c *fullChain) genEditValidator() fullTx {
	v := c.randomValidator()
	op := c.operatorOf(v.OperatorAddress)
	var rate *math.LegacyDec
	if c.r.Intn(2) == 0 {
		// within the maximum change, or not (fails); at most once a day
		r := v.Commission.Rate.Add(math.LegacyNewDecWithPrec(int64(c.r.Intn(3)), 2))
		rate = &r
	}
	desc := stakingtypes.NewDescription(fmt.Sprintf("validator-%d-%d", op, c.r.Intn(1000)), "", "", "", "")
	return c.sign("staking/edit-validator", op, []sdk.Msg{stakingtypes.NewMsgEditValidator(v.OperatorAddress, desc, rate, nil)}, nil)
}

func (c *fullChain) genCreateValidator() fullTx {
	msg, err := stakingtypes.NewMsgCreateValidator(c.valoper(fullNewVal), c.consKeys[fullNewVal].PubKey(),
		sdk.NewInt64Coin(fullDenom, 12_000_000_000), stakingtypes.NewDescription("validator-new", "", "", "", ""),
		stakingtypes.NewCommissionRates(math.LegacyNewDecWithPrec(10, 2), math.LegacyNewDecWithPrec(30, 2), math.LegacyNewDecWithPrec(2, 2)),
		math.NewInt(1_000_000))
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sign("staking/create-validator", fullNewVal, []sdk.Msg{msg}, func(*abci.ExecTxResult) { c.createdVal = true })
}

func (c *fullChain) genWithdrawRewards() fullTx {
	from, dels := c.delegator()
	var msgs []sdk.Msg
	if len(dels) == 0 {
		msgs = append(msgs, distrtypes.NewMsgWithdrawDelegatorReward(c.addrs[from].String(), c.randomValidator().OperatorAddress))
	}
	for i := 0; i < len(dels) && i < 1+c.r.Intn(2); i++ {
		d := dels[c.r.Intn(len(dels))]
		msgs = append(msgs, distrtypes.NewMsgWithdrawDelegatorReward(d.DelegatorAddress, d.ValidatorAddress))
	}
	return c.sign("distr/withdraw-rewards", from, msgs, nil)
}

func (c *fullChain) genWithdrawCommission() fullTx {
	v := c.randomValidator()
	op := c.operatorOf(v.OperatorAddress)
	return c.sign("distr/withdraw-commission", op, []sdk.Msg{distrtypes.NewMsgWithdrawValidatorCommission(v.OperatorAddress)}, nil)
}

func (c *fullChain) genSetWithdrawAddress() fullTx {
	from := c.signer()
	return c.sign("distr/set-withdraw-address", from, []sdk.Msg{distrtypes.NewMsgSetWithdrawAddress(c.addrs[from], c.addrs[c.r.Intn(len(c.addrs))])}, nil)
}

func (c *fullChain) genFundCommunityPool() fullTx {
	from := c.signer()
	return c.sign("distr/fund-community-pool", from, []sdk.Msg{distrtypes.NewMsgFundCommunityPool(c.stake(c.upTo(math.NewInt(10_000_000))), c.addrs[from].String())}, nil)
}

// genSubmitProposal submits a text proposal, a community pool spend or a
// mint parameter change, with a deposit that may start the voting period or
// not.
func (c *fullChain) genSubmitProposal() fullTx {
	from := c.signer()
	authority := authtypes.NewModuleAddress(govtypes.ModuleName).String()
	var msgs []sdk.Msg
	switch c.r.Intn(3) {
	case 1:
		msgs = append(msgs, &distrtypes.MsgCommunityPoolSpend{Authority: authority, Recipient: c.recipient().String(), Amount: c.stake(c.upTo(math.NewInt(200_000)))})
	case 2:
		p := minttypes.DefaultParams()
		p.InflationRateChange = math.LegacyNewDecWithPrec(int64(5+c.r.Intn(20)), 2)
		msgs = append(msgs, &minttypes.MsgUpdateParams{Authority: authority, Params: p})
	}
	deposit := math.NewInt(1_000_000 + c.r.Int63n(6_000_000))
	if c.r.Intn(3) == 0 {
		deposit = math.NewInt(10_000 + c.r.Int63n(900_000)) // stays in the deposit period
	}
	msg, err := govv1.NewMsgSubmitProposal(msgs, c.stake(deposit), c.addrs[from].String(), "ipfs://memiavl-test",
		fmt.Sprintf("proposal at %s", c.blockTime.Format(time.TimeOnly)), "a proposal of the memiavl test", c.r.Intn(5) == 0)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sign("gov/submit-proposal", from, []sdk.Msg{msg}, nil)
}

// genVotingProposal submits a text proposal with the minimum deposit from
// a genesis account, which starts its voting period.
func (c *fullChain) genVotingProposal() fullTx {
	msg, err := govv1.NewMsgSubmitProposal(nil, c.stake(math.NewInt(1_000_000)), c.addrs[0].String(), "ipfs://memiavl-test",
		"a proposal to vote on", "a proposal of the memiavl test", false)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sign("gov/submit-proposal", 0, []sdk.Msg{msg}, nil)
}

// genVoteOnVoting votes yes from genesis account 4, without a fault, on a
// proposal in its voting period, if there is one.
func (c *fullChain) genVoteOnVoting() (fullTx, bool) {
	for _, p := range c.proposals {
		if p.Status == govv1.StatusVotingPeriod {
			const from = 4
			return c.forced(func() fullTx {
				return c.sign("gov/vote", from, []sdk.Msg{govv1.NewMsgVote(c.addrs[from], p.Id, govv1.OptionYes, "")}, nil)
			}), true
		}
	}
	return fullTx{}, false
}

// forced returns the transaction gen makes, signed without a fault.
func (c *fullChain) forced(gen func() fullTx) fullTx {
	c.noFault = true
	defer func() { c.noFault = false }()
	return gen()
}

// genForcedMultiSend sends from genesis account 5 to accounts 7 and 8.
func (c *fullChain) genForcedMultiSend() fullTx {
	const from = 5
	coins := c.stake(math.NewInt(1_000_000))
	outs := []banktypes.Output{banktypes.NewOutput(c.addrs[7], coins), banktypes.NewOutput(c.addrs[8], coins)}
	msg := banktypes.NewMsgMultiSend(banktypes.NewInput(c.addrs[from], coins.Add(coins...)), outs)
	return c.sign("bank/multisend", from, []sdk.Msg{msg}, nil)
}

// genForcedDelegate delegates from genesis account 6 to a validator, which
// genForcedRedelegate, next in the block, moves part of to another: one
// that no redelegation of the account's went to (the random mix may have
// made one), which would refuse the move until it completes.
func (c *fullChain) genForcedDelegate() fullTx {
	const from = 6
	c.forcedDel = ""
	for _, v := range c.vals {
		val, err := sdk.ValAddressFromBech32(v.OperatorAddress)
		if err != nil {
			c.t.Fatal(err)
		}
		if in, err := c.oracle.app.staking.HasReceivingRedelegation(c.ctx, c.addrs[from], val); err != nil {
			c.t.Fatal(err)
		} else if !in {
			c.forcedDel = v.OperatorAddress
			break
		}
	}
	if c.forcedDel == "" {
		c.forcedDel = c.vals[0].OperatorAddress
	}
	msg := stakingtypes.NewMsgDelegate(c.addrs[from].String(), c.forcedDel, c.stake(math.NewInt(5_000_000))[0])
	return c.sign("staking/delegate", from, []sdk.Msg{msg}, nil)
}

func (c *fullChain) genForcedRedelegate() fullTx {
	const from = 6
	dst := ""
	for _, v := range c.vals {
		if v.OperatorAddress != c.forcedDel {
			dst = v.OperatorAddress
			break
		}
	}
	msg := stakingtypes.NewMsgBeginRedelegate(c.addrs[from].String(), c.forcedDel, dst, c.stake(math.NewInt(1_000_000))[0])
	return c.sign("staking/redelegate", from, []sdk.Msg{msg}, nil)
}

// proposalID picks a proposal in its deposit or voting period (only the
// latter with voting), or one that ended or never existed.
func (c *fullChain) proposalID(voting bool) uint64 {
	var ids []uint64
	for _, p := range c.proposals {
		if !voting || p.Status == govv1.StatusVotingPeriod {
			ids = append(ids, p.Id)
		}
	}
	if len(ids) == 0 || c.r.Intn(10) == 0 {
		return 1 + uint64(c.r.Intn(50)) // ended or unknown: fails
	}
	return ids[c.r.Intn(len(ids))]
}

func (c *fullChain) genDeposit() fullTx {
	from := c.signer()
	amount := math.NewInt(10_000 + c.r.Int63n(2_000_000))
	if c.r.Intn(10) == 0 {
		amount = math.NewInt(100) // below the minimum deposit ratio
	}
	return c.sign("gov/deposit", from, []sdk.Msg{govv1.NewMsgDeposit(c.addrs[from], c.proposalID(false), c.stake(amount))}, nil)
}

func (c *fullChain) voteOption() govv1.VoteOption {
	switch n := c.r.Intn(20); {
	case n < 11:
		return govv1.OptionYes
	case n < 15:
		return govv1.OptionNo
	case n < 18:
		return govv1.OptionAbstain
	}
	return govv1.OptionNoWithVeto
}

func (c *fullChain) genVote() fullTx {
	from := c.signer()
	if c.r.Intn(2) == 0 {
		from = c.operatorOf(c.randomValidator().OperatorAddress) // its vote carries its self-delegation
	}
	id := c.proposalID(true)
	var msg sdk.Msg = govv1.NewMsgVote(c.addrs[from], id, c.voteOption(), "")
	if c.r.Intn(5) == 0 {
		msg = govv1.NewMsgVoteWeighted(c.addrs[from], id, govv1.WeightedVoteOptions{
			{Option: govv1.OptionYes, Weight: "0.6"}, {Option: govv1.VoteOption(2 + c.r.Intn(3)), Weight: "0.4"},
		}, "")
	}
	return c.sign("gov/vote", from, []sdk.Msg{msg}, nil)
}

func (c *fullChain) genCancelProposal() fullTx {
	from, id := c.signer(), c.proposalID(false)
	for _, p := range c.proposals {
		if p.Id == id && c.r.Intn(4) != 0 {
			if i := c.indexOf(p.Proposer); i >= 0 {
				from = i
			}
		}
	}
	return c.sign("gov/cancel-proposal", from, []sdk.Msg{govv1.NewMsgCancelProposal(id, c.addrs[from].String())}, nil)
}

func (c *fullChain) genUnjail() fullTx {
	v := c.randomValidator()
	for _, w := range c.vals {
		if w.Jailed && c.r.Intn(8) != 0 {
			v = w // unjailed once its jail time has passed
		}
	}
	return c.sign("slashing/unjail", c.operatorOf(v.OperatorAddress), []sdk.Msg{slashingtypes.NewMsgUnjail(v.OperatorAddress)}, nil)
}

func (c *fullChain) genGrant() fullTx { return c.grantFrom(c.signer()) }

func (c *fullChain) grantFrom(granter int) fullTx {
	g := fullGrant{granter: granter, grantee: c.other(granter)}
	var a authz.Authorization
	switch c.r.Intn(3) {
	case 0:
		g.typ = "send"
		a = banktypes.NewSendAuthorization(c.stake(c.upTo(math.NewInt(20_000_000))), nil)
	case 1:
		g.typ = "delegate"
		a = authz.NewGenericAuthorization(sdk.MsgTypeURL(&stakingtypes.MsgDelegate{}))
	default:
		g.typ = "vote"
		a = authz.NewGenericAuthorization(sdk.MsgTypeURL(&govv1.MsgVote{}))
	}
	var exp *time.Time
	if c.r.Intn(2) == 0 {
		e := c.blockTime.Add(time.Duration(20+c.r.Intn(300)) * time.Second)
		exp = &e
	}
	msg, err := authz.NewMsgGrant(c.addrs[g.granter], c.addrs[g.grantee], a, exp)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sign("authz/grant", granter, []sdk.Msg{msg}, func(*abci.ExecTxResult) {
		c.grants = append(c.grants, g)
		if len(c.grants) > 40 {
			c.grants = c.grants[1:]
		}
	})
}

func (c *fullChain) pickGrant() fullGrant {
	if len(c.grants) == 0 || c.r.Intn(10) == 0 {
		granter := c.signer()
		return fullGrant{granter: granter, grantee: c.other(granter), typ: "send"}
	}
	return c.grants[c.r.Intn(len(c.grants))]
}

func (c *fullChain) genExec() fullTx {
	g := c.pickGrant()
	var inner sdk.Msg
	switch g.typ {
	case "send":
		inner = banktypes.NewMsgSend(c.addrs[g.granter], c.recipient(), c.stake(c.upTo(math.NewInt(8_000_000))))
	case "delegate":
		inner = stakingtypes.NewMsgDelegate(c.addrs[g.granter].String(), c.randomValidator().OperatorAddress, sdk.NewCoin(fullDenom, c.upTo(math.NewInt(50_000_000))))
	default:
		inner = govv1.NewMsgVote(c.addrs[g.granter], c.proposalID(true), c.voteOption(), "")
	}
	msg := authz.NewMsgExec(c.addrs[g.grantee], []sdk.Msg{inner})
	return c.sign("authz/exec", g.grantee, []sdk.Msg{&msg}, nil)
}

func (c *fullChain) genRevoke() fullTx {
	g := c.pickGrant()
	url := map[string]string{
		"send":     sdk.MsgTypeURL(&banktypes.MsgSend{}),
		"delegate": sdk.MsgTypeURL(&stakingtypes.MsgDelegate{}),
		"vote":     sdk.MsgTypeURL(&govv1.MsgVote{}),
	}[g.typ]
	msg := authz.NewMsgRevoke(c.addrs[g.granter], c.addrs[g.grantee], url)
	return c.sign("authz/revoke", g.granter, []sdk.Msg{&msg}, nil)
}

// genVesting creates a vesting account (continuous, delayed, permanently
// locked or periodic) for a spare key, which can then sign, or for a new
// address; an existing account fails.
func (c *fullChain) genVesting() fullTx {
	from := c.signer()
	to := c.addrs[fullAccounts+c.r.Intn(fullSpare)]
	if c.r.Intn(2) == 0 {
		to = c.newAddress()
	}
	amount := c.stake(math.NewInt(1_000_000 + c.r.Int63n(100_000_000)))
	end := c.blockTime.Add(time.Duration(30+c.r.Intn(300)) * time.Second).Unix()
	var msg sdk.Msg
	switch n := c.r.Intn(8); {
	case n < 3:
		msg = vestingtypes.NewMsgCreateVestingAccount(c.addrs[from], to, amount, end, false)
	case n < 5:
		msg = vestingtypes.NewMsgCreateVestingAccount(c.addrs[from], to, amount, end, true)
	case n < 6:
		msg = vestingtypes.NewMsgCreatePermanentLockedAccount(c.addrs[from], to, amount)
	default:
		periods := vestingtypes.Periods{
			{Length: int64(10 + c.r.Intn(60)), Amount: amount},
			{Length: int64(10 + c.r.Intn(60)), Amount: amount},
		}
		msg = vestingtypes.NewMsgCreatePeriodicVestingAccount(c.addrs[from], to, c.blockTime.Unix(), periods)
	}
	return c.sign("vesting/create", from, []sdk.Msg{msg}, nil)
}

func (c *fullChain) genGroupCreate() fullTx {
	admin := c.signer()
	var members []group.MemberRequest
	var idx []int
	for _, i := range c.r.Perm(len(c.addrs))[:2+c.r.Intn(3)] {
		members = append(members, group.MemberRequest{Address: c.addrs[i].String(), Weight: fmt.Sprint(1 + c.r.Intn(3))})
		idx = append(idx, i)
	}
	policy := group.NewThresholdDecisionPolicy(fmt.Sprint(1+c.r.Intn(2)), time.Duration(60+c.r.Intn(120))*time.Second, 0)
	msg, err := group.NewMsgCreateGroupWithPolicy(c.addrs[admin].String(), members, "", "", c.r.Intn(2) == 0, policy)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sign("group/create", admin, []sdk.Msg{msg}, func(res *abci.ExecTxResult) {
		var resp group.MsgCreateGroupWithPolicyResponse
		c.msgResponse(res, &resp)
		c.policies = append(c.policies, fullPolicy{addr: resp.GroupPolicyAddress, members: idx})
	})
}

// msgResponse decodes the first message response of a transaction result.
func (c *fullChain) msgResponse(res *abci.ExecTxResult, resp interface{ Unmarshal([]byte) error }) {
	var data sdk.TxMsgData
	if err := data.Unmarshal(res.Data); err != nil {
		c.t.Fatal(err)
	}
	if len(data.MsgResponses) == 0 {
		c.t.Fatal("no message response")
	}
	if err := resp.Unmarshal(data.MsgResponses[0].Value); err != nil {
		c.t.Fatal(err)
	}
}

func (c *fullChain) genGroupSubmit() fullTx {
	if len(c.policies) == 0 {
		return c.genGroupCreate()
	}
	pi := c.r.Intn(len(c.policies))
	p := c.policies[pi]
	proposer := p.members[c.r.Intn(len(p.members))]
	if c.r.Intn(8) == 0 {
		proposer = c.signer() // maybe not a member: fails
	}
	send := banktypes.NewMsgSend(sdk.MustAccAddressFromBech32(p.addr), c.recipient(), c.stake(c.upTo(math.NewInt(5_000_000))))
	exec := group.Exec_EXEC_UNSPECIFIED
	if c.r.Intn(4) == 0 {
		exec = group.Exec_EXEC_TRY // executed (and pruned) at once if the proposer's weight suffices
	}
	msg, err := group.NewMsgSubmitProposal(p.addr, []string{c.addrs[proposer].String()}, []sdk.Msg{send}, "", exec, "group proposal", "a group proposal of the memiavl test")
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sign("group/submit-proposal", proposer, []sdk.Msg{msg}, func(res *abci.ExecTxResult) {
		var resp group.MsgSubmitProposalResponse
		c.msgResponse(res, &resp)
		c.groupProposals = append(c.groupProposals, fullGroupProposal{id: resp.ProposalId, policy: pi})
	})
}

func (c *fullChain) genGroupVote() fullTx {
	if len(c.groupProposals) == 0 {
		return c.genGroupSubmit()
	}
	gp := c.recentGroupProposal()
	p := c.policies[gp.policy]
	voter := p.members[c.r.Intn(len(p.members))]
	if c.r.Intn(8) == 0 {
		voter = c.signer()
	}
	msg := &group.MsgVote{ProposalId: gp.id, Voter: c.addrs[voter].String(), Option: group.VoteOption(1 + c.r.Intn(4))}
	if c.r.Intn(3) == 0 {
		msg.Exec = group.Exec_EXEC_TRY
	}
	return c.sign("group/vote", voter, []sdk.Msg{msg}, nil)
}

// recentGroupProposal picks one of the last proposals (older ones have been
// pruned after their voting period or execution).
func (c *fullChain) recentGroupProposal() fullGroupProposal {
	n := len(c.groupProposals)
	return c.groupProposals[n-1-c.r.Intn(min(n, 4))]
}

func (c *fullChain) genGroupExec() fullTx {
	if len(c.groupProposals) == 0 {
		return c.genGroupSubmit()
	}
	gp := c.recentGroupProposal()
	from := c.signer()
	return c.sign("group/exec", from, []sdk.Msg{&group.MsgExec{ProposalId: gp.id, Executor: c.addrs[from].String()}}, nil)
}

// ---------------------------------------------------------------------------
// Blocks

// absence is the chance that a validator's vote is missing from a commit.
func (c *fullChain) absence(i int) int {
	switch i {
	case fullFlaky:
		return 65
	case fullNewVal:
		return 10
	}
	return 4
}

// lastCommit returns the votes of block h-1's validators that block h
// carries (a random few absent).
func (c *fullChain) lastCommit(h int64) abci.CommitInfo {
	ci := abci.CommitInfo{Round: int32(c.r.Intn(2))}
	if h == 1 {
		return ci
	}
	for _, v := range c.valsets[h-1] {
		flag := cmtproto.BlockIDFlagCommit
		if c.r.Intn(100) < c.absence(c.consIdx[string(v.pub.Address())]) {
			flag = cmtproto.BlockIDFlagAbsent
		}
		ci.Votes = append(ci.Votes, abci.VoteInfo{Validator: abci.Validator{Address: v.pub.Address(), Power: v.power}, BlockIdFlag: flag})
	}
	return ci
}

// step runs block h on both nodes as CometBFT would (CheckTx of its
// transactions, ProcessProposal, FinalizeBlock, Commit) and requires equal
// responses, LastCommitID and Info.
func (c *fullChain) step(h int64, txs []fullTx) {
	t := c.t
	t.Helper()
	raw := make([][]byte, len(txs))
	for i, tx := range txs {
		raw[i] = tx.bz
		ra, err := c.ours.app.CheckTx(&abci.RequestCheckTx{Tx: tx.bz, Type: abci.CheckTxType_New})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := c.oracle.app.CheckTx(&abci.RequestCheckTx{Tx: tx.bz, Type: abci.CheckTxType_New})
		if err != nil {
			t.Fatal(err)
		}
		if d := fullDiff(ra, rb); d != "" {
			t.Fatalf("block %d: CheckTx %d (%s): %s", h, i, tx.kind, d)
		}
	}
	commit := c.lastCommit(h)
	set := c.valsets[h]
	proposer := set[c.r.Intn(len(set))].pub.Address()
	hash := make([]byte, 32)
	c.r.Read(hash)
	next := fullValsetHash(c.valsets[h+1])

	pp := &abci.RequestProcessProposal{Txs: raw, ProposedLastCommit: commit, Hash: hash, Height: h, Time: c.times[h], NextValidatorsHash: next, ProposerAddress: proposer}
	pa, err := c.ours.app.ProcessProposal(pp)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := c.oracle.app.ProcessProposal(pp)
	if err != nil {
		t.Fatal(err)
	}
	if pa.Status != abci.ResponseProcessProposal_ACCEPT || pb.Status != pa.Status {
		t.Fatalf("block %d: ProcessProposal %v, default store %v", h, pa.Status, pb.Status)
	}

	req := &abci.RequestFinalizeBlock{Txs: raw, DecidedLastCommit: commit, Hash: hash, Height: h, Time: c.times[h], NextValidatorsHash: next, ProposerAddress: proposer}
	ra, err := c.ours.app.FinalizeBlock(req)
	if err != nil {
		t.Fatalf("block %d: %v", h, err)
	}
	rb, err := c.oracle.app.FinalizeBlock(req)
	if err != nil {
		t.Fatalf("block %d (default store): %v", h, err)
	}
	if d := fullDiff(ra, rb); d != "" {
		t.Fatalf("block %d: FinalizeBlock: %s", h, d)
	}
	for i, res := range rb.TxResults {
		st := c.stats[txs[i].kind]
		if st == nil {
			st = &[2]int{}
			c.stats[txs[i].kind] = st
		}
		if res.Code != 0 {
			st[1]++
			continue
		}
		st[0]++
		if txs[i].onOK != nil {
			txs[i].onOK(res)
		}
	}
	for _, e := range rb.Events {
		switch e.Type {
		case slashingtypes.EventTypeSlash, stakingtypes.EventTypeCompleteUnbonding, stakingtypes.EventTypeCompleteRedelegation:
			c.events[e.Type]++
		case govtypes.EventTypeActiveProposal, govtypes.EventTypeInactiveProposal:
			for _, a := range e.Attributes {
				if a.Key == govtypes.AttributeKeyProposalResult {
					c.events[e.Type+"/"+a.Value]++
				}
			}
		}
	}
	c.updates += len(rb.ValidatorUpdates)
	c.valsets[h+2] = c.applyUpdates(c.valsets[h+1], rb.ValidatorUpdates)

	ca, err := c.ours.app.Commit()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := c.oracle.app.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if d := fullDiff(ca, cb); d != "" {
		t.Fatalf("block %d: Commit: %s", h, d)
	}
	c.hashes[h] = rb.AppHash
	c.checkInfo(h)
}

// checkInfo requires both nodes' ABCI Info and LastCommitID to report block
// h and its app hash.
func (c *fullChain) checkInfo(h int64) {
	c.t.Helper()
	ia, err := c.ours.app.Info(&abci.RequestInfo{})
	if err != nil {
		c.t.Fatal(err)
	}
	ib, err := c.oracle.app.Info(&abci.RequestInfo{})
	if err != nil {
		c.t.Fatal(err)
	}
	if d := fullDiff(ia, ib); d != "" {
		c.t.Fatalf("after block %d: Info: %s", h, d)
	}
	if ia.LastBlockHeight != h || !bytes.Equal(ia.LastBlockAppHash, c.hashes[h]) {
		c.t.Fatalf("after block %d: Info reports block %d app hash %X, want %X", h, ia.LastBlockHeight, ia.LastBlockAppHash, c.hashes[h])
	}
	for _, n := range []*fullNode{c.ours, c.oracle} {
		if id := n.app.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, c.hashes[h]) {
			c.t.Fatalf("after block %d: %s LastCommitID %v, want app hash %X", h, n.name, id, c.hashes[h])
		}
	}
}

func (c *fullChain) restart(h int64) {
	c.ours.close(c.t)
	c.oracle.close(c.t)
	c.ours.open(c.t)
	c.oracle.open(c.t)
	c.checkInfo(h)
}

// ---------------------------------------------------------------------------
// Queries

// mismatch reports a query answered differently and lets the run go on, so
// that one run reports every query that differs (the first few in full).
func (c *fullChain) mismatch(format string, args ...any) {
	c.t.Helper()
	if c.mismatches++; c.mismatches <= 8 {
		c.t.Errorf(format, args...)
	}
}

func (c *fullChain) queryBoth(req abci.RequestQuery) (a, b *abci.ResponseQuery) {
	c.t.Helper()
	ra, rb := req, req
	a, err := c.ours.app.Query(context.Background(), &ra)
	if err != nil {
		c.t.Fatal(err)
	}
	b, err = c.oracle.app.Query(context.Background(), &rb)
	if err != nil {
		c.t.Fatal(err)
	}
	return a, b
}

// storeKeys returns the keys of an IAVL store in the default store's latest
// version.
func (c *fullChain) storeKeys(key storetypes.StoreKey) [][]byte {
	it := c.oracle.app.CommitMultiStore().CacheMultiStore().GetKVStore(key).Iterator(nil, nil)
	defer it.Close()
	var keys [][]byte
	for ; it.Valid(); it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
	}
	return keys
}

// compareQueries compares, at the latest block h, an older one and height 0:
// ABCI store queries with proofs ("/store/<store>/key", keys present and
// absent, read from the default store) for every IAVL store, verified
// against the app hash of their height, a subspace query, and gRPC queries
// of the modules.
func (c *fullChain) compareQueries(h int64) {
	t := c.t
	t.Helper()
	older := h - 1 - int64(c.r.Intn(5))
	if older < 2 {
		older = 2 // BaseApp refuses proofs at heights up to 1
	}
	var stores []*storetypes.KVStoreKey
	for _, k := range c.oracle.app.GetStoreKeys() {
		if kv, ok := k.(*storetypes.KVStoreKey); ok {
			stores = append(stores, kv)
		}
	}
	sort.Slice(stores, func(i, j int) bool { return stores[i].Name() < stores[j].Name() })
	for _, sk := range stores {
		keys := c.storeKeys(sk)
		var probe [][]byte
		for i := 0; i < 2 && len(keys) > 0; i++ {
			probe = append(probe, keys[c.r.Intn(len(keys))])
		}
		if len(keys) > 0 {
			k := bytes.Clone(keys[c.r.Intn(len(keys))])
			probe = append(probe, append(k, 0)) // absent, between two keys
		} else {
			probe = append(probe, []byte{0x01})
		}
		for _, key := range probe {
			for _, height := range []int64{h, older, 0} {
				qa, qb := c.queryBoth(abci.RequestQuery{Path: "/store/" + sk.Name() + "/key", Data: key, Height: height, Prove: true})
				sa, sb := storetypes.ResponseQuery(*qa), storetypes.ResponseQuery(*qb)
				if err := sameResponse(&sa, nil, &sb, nil); err != nil {
					c.mismatch("after block %d: store %s key %X at height %d: %v", h, sk.Name(), key, height, err)
					continue
				}
				if qa.Code != 0 {
					t.Fatalf("after block %d: store %s key %X at height %d failed: %s", h, sk.Name(), key, height, qa.Log)
				}
				if verifiable(t, sa.ProofOps) {
					if err := verifyProof(sk.Name(), &sa, c.hashes[sa.Height]); err != nil {
						t.Fatalf("after block %d: store %s key %X at height %d: proof: %v", h, sk.Name(), key, height, err)
					}
				}
				c.queries[0]++
			}
		}
		if len(keys) > 0 && c.r.Intn(3) == 0 {
			prefix := keys[c.r.Intn(len(keys))][:1]
			qa, qb := c.queryBoth(abci.RequestQuery{Path: "/store/" + sk.Name() + "/subspace", Data: prefix})
			sa, sb := storetypes.ResponseQuery(*qa), storetypes.ResponseQuery(*qb)
			if err := sameResponse(&sa, nil, &sb, nil); err != nil {
				c.mismatch("after block %d: store %s subspace %X: %v", h, sk.Name(), prefix, err)
			} else if qa.Code != 0 {
				t.Fatalf("after block %d: store %s subspace %X failed: %s", h, sk.Name(), prefix, qa.Log)
			}
			c.queries[0]++
		}
	}

	addr := c.addrs[c.r.Intn(len(c.addrs))].String()
	valoper := c.valoper(c.r.Intn(fullVals))
	pid := uint64(1 + c.r.Intn(10))
	type grpcQuery struct {
		path string
		req  interface{ Marshal() ([]byte, error) }
		// latestOnly: the answer depends on the block time, which BaseApp
		// sets for a past height only over rootmulti (compat/README,
		// "Versions"): compared at the latest height alone
		latestOnly bool
	}
	qs := []grpcQuery{
		{path: "/cosmos.auth.v1beta1.Query/Account", req: &authtypes.QueryAccountRequest{Address: addr}},
		{path: "/cosmos.bank.v1beta1.Query/AllBalances", req: &banktypes.QueryAllBalancesRequest{Address: addr}},
		{path: "/cosmos.bank.v1beta1.Query/SpendableBalances", req: &banktypes.QuerySpendableBalancesRequest{Address: addr}, latestOnly: true},
		{path: "/cosmos.bank.v1beta1.Query/TotalSupply", req: &banktypes.QueryTotalSupplyRequest{}},
		{path: "/cosmos.staking.v1beta1.Query/Validators", req: &stakingtypes.QueryValidatorsRequest{}},
		{path: "/cosmos.staking.v1beta1.Query/ValidatorDelegations", req: &stakingtypes.QueryValidatorDelegationsRequest{ValidatorAddr: valoper}},
		{path: "/cosmos.staking.v1beta1.Query/DelegatorDelegations", req: &stakingtypes.QueryDelegatorDelegationsRequest{DelegatorAddr: addr}},
		{path: "/cosmos.staking.v1beta1.Query/DelegatorUnbondingDelegations", req: &stakingtypes.QueryDelegatorUnbondingDelegationsRequest{DelegatorAddr: addr}},
		{path: "/cosmos.staking.v1beta1.Query/Redelegations", req: &stakingtypes.QueryRedelegationsRequest{DelegatorAddr: addr}},
		{path: "/cosmos.staking.v1beta1.Query/Pool", req: &stakingtypes.QueryPoolRequest{}},
		{path: "/cosmos.staking.v1beta1.Query/HistoricalInfo", req: &stakingtypes.QueryHistoricalInfoRequest{Height: older}},
		{path: "/cosmos.distribution.v1beta1.Query/DelegationTotalRewards", req: &distrtypes.QueryDelegationTotalRewardsRequest{DelegatorAddress: addr}},
		{path: "/cosmos.distribution.v1beta1.Query/ValidatorOutstandingRewards", req: &distrtypes.QueryValidatorOutstandingRewardsRequest{ValidatorAddress: valoper}},
		{path: "/cosmos.distribution.v1beta1.Query/ValidatorCommission", req: &distrtypes.QueryValidatorCommissionRequest{ValidatorAddress: valoper}},
		{path: "/cosmos.distribution.v1beta1.Query/CommunityPool", req: &distrtypes.QueryCommunityPoolRequest{}},
		{path: "/cosmos.gov.v1.Query/Proposals", req: &govv1.QueryProposalsRequest{}},
		{path: "/cosmos.gov.v1.Query/Votes", req: &govv1.QueryVotesRequest{ProposalId: pid}},
		{path: "/cosmos.gov.v1.Query/Deposits", req: &govv1.QueryDepositsRequest{ProposalId: pid}},
		{path: "/cosmos.gov.v1.Query/TallyResult", req: &govv1.QueryTallyResultRequest{ProposalId: pid}},
		{path: "/cosmos.slashing.v1beta1.Query/SigningInfos", req: &slashingtypes.QuerySigningInfosRequest{}},
		{path: "/cosmos.mint.v1beta1.Query/AnnualProvisions", req: &minttypes.QueryAnnualProvisionsRequest{}},
		{path: "/cosmos.authz.v1beta1.Query/GranterGrants", req: &authz.QueryGranterGrantsRequest{Granter: addr}},
		{path: "/cosmos.group.v1.Query/GroupsByMember", req: &group.QueryGroupsByMemberRequest{Address: addr}},
		{path: "/cosmos.consensus.v1.Query/Params", req: &consensustypes.QueryParamsRequest{}},
	}
	if len(c.policies) > 0 {
		p := c.policies[c.r.Intn(len(c.policies))].addr
		qs = append(qs, grpcQuery{path: "/cosmos.group.v1.Query/ProposalsByGroupPolicy", req: &group.QueryProposalsByGroupPolicyRequest{Address: p}})
	}
	for _, q := range qs {
		data, err := q.req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for _, height := range []int64{h, older} {
			if q.latestOnly && height != h {
				continue
			}
			qa, qb := c.queryBoth(abci.RequestQuery{Path: q.path, Data: data, Height: height})
			if qa.Code != qb.Code || qa.Codespace != qb.Codespace || qa.Log != qb.Log || qa.Height != qb.Height || !bytes.Equal(qa.Value, qb.Value) {
				c.mismatch("after block %d: %s %s at %d: code %d %q value %X, default store code %d %q value %X",
					h, q.path, q.req, height, qa.Code, qa.Log, qa.Value, qb.Code, qb.Log, qb.Value)
			}
			if qa.Code == 0 {
				c.queries[1]++
			} else {
				c.queries[2]++
			}
		}
	}
}

// TestFullSDKApp runs a multi-module application on our store beside the
// same application on the default store (rootmulti over cosmos/iavl on an
// in-memory cosmos-db), block by block: InitChain with identical genesis, then blocks
// of signed transactions of every kind (some failing in the ante handler or
// in their messages), validators' votes with absences (so that slashing
// jails), proposers, advancing block times, CometBFT's validator set
// updates; equal ABCI responses every block (CheckTx, ProcessProposal,
// FinalizeBlock with its app hash, results, gas and events, Commit, Info);
// equal store queries with proofs and gRPC queries at the latest and older
// heights every few blocks; a restart of both midway; a verified database at
// the end. The seed is logged (MEMIAVL_SEED replays).
func TestFullSDKApp(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotInterval = 7
	cfg.QueryViews = 8
	t.Run("sync", func(t *testing.T) { runFullSDKApp(t, cfg) })
	// an asynchronous log with grouped fsyncs, and reads of the working
	// state from the memory-mapped snapshots without copies
	cfg.SnapshotInterval = 5
	cfg.AsyncCommitBuffer = 3
	cfg.Fsync = "grouped"
	cfg.ZeroCopy = true
	t.Run("async-zero-copy", func(t *testing.T) { runFullSDKApp(t, cfg) })
}

func runFullSDKApp(t *testing.T, cfg compat.Config) {
	start := time.Now()
	c := newFullChain(t, testutil.Rand(t), cfg)
	c.ours.open(t)
	c.oracle.open(t)
	c.initChain()

	blocks := int64(scale(200, 40))
	restartAt := blocks/2 + 1
	createAt := blocks / 3
	for h := int64(1); h <= blocks; h++ {
		c.times[h] = c.times[h-1].Add(4*time.Second + time.Duration(c.r.Intn(2000))*time.Millisecond)
	}
	for h := int64(1); h <= blocks; h++ {
		if h == restartAt {
			c.restart(h - 1)
			c.compareQueries(h - 1)
		}
		c.step(h, c.block(h, createAt))
		if h%3 == 0 || h == blocks {
			c.compareQueries(h)
		}
	}

	c.ours.close(t)
	report, err := multitree.Verify(compat.DBDir(c.ours.dir))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if report.Version != blocks || !bytes.Equal(report.AppHash, c.hashes[blocks]) {
		t.Fatalf("verify: version %d app hash %X, want %d %X", report.Version, report.AppHash, blocks, c.hashes[blocks])
	}

	var kinds []string
	for k := range c.stats {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var sb strings.Builder
	var ok, failed int
	for _, k := range kinds {
		fmt.Fprintf(&sb, "\n  %-28s %4d ok %4d failed", k, c.stats[k][0], c.stats[k][1])
		ok += c.stats[k][0]
		failed += c.stats[k][1]
	}
	var evs []string
	for k, n := range c.events {
		evs = append(evs, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(evs)
	t.Logf("%d blocks, %d transactions (%d ok, %d failed) by kind:%s", blocks, ok+failed, ok, failed, sb.String())
	t.Logf("block events: %s; %d validator updates; queries compared: %d store, %d gRPC answered, %d gRPC failing alike; snapshots kept %v; %s",
		strings.Join(evs, " "), c.updates, c.queries[0], c.queries[1], c.queries[2], report.Snapshots, time.Since(start).Round(time.Millisecond))
	if c.mismatches > 0 {
		t.Errorf("%d queries answered differently", c.mismatches)
	}
	if !c.createdVal {
		t.Error("the new validator was not created")
	}
	for _, k := range []string{"bank/send", "bank/multisend", "staking/delegate", "staking/undelegate", "staking/redelegate",
		"distr/withdraw-rewards", "gov/submit-proposal", "gov/vote", "authz/grant"} {
		if st := c.stats[k]; st == nil || st[0] == 0 {
			t.Errorf("%s: no transaction succeeded (%v)", k, st)
		}
	}
	if st := c.stats["bank/send"]; st[1] == 0 {
		t.Errorf("bank/send: no transaction failed (%v)", st)
	}
}
