package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// TestSnapshotHoldsOneHeight checks that a state-sync snapshot holds its
// height alone (viewCache.hold): a snapshot of a later height gives up the
// earlier one's hold, even without PruneSnapshotHeight, so that an old
// version is not kept mapped for ever.
func TestSnapshotHoldsOneHeight(t *testing.T) {
	r := testutil.Rand(t)
	p := newPair(t, smallMount)
	cfg := p.cfg
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent, cfg.QueryViews = -1, 0, 1
	p.ours.Close()
	p.ours = newOurs(t, p.dir, cfg, p.keys, smallMount, nil)
	for i := 0; i < 3; i++ {
		p.commitRandom(r, []string{"a", "b"}, 20)
	}
	var sink bytes.Buffer
	if err := p.ours.Snapshot(3, protoio.NewDelimitedWriter(&sink)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		p.commitRandom(r, []string{"a", "b"}, 20)
	}
	// a later snapshot, the earlier never given up (a caller other than
	// the SDK's manager, or one whose PruneSnapshotHeight was lost)
	if err := p.ours.Snapshot(5, protoio.NewDelimitedWriter(&sink)); err != nil {
		t.Fatal(err)
	}
	// version 3 is no longer kept: its snapshot is replaced, and the cache
	// (one view) holds the latest only
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		p.commitRandom(r, []string{"a", "b"}, 20)
	}
	if err := p.ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ours.CacheMultiStoreWithVersion(3); err == nil {
		t.Fatal("a branch of height 3 opened after a snapshot of height 5 replaced its hold and the version was pruned")
	}
	// the current hold is kept
	if _, err := p.ours.CacheMultiStoreWithVersion(5); err != nil {
		t.Fatalf("a branch of the held height 5: %v", err)
	}
}

// TestConfigRewriteRateLimitReachesDB checks that rewrite-rate-limit is
// handed to the database: the background open check, paced like a
// rewrite, of a snapshot of about 2 MB takes seconds at the smallest rate,
// so a short wait for it ends first.
func TestConfigRewriteRateLimitReachesDB(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotInterval = -1
	dir := t.TempDir()
	keys := keyring{}
	m := mount{iavl: []string{"bank"}}
	ms := newOurs(t, dir, cfg, keys, m, nil)
	bank := ms.GetKVStore(keys.key("bank", 0))
	for i := 0; i < 4000; i++ {
		bank.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{byte(i)}, 500))
	}
	ms.Commit()
	if err := ms.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.OpenCheck = "background"
	cfg.RewriteRateLimit = multitree.MinRewriteRateLimit
	ms = newOurs(t, dir, cfg, keys, m, nil)
	defer ms.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := ms.DB().WaitOpenCheck(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open check at rewrite-rate-limit %d of a 2 MB snapshot: %v, want it still running after 200ms", cfg.RewriteRateLimit, err)
	}
}

// TestCopiesOutliveTheSnapshot checks that, without zero-copy, what the
// working state's Get and iterators return is the caller's own copy: still
// readable, and unchanged, once the snapshot it was read from is unmapped
// (here by Close).
func TestCopiesOutliveTheSnapshot(t *testing.T) {
	p, ak := pairOnSnapshot(t) // 100 keys of store "a" in the current snapshot
	st := p.ours.GetKVStore(ak)
	got := [][]byte{st.Get([]byte("k007"))}
	it := st.Iterator([]byte("k042"), nil)
	got = append(got, it.Key(), it.Value())
	it.Close()
	rit := st.ReverseIterator(nil, []byte("k043"))
	got = append(got, rit.Key(), rit.Value())
	rit.Close()
	if err := p.ours.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"v7", "k042", "v42", "k042", "v42"}
	res := outcome(func() any {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		var s []string
		for _, b := range got {
			s = append(s, string(b))
		}
		return s
	})
	if res != fmt.Sprint(want) {
		t.Fatalf("values read before Close, read after it: %s; want %v", res, want)
	}
}

// TestImportIAVLRefusesHeightAfterLatest checks the boundary of the
// rolled-back heights: the one right after the application's latest
// version (s/latest) is refused by that check, naming the latest version,
// whatever its trees still hold.
func TestImportIAVLRefusesHeightAfterLatest(t *testing.T) {
	mem := dbm.NewMemDB()
	c := migBuild(t, mem, 9)
	if err := c.rs.RollbackToVersion(7); err != nil {
		t.Fatal(err)
	}
	err := compat.ImportIAVL(mem, 8, nil, filepath.Join(t.TempDir(), "db"), multitree.Options{})
	if !errors.Is(err, compat.ErrMigrate) || !strings.Contains(err.Error(), "latest version 7") {
		t.Fatalf("import of height 8, after the latest version 7: %v", err)
	}
}

// TestImportIAVLRefusesMislabelledCommitInfo checks that the commit info
// stored under s/<height> must be of that height: one of another version
// (a damaged or hand-edited application.db) is refused before anything is
// imported, even where the stores' hashes would match.
func TestImportIAVLRefusesMislabelledCommitInfo(t *testing.T) {
	mem := dbm.NewMemDB()
	migBuild(t, mem, 6)
	bz, err := mem.Get([]byte("s/5"))
	if err != nil || bz == nil {
		t.Fatalf("commit info of 5: %v", err)
	}
	if err := mem.Set([]byte("s/6"), bz); err != nil {
		t.Fatal(err)
	}
	err = compat.ImportIAVL(mem, 6, nil, filepath.Join(t.TempDir(), "db"), multitree.Options{})
	if !errors.Is(err, compat.ErrMigrate) || !strings.Contains(err.Error(), "is of version 5") {
		t.Fatalf("import of height 6 whose commit info is version 5's: %v", err)
	}
}

// TestRemovedStoreGoneFromHistoricalBranches: once the Commit after a
// load deleting a mounted store has removed it, a branch of a version
// from before the deletion has no such store either, as in rootmulti
// (whose CacheMultiStoreWithVersion builds the branch from its mounted
// stores): GetKVStore of it panics.
func TestRemovedStoreGoneFromHistoricalBranches(t *testing.T) {
	z := sideDeletingStore3(t)
	z.commit()
	k3 := z.keys["store3"]
	z.samePanicness("CacheMultiStoreWithVersion(1).GetKVStore(store3) after the deletion's commit", func(s types.CommitMultiStore) any {
		b, err := s.CacheMultiStoreWithVersion(1)
		if err != nil {
			return err
		}
		return b.GetKVStore(k3) != nil
	})
}
