package compat_test

// Lifecycle tests of the SDK app of sdkapp_test.go on our store against the
// same app on the default store (rootmulti over cosmos/iavl): restarts (with
// a synchronous and an asynchronous log and background snapshot rewrites),
// state sync through the SDK's snapshot manager in both directions, store
// upgrades through the baseapp store loader, `simd rollback`, and a shutdown
// in the middle of a state-sync snapshot.
//
//	go test -run TestLife -count=1 ./compat/

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/math"
	"cosmossdk.io/store/snapshots"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/cosmos/cosmos-sdk/baseapp"
	sdk "github.com/cosmos/cosmos-sdk/types"
	moduletestutil "github.com/cosmos/cosmos-sdk/types/module/testutil"
	"github.com/cosmos/cosmos-sdk/x/auth"
	"github.com/cosmos/cosmos-sdk/x/bank"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"
	protoio "github.com/cosmos/gogoproto/io"
	"github.com/cosmos/gogoproto/proto"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// lifeLogger records the errors logged by our store (background rewrite
// failures, unmounted stores): the tests require none.
type lifeLogger struct {
	mu   sync.Mutex
	errs []string
}

func (l *lifeLogger) Info(string, ...any)  {}
func (l *lifeLogger) Warn(string, ...any)  {}
func (l *lifeLogger) Debug(string, ...any) {}
func (l *lifeLogger) Error(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprint(append([]any{msg}, kv...)...))
}
func (l *lifeLogger) With(...any) log.Logger { return l }
func (l *lifeLogger) Impl() any              { return nil }

func (l *lifeLogger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Errorf("our store logged errors: %q", l.errs)
	}
}

// lifeNode is one node of the chain: the test app on one store, reopened on
// the same databases across restarts.
type lifeNode struct {
	name   string
	ours   bool
	home   string // ours: the node home
	db     dbm.DB // the BaseApp database (the default store's state)
	cfg    compat.Config
	logger *lifeLogger
	app    *testApp

	pendingSnapshot uint64 // see lifeSyncStep
}

func lifeNewNode(t *testing.T, name string, ours bool, cfg compat.Config) *lifeNode {
	n := &lifeNode{name: name, ours: ours, db: dbm.NewMemDB(), cfg: cfg, logger: &lifeLogger{}}
	if ours {
		n.home = t.TempDir()
	}
	cleanupNode(t, ours, n.logger, func() bool { return n.app != nil }, n.close)
	return n
}

// open builds a new BaseApp on the node's databases (what a node start
// does), with the extra options after SetupMemIAVL.
func (n *lifeNode) open(t *testing.T, extra ...func(*baseapp.BaseApp)) *testApp {
	t.Helper()
	if n.app != nil {
		t.Fatalf("%s: open while open", n.name)
	}
	var opts []func(*baseapp.BaseApp)
	if n.ours {
		opts = append(opts, compat.SetupMemIAVL(n.logger, n.home, n.cfg))
	}
	opts = append(opts, extra...)
	n.app = newTestApp(t, n.db, opts...)
	switch n.app.CommitMultiStore().(type) {
	case *compat.MultiStore, *lifeRecordingCMS:
		if !n.ours {
			t.Fatalf("%s: multistore %T", n.name, n.app.CommitMultiStore())
		}
	default:
		if n.ours {
			t.Fatalf("%s: multistore %T", n.name, n.app.CommitMultiStore())
		}
	}
	return n.app
}

// cleanupNode has a node's app closed when the test ends, if open reports
// it still open (closeNode), and, for a node on this store (ours), its log
// checked.
func cleanupNode(t *testing.T, ours bool, logger *lifeLogger, open func() bool, closeNode func(*testing.T)) {
	t.Cleanup(func() {
		if open() {
			closeNode(t)
		}
		if ours {
			logger.check(t)
		}
	})
}

