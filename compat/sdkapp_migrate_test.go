package compat_test

// The migration a node operator follows to switch a running node from the
// default store (rootmulti over cosmos/iavl in <home>/data/application.db,
// goleveldb) to ours: run the node, stop it, migrate its application
// database with compat.ImportIAVL (or the `memiavl import-iavl` command) into
// <home>/data/memiavl.db, and start it again on the same home with
// SetupMemIAVL. An oracle app on the default store runs every block beside
// it; app hashes, transaction results and queries must be equal throughout.
//
//	go test -run TestMigrateNode -count=1 ./compat/

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// mig2Case is one migration scenario. Heights are counted from the chain's
// first block (1 is the initial height).
type mig2Case struct {
	name      string
	initial   int64 // the chain's initial height (0: 1)
	stop      int64 // the default-store node stops after this block
	migrateAt int64 // the height imported (<= stop: the node replays the rest)
	upgradeAt int64 // a store upgrade (added, renamed, deleted store) at this block, <= stop (0: none)
	restartAt int64 // our node restarts before this block (> stop)
	total     int64
	cli       bool // migrate with the memiavl command instead of compat.ImportIAVL
	async     bool // our node with an asynchronous log
	empty     bool // mount a store that is never written (see mig2Stores)
}

// mig2Block is what the oracle computed for a block.
type mig2Block struct {
	hash  []byte
	codes []uint32
}

// mig2NewNode is the node being migrated: the test app over a goleveldb
// application database in <home>/data (reopened at every start, as the SDK's
// node opens it; BaseApp.Close closes it), first on the default store, then
// (n.ours set) with SetupMemIAVL on the same home.
func mig2NewNode(t *testing.T, name, home string, cfg compat.Config) *lifeNode {
	n := &lifeNode{name: name, home: home, cfg: cfg, logger: &lifeLogger{}}
	t.Cleanup(func() {
		if n.app != nil {
			n.close(t)
		}
		n.logger.check(t)
	})
	return n
}

func mig2DataDir(home string) string { return filepath.Join(home, "data") }

// mig2Open starts the node: opens <home>/data/application.db and builds the
// app on it.
func mig2Open(t *testing.T, n *lifeNode, extra ...func(*baseapp.BaseApp)) {
	t.Helper()
	db, err := dbm.NewGoLevelDB("application", mig2DataDir(n.home), nil)
	if err != nil {
		t.Fatalf("%s: open application.db: %v", n.name, err)
	}
	n.db = db
	n.open(t, extra...)
}

func mig2Restart(t *testing.T, n *lifeNode, extra ...func(*baseapp.BaseApp)) {
	t.Helper()
	n.close(t)
	if n.home != "" {
		mig2Open(t, n, extra...)
	} else {
		n.open(t, extra...)
	}
}

// mig2Exec runs block h on one node (FinalizeBlock and Commit through ABCI).
func mig2Exec(t *testing.T, n *lifeNode, h int64, txs [][]byte) mig2Block {
	t.Helper()
	res, err := n.app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: h, Txs: txs})
	if err != nil {
		t.Fatalf("%s: block %d: %v", n.name, h, err)
	}
	if _, err := n.app.Commit(); err != nil {
		t.Fatalf("%s: commit %d: %v", n.name, h, err)
	}
	if id := n.app.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, res.AppHash) {
		t.Fatalf("%s: after commit %d: LastCommitID %v, app hash %X", n.name, h, id, res.AppHash)
	}
	b := mig2Block{hash: res.AppHash}
	for _, r := range res.TxResults {
		b.codes = append(b.codes, r.Code)
	}
	return b
}

func mig2Same(t *testing.T, n *lifeNode, h int64, got, want mig2Block) {
	t.Helper()
	if !bytes.Equal(got.hash, want.hash) {
		t.Fatalf("block %d: %s app hash %X, oracle %X", h, n.name, got.hash, want.hash)
	}
	if fmt.Sprint(got.codes) != fmt.Sprint(want.codes) {
		t.Fatalf("block %d: %s tx result codes %v, oracle %v", h, n.name, got.codes, want.codes)
	}
}

