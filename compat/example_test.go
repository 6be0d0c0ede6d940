package compat_test

import (
	"fmt"
	"os"

	"cosmossdk.io/log"
	"cosmossdk.io/store/rootmulti"
	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// The multistore as an SDK app uses it: stores mounted and loaded, blocks
// written and committed (the app hashes are rootmulti's over cosmos/iavl
// for the same writes), and an ABCI query with an ICS23 proof.
func ExampleNewMultiStore() {
	dir, err := os.MkdirTemp("", "compat-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	cms, err := compat.NewMultiStore(dir, log.NewNopLogger(), compat.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer cms.Close()
	bank, staking := storetypes.NewKVStoreKey("bank"), storetypes.NewKVStoreKey("staking")
	cms.MountStoreWithDB(bank, storetypes.StoreTypeIAVL, nil)
	cms.MountStoreWithDB(staking, storetypes.StoreTypeIAVL, nil)
	if err := cms.LoadLatestVersion(); err != nil {
		panic(err)
	}
	appHashes := map[int64][]byte{}
	for block := 1; block <= 3; block++ {
		cms.GetKVStore(bank).Set([]byte("alice"), []byte(fmt.Sprint(100*block)))
		cms.GetKVStore(staking).Set([]byte(fmt.Sprintf("validator/%d", block)), []byte("bonded"))
		id := cms.Commit()
		appHashes[id.Version] = id.Hash
		fmt.Printf("height %d app hash %X\n", id.Version, id.Hash)
	}

	res, err := cms.Query(&storetypes.RequestQuery{Path: "/bank/key", Data: []byte("alice"), Height: 2, Prove: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("alice at height %d: %s, proof of %d operations\n", res.Height, res.Value, len(res.ProofOps.Ops))
	// the proof leads from the value to the app hash of the height
	err = rootmulti.DefaultProofRuntime().VerifyValue(res.ProofOps, appHashes[res.Height], "/bank/alice", res.Value)
	fmt.Println("proof verifies against the app hash:", err == nil)
	// Output:
	// height 1 app hash FE7E855B661879BA43009E9D4E138CB3FDC7C55A56AE41926677635F61BF1722
	// height 2 app hash 822CAE66D36014EE70DA48B553ED8075F2FCA8C8A8C02D94FAFA2A5EC40C558E
	// height 3 app hash 5D1777B47054CB7E26F3B0AE567D81B3BD1E8B177F5AECD005CCFDA5D07DFC34
	// alice at height 2: 200, proof of 2 operations
	// proof verifies against the app hash: true
}