// closeApp closes app as an app's Close should: BaseApp.Close (which closes
// the application database), then the multistore through io.Closer; it
// returns the first error.
func closeApp(app interface {
	Close() error
	CommitMultiStore() storetypes.CommitMultiStore
}) error {
	err := app.Close()
	if c, ok := app.CommitMultiStore().(io.Closer); ok {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// close closes the app with closeApp.
func (n *lifeNode) close(t *testing.T) {
	t.Helper()
	err := closeApp(n.app)
	n.app = nil
	if err != nil {
		t.Fatalf("%s: close: %v", n.name, err)
	}
}

func (n *lifeNode) ms() *compat.MultiStore {
	switch cms := n.app.CommitMultiStore().(type) {
	case *compat.MultiStore:
		return cms
	case *lifeRecordingCMS:
		return cms.MultiStore
	}
	panic(fmt.Sprintf("%s: multistore %T", n.name, n.app.CommitMultiStore()))
}

// lifeRecordingCMS is our multistore recording the errors of the snapshots
// the SDK's snapshot manager takes (which it only logs, to the app's nop
// logger).
type lifeRecordingCMS struct {
	*compat.MultiStore
	mu   sync.Mutex
	errs map[uint64]error
	log  []string
	gate func() // see lifeGatedWriter
}

// lifeGatedWriter calls gate before its second message (the first store's
// first node: the snapshot is under way, holding its view).
type lifeGatedWriter struct {
	protoio.Writer
	n    int
	gate func()
}

func (w *lifeGatedWriter) WriteMsg(m proto.Message) error {
	if w.n++; w.n == 2 && w.gate != nil {
		w.gate()
	}
	return w.Writer.WriteMsg(m)
}

func (c *lifeRecordingCMS) Snapshot(height uint64, w protoio.Writer) error {
	start := time.Now()
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		w = &lifeGatedWriter{Writer: w, gate: gate}
	}
	err := c.MultiStore.Snapshot(height, w)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[height] = err
	c.log = append(c.log, fmt.Sprintf("Snapshot(%d) at %s took %s", height, start.Format("15:04:05.000"), time.Since(start)))
	return err
}

func (c *lifeRecordingCMS) Commit() storetypes.CommitID {
	id := c.MultiStore.Commit()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf("Commit(%d) at %s", id.Version, time.Now().Format("15:04:05.000")))
	return id
}

func (c *lifeRecordingCMS) snapshotErr(height uint64) (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	err, ok := c.errs[height]
	return err, ok
}

// lifeRecordSnapshots installs lifeRecordingCMS over our multistore (an
// option after SetupMemIAVL, before SetSnapshot).
func lifeRecordSnapshots(b *baseapp.BaseApp) {
	if ms, ok := b.CommitMultiStore().(*compat.MultiStore); ok {
		b.SetCMS(&lifeRecordingCMS{MultiStore: ms, errs: map[uint64]error{}})
	}
}

// lifeCheckInfo checks ABCI Info against the expected last block.
func lifeCheckInfo(t *testing.T, n *lifeNode, height int64, hash []byte) {
	t.Helper()
	info, err := n.app.Info(&abci.RequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if info.LastBlockHeight != height || !bytes.Equal(info.LastBlockAppHash, hash) {
		t.Fatalf("%s: Info: height %d app hash %X, want %d %X", n.name, info.LastBlockHeight, info.LastBlockAppHash, height, hash)
	}
}

// lifeChain is the genesis and pre-generated blocks of a test chain.
type lifeChain struct {
	addrs   []sdk.AccAddress
	genesis []byte
	enc     *testApp // for encoding only
	r       *rand.Rand
	made    int // blocks made so far
}

func lifeNewChain(t *testing.T) *lifeChain {
	enc := &testApp{encCfg: moduletestutil.MakeTestEncodingConfig(auth.AppModuleBasic{}, bank.AppModuleBasic{})}
	addrs := testAccounts(30)
	return &lifeChain{addrs: addrs, genesis: genesisState(t, enc.encCfg, addrs), enc: enc, r: testutil.Rand(t)}
}

// block returns the transactions of a random block of bank sends (some
// failing, some creating accounts), as in TestSDKAppAgainstDefaultStore.
// The first transaction of the chain's first block always fails, so that
// even a short chain has a failing one.
func (c *lifeChain) block(t *testing.T) [][]byte {
	r := c.r
	c.made++
	var txs [][]byte
	for i := 0; i < 1+r.Intn(8); i++ {
		var msgs []sdk.Msg
		for j := 0; j < 1+r.Intn(3); j++ {
			from, to := c.addrs[r.Intn(len(c.addrs))], c.addrs[r.Intn(len(c.addrs))]
			if r.Intn(8) == 0 {
				to = sdk.AccAddress(fmt.Appendf(nil, "memiavl-new-acct-%03d", r.Intn(1000))[:20])
			}
			n := 1 + r.Int63n(400)
			if r.Intn(12) == 0 || (c.made == 1 && i == 0 && j == 0) {
				n = 1_000_000_000 // the transaction fails
			}
			msgs = append(msgs, banktypes.NewMsgSend(from, to, sdk.NewCoins(sdk.NewCoin(testDenom, math.NewInt(n)))))
		}
		txs = append(txs, c.enc.sendTx(t, msgs...))
	}
	return txs
}

func (c *lifeChain) blocks(t *testing.T, n int) [][][]byte {
	out := make([][][]byte, n+1) // by height, [0] unused
	for h := 1; h <= n; h++ {
		out[h] = c.block(t)
	}
	return out
}

func (c *lifeChain) initChain(t *testing.T, nodes ...*lifeNode) {
	t.Helper()
	for _, n := range nodes {
		if _, err := n.app.InitChain(&abci.RequestInitChain{ChainId: testChainID, AppStateBytes: c.genesis, InitialHeight: 1}); err != nil {
			t.Fatalf("%s: InitChain: %v", n.name, err)
		}
	}
}

// lifeStep runs block h (FinalizeBlock and Commit through ABCI) on every
// node, requiring equal app hashes and transaction results, and returns the
// app hash.
func lifeStep(t *testing.T, h int64, txs [][]byte, nodes ...*lifeNode) []byte {
	t.Helper()
	var want *abci.ResponseFinalizeBlock
	for i, n := range nodes {
		res, err := n.app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: h, Txs: txs})
		if err != nil {
			t.Fatalf("%s: block %d: %v", n.name, h, err)
		}
		if i == 0 {
			want = res
			continue
		}
		if !bytes.Equal(res.AppHash, want.AppHash) {
			t.Fatalf("block %d: %s app hash %X, %s %X", h, n.name, res.AppHash, nodes[0].name, want.AppHash)
		}
		if len(res.TxResults) != len(want.TxResults) {
			t.Fatalf("block %d: %s %d tx results, %s %d", h, n.name, len(res.TxResults), nodes[0].name, len(want.TxResults))
		}
		for j := range res.TxResults {
			if res.TxResults[j].Code != want.TxResults[j].Code {
				t.Fatalf("block %d tx %d: %s code %d, %s %d", h, j, n.name, res.TxResults[j].Code, nodes[0].name, want.TxResults[j].Code)
			}
		}
	}
	for _, n := range nodes {
		if _, err := n.app.Commit(); err != nil {
			t.Fatalf("%s: commit %d: %v", n.name, h, err)
		}
		if id := n.app.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, want.AppHash) {
			t.Fatalf("%s: after commit %d: LastCommitID %v, want app hash %X", n.name, h, id, want.AppHash)
		}
	}
	return want.AppHash
}

