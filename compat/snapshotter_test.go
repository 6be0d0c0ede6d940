package compat_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/metrics"
	"cosmossdk.io/store/rootmulti"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

const ssMaxItem = 64 << 20 // the SDK snapshot manager's item limit

var ssStores = []string{"acc", "bank", "empty", "gov", "staking"}

// ssExtension is the item the snapshot manager writes after the
// multistore's: Restore must stop at it and hand it back.
var ssExtension = snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_Extension{
	Extension: &snapshottypes.SnapshotExtensionMeta{Name: "ext", Format: 1},
}}

// ssBlocks makes n blocks of random changes over stores, leaving "empty"
// untouched.
func ssBlocks(r *rand.Rand, stores []string, n int, ops int) [][]wal.ChangeSet {
	gen := testutil.NewKeyGen(r)
	keys := map[string][][]byte{}
	var blocks [][]wal.ChangeSet
	for b := 0; b < n; b++ {
		var css []wal.ChangeSet
		for _, name := range stores {
			if name == "empty" || r.Intn(4) == 0 {
				continue
			}
			cs := wal.ChangeSet{Name: name}
			for i := 0; i < 1+r.Intn(ops); i++ {
				ks := keys[name]
				if len(ks) > 0 && r.Intn(4) == 0 {
					j := r.Intn(len(ks))
					cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: ks[j]})
					ks[j] = ks[len(ks)-1]
					keys[name] = ks[:len(ks)-1]
					continue
				}
				var k []byte
				if len(ks) > 0 && r.Intn(3) == 0 {
					k = ks[r.Intn(len(ks))] // update
				} else {
					k = gen.Key()
					keys[name] = append(ks, k)
				}
				cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: gen.Value(120)})
			}
			css = append(css, cs)
		}
		blocks = append(blocks, css)
	}
	return blocks
}

