package compat_test

import (
	"bytes"
	"flag"
	"fmt"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	"cosmossdk.io/store/types"
	"github.com/cometbft/cometbft/crypto/merkle"
	cmtprotocrypto "github.com/cometbft/cometbft/proto/tendermint/crypto"
	dbm "github.com/cosmos/cosmos-db"
	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

var fullRun = flag.Bool("compat.full", false, "run the randomized tests at their largest size, even with -short (as MEMIAVL_FULL=1)")

// scale returns full unless the run is -short without -compat.full or
// MEMIAVL_FULL=1.
func scale(full, short int) int { return size(full, full, short) }

// size returns the size of a test that has three: full with -compat.full
// or MEMIAVL_FULL=1 (testutil.Full), short under -short, plain otherwise.
func size(full, plain, short int) int { return testutil.Size(*fullRun, full, plain, short) }

// mount describes the stores of a chain: IAVL stores by name plus one
// transient and one memory store.
type mount struct {
	iavl      []string
	transient string
	memory    string
}

// keyring hands out one StoreKey per name, shared by both multistores.
type keyring map[string]types.StoreKey

func (k keyring) key(name string, typ types.StoreType) types.StoreKey {
	if key, ok := k[name]; ok {
		return key
	}
	var key types.StoreKey
	switch typ {
	case types.StoreTypeTransient:
		key = types.NewTransientStoreKey(name)
	case types.StoreTypeMemory:
		key = types.NewMemoryStoreKey(name)
	default:
		key = types.NewKVStoreKey(name)
	}
	k[name] = key
	return key
}

func mountAll(cms types.CommitMultiStore, keys keyring, m mount) {
	for _, name := range m.iavl {
		cms.MountStoreWithDB(keys.key(name, types.StoreTypeIAVL), types.StoreTypeIAVL, nil)
	}
	if m.transient != "" {
		cms.MountStoreWithDB(keys.key(m.transient, types.StoreTypeTransient), types.StoreTypeTransient, nil)
	}
	if m.memory != "" {
		cms.MountStoreWithDB(keys.key(m.memory, types.StoreTypeMemory), types.StoreTypeMemory, nil)
	}
}

// newOracle returns rootmulti over cosmos/iavl on db (pruning nothing).
func newOracle(t testing.TB, db dbm.DB, keys keyring, m mount, up *types.StoreUpgrades) *rootmulti.Store {
	t.Helper()
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	mountAll(rs, keys, m)
	var err error
	if up != nil {
		err = rs.LoadLatestVersionAndUpgrade(up)
	} else {
		err = rs.LoadLatestVersion()
	}
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// newOurs returns our multistore on dir.
func newOurs(t testing.TB, dir string, cfg compat.Config, keys keyring, m mount, up *types.StoreUpgrades) *compat.MultiStore {
	t.Helper()
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mountAll(ms, keys, m)
	if up != nil {
		err = ms.LoadLatestVersionAndUpgrade(up)
	} else {
		err = ms.LoadLatestVersion()
	}
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func testConfig() compat.Config {
	cfg := compat.DefaultConfig()
	cfg.Enable = true
	cfg.SnapshotInterval = 10
	cfg.SnapshotKeepRecent = 2
	cfg.QueryViews = 6
	return cfg
}

// sameResponse compares two query responses field by field (proofs byte for
// byte) and the errors by message.
func sameResponse(a *types.ResponseQuery, aerr error, b *types.ResponseQuery, berr error) error {
	if (aerr == nil) != (berr == nil) || (aerr != nil && aerr.Error() != berr.Error()) {
		return fmt.Errorf("error %v, rootmulti %v", aerr, berr)
	}
	if a == nil || b == nil {
		if a != b {
			return fmt.Errorf("response %v, rootmulti %v", a, b)
		}
		return nil
	}
	switch {
	case a.Code != b.Code, a.Log != b.Log, a.Info != b.Info, a.Index != b.Index, a.Codespace != b.Codespace:
		return fmt.Errorf("response %+v, rootmulti %+v", a, b)
	case a.Height != b.Height:
		return fmt.Errorf("height %d, rootmulti %d", a.Height, b.Height)
	case !bytes.Equal(a.Key, b.Key):
		return fmt.Errorf("key %X, rootmulti %X", a.Key, b.Key)
	case !bytes.Equal(a.Value, b.Value) || (a.Value == nil) != (b.Value == nil):
		return fmt.Errorf("value %X (nil %v), rootmulti %X (nil %v)", a.Value, a.Value == nil, b.Value, b.Value == nil)
	}
	if (a.ProofOps == nil) != (b.ProofOps == nil) {
		return fmt.Errorf("proof ops %v, rootmulti %v", a.ProofOps, b.ProofOps)
	}
	if a.ProofOps != nil {
		ab, err := a.ProofOps.Marshal()
		if err != nil {
			return err
		}
		bb, err := b.ProofOps.Marshal()
		if err != nil {
			return err
		}
		if !bytes.Equal(ab, bb) {
			return fmt.Errorf("proofs differ:\n ours     %X\n rootmulti %X", ab, bb)
		}
	}
	return nil
}

// verifiable reports whether ics23 can verify the store proof of ops: it
// rejects leaves with empty values and an empty tree's non-existence proof,
// for cosmos/iavl's proofs as for ours.
func verifiable(t testing.TB, ops *cmtprotocrypto.ProofOps) bool {
	var p ics23.CommitmentProof
	if err := p.Unmarshal(ops.Ops[0].Data); err != nil {
		t.Fatal(err)
	}
	if e := p.GetExist(); e != nil {
		return len(e.Value) > 0
	}
	ne := p.GetNonexist()
	if ne == nil || (ne.Left == nil && ne.Right == nil) {
		return false
	}
	return (ne.Left == nil || len(ne.Left.Value) > 0) && (ne.Right == nil || len(ne.Right.Value) > 0)
}

// verifyProof checks a "/key" response's proof against the app hash the way
// light clients do: the SDK's proof runtime and the "/<store>/<key>" path.
// The key is hex-encoded in the path: URL-encoded, a key that starts with
// the bytes "x:" would read as the hex marker.
func verifyProof(store string, res *types.ResponseQuery, appHash []byte) error {
	prt := rootmulti.DefaultProofRuntime()
	kp := merkle.KeyPath{}.AppendKey([]byte(store), merkle.KeyEncodingURL).AppendKey(res.Key, merkle.KeyEncodingHex)
	if res.Value != nil {
		return prt.VerifyValue(res.ProofOps, appHash, kp.String(), res.Value)
	}
	return prt.VerifyAbsence(res.ProofOps, appHash, kp.String())
}

// mustPanic runs f and returns what it panicked with (failing if nothing).
func mustPanic(t testing.TB, f func()) (r any) {
	t.Helper()
	defer func() {
		r = recover()
		if r == nil {
			t.Fatal("expected a panic")
		}
	}()
	f()
	return nil
}
