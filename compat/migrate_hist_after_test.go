package compat_test

import (
	"bytes"
	"errors"
	"testing"

	"cosmossdk.io/log"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestMigrateImportedHistory: the multistore on an import at h, after more
// blocks: the commit info of h and later is served, of h-1 refused with
// rootmulti's error; a rollback to h gives h's app hash back (and the
// blocks after it commit again to the same hashes); a rollback before h is
// refused and changes nothing.
func TestMigrateImportedHistory(t *testing.T) {
	c, s := histSmallChain(t)
	const h = 4
	dir := histImport(t, c, h)
	keys := keyring{}
	open := func() *compat.MultiStore {
		ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), testConfig())
		if err != nil {
			t.Fatal(err)
		}
		histMount(ms, keys, c.mounts[h])
		if err := ms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	ms := open()
	defer func() { ms.Close() }()
	commit := func(from, to int) {
		for i := from; i < to; i++ {
			id := histBlock(ms, keys, s.steps[i].css, i)
			if id.Version != c.ids[i].Version || !bytes.Equal(id.Hash, c.ids[i].Hash) {
				t.Fatalf("block %d: %v, rootmulti %v", i, id, c.ids[i])
			}
		}
	}
	commit(h, len(s.steps))
	for v := int64(h); v <= histHeight(s, len(s.steps)-1); v++ {
		info, err := ms.GetCommitInfo(v)
		if err != nil || !bytes.Equal(info.Hash(), c.infos[v].Hash()) {
			t.Fatalf("GetCommitInfo(%d): %v", v, err)
		}
	}
	for _, v := range []int64{h - 1, 1, 0} {
		_, oerr := ms.GetCommitInfo(v)
		if !errors.Is(oerr, multitree.ErrVersion) {
			t.Fatalf("GetCommitInfo(%d) before the import: %v", v, oerr)
		}
		if _, err := ms.CacheMultiStoreWithVersion(v); err == nil {
			t.Fatalf("CacheMultiStoreWithVersion(%d) before the import succeeded", v)
		}
	}
	if err := ms.RollbackToVersion(h - 1); err == nil {
		t.Fatal("rollback before the imported height succeeded")
	}
	if id := ms.LastCommitID(); id.Version != c.ids[len(s.steps)-1].Version || !bytes.Equal(id.Hash, c.ids[len(s.steps)-1].Hash) {
		t.Fatalf("a refused rollback changed the multistore: %v", id)
	}
	if err := ms.RollbackToVersion(h); err != nil {
		t.Fatalf("rollback to the imported height: %v", err)
	}
	if id := ms.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, c.infos[h].Hash()) {
		t.Fatalf("after the rollback to %d: %v", h, id)
	}
	ms.Close()
	ms = open()
	if id := ms.LastCommitID(); id.Version != h || !bytes.Equal(id.Hash, c.infos[h].Hash()) {
		t.Fatalf("reopened after the rollback to %d: %v", h, id)
	}
	commit(h, len(s.steps))
}