func ssOurs(t *testing.T, dir string, blocks [][]wal.ChangeSet) (*multitree.DB, map[int64][]byte) {
	t.Helper()
	db, err := multitree.Open(dir, multitree.Options{
		CreateIfMissing: true, InitialStores: ssStores, SnapshotInterval: 7, SnapshotKeepRecent: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for _, css := range blocks {
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		hashes[info.Version] = info.Hash()
	}
	return db, hashes
}

func ssRootMulti(t *testing.T, db dbm.DB, withTransient bool) *rootmulti.Store {
	t.Helper()
	rs := rootmulti.NewStore(db, log.NewNopLogger(), metrics.NewNoOpMetrics())
	for _, name := range ssStores {
		rs.MountStoreWithDB(storetypes.NewKVStoreKey(name), storetypes.StoreTypeIAVL, nil)
	}
	if withTransient {
		rs.MountStoreWithDB(storetypes.NewTransientStoreKey("transient"), storetypes.StoreTypeTransient, nil)
	}
	if err := rs.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	return rs
}

func ssApply(rs *rootmulti.Store, css []wal.ChangeSet) storetypes.CommitID {
	for _, cs := range css {
		st := rs.GetStoreByName(cs.Name).(storetypes.KVStore)
		for _, p := range cs.Pairs {
			if p.Delete {
				st.Delete(p.Key)
			} else {
				st.Set(p.Key, p.Value)
			}
		}
	}
	return rs.Commit()
}

// ssSameContents compares every IAVL store of a rootmulti store with a view.
func ssSameContents(t *testing.T, rs *rootmulti.Store, view *multitree.View) {
	t.Helper()
	var names []string
	for name, key := range rs.StoreKeysByName() {
		if rs.GetCommitKVStore(key).GetStoreType() == storetypes.StoreTypeIAVL {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != fmt.Sprint(view.StoreNames()) {
		t.Fatalf("stores %v, rootmulti %v", view.StoreNames(), names)
	}
	for _, name := range names {
		tr := view.Tree(name)
		if err := tr.Check(); err != nil {
			t.Fatal(err)
		}
		it := tr.Iterator(nil, nil, true)
		rit := rs.GetStoreByName(name).(storetypes.KVStore).Iterator(nil, nil)
		n := 0
		for ; rit.Valid(); rit.Next() {
			if !it.Valid() || !bytes.Equal(it.Key(), rit.Key()) || !bytes.Equal(it.Value(), rit.Value()) {
				t.Fatalf("store %s pair %d: rootmulti has %X", name, n, rit.Key())
			}
			it.Next()
			n++
		}
		rit.Close()
		if it.Valid() {
			t.Fatalf("store %s: extra key %X", name, it.Key())
		}
	}
}

// ssStream returns the items of a snapshot of db at height, followed by the
// extension item, as one delimited byte stream.
func ssStream(t *testing.T, db *multitree.DB, height uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := protoio.NewDelimitedWriter(&buf)
	if err := compat.SnapshotDB(db, height, w); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMsg(&ssExtension); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ssReader(b []byte) protoio.Reader {
	return protoio.NewDelimitedReader(bytes.NewReader(b), ssMaxItem)
}

func ssView(t *testing.T, db *multitree.DB, v int64) *multitree.View {
	t.Helper()
	view, err := db.ViewAt(v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Release)
	return view
}

func TestStateSyncOursIntoRootMulti(t *testing.T) {
	r := testutil.Rand(t)
	blocks := ssBlocks(r, ssStores, 40, 40)
	db, hashes := ssOurs(t, t.TempDir(), blocks)
	defer db.Close()
	for _, height := range []uint64{40, 23} { // the latest and an older kept version
		t.Run(fmt.Sprint(height), func(t *testing.T) {
			stream := ssStream(t, db, height)
			rs := ssRootMulti(t, dbm.NewMemDB(), true)
			next, err := rs.Restore(height, snapshottypes.CurrentFormat, ssReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			if next.GetExtension().GetName() != "ext" {
				t.Fatalf("rootmulti returned item %v", next)
			}
			cid := rs.LastCommitID()
			if cid.Version != int64(height) || !bytes.Equal(cid.Hash, hashes[int64(height)]) {
				t.Fatalf("rootmulti restored version %d app hash %X, ours %X", cid.Version, cid.Hash, hashes[int64(height)])
			}
			ci, err := rs.GetCommitInfo(int64(height))
			if err != nil {
				t.Fatal(err)
			}
			view := ssView(t, db, int64(height))
			if !bytes.Equal(ci.Hash(), view.CommitInfo().Hash()) {
				t.Fatal("commit info hashes differ")
			}
			ssSameContents(t, rs, view)
		})
	}
}

func TestStateSyncRootMultiIntoOurs(t *testing.T) {
	r := testutil.Rand(t)
	blocks := ssBlocks(r, ssStores, 40, 40)
	rs := ssRootMulti(t, dbm.NewMemDB(), true)
	for _, css := range blocks[:30] {
		ssApply(rs, css)
	}
	height := uint64(rs.LastCommitID().Version)
	var buf bytes.Buffer
	w := protoio.NewDelimitedWriter(&buf)
	if err := rs.Snapshot(height, w); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMsg(&ssExtension); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	next, err := compat.RestoreDB(dir, height, snapshottypes.CurrentFormat, ssReader(buf.Bytes()), multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if next.GetExtension().GetName() != "ext" {
		t.Fatalf("RestoreDB returned item %v", next)
	}
	db, err := multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != int64(height) || !bytes.Equal(db.LastCommitInfo().Hash(), rs.LastCommitID().Hash) {
		t.Fatalf("restored version %d app hash %X, rootmulti %X", db.Version(), db.LastCommitInfo().Hash(), rs.LastCommitID().Hash)
	}
	ssSameContents(t, rs, ssView(t, db, int64(height)))
	// both chains go on with the same blocks and the same app hashes
	for _, css := range blocks[30:] {
		cid := ssApply(rs, css)
		if err := db.ApplyChangeSets(css); err != nil {
			t.Fatal(err)
		}
		info, err := db.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if info.Version != cid.Version || !bytes.Equal(info.Hash(), cid.Hash) {
			t.Fatalf("after the restore, version %d hash %X, rootmulti %d %X", info.Version, info.Hash(), cid.Version, cid.Hash)
		}
	}
}

func TestRestoreIdempotent(t *testing.T) {
	r := testutil.Rand(t)
	src, hashes := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 12, 10))
	defer src.Close()
	stream := ssStream(t, src, 12)
	dir := filepath.Join(t.TempDir(), "db")

	// an empty database created at start-up, as the multistore does
	empty, err := multitree.Open(dir, multitree.Options{CreateIfMissing: true, InitialStores: ssStores})
	if err != nil {
		t.Fatal(err)
	}
	empty.Close()
	opts := multitree.Options{InitialStores: ssStores}
	restore := func() error {
		_, err := compat.RestoreDB(dir, 12, snapshottypes.CurrentFormat, ssReader(stream), opts)
		return err
	}
	for i := 0; i < 2; i++ { // over the empty database, then over itself
		if err := restore(); err != nil {
			t.Fatalf("restore %d: %v", i, err)
		}
		db, err := multitree.Open(dir, multitree.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if db.Version() != 12 || !bytes.Equal(db.LastCommitInfo().Hash(), hashes[12]) {
			t.Fatalf("restore %d: version %d", i, db.Version())
		}
		if i == 1 {
			if _, err := db.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	// the database moved on to 13: a restore at 12 is refused and changes nothing
	if err := restore(); !errors.Is(err, multitree.ErrExists) {
		t.Fatalf("restore over version 13: %v", err)
	}
	db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != 13 {
		t.Fatalf("version %d after a refused restore", db.Version())
	}
}

// TestRestoreRefusesMissingMountedStore restores, side by side with
// rootmulti, a stream that lacks one of the mounted stores (the items of
// "gov" removed, as a stream cut cleanly between two stores would be):
// both refuse it, ours leaving the empty database as it was, which then
// takes the whole stream.
func TestRestoreRefusesMissingMountedStore(t *testing.T) {
	r := testutil.Rand(t)
	src, hashes := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 6, 10))
	defer src.Close()
	stream := ssStream(t, src, 6)
	var cut []*snapshottypes.SnapshotItem
	inGov := false
	for _, it := range ssItems(t, stream) {
		if st := it.GetStore(); st != nil {
			inGov = st.Name == "gov"
		}
		if !inGov {
			cut = append(cut, it)
		}
	}
	if len(cut) == len(ssItems(t, stream)) {
		t.Fatal("the stream has no gov store")
	}
	short := ssEncode(t, cut)

	keys := keyring{}
	m := mount{iavl: ssStores}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	if _, err := rs.Restore(6, snapshottypes.CurrentFormat, ssReader(short)); err == nil {
		t.Fatal("rootmulti restored a stream without a mounted store")
	}
	ours := newOurs(t, filepath.Join(t.TempDir(), "db"), testConfig(), keys, m, nil)
	defer ours.Close()
	if _, err := ours.Restore(6, snapshottypes.CurrentFormat, ssReader(short)); !errors.Is(err, compat.ErrSnapshotStream) {
		t.Fatalf("restore without a mounted store: %v", err)
	}
	if cid := ours.LastCommitID(); cid.Version != 0 {
		t.Fatalf("a refused restore left version %d", cid.Version)
	}
	if _, err := ours.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatal(err)
	}
	if cid := ours.LastCommitID(); cid.Version != 6 || !bytes.Equal(cid.Hash, hashes[6]) {
		t.Fatalf("restored version %d app hash %X, want %X", cid.Version, cid.Hash, hashes[6])
	}
}

// TestRestoredVersionsBeforeHeight checks that the versions before a
// restored snapshot's height, which the node never committed, are
// rootmulti's "no commit info found", also once a rewrite pruned the
// restored snapshot.
func TestRestoredVersionsBeforeHeight(t *testing.T) {
	r := testutil.Rand(t)
	src, _ := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 6, 10))
	defer src.Close()
	stream := ssStream(t, src, 6)
	keys := keyring{}
	m := mount{iavl: ssStores}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	if _, err := rs.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent = -1, 0
	ours := newOurs(t, dir, cfg, keys, m, nil)
	defer func() { ours.Close() }()
	if _, err := ours.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		for v := int64(1); v < 6; v++ {
			_, err := ours.GetCommitInfo(v)
			_, cerr := ours.CacheMultiStoreWithVersion(v)
			for _, e := range []error{err, cerr} {
				if e == nil || e.Error() != "no commit info found" || !errors.Is(e, multitree.ErrVersion) {
					t.Fatalf("%s: version %d before the restored height: %v", stage, v, e)
				}
			}
		}
		if _, err := rs.CacheMultiStoreWithVersion(2); err == nil || err.Error() != "no commit info found" {
			t.Fatalf("rootmulti: %v", err)
		}
	}
	check("restored")
	for i := 0; i < 3; i++ {
		ours.GetKVStore(keys[ssStores[0]]).Set([]byte{byte(i)}, []byte("v"))
		ours.Commit()
	}
	if err := ours.RewriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ours.Close(); err != nil { // waits for the prune of the restored snapshot
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("snapshot-%020d", 6))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the restored snapshot is kept: %v", err)
	}
	ours = newOurs(t, dir, cfg, keys, m, nil)
	check("pruned")
	if _, err := ours.CacheMultiStoreWithVersion(6); err == nil || err.Error() == "no commit info found" {
		t.Fatalf("the restored height, pruned: %v", err)
	}
}

// TestRestoreRefusesCommittedDatabase restores, side by side with
// rootmulti, a snapshot of height 6 into multistores that committed blocks
// of their own: below, at and above the snapshot's height. Both refuse in
// every case, ours before touching anything, so each keeps its own state
// (at height 6 a replace would have swapped it for the snapshot's).
func TestRestoreRefusesCommittedDatabase(t *testing.T) {
	r := testutil.Rand(t)
	src, _ := ssOurs(t, t.TempDir(), ssBlocks(r, ssStores, 6, 10))
	defer src.Close()
	stream := ssStream(t, src, 6)
	for _, n := range []int{1, 6, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			keys := keyring{}
			m := mount{iavl: ssStores}
			p := &pair{t: t, keys: keys, odb: dbm.NewMemDB(), dir: filepath.Join(t.TempDir(), "db"), cfg: testConfig()}
			p.oracle = newOracle(t, p.odb, keys, m, nil)
			p.ours = newOurs(t, p.dir, p.cfg, keys, m, nil)
			defer p.ours.Close()
			for i := 0; i < n; i++ {
				p.commit(map[string][][2][]byte{"bank": {{[]byte("own"), []byte(fmt.Sprint(i))}}})
			}
			before := p.ours.LastCommitID()
			if _, err := p.oracle.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); err == nil {
				t.Fatal("rootmulti restored over committed versions")
			}
			if _, err := p.ours.Restore(6, snapshottypes.CurrentFormat, ssReader(stream)); !errors.Is(err, multitree.ErrExists) {
				t.Fatalf("restore over version %d: %v, want ErrExists", n, err)
			}
			if after := p.ours.LastCommitID(); after.Version != before.Version || !bytes.Equal(after.Hash, before.Hash) {
				t.Fatalf("a refused restore changed the state: %v, was %v", after, before)
			}
			// still the multistore it was: the next block commits
			if id := p.commit(map[string][][2][]byte{"gov": {{[]byte("next"), []byte("v")}}}); id.Version != int64(n)+1 {
				t.Fatalf("next block committed version %d", id.Version)
			}
		})
	}
}

