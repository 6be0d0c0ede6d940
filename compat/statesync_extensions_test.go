package compat_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"testing"
	"time"

	"cosmossdk.io/log"
	"cosmossdk.io/store/snapshots"
	snapshottypes "cosmossdk.io/store/snapshots/types"
	"cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/seed-6dfbb450/memiavl/compat"
)

// ssExt is an ExtensionSnapshotter as wasmd registers: on snapshot it writes
// its fixed payloads, then (when cms is set) the pairs of store "bank" at
// the snapshot's height read through CacheMultiStoreWithVersion (as wasmd
// reads its code store at height); on restore it reads payloads until
// io.EOF and, when cms is set, checks the restored multistore is loaded and
// readable (wasmd reads the store after its restore).
type ssExt struct {
	name     string
	format   uint32
	payloads [][]byte
	cms      types.CommitMultiStore // read at height when set

	restored   [][]byte
	restoreErr error
	heightSeen uint64
}

func (e *ssExt) SnapshotName() string       { return e.name }
func (e *ssExt) SnapshotFormat() uint32     { return e.format }
func (e *ssExt) SupportedFormats() []uint32 { return []uint32{e.format} }

func (e *ssExt) storePayloads(height uint64) ([][]byte, error) {
	if e.cms == nil {
		return nil, nil
	}
	cms, err := e.cms.CacheMultiStoreWithVersion(int64(height))
	if err != nil {
		return nil, err
	}
	var out [][]byte
	key := findKey(e.cms, "bank")
	it := cms.GetKVStore(key).Iterator(nil, nil)
	defer it.Close()
	for ; it.Valid(); it.Next() {
		out = append(out, append(append([]byte("kv:"), it.Key()...), it.Value()...))
	}
	return out, nil
}

func findKey(cms types.CommitMultiStore, name string) types.StoreKey {
	type byName interface {
		StoreKeysByName() map[string]types.StoreKey
	}
	if b, ok := cms.(byName); ok {
		return b.StoreKeysByName()[name]
	}
	panic("no StoreKeysByName")
}

func (e *ssExt) SnapshotExtension(height uint64, w snapshottypes.ExtensionPayloadWriter) error {
	for _, p := range e.payloads {
		if err := w(p); err != nil {
			return err
		}
	}
	sp, err := e.storePayloads(height)
	if err != nil {
		return err
	}
	for _, p := range sp {
		if err := w(p); err != nil {
			return err
		}
	}
	return nil
}

func (e *ssExt) RestoreExtension(height uint64, format uint32, r snapshottypes.ExtensionPayloadReader) error {
	if format != e.format {
		return fmt.Errorf("format %d", format)
	}
	e.heightSeen = height
	for {
		p, err := r()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		e.restored = append(e.restored, bytes.Clone(p))
	}
	if e.cms != nil {
		// the multistore must be loaded at height by now
		if got := e.cms.LastCommitID().Version; got != int64(height) {
			e.restoreErr = fmt.Errorf("extension restore: multistore at version %d, want %d", got, height)
		}
	}
	return nil
}

