package compat_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestImportIAVLMissingNode: an application database with a node of a tree
// missing (a damaged or hand-pruned source) cannot be migrated. cosmos/iavl's
// exporter ends its stream without an error at a node it cannot read; the
// import fails with ErrMigrate naming the store and saying that nodes are
// missing from the source, and leaves no database.
func TestImportIAVLMissingNode(t *testing.T) {
	// iavl v1 node keys: 's' | version (8 bytes) | nonce (4 bytes), under
	// the store's prefix; nonce 1 is the version's root
	nodeKey := func(nonce uint32) []byte {
		key := binary.BigEndian.AppendUint64([]byte("s/k:bank/s"), 11)
		return binary.BigEndian.AppendUint32(key, nonce)
	}
	src := dbm.NewMemDB()
	c := migBuild(t, src, 10)
	// version 11 writes nodes of bank's tree: every node written at a
	// version is in the tree of that version
	var pairs []wal.KVPair
	for i := 0; i < 20; i++ {
		pairs = append(pairs, wal.KVPair{Key: []byte(fmt.Sprintf("new-%02d", i)), Value: []byte{byte(i)}})
	}
	ssApply(c.rs, []wal.ChangeSet{{Name: "bank", Pairs: pairs}})
	var nonces []uint32
	{
		mem := src
		for nonce := uint32(2); ; nonce++ {
			if ok, err := mem.Has(nodeKey(nonce)); err != nil {
				t.Fatal(err)
			} else if !ok {
				break
			}
			nonces = append(nonces, nonce)
		}
	}
	if len(nonces) < 3 {
		t.Fatalf("version 11 of bank wrote nodes %v", nonces)
	}
	for _, nonce := range []uint32{nonces[0], nonces[len(nonces)/2], nonces[len(nonces)-1]} {
		mem := dbm.NewMemDB()
		it, err := src.Iterator(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for ; it.Valid(); it.Next() {
			if err := mem.Set(it.Key(), it.Value()); err != nil {
				t.Fatal(err)
			}
		}
		it.Close()
		if err := mem.Delete(nodeKey(nonce)); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "db")
		err = compat.ImportIAVL(mem, 11, nil, dir, multitree.Options{})
		if !errors.Is(err, compat.ErrMigrate) || !strings.Contains(err.Error(), `"bank"`) ||
			!strings.Contains(err.Error(), "nodes are missing from the source") {
			t.Fatalf("node %d of version 11 deleted: %v", nonce, err)
		}
		if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
			t.Fatalf("a failed import left a database: %v", err)
		}
	}
}
