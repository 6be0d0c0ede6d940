package multitree_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// TestAppHashVariedOptions runs the differential test against rootmulti
// with options drawn at random (snapshot interval, snapshots kept, log
// queue, rewrite concurrency, initial version), over 20 stores, with a store
// added, one renamed and one deleted every 75 versions, some values of up to
// 512 KiB, and frequent reopens. Run it with several seeds (MEMIAVL_SEED)
// to cover more combinations.
func TestAppHashVariedOptions(t *testing.T) {
	r := testutil.Rand(t)
	var stores []string
	for i := 0; i < 20; i++ {
		stores = append(stores, fmt.Sprintf("s%02d", i))
	}
	dir := t.TempDir()
	opts := multitree.Options{
		SnapshotInterval:   int64([]int{1, 2, 3, 7, 13}[r.Intn(5)]),
		SnapshotKeepRecent: r.Intn(2),
		AsyncCommitBuffer:  []int{0, 1, 4}[r.Intn(3)],
		RewriteConcurrency: 1 + r.Intn(4),
	}
	copts := opts
	copts.CreateIfMissing, copts.InitialStores = true, stores
	copts.InitialVersion = int64(r.Intn(3)) * 100
	t.Logf("interval %d, keep %d, queue %d, concurrency %d, initial version %d", opts.SnapshotInterval,
		opts.SnapshotKeepRecent, opts.AsyncCommitBuffer, opts.RewriteConcurrency, copts.InitialVersion)
	db, err := multitree.Open(dir, copts)
	if err != nil {
		t.Fatal(err)
	}
	o := newOracle(t, stores)
	if copts.InitialVersion > 0 {
		o.rs.SetInitialVersion(copts.InitialVersion)
	}
	c := &chain{t: t, r: r, gen: testutil.NewKeyGen(r), dir: dir, opts: opts, o: o,
		keys: map[string][][]byte{}, hashes: map[int64][]byte{}}
	// some runs commit the versions with a large value by a snapshot, as
	// a version over wal.MaxEntrySize is
	c.maxLogged = []int{0, 0, 96 << 10}[r.Intn(3)]
	t.Logf("largest logged entry %d (0: wal.MaxEntrySize)", c.maxLogged)
	c.attach(db)
	cur := append([]string(nil), stores...)
	versions := scale(300, 120)
	for v := 1; v <= versions; v++ {
		if v%75 == 0 {
			// upgrade: add one, rename one, delete one
			added := fmt.Sprintf("n%03d", v)
			ren := cur[r.Intn(len(cur))]
			var del string
			for del == "" || del == ren {
				del = cur[r.Intn(len(cur))]
			}
			var next []string
			for _, s := range cur {
				if s != ren && s != del {
					next = append(next, s)
				}
			}
			next = append(next, added, "r"+ren)
			up := &storetypes.StoreUpgrades{Added: []string{added},
				Renamed: []storetypes.StoreRename{{OldKey: ren, NewKey: "r" + ren}}, Deleted: []string{del}}
			c.upgrade(up, next)
			cur = next
		}
		c.block(1 + r.Intn(60))
		if r.Intn(40) == 0 {
			// a large value
			name := cur[r.Intn(len(cur))]
			k, val := c.gen.Key(), bytes.Repeat([]byte{byte(v)}, 1<<(10+r.Intn(10)))
			c.o.store(name).Set(k, val)
			c.keys[name] = append(c.keys[name], k)
			c.commit([]wal.ChangeSet{{Name: name, Pairs: []wal.KVPair{{Key: k, Value: val}}}})
		}
		if r.Intn(25) == 0 {
			c.reopen()
		}
		if v%50 == 0 {
			view, err := c.db.View()
			if err != nil {
				t.Fatal(err)
			}
			c.compareData(view)
			view.Release()
		}
	}
	last := c.db.Version()
	c.close()
	t.Logf("%d versions committed by a snapshot", c.snapshotCommits)
	// the latest version and recent ones, read-only; a version older
	// than every kept snapshot must be refused with ErrVersion
	for i := 0; i < 6; i++ {
		target := last
		if i > 0 {
			target -= int64(r.Intn(20))
		}
		ro, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: target})
		if err != nil {
			if i == 0 || !errors.Is(err, multitree.ErrVersion) {
				t.Fatalf("TargetVersion %d: %v", target, err)
			}
			continue
		}
		if ro.Version() != target || !bytes.Equal(ro.LastCommitInfo().Hash(), c.hashes[target]) {
			t.Fatalf("TargetVersion %d opened at %d with another hash", target, ro.Version())
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
