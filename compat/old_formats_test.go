package compat_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cosmossdk.io/log"
	"cosmossdk.io/store/types"
	protoio "github.com/cosmos/gogoproto/io"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

const oldFmtFixture = "../testdata/multitree-v1"

// oldFmtFixtureCopy copies the fixture; old also converts its snapshots to
// snapshot format 1.
func oldFmtFixtureCopy(t *testing.T, old bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	testutil.CopyDir(t, oldFmtFixture, dir)
	if old {
		testutil.SnapshotsToFormat1(t, dir)
	}
	return dir
}

func oldFmtRecorded(t *testing.T) map[int64][]byte {
	b, err := os.ReadFile(oldFmtFixture + ".apphashes")
	if err != nil {
		t.Fatal(err)
	}
	m := map[int64][]byte{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		var v int64
		var h string
		fmt.Sscan(l, &v, &h)
		m[v], _ = hex.DecodeString(h)
	}
	return m
}

func oldFmtLoad(t *testing.T, dir string, ver int64) (*compat.MultiStore, map[string]types.StoreKey) {
	t.Helper()
	cfg := compat.DefaultConfig()
	cfg.Enable = true
	cfg.SnapshotInterval = 1000
	cfg.SnapshotKeepRecent = 10
	ms, err := compat.NewMultiStore(dir, log.NewNopLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]types.StoreKey{}
	for _, n := range []string{"auth", "bank", "gov"} {
		keys[n] = types.NewKVStoreKey(n)
		ms.MountStoreWithDB(keys[n], types.StoreTypeIAVL, nil)
	}
	if ver == 0 {
		err = ms.LoadLatestVersion()
	} else {
		err = ms.LoadVersion(ver)
	}
	if err != nil {
		t.Fatalf("load %d: %v", ver, err)
	}
	return ms, keys
}

// oldFmtQueries runs proofs queries of every key of every store at each height.
func oldFmtQueries(t *testing.T, ms *compat.MultiStore, lo, hi int64) string {
	t.Helper()
	var out bytes.Buffer
	db := ms.DB()
	for h := lo; h <= hi; h++ {
		view, err := db.ViewAt(h)
		if err != nil {
			t.Fatalf("ViewAt %d: %v", h, err)
		}
		for _, store := range view.StoreNames() {
			it := view.Tree(store).Iterator(nil, nil, true)
			keys := [][]byte{[]byte("zzz-absent"), {0}}
			for ; it.Valid(); it.Next() {
				keys = append(keys, bytes.Clone(it.Key()))
			}
			it.Close()
			for _, k := range keys {
				res, err := ms.Query(&types.RequestQuery{Path: "/" + store + "/key", Data: k, Height: h, Prove: true})
				if err != nil {
					fmt.Fprintf(&out, "%d %s %x: error %v\n", h, store, k, err)
					continue
				}
				ops, _ := res.ProofOps.Marshal()
				fmt.Fprintf(&out, "%d %s %x: %d %x %x %s\n", h, store, k, res.Code, res.Value, ops, res.Log)
				if res.Code == 0 && res.ProofOps != nil && res.Value != nil && len(res.Value) > 0 {
					if err := verifyProof(store, res, view.CommitInfo().Hash()); err != nil {
						t.Errorf("height %d store %s key %x: proof: %v", h, store, k, err)
					}
				}
			}
		}
		view.Release()
	}
	return out.String()
}

func oldFmtStream(t *testing.T, ms *compat.MultiStore, h uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := protoio.NewDelimitedWriter(&buf)
	if err := ms.Snapshot(h, w); err != nil {
		t.Fatalf("snapshot %d: %v", h, err)
	}
	return buf.Bytes()
}

func TestOldFormatsCompat(t *testing.T) {
	rec := oldFmtRecorded(t)
	results := map[bool][]string{}
	for _, old := range []bool{false, true} {
		dir := oldFmtFixtureCopy(t, old)
		ms, _ := oldFmtLoad(t, dir, 0)
		if id := ms.LastCommitID(); id.Version != 12 || !bytes.Equal(id.Hash, rec[12]) {
			t.Fatalf("old=%v: loaded %d %X", old, id.Version, id.Hash)
		}
		q := oldFmtQueries(t, ms, 5, 12)
		var streams []string
		for _, h := range []uint64{12, 10, 7, 5} {
			s := oldFmtStream(t, ms, h)
			streams = append(streams, hex.EncodeToString(s))
			rdir := filepath.Join(t.TempDir(), "restored")
			if _, err := compat.RestoreDB(rdir, h, 3, protoio.NewDelimitedReader(bytes.NewReader(s), 64<<20), multitree.Options{}); err != nil {
				t.Fatalf("old=%v: restore %d: %v", old, h, err)
			}
			db, err := multitree.Open(rdir, multitree.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(db.LastCommitInfo().Hash(), rec[int64(h)]) {
				t.Errorf("old=%v: restored %d: %X", old, h, db.LastCommitInfo().Hash())
			}
			db.Close()
		}
		if err := ms.RewriteSnapshot(context.Background()); err != nil {
			t.Fatalf("old=%v: rewrite: %v", old, err)
		}
		q2 := oldFmtQueries(t, ms, 5, 12)
		if q2 != q {
			t.Errorf("old=%v: queries differ after the rewrite", old)
		}
		if err := ms.Close(); err != nil {
			t.Fatal(err)
		}
		// older load and rollback
		ms, _ = oldFmtLoad(t, dir, 9)
		if id := ms.LastCommitID(); id.Version != 9 || !bytes.Equal(id.Hash, rec[9]) {
			t.Errorf("old=%v: LoadVersion(9) %d %X", old, id.Version, id.Hash)
		}
		ms.Close()
		ms, _ = oldFmtLoad(t, dir, 0)
		if err := ms.RollbackToVersion(11); err != nil {
			t.Fatalf("old=%v: rollback: %v", old, err)
		}
		ms.Close()
		ms, _ = oldFmtLoad(t, dir, 0)
		if id := ms.LastCommitID(); id.Version != 11 || !bytes.Equal(id.Hash, rec[11]) {
			t.Errorf("old=%v: after rollback %d %X", old, id.Version, id.Hash)
		}
		ms.Close()
		results[old] = append([]string{q}, streams...)
	}
	for i := range results[false] {
		if results[false][i] != results[true][i] {
			t.Errorf("result %d differs between snapshot formats", i)
		}
	}
}