var mig2Upgrade = &storetypes.StoreUpgrades{
	Added:   []string{"added"},
	Renamed: []storetypes.StoreRename{{OldKey: "oldmod", NewKey: "newmod"}},
	Deleted: []string{"legacy"},
}

// mig2Stores returns the extra module stores mounted for block next (and
// those the PreBlocker writes). With empty, "emptymod" is mounted too and
// never written, as chains have module stores that stay empty (x/params in
// SDK v0.50 apps, evidence, feegrant...).
func mig2Stores(upgradeAt, next int64, empty bool) (mounted, written []string) {
	switch {
	case upgradeAt == 0:
		mounted, written = []string{"extra"}, []string{"extra"}
	case next < upgradeAt:
		mounted, written = []string{"oldmod", "legacy"}, []string{"oldmod", "legacy"}
	default:
		mounted, written = []string{"newmod", "added"}, []string{"newmod", "added"}
	}
	if empty {
		mounted = append(mounted, "emptymod")
	}
	return mounted, written
}

// mig2Mods is the app's extra modules for a start before block next (with
// x/upgrade's store loader when there is an upgrade).
func mig2Mods(upgradeAt, next int64, empty bool) func(*baseapp.BaseApp) {
	mounted, written := mig2Stores(upgradeAt, next, empty)
	var loader baseapp.StoreLoader
	if upgradeAt != 0 && next >= upgradeAt {
		loader = lifeUpgradeStoreLoader(upgradeAt, mig2Upgrade)
	}
	return lifeModules(mounted, written, loader)
}

// mig2Common returns the extra stores of height m mounted by our node
// started before m+1 and by the oracle at stop.
func mig2Common(upgradeAt, m, stop int64, empty bool) []string {
	at, _ := mig2Stores(upgradeAt, m, empty)
	ours, _ := mig2Stores(upgradeAt, m+1, empty)
	oracle, _ := mig2Stores(upgradeAt, stop+1, empty)
	var out []string
	for _, s := range at {
		if slices.Contains(ours, s) && slices.Contains(oracle, s) {
			out = append(out, s)
		}
	}
	return out
}

// mig2CLIBinary builds the memiavl command into dir.
func mig2CLIBinary(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "memiavl")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/seed-6dfbb450/memiavl/cmd/memiavl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/memiavl: %v\n%s", err, out)
	}
	return bin
}

