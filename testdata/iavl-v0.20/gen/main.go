// Command gen writes the iavl-v0.20 fixture: two cosmos/iavl v0.20.1 trees
// (the node format of SDK v0.47 chains: nodes keyed by hash, roots by
// version, fast nodes) in one goleveldb database, under the rootmulti key
// prefixes "s/k:acc/" and "s/k:bank/", versions 1 to 12 of a deterministic
// workload. It writes no commit info: the test writes it, as the store of
// SDK v0.47 did, from the trees' hashes.
package main

import (
	"fmt"
	"math/rand"
	"os"

	dbm "github.com/cometbft/cometbft-db"
	"github.com/cosmos/iavl"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen <dir>")
		os.Exit(2)
	}
	db, err := dbm.NewGoLevelDB("application", os.Args[1])
	if err != nil {
		panic(err)
	}
	defer db.Close()
	r := rand.New(rand.NewSource(20))
	for si, name := range []string{"acc", "bank"} {
		tree, err := iavl.NewMutableTree(dbm.NewPrefixDB(db, []byte("s/k:"+name+"/")), 0, false)
		if err != nil {
			panic(err)
		}
		var keys [][]byte
		for v := 1; v <= 12; v++ {
			for i := 0; i < 40+si*30; i++ {
				if len(keys) > 10 && r.Intn(5) == 0 {
					j := r.Intn(len(keys))
					if _, _, err := tree.Remove(keys[j]); err != nil {
						panic(err)
					}
					keys[j] = keys[len(keys)-1]
					keys = keys[:len(keys)-1]
					continue
				}
				var k []byte
				if len(keys) > 0 && r.Intn(3) == 0 {
					k = keys[r.Intn(len(keys))]
				} else {
					k = make([]byte, 1+r.Intn(24))
					r.Read(k)
					keys = append(keys, k)
				}
				val := make([]byte, r.Intn(60))
				r.Read(val)
				if _, err := tree.Set(k, val); err != nil {
					panic(err)
				}
			}
			h, ver, err := tree.SaveVersion()
			if err != nil {
				panic(err)
			}
			fmt.Printf("%s %d %X\n", name, ver, h)
		}
	}
}
