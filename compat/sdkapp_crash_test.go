package compat_test

// Crash points of an SDK node on our store: the auth/bank app of
// sdkapp_test.go, killed while it executes and commits blocks, restarted on
// the same home and checked against the same chain on the default store.
//
//	go test -count=1 -run TestSDKAppCrashPoints ./compat/

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/math"
	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	sdk "github.com/cosmos/cosmos-sdk/types"
	moduletestutil "github.com/cosmos/cosmos-sdk/types/module/testutil"
	"github.com/cosmos/cosmos-sdk/x/auth"
	"github.com/cosmos/cosmos-sdk/x/bank"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// The environment of TestSDKAppCrashPointsChild.
const (
	sdkCrashHomeEnv  = "MEMIAVL_SDKCRASH_HOME"  // the node home
	sdkCrashSeedEnv  = "MEMIAVL_SDKCRASH_SEED"  // the seed of the chain's blocks
	sdkCrashUntilEnv = "MEMIAVL_SDKCRASH_UNTIL" // the last height to commit
	sdkCrashModeEnv  = "MEMIAVL_SDKCRASH_MODE"  // "sync" or "async"
)

// sdkCrashCalls are the system calls TestSDKAppCrashPoints kills the node
// at: those that change what the database directory holds or make it
// durable (and write, which also prints the acknowledgements).
var sdkCrashCalls = []string{"renameat", "unlinkat", "fsync", "pwrite64", "write", "mkdirat"}

// sdkCrashHeight is the height the node commits up to: four background
// snapshot rewrites at an interval of 3.
const sdkCrashHeight = 12

// sdkCrashConfig is the node's [memiavl] section: a background snapshot
// rewrite every 3 blocks, and with mode "async" an asynchronous log of 4
// blocks with grouped fsyncs.
func sdkCrashConfig(mode string) compat.Config {
	cfg := testConfig()
	cfg.SnapshotInterval = 3
	cfg.SnapshotKeepRecent = 1
	if mode == "async" {
		cfg.AsyncCommitBuffer = 4
		cfg.Fsync = "grouped"
	}
	return cfg
}

// sdkCrashChain is the chain both processes run: the genesis and blocks
// derived from a seed, so that the killed node and the test agree on them.
type sdkCrashChain struct {
	seed    int64
	addrs   []sdk.AccAddress
	genesis []byte
	enc     *testApp // for encoding only
}

func newSDKCrashChain(t *testing.T, seed int64) *sdkCrashChain {
	enc := &testApp{encCfg: moduletestutil.MakeTestEncodingConfig(auth.AppModuleBasic{}, bank.AppModuleBasic{})}
	addrs := testAccounts(24)
	return &sdkCrashChain{seed: seed, addrs: addrs, genesis: genesisState(t, enc.encCfg, addrs), enc: enc}
}

// block returns the transactions of block h: bank sends, some creating
// accounts and some failing for lack of funds.
func (c *sdkCrashChain) block(t *testing.T, h int64) [][]byte {
	r := rand.New(rand.NewSource(c.seed ^ (h * 0x5DEECE66D)))
	var txs [][]byte
	for i := 0; i < 2+r.Intn(8); i++ {
		var msgs []sdk.Msg
		for j := 0; j < 1+r.Intn(3); j++ {
			from, to := c.addrs[r.Intn(len(c.addrs))], c.addrs[r.Intn(len(c.addrs))]
			if r.Intn(6) == 0 {
				to = sdk.AccAddress(fmt.Appendf(nil, "memiavl-new-acct-%03d", r.Intn(1000))[:20])
			}
			n := 1 + r.Int63n(400)
			if r.Intn(12) == 0 || (h == 1 && i == 0 && j == 0) {
				// more than any balance: the transaction fails (always
				// the first one of block 1, so that the chain has one)
				n = 1_000_000_000
			}
			msgs = append(msgs, banktypes.NewMsgSend(from, to, sdk.NewCoins(sdk.NewCoin(testDenom, math.NewInt(n)))))
		}
		txs = append(txs, c.enc.sendTx(t, msgs...))
	}
	return txs
}

func (c *sdkCrashChain) initChain(app *testApp) error {
	_, err := app.InitChain(&abci.RequestInitChain{ChainId: testChainID, AppStateBytes: c.genesis, InitialHeight: 1})
	return err
}