// ssItems decodes a delimited stream into its items.
func ssItems(t *testing.T, b []byte) []*snapshottypes.SnapshotItem {
	t.Helper()
	rd := ssReader(b)
	var out []*snapshottypes.SnapshotItem
	for {
		it := &snapshottypes.SnapshotItem{}
		err := rd.ReadMsg(it)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
}

func ssEncode(t testing.TB, items []*snapshottypes.SnapshotItem) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := protoio.NewDelimitedWriter(&buf)
	for _, it := range items {
		if err := w.WriteMsg(it); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// midMessage returns an offset in the encoded stream of items, at or after
// near, that falls inside an item's body: after its length prefix and at
// least one byte of the body, before its end. A cut anywhere else is not
// mid-message for the reader: at an item boundary, or just after a length
// prefix, the delimited reader reports a clean io.EOF.
func midMessage(t testing.TB, items []*snapshottypes.SnapshotItem, near int) int {
	t.Helper()
	start := 0
	for _, it := range items {
		enc := ssEncode(t, []*snapshottypes.SnapshotItem{it})
		_, hdr := binary.Uvarint(enc)
		end := start + len(enc)
		if cut := max(near, start+hdr+1); cut < end {
			return cut
		}
		start = end
	}
	t.Fatalf("no item body at or after offset %d", near)
	return 0
}

func storeItem(name string) *snapshottypes.SnapshotItem {
	return &snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_Store{Store: &snapshottypes.SnapshotStoreItem{Name: name}}}
}

func TestRestoreRejectsMalformedStreams(t *testing.T) {
	r := testutil.Rand(t)
	blocks := ssBlocks(r, ssStores, 5, 12)
	// the first store gets inner nodes whatever the random blocks left in it
	sure := wal.ChangeSet{Name: "acc"}
	for i := 0; i < 8; i++ {
		sure.Pairs = append(sure.Pairs, wal.KVPair{Key: []byte{0xff, byte(i)}, Value: []byte{byte(i)}})
	}
	src, _ := ssOurs(t, t.TempDir(), append(blocks, []wal.ChangeSet{sure}))
	defer src.Close()
	good := ssStream(t, src, 6)
	items := ssItems(t, good)
	var (
		firstStore  = -1 // index of the first store item
		secondStore = -1
		firstInner  = -1
		lastNode    = -1 // last node of the first non-empty store
	)
	for i, it := range items {
		switch {
		case it.GetStore() != nil && firstStore < 0:
			firstStore = i
		case it.GetStore() != nil && secondStore < 0:
			secondStore = i
		case it.GetIAVL() != nil && secondStore < 0:
			lastNode = i
			if it.GetIAVL().Height > 0 && firstInner < 0 {
				firstInner = i
			}
		}
	}
	if firstStore != 0 || secondStore < 0 || firstInner < 0 || lastNode != secondStore-1 {
		t.Fatalf("unexpected stream layout %d %d %d %d", firstStore, secondStore, firstInner, lastNode)
	}
	edit := func(f func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem) []byte {
		return ssEncode(t, f(ssItems(t, good)))
	}
	cases := map[string][]byte{
		"node before store": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append([]*snapshottypes.SnapshotItem{its[1]}, its...)
		}),
		"empty item": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append(its[:3:3], append([]*snapshottypes.SnapshotItem{{}}, its[3:]...)...)
		}),
		"extension payload": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			p := &snapshottypes.SnapshotItem{Item: &snapshottypes.SnapshotItem_ExtensionPayload{
				ExtensionPayload: &snapshottypes.SnapshotExtensionPayload{Payload: []byte("x")}}}
			return append(its[:3:3], append([]*snapshottypes.SnapshotItem{p}, its[3:]...)...)
		}),
		"second store before the first completes": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append(its[:lastNode:lastNode], its[lastNode+1:]...)
		}),
		"stores out of order": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append([]*snapshottypes.SnapshotItem{storeItem("zzz")}, its...)
		}),
		"store twice": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			return append(its[:secondStore:secondStore], its...)
		}),
		"wrong inner key": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			its[firstInner].GetIAVL().Key = []byte("not the key")
			return its
		}),
		"height above int8": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			its[firstInner].GetIAVL().Height = 200
			return its
		}),
		"negative height": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			its[firstInner].GetIAVL().Height = -3
			return its
		}),
		"version after height": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			its[1].GetIAVL().Version = 7
			return its
		}),
		"value on inner node": edit(func(its []*snapshottypes.SnapshotItem) []*snapshottypes.SnapshotItem {
			its[firstInner].GetIAVL().Value = []byte("v")
			return its
		}),
		"truncated mid-message":   good[:midMessage(t, items, len(good)/2)],
		"truncated between nodes": ssEncode(t, items[:lastNode]),
		"no item":                 {},
		"only an extension": ssEncode(t, []*snapshottypes.SnapshotItem{{Item: &snapshottypes.SnapshotItem_Extension{
			Extension: &snapshottypes.SnapshotExtensionMeta{Name: "wasm", Format: 1}}}}),
		"garbage":     []byte{5, 0xff, 0xff, 0xff, 0xff, 0xff},
		"huge length": {0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3},
	}
	// every failure leaves no database, and none over an existing one
	existing, hashes := ssOurs(t, filepath.Join(t.TempDir(), "existing"), ssBlocks(r, ssStores, 6, 6))
	existingDir := existing.Dir()
	existing.Close()
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			_, err := compat.RestoreDB(dir, 6, snapshottypes.CurrentFormat, ssReader(stream), multitree.Options{})
			if err == nil {
				t.Fatal("malformed stream restored")
			}
			t.Log(err)
			if _, err := multitree.Open(dir, multitree.Options{}); !errors.Is(err, multitree.ErrNotFound) {
				t.Fatalf("a failed restore left a database: %v", err)
			}
			if _, err := compat.RestoreDB(existingDir, 6, snapshottypes.CurrentFormat, ssReader(stream), multitree.Options{}); err == nil {
				t.Fatal("malformed stream restored over a database")
			}
			db, err := multitree.Open(existingDir, multitree.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if !bytes.Equal(db.LastCommitInfo().Hash(), hashes[6]) {
				t.Fatal("a failed restore changed the existing database")
			}
		})
	}
	// and the unmodified stream restores
	if _, err := compat.RestoreDB(filepath.Join(t.TempDir(), "ok"), 6, snapshottypes.CurrentFormat, ssReader(good), multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	// bad arguments
	if _, err := compat.RestoreDB(t.TempDir(), 6, 2, ssReader(good), multitree.Options{}); !errors.Is(err, snapshottypes.ErrUnknownFormat) {
		t.Fatalf("format 2: %v", err)
	}
	if _, err := compat.RestoreDB(t.TempDir(), 0, snapshottypes.CurrentFormat, ssReader(good), multitree.Options{}); err == nil {
		t.Fatal("height 0 restored")
	}
	if _, err := compat.RestoreDB(filepath.Join(t.TempDir(), "x"), 6, snapshottypes.CurrentFormat, ssReader(good),
		multitree.Options{InitialStores: []string{"acc"}}); !errors.Is(err, multitree.ErrUnknownStore) {
		t.Fatalf("store not among InitialStores: %v", err)
	}
	if err := compat.SnapshotDB(src, 7, protoio.NewDelimitedWriter(io.Discard)); err == nil {
		t.Fatal("snapshot of a future height")
	}
	if err := compat.SnapshotDB(src, 0, protoio.NewDelimitedWriter(io.Discard)); err == nil {
		t.Fatal("snapshot of height 0")
	}
}

