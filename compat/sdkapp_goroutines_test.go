package compat_test

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cosmos/cosmos-sdk/baseapp"
	sdk "github.com/cosmos/cosmos-sdk/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// TestSDKAppGoroutines runs a chain on BaseApp over our multistore
// beside the default store while, on the node with our store, the
// goroutines the SDK runs beside the consensus one do their work: gRPC
// Simulate (app.Simulate on the check state), gRPC queries
// (CreateQueryContext at the latest height, reading a module store through
// a historical branch), and the snapshot manager's goroutine (state-sync
// snapshots every 3 blocks), with ADR-038 listeners on and background
// snapshot rewrites every 2 blocks. App hashes, FinalizeBlock responses and
// the streamed change sets must equal the default store's; every query must
// see its height's state; a restart must find the last commit.
func TestSDKAppGoroutines(t *testing.T) {
	if raceEnabled {
		t.Skip("BaseApp's own check state and signer cache race with Simulate under -race, on either store")
	}
	chain := lifeNewChain(t)
	mods := raMods{mounted: []string{"alpha", "beta"}, written: []string{"alpha", "beta"}}
	cfg := testConfig()
	cfg.SnapshotInterval = 2
	cfg.QueryViews = 3
	oracle := raNewNode(t, "default store", false, compat.Config{}, false)
	ours := raNewNode(t, "ours", true, cfg, false)
	nodes := []*raNode{oracle, ours}
	ls := map[*raNode]*raListener{}
	for _, n := range nodes {
		n.mods = mods
		var extra []func(*baseapp.BaseApp)
		if n == ours {
			extra = append(extra, raSnapshotOpt(t, t.TempDir(), 3, 2))
		}
		n.open(t, extra...)
		ls[n] = raStreaming(t, n)
	}
	raInitChain(t, chain, 1, nodes...)
	simTx := chain.enc.sendTx(t, banktypes.NewMsgSend(chain.addrs[1], chain.addrs[2], sdk.NewCoins(sdk.NewInt64Coin(testDenom, 1))))
	for _, n := range nodes {
		if _, err := n.app.CheckTx(&abci.RequestCheckTx{Tx: simTx, Type: abci.CheckTxType_New}); err != nil {
			t.Fatal(err)
		}
	}
	app := ours.app
	alpha := ours.ms().StoreKeysByName()["alpha"]

	var stop atomic.Bool
	var sims, queries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 32)
	report := func(s string) {
		select {
		case errs <- s:
		default:
		}
	}
	wg.Add(2)
	go func() { // gRPC Simulate
		defer wg.Done()
		// a fault reading unmapped memory is then a panic, which
		// Simulate (runTx) recovers, instead of killing the process
		debug.SetPanicOnFault(true)
		for !stop.Load() {
			before := app.LastBlockHeight()
			_, _, err := app.Simulate(simTx)
			sims.Add(1)
			if err != nil && before > 1 && !strings.Contains(err.Error(), "iterator used after the snapshot") {
				report(fmt.Sprintf("simulate begun after block %d, ended after block %d: %v", before, app.LastBlockHeight(), err))
			}
		}
	}()
	go func() { // gRPC query
		defer wg.Done()
		for !stop.Load() {
			msg := outcome(func() any {
				ctx, err := app.CreateQueryContext(0, false)
				if err != nil {
					if strings.Contains(err.Error(), "not ready") {
						return "ok"
					}
					return fmt.Sprintf("query context: %v", err)
				}
				h := ctx.BlockHeight()
				st := ctx.MultiStore().GetKVStore(alpha)
				if got := st.Get([]byte("last")); !bytes.Equal(got, sdk.Uint64ToBigEndian(uint64(h))) {
					return fmt.Sprintf("query at %d: last = %X", h, got)
				}
				var keys []string
				it := st.Iterator([]byte("b/"), []byte("b0"))
				for ; it.Valid(); it.Next() {
					keys = append(keys, string(it.Key()))
				}
				it.Close()
				var want []string
				for i := max(1, h-3); i <= h; i++ {
					want = append(want, fmt.Sprintf("b/%06d", i))
				}
				if strings.Join(keys, ",") != strings.Join(want, ",") {
					return fmt.Sprintf("query at %d: b/ keys %v, want %v", h, keys, want)
				}
				return "ok"
			})
			queries.Add(1)
			if msg != "ok" && !strings.Contains(msg, "no longer held") {
				report(msg)
			}
		}
	}()
	blocks := 40
	for h := int64(1); h <= int64(blocks); h++ {
		raBlock(t, h, chain.block(t), nodes...)
		if a, b := ls[ours].blocks[h], ls[oracle].blocks[h]; !bytes.Equal(a, b) {
			t.Errorf("block %d: streamed data differs", h)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if sims.Load() == 0 || queries.Load() == 0 {
		t.Fatalf("simulations %d, queries %d beside the blocks", sims.Load(), queries.Load())
	}
	want := oracle.app.LastCommitID()
	ours.restart(t)
	if got := ours.app.LastCommitID(); got.Version != want.Version || !bytes.Equal(got.Hash, want.Hash) {
		t.Fatalf("after restart: %v, default store %v", got, want)
	}
	t.Logf("%d simulations, %d queries beside %d blocks", sims.Load(), queries.Load(), blocks)
}