// sdkCrashClose closes the app as an app's Close should: BaseApp.Close, then the
// multistore through io.Closer.
func sdkCrashClose(app *testApp) error {
	err := app.Close()
	if c, ok := app.CommitMultiStore().(io.Closer); ok {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// TestSDKAppCrashPointsChild is the node TestSDKAppCrashPoints kills: the
// test app on our store on the home MEMIAVL_SDKCRASH_HOME. As CometBFT
// drives an app, it runs InitChain when the app has no block yet, then
// FinalizeBlock and Commit of the blocks after the app's last one, up to
// MEMIAVL_SDKCRASH_UNTIL, printing "committed <height> <app hash>" once each
// Commit has returned, and closes the app, printing "closed".
func TestSDKAppCrashPointsChild(t *testing.T) {
	home := os.Getenv(sdkCrashHomeEnv)
	if home == "" {
		t.Skip("only run as the crash-point test's child process")
	}
	seed, err := strconv.ParseInt(os.Getenv(sdkCrashSeedEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	until, err := strconv.ParseInt(os.Getenv(sdkCrashUntilEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	chain := newSDKCrashChain(t, seed)
	app := newTestApp(t, dbm.NewMemDB(), compat.SetupMemIAVL(log.NewNopLogger(), home, sdkCrashConfig(os.Getenv(sdkCrashModeEnv))))
	if app.LastBlockHeight() == 0 {
		if err := chain.initChain(app); err != nil {
			t.Fatal(err)
		}
	}
	for h := app.LastBlockHeight() + 1; h <= until; h++ {
		res, err := app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: h, Txs: chain.block(t, h)})
		if err != nil {
			t.Fatalf("block %d: %v", h, err)
		}
		if _, err := app.Commit(); err != nil {
			t.Fatalf("commit %d: %v", h, err)
		}
		fmt.Printf("committed %d %X\n", h, res.AppHash)
	}
	if err := sdkCrashClose(app); err != nil {
		t.Fatal(err)
	}
	fmt.Println("closed")
}

// sdkCrashRef is the chain run on the default store (rootmulti over
// cosmos/iavl on an in-memory database): the app hash of every height (0:
// before the first block) and the transaction result codes of every block,
// and the app itself, at the last height, for queries.
type sdkCrashRef struct {
	hashes [][]byte
	codes  [][]uint32
	app    *testApp
}

func newSDKCrashRef(t *testing.T, chain *sdkCrashChain, until int64) *sdkCrashRef {
	ref := &sdkCrashRef{app: newTestApp(t, dbm.NewMemDB())}
	ref.hashes = append(ref.hashes, ref.app.LastCommitID().Hash)
	ref.codes = append(ref.codes, nil)
	if err := chain.initChain(ref.app); err != nil {
		t.Fatal(err)
	}
	var ok, failed int
	for h := int64(1); h <= until; h++ {
		res, err := ref.app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: h, Txs: chain.block(t, h)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.app.Commit(); err != nil {
			t.Fatal(err)
		}
		var codes []uint32
		for _, r := range res.TxResults {
			codes = append(codes, r.Code)
			if r.Code == 0 {
				ok++
			} else {
				failed++
			}
		}
		ref.hashes = append(ref.hashes, res.AppHash)
		ref.codes = append(ref.codes, codes)
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("expected both successful and failing transactions, got %d and %d", ok, failed)
	}
	return ref
}

// sdkCrashRun is what a child run printed and how it ended.
type sdkCrashRun struct {
	committed int64 // the last height printed as committed, 0 if none
	closed    bool  // the child closed the app
	killed    bool  // strace killed the child before it closed the app
}

// runSDKCrashChild runs TestSDKAppCrashPointsChild on home up to height
// until, under strace killing it at the nth call of call when call is set
// (else the child must close the app). Every height the child printed as
// committed must have the default store's app hash.
func runSDKCrashChild(t *testing.T, ref *sdkCrashRef, strace string, v sdkCrashVariant, call string, n int, home string, seed, until int64) sdkCrashRun {
	t.Helper()
	args := []string{os.Args[0], "-test.run=^TestSDKAppCrashPointsChild$"}
	if call != "" {
		args = testutil.KillAt(strace, call, n, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), sdkCrashHomeEnv+"="+home, fmt.Sprintf("%s=%d", sdkCrashSeedEnv, seed),
		fmt.Sprintf("%s=%d", sdkCrashUntilEnv, until), sdkCrashModeEnv+"="+v.mode)
	if v.procs > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", v.procs))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var run sdkCrashRun
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "committed":
			h, perr := strconv.ParseInt(f[1], 10, 64)
			hash, herr := hex.DecodeString(f[2])
			if perr != nil || herr != nil || h < 1 || h > until {
				t.Fatalf("child (%s, to be killed at %s #%d): bad line %q", v, call, n, sc.Text())
			}
			if !bytes.Equal(hash, ref.hashes[h]) {
				t.Fatalf("child (%s, to be killed at %s #%d) committed %d with app hash %X, default store %X", v, call, n, h, hash, ref.hashes[h])
			}
			run.committed = h
		case len(f) == 1 && f[0] == "closed":
			run.closed = true
		}
	}
	switch {
	case err == nil && run.closed:
	case call != "" && testutil.StraceFailed(strace, stderr.Bytes()):
		// strace failed on its own (testutil.StraceFailed): as the child,
		// which had closed the node, exited, or before that, which is a
		// crash at a point strace did not choose (Output returned, so the
		// child, holding stdout, has exited)
		run.killed = !run.closed
	case call != "" && testutil.KilledBySIGKILL(err):
		// (killed after "closed": at the test framework's own output)
		run.killed = !run.closed
	default:
		t.Fatalf("child (%s, to be killed at %s #%d) failed: %v\n%s%s", v, call, n, err, out, stderr.Bytes())
	}
	return run
}

// checkSDKCrashRestart restarts the node on home after a child run, as a
// node restart does (a new BaseApp with SetupMemIAVL), and checks it: its
// last block must be between lower and upper, with the default store's app
// hash in LastCommitID and ABCI Info. It then replays the missing blocks as
// CometBFT's handshake does (InitChain first if the app has no block),
// requiring the default store's app hashes and results, compares store and
// gRPC queries, closes the node and verifies the database directory. It
// returns the height the node restarted at.
func checkSDKCrashRestart(t *testing.T, chain *sdkCrashChain, ref *sdkCrashRef, home, mode string, lower, upper, until int64, where string) (restartedAt int64) {
	t.Helper()
	logger := &lifeLogger{}
	app := newTestApp(t, dbm.NewMemDB(), compat.SetupMemIAVL(logger, home, sdkCrashConfig(mode)))
	defer func() {
		if app != nil {
			_ = sdkCrashClose(app)
		}
	}()
	h := app.LastBlockHeight()
	if h < lower || h > upper {
		t.Fatalf("%s: restarted at height %d, want %d to %d", where, h, lower, upper)
	}
	if id := app.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, ref.hashes[h]) {
		t.Fatalf("%s: restarted: LastCommitID %d %X, default store at %d: %X", where, id.Version, id.Hash, h, ref.hashes[h])
	}
	info, err := app.Info(&abci.RequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if info.LastBlockHeight != h || !bytes.Equal(info.LastBlockAppHash, ref.hashes[h]) {
		t.Fatalf("%s: restarted: Info at %d %X, default store at %d: %X", where, info.LastBlockHeight, info.LastBlockAppHash, h, ref.hashes[h])
	}
	if h == 0 {
		if err := chain.initChain(app); err != nil {
			t.Fatalf("%s: InitChain after the restart: %v", where, err)
		}
	}
	for b := h + 1; b <= until; b++ {
		res, err := app.FinalizeBlock(&abci.RequestFinalizeBlock{Height: b, Txs: chain.block(t, b)})
		if err != nil {
			t.Fatalf("%s: replayed block %d: %v", where, b, err)
		}
		if !bytes.Equal(res.AppHash, ref.hashes[b]) {
			t.Fatalf("%s: restarted at %d: replayed block %d: app hash %X, default store %X", where, h, b, res.AppHash, ref.hashes[b])
		}
		for i, r := range res.TxResults {
			if r.Code != ref.codes[b][i] {
				t.Fatalf("%s: replayed block %d tx %d: code %d, default store %d", where, b, i, r.Code, ref.codes[b][i])
			}
		}
		if _, err := app.Commit(); err != nil {
			t.Fatalf("%s: commit of replayed block %d: %v", where, b, err)
		}
		if id := app.LastCommitID(); id.Version != b || !bytes.Equal(id.Hash, ref.hashes[b]) {
			t.Fatalf("%s: after the commit of replayed block %d: LastCommitID %d %X, default store %X", where, b, id.Version, id.Hash, ref.hashes[b])
		}
	}
	compareAppQueries(t, rand.New(rand.NewSource(chain.seed+h)), app, ref.app, chain.addrs, until, ref.hashes[until])
	err = sdkCrashClose(app)
	app = nil
	if err != nil {
		t.Fatalf("%s: close after the replay: %v", where, err)
	}
	logger.check(t)
	rep, err := multitree.Verify(compat.DBDir(home))
	if err != nil {
		t.Fatalf("%s: verify: %v", where, err)
	}
	if rep.Version != until || !bytes.Equal(rep.AppHash, ref.hashes[until]) {
		t.Fatalf("%s: verify: version %d app hash %X, want %d %X", where, rep.Version, rep.AppHash, until, ref.hashes[until])
	}
	return h
}

// sdkCrashVariant is how the node runs: its log ("sync" or "async", see
// sdkCrashConfig) and its GOMAXPROCS (0: the default). strace counts the
// calls of each thread; with fewer threads, each makes more of them, so that
// the same N lands at another point of the run.
type sdkCrashVariant struct {
	mode  string
	procs int
}

func (v sdkCrashVariant) String() string {
	if v.procs == 0 {
		return v.mode + " log"
	}
	return fmt.Sprintf("%s log, GOMAXPROCS=%d", v.mode, v.procs)
}

// TestSDKAppCrashPoints kills the SDK node of TestSDKAppCrashPointsChild
// (our store, a background snapshot rewrite every 3 blocks) while it
// executes and commits blocks 1 to 12: at the Nth call of each of
// sdkCrashCalls, injected by strace, for N = 1, 1+step, ... until the node
// closes without meeting it; with a synchronous log and with an
// asynchronous one, each with the default GOMAXPROCS and with 1 (under
// -short, the synchronous log with the default and the asynchronous one
// with 1). Each kill starts from a new home, empty (every third point) or
// holding 1 to 10 blocks an earlier run of the node committed and closed,
// so that kills land in the store's creation, in a restart's open and log
// replay, and in every block; every fourth kill is followed by a second one
// in the next run of the node, which recovers from the first. The node is
// then restarted in this process and checked by checkSDKCrashRestart
// against the chain run once on the default store: with the synchronous log
// it must hold every block it acknowledged. A run without -short tries
// every point once, the largest (MEMIAVL_FULL=1) twice, from homes of other
// heights; -short only every 4th point, once.
func TestSDKAppCrashPoints(t *testing.T) {
	if os.Getenv(sdkCrashHomeEnv) != "" {
		t.Skip("child")
	}
	strace := testutil.Strace(t)
	chain := newSDKCrashChain(t, testutil.Rand(t).Int63())
	ref := newSDKCrashRef(t, chain, sdkCrashHeight)
	start := time.Now()
	st := &sdkCrashStats{restartedAt: make([]int, sdkCrashHeight+1)}
	step := scale(1, 4)
	variants := []sdkCrashVariant{{"sync", 0}, {"async", 1}, {"sync", 1}, {"async", 0}}
	variants = variants[:scale(4, 2)]
	for round := range size(2, 1, 1) {
		for vi, v := range variants {
			for ci := range sdkCrashCalls {
				sdkCrashPoints(t, chain, ref, strace, v, ci, 1+(vi+ci*3)%step, step, round, st)
			}
		}
	}
	t.Logf("%d kills at crash points (%d of them second kills) in %s; restarts by the height the node restarted at: %v; "+
		"restarted at the block being committed when killed: %d; before acknowledged blocks (asynchronous log): %d",
		st.kills, st.second, time.Since(start).Round(time.Millisecond), st.restartedAt, st.ahead, st.lost)
}

// sdkCrashStats counts the kills of TestSDKAppCrashPoints.
type sdkCrashStats struct {
	kills       int
	second      int   // kills of a node recovering from a kill
	restartedAt []int // restarts after kills, by the height the node restarted at
	ahead       int   // restarts at the block the node was committing, unacknowledged
	lost        int   // restarts before the last acknowledged block (asynchronous log)
}

// sdkCrashBounds are the heights a restart may find the node at.
type sdkCrashBounds struct{ lower, upper int64 }

// after returns the bounds after a run of the node up to until that started
// within b: every block the node acknowledged with the synchronous log is
// kept (with the asynchronous one, only those it closed the home with), and
// at most the block after the last one acknowledged, being committed when
// the node was killed, is there too.
func (b sdkCrashBounds) after(run sdkCrashRun, mode string, until int64) sdkCrashBounds {
	if run.closed {
		return sdkCrashBounds{until, until}
	}
	if mode != "async" {
		b.lower = max(b.lower, run.committed)
	}
	b.upper = min(max(b.upper, run.committed)+1, until)
	return b
}

// sdkCrashPoints kills the node at the nth call of sdkCrashCalls[ci] for n =
// first, first+step, ... until it closes without meeting it, checking each
// restart, and counts the kills in st. The homes the round's points start
// from depend on round. Every fourth kill is followed by a second one, at a
// crash point of the node's next run (its restart and the blocks after it),
// before the check.
func sdkCrashPoints(t *testing.T, chain *sdkCrashChain, ref *sdkCrashRef, strace string, v sdkCrashVariant, ci, first, step, round int, st *sdkCrashStats) {
	t.Helper()
	call := sdkCrashCalls[ci]
	base := t.TempDir()
	n := first
	for ; ; n += step {
		home := filepath.Join(base, strconv.Itoa(n))
		var b sdkCrashBounds
		where := v.String()
		if (n+round)%3 != 0 {
			prior := runSDKCrashChild(t, ref, strace, v, "", 0, home, chain.seed, int64(n*7+round*3)%10+1)
			b = b.after(prior, v.mode, prior.committed)
			where += fmt.Sprintf(", on a home closed at %d", prior.committed)
		}
		run := runSDKCrashChild(t, ref, strace, v, call, n, home, chain.seed, sdkCrashHeight)
		b = b.after(run, v.mode, sdkCrashHeight)
		acked := max(b.lower, run.committed)
		if !run.killed {
			where += fmt.Sprintf(", not killed at %s #%d", call, n)
		} else {
			where += fmt.Sprintf(", killed at %s #%d after committing %d", call, n, run.committed)
			st.kills++
			if (st.kills-st.second)%4 == 0 {
				call2, n2 := sdkCrashCalls[(ci+n)%len(sdkCrashCalls)], 1+n%5
				again := runSDKCrashChild(t, ref, strace, v, call2, n2, home, chain.seed, sdkCrashHeight)
				b = b.after(again, v.mode, sdkCrashHeight)
				acked = max(acked, again.committed)
				if again.killed {
					st.kills++
					st.second++
					where += fmt.Sprintf(", restarted and killed at %s #%d after committing %d", call2, n2, again.committed)
				} else {
					where += fmt.Sprintf(", restarted and not killed at %s #%d", call2, n2)
				}
			}
		}
		held := sdkCrashListing(compat.DBDir(home))
		t.Cleanup(func() {
			if t.Failed() && held != "" {
				t.Logf("%s: before the restart, the database directory held:\n%s", where, held)
				held = ""
			}
		})
		h := checkSDKCrashRestart(t, chain, ref, home, v.mode, b.lower, b.upper, sdkCrashHeight, where)
		held = ""
		if err := os.RemoveAll(home); err != nil {
			t.Fatal(err)
		}
		if !run.killed {
			break // no thread of the node made n such calls
		}
		st.restartedAt[h]++
		switch {
		case h > acked:
			st.ahead++
		case h < acked:
			st.lost++
		}
	}
	if n == first && step == 1 {
		t.Errorf("%s: the node never called %s: the crash point list is stale", v, call)
	}
}

// sdkCrashListing lists the files under dir with their sizes, for the
// report of a failed restart.
func sdkCrashListing(dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			fmt.Fprintf(&b, "  %s/\n", rel)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  %s %d\n", rel, info.Size())
		return nil
	})
	if err != nil {
		fmt.Fprintf(&b, "  (%v)\n", err)
	}
	return b.String()
}