// mig2Migrate migrates the stopped node's application database at height
// into <home>/data/memiavl.db, with compat.ImportIAVL or with the command
// (bin) as an operator would run it.
func mig2Migrate(t *testing.T, home string, height, latest int64, bin string, want []byte) {
	t.Helper()
	src := filepath.Join(mig2DataDir(home), "application.db")
	dst := compat.DBDir(home)
	if bin == "" {
		db, err := dbm.NewGoLevelDB("application", mig2DataDir(home), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = compat.ImportIAVL(db, height, nil, dst, multitree.Options{RewriteConcurrency: 2})
		if cerr := db.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("ImportIAVL at %d: %v", height, err)
		}
	} else {
		args := []string{"import-iavl", src, dst, "--concurrency", "2"}
		if height != latest {
			args = append(args, "--height", fmt.Sprint(height))
		} // else: the default, the application's latest version
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("memiavl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), fmt.Sprintf("at version %d", height)) || !strings.Contains(string(out), fmt.Sprintf("app hash %x", want)) {
			t.Fatalf("memiavl import-iavl printed %q, want version %d and app hash %X", out, height, want)
		}
		if out, err := exec.Command(bin, "verify", dst).CombinedOutput(); err != nil {
			t.Fatalf("memiavl verify %s: %v\n%s", dst, err, out)
		}
	}
	// the application database is left as it was
	db, err := dbm.NewGoLevelDB("application", mig2DataDir(home), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, h := range []int64{height, latest} {
		if bz, err := db.Get([]byte(fmt.Sprintf("s/%d", h))); err != nil || bz == nil {
			t.Fatalf("application.db after the migration: commit info of %d: %v %v", h, bz, err)
		}
	}
	if bz, _ := db.Get([]byte(fmt.Sprintf("s/%d", latest+1))); bz != nil {
		t.Fatalf("application.db after the migration has a version %d", latest+1)
	}
}

// mig2Query runs an ABCI query on both apps and requires equal responses
// (proofs byte for byte), verifying a proof of height against hash.
func mig2Query(t *testing.T, ours, oracle *testApp, store string, key []byte, height int64, prove bool, hash []byte) *storetypes.ResponseQuery {
	t.Helper()
	qa, qb := queryBoth(t, ours, oracle, abci.RequestQuery{Path: "/store/" + store + "/key", Data: key, Height: height, Prove: prove})
	sa, sb := storetypes.ResponseQuery(*qa), storetypes.ResponseQuery(*qb)
	if err := sameResponse(&sa, nil, &sb, nil); err != nil {
		t.Fatalf("query %s %q at %d (prove %v): %v", store, key, height, prove, err)
	}
	if prove && sa.Code == 0 && sa.ProofOps != nil && verifiable(t, sa.ProofOps) {
		if err := verifyProof(store, &sa, hash); err != nil {
			t.Fatalf("query %s %q at %d: proof: %v", store, key, height, err)
		}
	}
	return &sa
}

// mig2QueriesAt compares queries at exactly height (the migrated one, the
// only one our node has right after the migration): bank balances through
// ABCI with proofs and gRPC, the extra stores' keys.
func mig2QueriesAt(t *testing.T, ours, oracle *testApp, chain *lifeChain, height int64, hash []byte, stores []string) {
	t.Helper()
	found := 0
	for i, addr := range chain.addrs {
		if i%5 != 0 {
			continue
		}
		key := append([]byte{0x02, byte(len(addr))}, addr...)
		key = append(key, testDenom...)
		for _, prove := range []bool{true, false} {
			if res := mig2Query(t, ours, oracle, "bank", key, height, prove, hash); res.Code == 0 && res.Value != nil {
				found++
			}
		}
		q := &banktypes.QueryBalanceRequest{Address: addr.String(), Denom: testDenom}
		data, err := q.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		qa, qb := queryBoth(t, ours, oracle, abci.RequestQuery{Path: "/cosmos.bank.v1beta1.Query/Balance", Data: data, Height: height})
		if qa.Code != 0 || qb.Code != 0 || !bytes.Equal(qa.Value, qb.Value) {
			t.Fatalf("gRPC balance at %d: code %d %X (%s), oracle code %d %X (%s)", height, qa.Code, qa.Value, qa.Log, qb.Code, qb.Value, qb.Log)
		}
	}
	if height > 1 && found == 0 {
		t.Fatalf("no balance found at %d", height)
	}
	for _, store := range stores {
		for _, key := range []string{"last", "origin", fmt.Sprintf("h/%06d", height), fmt.Sprintf("h/%06d", height-5), "zzz"} {
			for _, prove := range []bool{true, false} {
				mig2Query(t, ours, oracle, store, []byte(key), height, prove, hash)
			}
		}
	}
}

// mig2NotServed checks that our node, migrated at a later height, does not
// serve height (before the migration) with wrong data: as a pruned height in
// rootmulti.
func mig2NotServed(t *testing.T, ours *testApp, chain *lifeChain, height int64) {
	t.Helper()
	addr := chain.addrs[0]
	key := append(append([]byte{0x02, byte(len(addr))}, addr...), testDenom...)
	res, err := ours.Query(context.Background(), &abci.RequestQuery{Path: "/store/bank/key", Data: key, Height: height})
	if err != nil {
		t.Fatal(err)
	}
	if res.Value != nil || (res.Code == 0 && !strings.Contains(res.Log, "version does not exist")) {
		t.Fatalf("query at %d, before the migration: code %d value %X log %q", height, res.Code, res.Value, res.Log)
	}
	if height > 1 {
		res, err = ours.Query(context.Background(), &abci.RequestQuery{Path: "/store/bank/key", Data: key, Height: height, Prove: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code == 0 {
			t.Fatalf("proven query at %d, before the migration: code 0 value %X", height, res.Value)
		}
	}
	q := &banktypes.QueryBalanceRequest{Address: addr.String(), Denom: testDenom}
	data, err := q.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	res, err = ours.Query(context.Background(), &abci.RequestQuery{Path: "/cosmos.bank.v1beta1.Query/Balance", Data: data, Height: height})
	if err != nil {
		t.Fatal(err)
	}
	if res.Code == 0 {
		t.Fatalf("gRPC balance at %d, before the migration: code 0 value %X", height, res.Value)
	}
}

// TestMigrateNode runs the scenarios of a node switching from the default
// store to ours through the migration.
func TestMigrateNode(t *testing.T) {
	cases := []mig2Case{
		{name: "latest", stop: 24, migrateAt: 24, restartAt: 32, total: 40},
		{name: "latest-async", stop: 24, migrateAt: 24, restartAt: 30, total: 36, async: true},
		{name: "older-height", stop: 24, migrateAt: 17, restartAt: 30, total: 36},
		{name: "first-height", stop: 10, migrateAt: 1, restartAt: 14, total: 18},
		{name: "initial-height", initial: 100, stop: 20, migrateAt: 14, restartAt: 25, total: 30},
		{name: "upgrade-before-migration", upgradeAt: 9, stop: 20, migrateAt: 20, restartAt: 25, total: 30},
		{name: "upgrade-replayed", upgradeAt: 18, stop: 22, migrateAt: 12, restartAt: 26, total: 30},
		// a store empty at the migration height (on goleveldb, whose Get
		// returns nil for iavl's empty root marker); the default node is
		// not restarted, which fails upstream in the same way
		{name: "empty-store", stop: 12, migrateAt: 12, restartAt: 16, total: 20, empty: true},
		{name: "cli-latest", stop: 20, migrateAt: 20, restartAt: 24, total: 28, cli: true},
		{name: "cli-older-height", upgradeAt: 8, stop: 20, migrateAt: 14, restartAt: 24, total: 28, cli: true},
	}
	cliDir := t.TempDir() // the command, built by the first case that runs it
	var bin string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cli {
				if testing.Short() {
					t.Skip("builds the memiavl command (-short)")
				}
				if bin == "" {
					bin = mig2CLIBinary(t, cliDir)
				}
			}
			mig2Run(t, tc, bin)
		})
	}
}

