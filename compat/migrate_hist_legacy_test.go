package compat_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/nodehash"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestMigrateLegacyEmptyRoot: a store that cosmos/iavl v0.20 left empty at
// a height marks it with the legacy root key 'r' | version and an empty
// value, which goleveldb reads back as absent: the store imports empty
// there, and a height without the marker (pruned) is refused.
func TestMigrateLegacyEmptyRoot(t *testing.T) {
	db, err := dbm.NewGoLevelDB("application", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &histScript{seed: 4}
	s.steps = make([]histStep, 4)
	s.steps[0] = histStep{reload: true, mount: []string{"acc"}}
	c := histBuild(t, db, s)
	const h = 3
	info := *c.infos[h]
	info.StoreInfos = append(append([]storetypes.StoreInfo(nil), info.StoreInfos...),
		storetypes.StoreInfo{Name: "legacy", CommitId: storetypes.CommitID{Version: h, Hash: nodehash.Empty()}})
	bz, err := info.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte(fmt.Sprintf("s/%d", h)), bz); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{2, h} {
		if err := db.Set(binary.BigEndian.AppendUint64([]byte("s/k:legacy/r"), uint64(v)), []byte{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "db")
	if err := compat.ImportIAVL(db, h, nil, dir, multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	mdb, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mdb.LastCommitInfo().Hash(), info.Hash()) {
		t.Fatalf("app hash %X, recorded %X", mdb.LastCommitInfo().Hash(), info.Hash())
	}
	mdb.Close()
	// the marker of h gone (the one of h-1 is no marker of h)
	if err := db.Delete(binary.BigEndian.AppendUint64([]byte("s/k:legacy/r"), uint64(h))); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "db")
	if err := compat.ImportIAVL(db, h, []string{"legacy"}, dir, multitree.Options{}); !histIsMigrate(err) {
		t.Fatalf("import without the marker: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("a refused import left its directory")
	}
}