// ---------------------------------------------------------------------------
// 1. Restart

// TestLifeRestart runs the app on our store with restarts (close, new
// BaseApp on the same home) against the default store running every block
// without restart.
func TestLifeRestart(t *testing.T) {
	async := testConfig()
	async.AsyncCommitBuffer = 4
	async.Fsync = "grouped"
	async.SnapshotInterval = 3
	async.SnapshotKeepRecent = 1
	for _, tc := range []struct {
		name     string
		cfg      compat.Config
		restarts []int64 // restart before these heights (repeated: twice in a row)
		blocks   int
	}{
		{"sync", testConfig(), []int64{6, 11, 17}, 24},
		// restarts right after a rewrite started (9 = 3*3), between two
		// rewrites (14), twice in a row (20)
		{"async-rewrites", async, []int64{10, 14, 20, 20}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := lifeNewChain(t)
			blocks := chain.blocks(t, tc.blocks)
			oracle := lifeNewNode(t, "default store", false, compat.Config{})
			ours := lifeNewNode(t, "ours", true, tc.cfg)
			oracle.open(t)
			ours.open(t)
			chain.initChain(t, oracle, ours)
			hashes := map[int64][]byte{}
			snapVersions := map[int64]bool{}
			for h := int64(1); h <= int64(tc.blocks); h++ {
				for _, rh := range tc.restarts {
					if rh != h {
						continue
					}
					ours.close(t)
					ours.open(t)
					lifeCheckInfo(t, ours, h-1, hashes[h-1])
					if got := ours.ms().LastCommitInfo(); got == nil || got.Version != h-1 {
						t.Fatalf("after restart before %d: last commit info %v", h, got)
					}
				}
				hashes[h] = lifeStep(t, h, blocks[h], oracle, ours)
				if tc.cfg.AsyncCommitBuffer > 0 && h == 15 {
					// one snapshot whatever the background rewrites
					// managed on a loaded machine
					if err := ours.ms().RewriteSnapshot(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if v := ours.ms().DB().SnapshotVersion(); v > 0 {
					snapVersions[v] = true
				}
				if h > 2 && h%3 == 0 {
					compareAppQueries(t, chain.r, ours.app, oracle.app, chain.addrs, h, hashes[h])
				}
			}
			if tc.cfg.AsyncCommitBuffer > 0 && !snapVersions[15] {
				t.Fatalf("the snapshot rewritten at 15 was not seen: snapshot versions %v", lifeKeys(snapVersions))
			}
			// a last restart after the last block: nothing lost on a clean close
			ours.close(t)
			ours.open(t)
			lifeCheckInfo(t, ours, int64(tc.blocks), hashes[int64(tc.blocks)])
			t.Logf("%d blocks, restarts before %v, snapshot versions seen %v", tc.blocks, tc.restarts, lifeKeys(snapVersions))
		})
	}
}

func lifeKeys(m map[int64]bool) []int64 {
	var ks []int64
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// ---------------------------------------------------------------------------
// 2. State sync through the SDK's snapshot manager

const lifeSnapshotInterval = 5

func lifeSnapshotOpt(t *testing.T) func(*baseapp.BaseApp) {
	st, err := snapshots.NewStore(dbm.NewMemDB(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return func(b *baseapp.BaseApp) {
		lifeRecordSnapshots(b)
		// keep every snapshot: the manager prunes after it saves one,
		// and a prune still running at the next snapshot height would
		// make it skip that snapshot
		b.SetSnapshot(st, snapshottypes.NewSnapshotOptions(lifeSnapshotInterval, 0))
	}
}

// lifeWaitSnapshot waits for the node's snapshot manager to list the
// snapshot of height (taken asynchronously after Commit).
func lifeWaitSnapshot(t *testing.T, n *lifeNode, height uint64) *abci.Snapshot {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := n.app.ListSnapshots(&abci.RequestListSnapshots{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Snapshots {
			if s.Height == height {
				return s
			}
		}
		if time.Now().After(deadline) {
			var hs []uint64
			for _, s := range res.Snapshots {
				hs = append(hs, s.Height)
			}
			// the manager logs its failures only (to the app's nop
			// logger)
			snapErr := "not recorded"
			if c, ok := n.app.CommitMultiStore().(*lifeRecordingCMS); ok {
				if err, called := c.snapshotErr(height); called {
					snapErr = fmt.Sprintf("MultiStore.Snapshot(%d) returned %v", height, err)
				} else {
					snapErr = fmt.Sprintf("MultiStore.Snapshot(%d) was not called", height)
				}
				c.mu.Lock()
				snapErr += fmt.Sprintf(" (%q)", c.log)
				c.mu.Unlock()
			}
			_, cerr := n.app.SnapshotManager().Create(height)
			t.Fatalf("%s: no snapshot of height %d after 15 s (snapshots %v); %s; Create(%d) now: %v",
				n.name, height, hs, snapErr, height, cerr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lifeSyncStep is lifeStep for nodes with snapshot managers. The default
// store's snapshots are waited for before the next block: cosmos/iavl's
// exporter races with the next block's writes to the mutable tree (a data
// race reported by -race inside cosmos/iavl, not ours), while our store's
// snapshots run concurrently with the next blocks, as they do in a node.
//
// Our store's snapshots are waited for two blocks before the next snapshot
// height: the manager skips a snapshot (logging "a snapshot operation is in
// progress") when the previous one has not finished, which happens under
// -race when blocks are faster than snapshots, for either store.
func lifeSyncStep(t *testing.T, h int64, txs [][]byte, nodes ...*lifeNode) []byte {
	t.Helper()
	hash := lifeStep(t, h, txs, nodes...)
	for _, n := range nodes {
		if n.app.SnapshotManager() == nil {
			continue
		}
		if h%lifeSnapshotInterval == 0 {
			if !n.ours {
				lifeWaitSnapshot(t, n, uint64(h))
			} else {
				n.pendingSnapshot = uint64(h)
			}
		}
		if n.pendingSnapshot != 0 && h%lifeSnapshotInterval == lifeSnapshotInterval-2 {
			lifeWaitSnapshot(t, n, n.pendingSnapshot)
			n.pendingSnapshot = 0
		}
	}
	return hash
}

// lifeStateSync restores the snapshot of height from src into dst (a fresh
// app at version 0) through ABCI, as CometBFT's state syncer does, and
// checks Info against the trusted app hash.
func lifeStateSync(t *testing.T, src, dst *lifeNode, height uint64, appHash []byte) {
	t.Helper()
	snap := lifeWaitSnapshot(t, src, height)
	if info, err := dst.app.Info(&abci.RequestInfo{}); err != nil || info.LastBlockHeight != 0 {
		t.Fatalf("%s: not a fresh node: %v %v", dst.name, info, err)
	}
	offer, err := dst.app.OfferSnapshot(&abci.RequestOfferSnapshot{Snapshot: snap, AppHash: appHash})
	if err != nil {
		t.Fatal(err)
	}
	if offer.Result != abci.ResponseOfferSnapshot_ACCEPT {
		t.Fatalf("%s: OfferSnapshot of %s's snapshot at %d: %v", dst.name, src.name, height, offer.Result)
	}
	if snap.Chunks == 0 {
		t.Fatalf("snapshot without chunks: %v", snap)
	}
	for i := uint32(0); i < snap.Chunks; i++ {
		chunk, err := src.app.LoadSnapshotChunk(&abci.RequestLoadSnapshotChunk{Height: snap.Height, Format: snap.Format, Chunk: i})
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Chunk) == 0 {
			t.Fatalf("%s: chunk %d of snapshot %d is empty", src.name, i, height)
		}
		res, err := dst.app.ApplySnapshotChunk(&abci.RequestApplySnapshotChunk{Index: i, Chunk: chunk.Chunk, Sender: src.name})
		if err != nil {
			t.Fatal(err)
		}
		if res.Result != abci.ResponseApplySnapshotChunk_ACCEPT {
			t.Fatalf("%s: ApplySnapshotChunk %d/%d of %s's snapshot at %d: %v", dst.name, i, snap.Chunks, src.name, height, res.Result)
		}
	}
	// CometBFT checks the restored app against the light client's app hash
	lifeCheckInfo(t, dst, int64(height), appHash)
}

// TestLifeStateSync: a chain runs on one store with snapshots every
// lifeSnapshotInterval blocks; a fresh node on the other store state-syncs
// from its snapshot at 10 and follows the chain; at 20 a fresh node on the
// first store state-syncs from the second node's own snapshot. An independent
// node on the default store runs every block from genesis; all app hashes
// must be equal, and so must the snapshots both stores take of the same
// heights (the streams are documented to be byte-identical).
func TestLifeStateSync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		srcOurs bool
		async   int
	}{
		{"default-to-ours", false, 0},
		{"ours-to-default", true, 0},
		{"default-to-ours-async", false, 3},
		{"ours-to-default-async", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := lifeNewChain(t)
			const first, second, total = 10, 20, 26
			blocks := chain.blocks(t, total)
			cfg := testConfig()
			cfg.SnapshotInterval = 4 // background rewrites meanwhile
			cfg.AsyncCommitBuffer = tc.async
			kind := map[bool]string{false: "default store", true: "ours"}
			oracle := lifeNewNode(t, "oracle (default store, from genesis)", false, compat.Config{})
			src := lifeNewNode(t, "source ("+kind[tc.srcOurs]+")", tc.srcOurs, cfg)
			dst := lifeNewNode(t, "state-synced ("+kind[!tc.srcOurs]+")", !tc.srcOurs, cfg)
			back := lifeNewNode(t, "state-synced back ("+kind[tc.srcOurs]+")", tc.srcOurs, cfg)
			oracle.open(t)
			src.open(t, lifeSnapshotOpt(t))
			chain.initChain(t, oracle, src)
			hashes := map[int64][]byte{}
			for h := int64(1); h <= first; h++ {
				hashes[h] = lifeSyncStep(t, h, blocks[h], oracle, src)
			}
			dst.open(t, lifeSnapshotOpt(t))
			lifeStateSync(t, src, dst, first, hashes[first])
			for h := int64(first + 1); h <= second; h++ {
				hashes[h] = lifeSyncStep(t, h, blocks[h], oracle, src, dst)
			}
			// both took snapshots of 15 and 20 (the second one's after the
			// restore): same state, same stream
			for _, height := range []uint64{15, second} {
				a, b := lifeWaitSnapshot(t, src, height), lifeWaitSnapshot(t, dst, height)
				if a.Chunks != b.Chunks || !bytes.Equal(a.Hash, b.Hash) {
					t.Errorf("snapshots of height %d differ: %s %d chunks hash %X, %s %d chunks hash %X",
						height, src.name, a.Chunks, a.Hash, dst.name, b.Chunks, b.Hash)
				}
			}
			back.open(t, lifeSnapshotOpt(t))
			lifeStateSync(t, dst, back, second, hashes[second])
			for h := int64(second + 1); h <= total; h++ {
				hashes[h] = lifeSyncStep(t, h, blocks[h], oracle, src, dst, back)
				compareAppQueries(t, chain.r, dst.app, oracle.app, chain.addrs, h, hashes[h])
				if h >= second+3 { // (queries reach back two heights; back has none before second)
					compareAppQueries(t, chain.r, back.app, oracle.app, chain.addrs, h, hashes[h])
				}
			}
			// let the snapshots in flight finish before the stores close
			for _, n := range []*lifeNode{src, dst, back} {
				lifeWaitSnapshot(t, n, total/lifeSnapshotInterval*lifeSnapshotInterval)
			}
			// the state-synced nodes restart like any other
			for _, n := range []*lifeNode{dst, back} {
				n.close(t)
				n.open(t)
				lifeCheckInfo(t, n, total, hashes[total])
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 3. Store upgrade through the baseapp store loader

// lifeModules mounts extra KV stores and a PreBlocker writing to some of
// them every block, and sets the store loader.
func lifeModules(mounted, written []string, loader baseapp.StoreLoader) func(*baseapp.BaseApp) {
	return func(b *baseapp.BaseApp) {
		keys := storetypes.NewKVStoreKeys(mounted...)
		b.MountKVStores(keys)
		b.SetPreBlocker(func(ctx sdk.Context, _ *abci.RequestFinalizeBlock) (*sdk.ResponsePreBlock, error) {
			h := ctx.BlockHeight()
			for _, name := range written {
				st := ctx.KVStore(keys[name])
				st.Set(fmt.Appendf(nil, "h/%06d", h), fmt.Appendf(nil, "%s at %d", name, h))
				st.Set([]byte("last"), sdk.Uint64ToBigEndian(uint64(h)))
				if !st.Has([]byte("origin")) {
					st.Set([]byte("origin"), []byte(name))
				}
				st.Delete(fmt.Appendf(nil, "h/%06d", h-3))
			}
			return &sdk.ResponsePreBlock{}, nil
		})
		if loader != nil {
			b.SetStoreLoader(loader)
		}
	}
}

// lifeUpgradeStoreLoader is x/upgrade's UpgradeStoreLoader.
func lifeUpgradeStoreLoader(upgradeHeight int64, up *storetypes.StoreUpgrades) baseapp.StoreLoader {
	return func(ms storetypes.CommitMultiStore) error {
		if upgradeHeight == ms.LastCommitID().Version+1 {
			if len(up.Renamed) > 0 || len(up.Deleted) > 0 || len(up.Added) > 0 {
				return ms.LoadLatestVersionAndUpgrade(up)
			}
		}
		return baseapp.DefaultStoreLoader(ms)
	}
}

// TestLifeStoreUpgrade: the chain runs with two extra module stores
// ("oldmod", "legacy"; "retired" too), then restarts with the upgrade store
// loader at height 8: "added" is added, "oldmod" renamed to "newmod",
// "legacy" (still mounted) and "retired" (no longer mounted) deleted. It
// restarts once more after the upgrade (without the upgrade) and goes on.
func TestLifeStoreUpgrade(t *testing.T) {
	async := testConfig()
	async.AsyncCommitBuffer = 3
	async.SnapshotInterval = 3 // rewrites at 3, 6 (in flight at the upgrade), 9, ...
	async.SnapshotKeepRecent = 1
	t.Run("sync", func(t *testing.T) { lifeStoreUpgrade(t, testConfig()) })
	t.Run("async-rewrites", func(t *testing.T) { lifeStoreUpgrade(t, async) })
}

func lifeStoreUpgrade(t *testing.T, cfg compat.Config) {
	chain := lifeNewChain(t)
	const upgradeAt, restartAt, total = 8, 12, 16
	blocks := chain.blocks(t, total)
	oracle := lifeNewNode(t, "default store", false, compat.Config{})
	ours := lifeNewNode(t, "ours", true, cfg)
	nodes := []*lifeNode{oracle, ours}

	before := []string{"oldmod", "legacy", "retired"}
	for _, n := range nodes {
		n.open(t, lifeModules(before, before, nil))
	}
	chain.initChain(t, nodes...)
	hashes := map[int64][]byte{}
	for h := int64(1); h < upgradeAt; h++ {
		hashes[h] = lifeStep(t, h, blocks[h], nodes...)
	}

	up := &storetypes.StoreUpgrades{
		Added:   []string{"added"},
		Renamed: []storetypes.StoreRename{{OldKey: "oldmod", NewKey: "newmod"}},
		Deleted: []string{"legacy", "retired"},
	}
	after := []string{"newmod", "added"}
	for _, n := range nodes {
		n.close(t)
		n.open(t, lifeModules(append(after, "legacy"), after, lifeUpgradeStoreLoader(upgradeAt, up)))
		lifeCheckInfo(t, n, upgradeAt-1, hashes[upgradeAt-1])
	}
	for h := int64(upgradeAt); h <= total; h++ {
		if h == restartAt {
			for _, n := range nodes {
				n.close(t)
				n.open(t, lifeModules(after, after, lifeUpgradeStoreLoader(upgradeAt, up)))
				lifeCheckInfo(t, n, h-1, hashes[h-1])
			}
		}
		hashes[h] = lifeStep(t, h, blocks[h], nodes...)
		// the stores' contents through ABCI queries with proofs
		for _, name := range after {
			for _, key := range []string{"last", "origin", fmt.Sprintf("h/%06d", upgradeAt-2), fmt.Sprintf("h/%06d", h)} {
				req := func() *abci.RequestQuery {
					return &abci.RequestQuery{Path: "/store/" + name + "/key", Data: []byte(key), Height: h, Prove: true}
				}
				qa, err := ours.app.Query(context.Background(), req())
				if err != nil {
					t.Fatal(err)
				}
				qb, err := oracle.app.Query(context.Background(), req())
				if err != nil {
					t.Fatal(err)
				}
				sa, sb := storetypes.ResponseQuery(*qa), storetypes.ResponseQuery(*qb)
				if err := sameResponse(&sa, nil, &sb, nil); err != nil {
					t.Fatalf("height %d: query %s %q: %v", h, name, key, err)
				}
			}
		}
	}
	// the renamed store kept the old one's pairs
	st := ours.app.CommitMultiStore().GetKVStore(lifeKeyByName(t, ours, "newmod"))
	if v := st.Get([]byte("origin")); string(v) != "oldmod" {
		t.Fatalf("renamed store: origin %q, want the old store's", v)
	}
	if v := ours.app.CommitMultiStore().GetKVStore(lifeKeyByName(t, ours, "added")).Get([]byte("origin")); string(v) != "added" {
		t.Fatalf("added store: origin %q", v)
	}
	for _, name := range []string{"oldmod", "legacy", "retired"} {
		if ours.ms().LastCommitInfo() != nil {
			for _, si := range ours.ms().LastCommitInfo().StoreInfos {
				if si.Name == name {
					t.Fatalf("store %q still in the commit info", name)
				}
			}
		}
	}
}

func lifeKeyByName(t *testing.T, n *lifeNode, name string) storetypes.StoreKey {
	t.Helper()
	key := n.ms().StoreKeysByName()[name]
	if key == nil {
		t.Fatalf("%s: no store %q", n.name, name)
	}
	return key
}

// ---------------------------------------------------------------------------
// 4. Rollback as `simd rollback` does it

// TestLifeRollback: after n blocks both nodes stop; `simd rollback` opens
// the app and calls RollbackToVersion on its CommitMultiStore; the nodes
// restart and run block n (and the next ones) with different transactions.
func TestLifeRollback(t *testing.T) {
	async := testConfig()
	async.AsyncCommitBuffer = 3
	async.SnapshotInterval = 4
	async.SnapshotKeepRecent = 1
	// a background rewrite that started late (at 13, its predecessor
	// still running at 12) and the forced one at 14 would leave nothing at
	// or below 12 with one older snapshot kept; with two, the oldest kept
	// is at most 9
	asyncKeep2 := async
	asyncKeep2.SnapshotKeepRecent = 2
	for _, tc := range []struct {
		name   string
		cfg    compat.Config
		n      int64 // blocks before the rollback
		target int64
		force  int64 // a synchronous snapshot rewrite (MultiStore.RewriteSnapshot) after this block
	}{
		{"one-block", testConfig(), 13, 12, 0},
		{"async-one-block", async, 15, 14, 0},
		{"async-three-blocks", async, 15, 12, 0},
		// the target is the snapshot's version
		{"to-snapshot-height", testConfig(), 13, 12, 12},
		{"async-to-snapshot-height", async, 13, 12, 12},
		// the snapshot is newer than the target: it goes
		{"past-snapshot", testConfig(), 13, 12, 13},
		{"async-past-snapshot", asyncKeep2, 15, 12, 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := lifeNewChain(t)
			const more = 6
			blocks := chain.blocks(t, int(tc.n)+more)
			oracle := lifeNewNode(t, "default store", false, compat.Config{})
			ours := lifeNewNode(t, "ours", true, tc.cfg)
			nodes := []*lifeNode{oracle, ours}
			for _, n := range nodes {
				n.open(t)
			}
			chain.initChain(t, nodes...)
			hashes := map[int64][]byte{}
			for h := int64(1); h <= tc.n; h++ {
				hashes[h] = lifeStep(t, h, blocks[h], nodes...)
				if h == tc.force {
					if err := ours.ms().RewriteSnapshot(context.Background()); err != nil {
						t.Fatal(err)
					}
					if v := ours.ms().DB().SnapshotVersion(); v != h {
						t.Fatalf("snapshot version %d after RewriteSnapshot at %d", v, h)
					}
				}
			}
			for _, n := range nodes {
				n.close(t)
				// simd rollback: open the app, roll its multistore back
				app := n.open(t)
				if err := app.CommitMultiStore().RollbackToVersion(tc.target); err != nil {
					t.Fatalf("%s: RollbackToVersion(%d): %v", n.name, tc.target, err)
				}
				if id := app.CommitMultiStore().LastCommitID(); id.Version != tc.target || !bytes.Equal(id.Hash, hashes[tc.target]) {
					t.Fatalf("%s: after rollback: %v, want %d %X", n.name, id, tc.target, hashes[tc.target])
				}
				n.close(t)
				n.open(t)
				lifeCheckInfo(t, n, tc.target, hashes[tc.target])
			}
			// re-run the rolled-back heights, the first with other transactions
			for h := tc.target + 1; h <= tc.n+more; h++ {
				txs := blocks[h]
				if h == tc.target+1 {
					// other transactions, and one that surely changes the
					// state otherwise (random ones can all fail, or send
					// to their sender, as the original block's may)
					txs = append(chain.block(t), chain.enc.sendTx(t, banktypes.NewMsgSend(chain.addrs[0],
						sdk.AccAddress("memiavl-rollback-new"), sdk.NewCoins(sdk.NewCoin(testDenom, math.NewInt(1))))))
				}
				hash := lifeStep(t, h, txs, nodes...)
				if h == tc.target+1 && bytes.Equal(hash, hashes[h]) {
					t.Fatalf("block %d with other transactions has the same app hash", h)
				}
				hashes[h] = hash
				if h > tc.target+2 {
					compareAppQueries(t, chain.r, ours.app, oracle.app, chain.addrs, h, hash)
				}
			}
			// and a restart after
			ours.close(t)
			ours.open(t)
			lifeCheckInfo(t, ours, tc.n+more, hashes[tc.n+more])
		})
	}
}

// TestLifeCloseDuringSnapshot: the node shuts down (app and multistore
// closed) right after the Commit that starts a state-sync snapshot, while
// the snapshot manager's goroutine is reading our store; the snapshot may
// fail, but nothing may crash, and the node restarts and follows the chain.
func TestLifeCloseDuringSnapshot(t *testing.T) {
	chain := lifeNewChain(t)
	const total = 14
	blocks := chain.blocks(t, total)
	cfg := testConfig()
	cfg.SnapshotInterval = 4
	oracle := lifeNewNode(t, "default store", false, compat.Config{})
	ours := lifeNewNode(t, "ours", true, cfg)
	// the snapshot waits for the close in the middle of its stream
	var started, closed chan struct{}
	gated := func() {
		ours.open(t, lifeSnapshotOpt(t))
		started, closed = make(chan struct{}), make(chan struct{})
		st, cl := started, closed
		rec := ours.app.CommitMultiStore().(*lifeRecordingCMS)
		rec.gate = func() {
			close(st)
			<-cl
		}
	}
	oracle.open(t)
	gated()
	chain.initChain(t, oracle, ours)
	hashes := map[int64][]byte{}
	for h := int64(1); h <= total; h++ {
		hashes[h] = lifeStep(t, h, blocks[h], oracle, ours)
		if h%lifeSnapshotInterval == 0 {
			rec := ours.app.CommitMultiStore().(*lifeRecordingCMS)
			closedApp := &lifeNode{name: "ours (closed)", ours: true, app: ours.app}
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatalf("the snapshot of %d did not start", h)
			}
			ours.close(t) // the snapshot of h is being taken
			close(closed)
			deadline := time.Now().Add(10 * time.Second)
			err, called := rec.snapshotErr(uint64(h))
			for ; !called && time.Now().Before(deadline); err, called = rec.snapshotErr(uint64(h)) {
				time.Sleep(5 * time.Millisecond)
			}
			if !called {
				t.Fatalf("the snapshot of %d did not return after the close", h)
			}
			t.Logf("snapshot of %d, the store closed midway: error %v", h, err)
			if err == nil {
				// a snapshot that completed must be the state of h: state
				// sync a default-store node from it
				fresh := lifeNewNode(t, fmt.Sprintf("default store synced at %d", h), false, compat.Config{})
				fresh.open(t, lifeSnapshotOpt(t))
				lifeStateSync(t, closedApp, fresh, uint64(h), hashes[h])
				fresh.close(t)
			}
			gated()
			lifeCheckInfo(t, ours, h, hashes[h])
		}
	}
}
