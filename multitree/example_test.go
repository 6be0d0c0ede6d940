package multitree_test

import (
	"fmt"
	"log"
	"os"

	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// A database of two stores: each block's writes, its commit, and a reopen,
// which maps the snapshot and replays the log. The app hashes printed are
// those rootmulti computes over cosmos/iavl stores "bank" and "staking"
// given the same writes.
func Example() {
	dir, err := os.MkdirTemp("", "multitree-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := multitree.Open(dir, multitree.Options{
		CreateIfMissing: true,
		InitialStores:   []string{"bank", "staking"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for block := 1; block <= 3; block++ {
		if err := db.Set("bank", []byte("alice"), []byte(fmt.Sprint(100*block))); err != nil {
			log.Fatal(err)
		}
		if err := db.Set("staking", []byte(fmt.Sprintf("validator/%d", block)), []byte("bonded")); err != nil {
			log.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("version %d app hash %X\n", info.Version, info.Hash())
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	db, err = multitree.Open(dir, multitree.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	v, err := db.Get("bank", []byte("alice"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("reopened at version %d: alice has %s\n", db.Version(), v)
	// Output:
	// version 1 app hash FE7E855B661879BA43009E9D4E138CB3FDC7C55A56AE41926677635F61BF1722
	// version 2 app hash 822CAE66D36014EE70DA48B553ED8075F2FCA8C8A8C02D94FAFA2A5EC40C558E
	// version 3 app hash 5D1777B47054CB7E26F3B0AE567D81B3BD1E8B177F5AECD005CCFDA5D07DFC34
	// reopened at version 3: alice has 300
}

// Changes may also come as whole changesets, as the SDK's commit listeners
// and the log carry them; a read view of an older version is served beside
// the writer without waiting for it.
func ExampleDB_ViewAt() {
	dir, err := os.MkdirTemp("", "multitree-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := multitree.Open(dir, multitree.Options{
		CreateIfMissing: true,
		InitialStores:   []string{"bank"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for block := 1; block <= 3; block++ {
		err := db.ApplyChangeSets([]wal.ChangeSet{{
			Name:  "bank",
			Pairs: []wal.KVPair{{Key: []byte("supply"), Value: []byte(fmt.Sprint(1000 * block))}},
		}})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			log.Fatal(err)
		}
	}

	view, err := db.ViewAt(2)
	if err != nil {
		log.Fatal(err)
	}
	defer view.Release()
	old, err := view.Get("bank", []byte("supply"))
	if err != nil {
		log.Fatal(err)
	}
	latest, err := db.Get("bank", []byte("supply"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("supply at version 2: %s, at version %d: %s\n", old, db.Version(), latest)
	// Output:
	// supply at version 2: 2000, at version 3: 3000
}