func TestRestoreCreatesMissingInitialStores(t *testing.T) {
	items := []*snapshottypes.SnapshotItem{
		storeItem("b"),
		{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte("k"), Value: nil, Version: 2}}},
	}
	dir := filepath.Join(t.TempDir(), "db")
	next, err := compat.RestoreDB(dir, 3, snapshottypes.CurrentFormat, ssReader(ssEncode(t, items)),
		multitree.Options{InitialStores: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Item != nil {
		t.Fatalf("end of stream returned %v", next)
	}
	db, err := multitree.Open(dir, multitree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if fmt.Sprint(db.StoreNames()) != "[a b c]" {
		t.Fatalf("stores %v", db.StoreNames())
	}
	// with mounted stores, a stream of none restores them all empty
	empty := filepath.Join(t.TempDir(), "empty")
	if _, err := compat.RestoreDB(empty, 3, snapshottypes.CurrentFormat, ssReader(nil),
		multitree.Options{InitialStores: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	edb, err := multitree.Open(empty, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer edb.Close()
	if fmt.Sprint(edb.StoreNames()) != "[a b]" || edb.Version() != 3 {
		t.Fatalf("stores %v at %d", edb.StoreNames(), edb.Version())
	}
	// a nil value in the stream is the empty value, as in rootmulti
	if v, err := db.Get("b", []byte("k")); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("value %q, %v", v, err)
	}
}

// FuzzRestore feeds arbitrary bytes to RestoreDB as a snapshot stream at
// height 5: it must fail cleanly or restore a database whose trees pass
// their checks, never panic or hang.
func FuzzRestore(f *testing.F) {
	f.Add(ssEncode(f, []*snapshottypes.SnapshotItem{
		storeItem("a"),
		{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte("a"), Value: []byte("1"), Version: 1}}},
		{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte("b"), Value: []byte("2"), Version: 2}}},
		{Item: &snapshottypes.SnapshotItem_IAVL{IAVL: &snapshottypes.SnapshotIAVLItem{Key: []byte("b"), Version: 2, Height: 1}}},
		storeItem("b"),
		&ssExtension,
	}))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "db")
		_, err := compat.RestoreDB(dir, 5, snapshottypes.CurrentFormat, protoio.NewDelimitedReader(bytes.NewReader(data), 1<<16), multitree.Options{})
		if err != nil {
			if _, serr := os.Stat(filepath.Join(dir, "current")); serr == nil {
				t.Fatalf("failed restore (%v) left a database", err)
			}
			return
		}
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		view, err := db.View()
		if err != nil {
			t.Fatal(err)
		}
		defer view.Release()
		for _, name := range view.StoreNames() {
			if err := view.Tree(name).Check(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSnapshotOfHeightQueriesRead: a state-sync snapshot of a height whose
// database snapshot was pruned (keep-recent 0) is exported from the view
// that queries of that height still read, the one the snapshot holds for
// the manager's extensions, instead of failing to rebuild the height; the
// stream restores to the height's app hash.
func TestSnapshotOfHeightQueriesRead(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent = -1, 0
	keys := keyring{}
	dir := t.TempDir()
	ms := newOurs(t, dir, cfg, keys, mount{iavl: ssStores}, nil)
	defer ms.Close()
	hashes := map[int64][]byte{}
	for i, css := range ssBlocks(testutil.Rand(t), ssStores, 8, 20) {
		for _, cs := range css {
			st := ms.GetKVStore(keys[cs.Name])
			for _, p := range cs.Pairs {
				if p.Delete {
					st.Delete(p.Key)
				} else {
					st.Set(p.Key, p.Value)
				}
			}
		}
		cid := ms.Commit()
		hashes[cid.Version] = cid.Hash
		if i+1 == 6 {
			if err := ms.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ms.RewriteSnapshot(context.Background()); err != nil { // at 8; 6 is pruned
		t.Fatal(err)
	}
	pruned := filepath.Join(dir, fmt.Sprintf("snapshot-%020d", 6))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(pruned); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("snapshot 6 not pruned")
		}
	}
	if _, err := ms.CacheMultiStoreWithVersion(7); err != nil {
		t.Fatalf("query branch of height 7: %v", err)
	}
	var buf bytes.Buffer
	w := protoio.NewDelimitedWriter(&buf)
	if err := ms.Snapshot(7, w); err != nil {
		t.Fatalf("snapshot of height 7, which queries read: %v", err)
	}
	ms.PruneSnapshotHeight(7)
	if err := w.WriteMsg(&ssExtension); err != nil {
		t.Fatal(err)
	}
	rs := ssRootMulti(t, dbm.NewMemDB(), false)
	if _, err := rs.Restore(7, snapshottypes.CurrentFormat, ssReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if cid := rs.LastCommitID(); cid.Version != 7 || !bytes.Equal(cid.Hash, hashes[7]) {
		t.Fatalf("restored version %d app hash %X, committed %X", cid.Version, cid.Hash, hashes[7])
	}
	if runtime.GOOS != "linux" {
		return
	}
	// the export kept no pin: once the query cache evicts heights 6 and 7,
	// the pruned snapshot 6 they read is unmapped
	for i := 0; i < cfg.QueryViews+2; i++ {
		ms.GetKVStore(keys["acc"]).Set([]byte{byte(i)}, []byte("x"))
		ms.Commit()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(maps, []byte(pruned)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the files of the pruned snapshot 6 are still mapped after its heights left the query cache")
		}
	}
}