func mig2Run(t *testing.T, tc mig2Case, bin string) {
	if !tc.cli {
		bin = ""
	}
	off := int64(0)
	if tc.initial > 1 {
		off = tc.initial - 1
	}
	first, stop, m, total, restartAt := 1+off, tc.stop+off, tc.migrateAt+off, tc.total+off, tc.restartAt+off
	up := int64(0)
	if tc.upgradeAt != 0 {
		up = tc.upgradeAt + off
	}
	if !(first <= m && m <= stop && stop < restartAt && restartAt <= total && up <= stop) {
		t.Fatalf("bad case %+v", tc)
	}
	chain := lifeNewChain(t)
	blocks := map[int64][][]byte{}
	for h := first; h <= total; h++ {
		blocks[h] = chain.block(t)
	}
	cfg := testConfig()
	if tc.async {
		cfg.AsyncCommitBuffer = 3
		cfg.Fsync = "grouped"
		cfg.SnapshotInterval = 4
		cfg.SnapshotKeepRecent = 1
	}
	home := t.TempDir()
	if err := os.MkdirAll(mig2DataDir(home), 0o755); err != nil {
		t.Fatal(err)
	}
	oracle := lifeNewNode(t, "oracle (default store, every block)", false, compat.Config{})
	node := mig2NewNode(t, "node", home, cfg)
	oracle.open(t, mig2Mods(up, first, tc.empty))
	mig2Open(t, node, mig2Mods(up, first, tc.empty))
	for _, n := range []*lifeNode{oracle, node} {
		if _, err := n.app.InitChain(&abci.RequestInitChain{ChainId: testChainID, AppStateBytes: chain.genesis, InitialHeight: first}); err != nil {
			t.Fatalf("%s: InitChain: %v", n.name, err)
		}
	}

	// 1. the node runs on the default store beside the oracle
	want := map[int64]mig2Block{}
	var ok, failed int
	for h := first; h <= stop; h++ {
		if h == up {
			// the upgrade binary, with x/upgrade's store loader
			for _, n := range []*lifeNode{oracle, node} {
				mig2Restart(t, n, mig2Mods(up, h, tc.empty))
				lifeCheckInfo(t, n, h-1, want[h-1].hash)
			}
		}
		want[h] = mig2Exec(t, oracle, h, blocks[h])
		mig2Same(t, node, h, mig2Exec(t, node, h, blocks[h]), want[h])
		for _, c := range want[h].codes {
			if c == 0 {
				ok++
			} else {
				failed++
			}
		}
		// (with an empty store the default store on goleveldb fails
		// gRPC queries at past heights: cosmos-db's goleveldb Get returns
		// nil for iavl's empty root marker, cosmos/cosmos-db#146,
		// cosmos/cosmos-sdk#20254)
		if !tc.empty && h >= first+2 && h%4 == 0 {
			compareAppQueries(t, chain.r, node.app, oracle.app, chain.addrs, h, want[h].hash)
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("want both successful and failing transactions, got %d and %d", ok, failed)
	}
	if _, isOurs := node.app.CommitMultiStore().(*compat.MultiStore); isOurs {
		t.Fatal("the node ran on our store before the migration")
	}

	// 2. stop it
	node.close(t)
	if _, err := os.Stat(compat.DBDir(home)); !os.IsNotExist(err) {
		t.Fatalf("%s exists before the migration: %v", compat.DBDir(home), err)
	}

	// 3. migrate
	mig2Migrate(t, home, m, stop, bin, want[m].hash)

	// 4. start it on our store
	node.ours = true
	node.name = "node (ours, migrated at " + fmt.Sprint(m) + ")"
	mig2Open(t, node, mig2Mods(up, m+1, tc.empty))
	lifeCheckInfo(t, node, m, want[m].hash)
	if v := node.ms().DB().Version(); v != m {
		t.Fatalf("migrated database at version %d, want %d", v, m)
	}
	// the stores of height m that both apps mount now
	mig2QueriesAt(t, node.app, oracle.app, chain, m, want[m].hash, mig2Common(up, m, stop, tc.empty))
	if m > first {
		mig2NotServed(t, node.app, chain, m-1)
	}
	// the node replays the blocks after the migrated height (CometBFT's
	// handshake), across the upgrade if it comes after it
	for h := m + 1; h <= stop; h++ {
		if h == up {
			mig2Restart(t, node, mig2Mods(up, h, tc.empty))
			lifeCheckInfo(t, node, h-1, want[h-1].hash)
		}
		mig2Same(t, node, h, mig2Exec(t, node, h, blocks[h]), want[h])
		if h-2 >= m && h >= first+2 {
			compareAppQueries(t, chain.r, node.app, oracle.app, chain.addrs, h, want[h].hash)
		}
	}
	lifeCheckInfo(t, node, stop, want[stop].hash)
	// and follows the chain beside the oracle
	for h := stop + 1; h <= total; h++ {
		if h == restartAt {
			mig2Restart(t, node, mig2Mods(up, h, tc.empty))
			lifeCheckInfo(t, node, h-1, want[h-1].hash)
		}
		want[h] = mig2Exec(t, oracle, h, blocks[h])
		mig2Same(t, node, h, mig2Exec(t, node, h, blocks[h]), want[h])
		if h-2 >= m && h >= first+2 {
			compareAppQueries(t, chain.r, node.app, oracle.app, chain.addrs, h, want[h].hash)
		}
		mounted, _ := mig2Stores(up, h, tc.empty)
		for _, store := range mounted {
			for _, key := range []string{"last", "origin", fmt.Sprintf("h/%06d", h-1)} {
				mig2Query(t, node.app, oracle.app, store, []byte(key), h, true, want[h].hash)
			}
		}
	}
	if up != 0 {
		keys := node.ms().StoreKeysByName()
		if v := node.app.CommitMultiStore().GetKVStore(keys["newmod"]).Get([]byte("origin")); string(v) != "oldmod" {
			t.Fatalf("renamed store: origin %q, want the old store's", v)
		}
		for _, si := range node.ms().LastCommitInfo().StoreInfos {
			if si.Name == "oldmod" || si.Name == "legacy" {
				t.Fatalf("store %q still in the commit info", si.Name)
			}
		}
	}
	// a last restart
	mig2Restart(t, node, mig2Mods(up, total+1, tc.empty))
	lifeCheckInfo(t, node, total, want[total].hash)
}
