package compat_test

import (
	"bytes"
	"fmt"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestMigrateValueShapes: empty values, binary keys (0x00, 0xFF, a key
// that is a prefix of another), large keys and values, and a store renamed
// while it is empty, over both cosmos-db backends; every height imports
// and continues.
func TestMigrateValueShapes(t *testing.T) {
	for _, leveldb := range []bool{false, true} {
		db := histBackend(t, leveldb)
		s := &histScript{seed: 1}
		s.steps = make([]histStep, 8)
		base := []string{"shapes", "other", "emptyold"}
		s.steps[0] = histStep{reload: true, mount: base}
		if leveldb { // rootmulti over goleveldb cannot load an empty store
			s.steps[0].mount = base[:2]
		}
		big := bytes.Repeat([]byte{0xAB}, 70<<10)
		for i := range s.steps {
			cs := wal.ChangeSet{Name: "shapes"}
			add := func(k, v []byte) { cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: v}) }
			add([]byte{0}, []byte{})
			add([]byte{0, 0}, []byte(fmt.Sprint(i)))
			add([]byte{0xFF, 0xFF, byte(i)}, []byte{})
			add(bytes.Repeat([]byte{byte(i)}, 2000), big[:1000*(i+1)])
			add([]byte(fmt.Sprintf("ab%d", i)), []byte{})
			add([]byte("a"), []byte{byte(i)})
			if i%3 == 2 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: []byte{0}})
			}
			s.steps[i].css = []wal.ChangeSet{cs, {Name: "other", Pairs: []wal.KVPair{{Key: []byte{byte(i)}, Value: big}}}}
		}
		if !leveldb {
			s.steps[4] = histStep{reload: true, mount: []string{"shapes", "other", "emptynew"},
				up:  &storetypes.StoreUpgrades{Renamed: []storetypes.StoreRename{{OldKey: "emptyold", NewKey: "emptynew"}}},
				css: s.steps[4].css}
		}
		c := histBuild(t, db, s)
		histImportEvery(t, c, s)
	}
}