func ssExtManager(t *testing.T, ms snapshottypes.Snapshotter, exts ...snapshottypes.ExtensionSnapshotter) *snapshots.Manager {
	t.Helper()
	st, err := snapshots.NewStore(dbm.NewMemDB(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := snapshots.NewManager(st, snapshottypes.NewSnapshotOptions(1000, 0), ms, nil, log.NewNopLogger())
	if err := m.RegisterExtensions(exts...); err != nil {
		t.Fatal(err)
	}
	return m
}

// ssExtTransfer feeds every chunk of snap from src into a restore by dst.
func ssExtTransfer(t *testing.T, src, dst *snapshots.Manager, snap *snapshottypes.Snapshot) error {
	t.Helper()
	if err := dst.Restore(*snap); err != nil {
		return err
	}
	for i := uint32(0); i < snap.Chunks; i++ {
		chunk, err := src.LoadChunk(snap.Height, snap.Format, i)
		if err != nil {
			t.Fatal(err)
		}
		done, err := dst.RestoreChunk(chunk)
		if err != nil {
			return err
		}
		if done != (i == snap.Chunks-1) {
			return fmt.Errorf("chunk %d of %d: done %v", i, snap.Chunks, done)
		}
	}
	return nil
}

var ssExtMount = mount{iavl: []string{"acc", "bank", "empty", "gov", "staking"}, transient: "transient", memory: "mem"}

// ssExtPair builds ours and rootmulti with the same blocks and returns them
// with the last height.
func ssExtPair(t *testing.T, keys keyring, seed int64, blocks, ops int, big bool, cfgs ...compat.Config) (types.CommitMultiStore, types.CommitMultiStore, uint64) {
	t.Helper()
	cfg := testConfig()
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	ours := newOurs(t, t.TempDir(), cfg, keys, ssExtMount, nil)
	t.Cleanup(func() { ours.Close() })
	rm := newOracle(t, dbm.NewMemDB(), keys, ssExtMount, nil)
	r := rand.New(rand.NewSource(seed))
	for b := 0; b < blocks; b++ {
		for _, name := range []string{"acc", "bank", "gov", "staking"} {
			for i := 0; i < 1+r.Intn(ops); i++ {
				k := []byte(fmt.Sprintf("k%05d", r.Intn(ops*4)))
				n := 1 + r.Intn(64)
				if big && i == 0 {
					n = 300 << 10
				}
				v := make([]byte, n)
				r.Read(v)
				if r.Intn(5) == 0 {
					ours.GetKVStore(keys[name]).Delete(k)
					rm.GetKVStore(keys[name]).Delete(k)
				} else {
					ours.GetKVStore(keys[name]).Set(k, v)
					rm.GetKVStore(keys[name]).Set(k, v)
				}
			}
		}
		a, b2 := ours.Commit(), rm.Commit()
		if !bytes.Equal(a.Hash, b2.Hash) {
			t.Fatalf("block %d: app hash %X, rootmulti %X", b, a.Hash, b2.Hash)
		}
	}
	return ours, rm, uint64(blocks)
}

func ssExtSame(t *testing.T, what string, want, got *ssExt) {
	t.Helper()
	if got.restoreErr != nil {
		t.Fatalf("%s: %v", what, got.restoreErr)
	}
	wantP := append([][]byte{}, want.payloads...)
	if len(got.restored) < len(wantP) {
		t.Fatalf("%s: extension %s restored %d payloads, want at least %d", what, want.name, len(got.restored), len(wantP))
	}
	for i, p := range wantP {
		if !bytes.Equal(p, got.restored[i]) {
			t.Fatalf("%s: extension %s payload %d differs (len %d vs %d)", what, want.name, i, len(got.restored[i]), len(p))
		}
	}
}

func ssExtPayloads(r *rand.Rand, n, size int) [][]byte {
	var out [][]byte
	for i := 0; i < n; i++ {
		p := make([]byte, size)
		r.Read(p)
		out = append(out, p)
	}
	return out
}

type ssExtCase struct {
	name string
	big  bool
	// extension specs: name and payloads
	exts func(r *rand.Rand) []*ssExt
}

var ssExtCases = []ssExtCase{
	{name: "one", exts: func(r *rand.Rand) []*ssExt {
		return []*ssExt{{name: "wasm", format: 1, payloads: ssExtPayloads(r, 5, 100)}}
	}},
	{name: "two-and-empty", exts: func(r *rand.Rand) []*ssExt {
		return []*ssExt{
			{name: "wasm", format: 1, payloads: ssExtPayloads(r, 3, 1000)},
			{name: "aaa-empty", format: 2},
			{name: "zzz", format: 7, payloads: [][]byte{{}, {1}, {}}},
		}
	}},
	{name: "large", big: true, exts: func(r *rand.Rand) []*ssExt {
		return []*ssExt{{name: "wasm", format: 1, payloads: ssExtPayloads(r, 3, 6<<20)}}
	}},
	{name: "reads-store", exts: func(r *rand.Rand) []*ssExt {
		return []*ssExt{{name: "wasm", format: 1, payloads: ssExtPayloads(r, 2, 10)}}
	}},
}

func TestStateSyncExtensions(t *testing.T) {
	for _, c := range ssExtCases {
		t.Run(c.name, func(t *testing.T) {
			keys := keyring{}
			ours, rm, h := ssExtPair(t, keys, 7, 12, 30, c.big)
			hash := ours.LastCommitID().Hash

			mk := func(src types.CommitMultiStore) []*ssExt {
				exts := c.exts(rand.New(rand.NewSource(3)))
				if c.name == "reads-store" {
					for _, e := range exts {
						e.cms = src
					}
				}
				return exts
			}
			asExt := func(es []*ssExt) []snapshottypes.ExtensionSnapshotter {
				var out []snapshottypes.ExtensionSnapshotter
				for _, e := range es {
					out = append(out, e)
				}
				return out
			}

			oursExts, rmExts := mk(ours), mk(rm)
			oursMgr := ssExtManager(t, ours.(snapshottypes.Snapshotter), asExt(oursExts)...)
			rmMgr := ssExtManager(t, rm.(snapshottypes.Snapshotter), asExt(rmExts)...)
			sOurs, err := oursMgr.Create(h)
			if err != nil {
				t.Fatal(err)
			}
			sRm, err := rmMgr.Create(h)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d chunks", sOurs.Chunks)
			// (4) the same chunks and metadata
			if sOurs.Chunks != sRm.Chunks || !bytes.Equal(sOurs.Hash, sRm.Hash) {
				t.Fatalf("snapshot over ours: %d chunks hash %X; rootmulti: %d chunks hash %X", sOurs.Chunks, sOurs.Hash, sRm.Chunks, sRm.Hash)
			}
			for i := range sOurs.Metadata.ChunkHashes {
				if !bytes.Equal(sOurs.Metadata.ChunkHashes[i], sRm.Metadata.ChunkHashes[i]) {
					t.Fatalf("chunk %d hash differs", i)
				}
			}

			for _, from := range []struct {
				name string
				mgr  *snapshots.Manager
				snap *snapshottypes.Snapshot
				exts []*ssExt
			}{{"ours", oursMgr, sOurs, oursExts}, {"rootmulti", rmMgr, sRm, rmExts}} {
				// into a fresh ours
				dOurs := newOurs(t, t.TempDir(), testConfig(), keyring{}, ssExtMount, nil)
				dOursExts := mk(dOurs)
				for _, e := range dOursExts {
					e.payloads = nil
				}
				if err := ssExtTransfer(t, from.mgr, ssExtManager(t, dOurs, asExt(dOursExts)...), from.snap); err != nil {
					t.Fatalf("%s into ours: %v", from.name, err)
				}
				if got := dOurs.LastCommitID(); got.Version != int64(h) || !bytes.Equal(got.Hash, hash) {
					t.Fatalf("%s into ours: %d %X, want %d %X", from.name, got.Version, got.Hash, h, hash)
				}
				// into a fresh rootmulti
				dRm := newOracle(t, dbm.NewMemDB(), keyring{}, ssExtMount, nil)
				dRmExts := mk(dRm)
				if err := ssExtTransfer(t, from.mgr, ssExtManager(t, dRm, asExt(dRmExts)...), from.snap); err != nil {
					t.Fatalf("%s into rootmulti: %v", from.name, err)
				}
				if got := dRm.LastCommitID(); got.Version != int64(h) || !bytes.Equal(got.Hash, hash) {
					t.Fatalf("%s into rootmulti: %d %X, want %d %X", from.name, got.Version, got.Hash, h, hash)
				}
				for i, src := range from.exts {
					ssExtSame(t, from.name+" into ours", src, dOursExts[i])
					ssExtSame(t, from.name+" into rootmulti", src, dRmExts[i])
					if !equalPayloads(dOursExts[i].restored, dRmExts[i].restored) {
						t.Fatalf("%s: extension %s: ours restored %d payloads, rootmulti %d", from.name, src.name, len(dOursExts[i].restored), len(dRmExts[i].restored))
					}
					if c.name == "reads-store" && len(dOursExts[i].restored) <= len(src.payloads) {
						t.Fatalf("%s: extension wrote no store pairs", from.name)
					}
					if dOursExts[i].heightSeen != h && len(from.exts) > 0 {
						t.Fatalf("height seen %d", dOursExts[i].heightSeen)
					}
				}
				dOurs.Close()
			}
		})
	}
}

func equalPayloads(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// zzBlockingExt reads store "bank" at height after started is closed and
// release is closed: commits go on meanwhile, as with baseapp's asynchronous
// snapshots.
type zzBlockingExt struct {
	ssExt
	started, release chan struct{}
	once             sync.Once
}

func (e *zzBlockingExt) SnapshotExtension(height uint64, w snapshottypes.ExtensionPayloadWriter) error {
	e.once.Do(func() { close(e.started) })
	<-e.release
	return e.ssExt.SnapshotExtension(height, w)
}

// TestStateSyncExtensionReadsHeightWhileCommitting: the extension reads the snapshot's
// height through CacheMultiStoreWithVersion while many blocks commit and
// ours prunes old versions (MultiStore.Snapshot documents that the height
// stays readable for the extensions until PruneSnapshotHeight).
func TestStateSyncExtensionReadsHeightWhileCommitting(t *testing.T) {
	keys := keyring{}
	cfg := testConfig()
	cfg.SnapshotInterval, cfg.SnapshotKeepRecent = -1, 0
	ours, rm, h := ssExtPair(t, keys, 11, 12, 30, false, cfg)
	want, err := (&ssExt{cms: rm}).storePayloads(h)
	if err != nil || len(want) == 0 {
		t.Fatal(err, len(want))
	}
	ext := &zzBlockingExt{ssExt: ssExt{name: "wasm", format: 1, cms: ours}, started: make(chan struct{}), release: make(chan struct{})}
	mgr := ssExtManager(t, ours, ext)
	type res struct {
		s   *snapshottypes.Snapshot
		err error
	}
	done := make(chan res, 1)
	go func() {
		s, err := mgr.Create(h)
		done <- res{s, err}
	}()
	<-ext.started
	r := rand.New(rand.NewSource(5))
	for b := 0; b < 60; b++ {
		for i := 0; i < 20; i++ {
			k := []byte(fmt.Sprintf("k%05d", r.Intn(120)))
			ours.GetKVStore(keys["bank"]).Set(k, []byte(fmt.Sprint("late", b)))
		}
		ours.Commit()
		if b == 30 || b == 59 {
			// new snapshots: the old ones, and the log before them, go
			if err := ours.(*compat.MultiStore).RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// the pruning is done: a height before the snapshot's is gone
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := ours.CacheMultiStoreWithVersion(int64(h) - 1); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("height before the snapshot's not pruned")
		}
	}
	close(ext.release)
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	dst := &ssExt{name: "wasm", format: 1}
	dRm := newOracle(t, dbm.NewMemDB(), keyring{}, ssExtMount, nil)
	if err := ssExtTransfer(t, mgr, ssExtManager(t, dRm, dst), out.s); err != nil {
		t.Fatal(err)
	}
	if !equalPayloads(dst.restored, want) {
		t.Fatalf("extension read %d pairs at height %d, want %d (state at height)", len(dst.restored), h, len(want))
	}
	// the hold is given up: a later snapshot works too
	if _, err := mgr.Create(uint64(ours.LastCommitID().Version)); err != nil {
		t.Fatal(err)
	}
}
