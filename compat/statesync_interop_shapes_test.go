package compat_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	snapshottypes "cosmossdk.io/store/snapshots/types"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"
	protoio "github.com/cosmos/gogoproto/io"
)

func ssShapeStream(t *testing.T, s snapshottypes.Snapshotter, h uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Snapshot(h, protoio.NewDelimitedWriter(&buf)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestStateSyncInteropShapes: many stores, empty ones, single-key ones, ~1 MiB
// values, a store added by an upgrade; byte-identical streams both ways,
// restore both ways, then commits and a reopen with equal hashes.
func TestStateSyncInteropShapes(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var names []string
	for i := 0; i < 24; i++ {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	m := mount{iavl: names, transient: "t", memory: "m"}
	p := newPair(t, m)
	big := make([]byte, 1<<20)
	r.Read(big)
	for b := 0; b < 5; b++ {
		w := map[string][][2][]byte{}
		for i, n := range names {
			switch {
			case i%6 == 0: // empty
			case i%6 == 1: // single key, rewritten
				w[n] = [][2][]byte{{[]byte("only"), fmt.Appendf(nil, "v%d", b)}}
			case i%6 == 2: // large values
				if b < 2 {
					w[n] = [][2][]byte{{fmt.Appendf(nil, "big%d", b), big}, {[]byte("e"), {}}}
				}
			default:
				for j := 0; j < 30; j++ {
					w[n] = append(w[n], [2][]byte{fmt.Appendf(nil, "k%03d", r.Intn(300)), fmt.Appendf(nil, "v%d", r.Int())})
				}
			}
		}
		p.commit(w)
	}
	// deletes so that single-key stores become empty at some point
	p.ours.GetKVStore(p.keys["s07"]).Delete([]byte("only"))
	p.oracle.GetKVStore(p.keys["s07"]).Delete([]byte("only"))
	p.commit(nil)
	h := uint64(p.ours.LastCommitID().Version)
	want := p.ours.LastCommitID()
	a, b := ssShapeStream(t, p.ours, h), ssShapeStream(t, p.oracle, h)
	if !bytes.Equal(a, b) {
		t.Fatalf("streams differ: %d vs %d bytes", len(a), len(b))
	}
	// ours -> rootmulti, rootmulti -> ours
	keys := keyring{}
	rs := newOracle(t, dbm.NewMemDB(), keys, m, nil)
	if _, err := rs.Restore(h, snapshottypes.CurrentFormat, ssReader(a)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	ms := newOurs(t, dir, testConfig(), keys, m, nil)
	defer func() { ms.Close() }()
	if _, err := ms.Restore(h, snapshottypes.CurrentFormat, ssReader(b)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []storetypes.CommitID{rs.LastCommitID(), ms.LastCommitID()} {
		if c.Version != want.Version || !bytes.Equal(c.Hash, want.Hash) {
			t.Fatalf("restored %v, want %v", c, want)
		}
	}
	// restore streams of the restored stores equal
	if x, y := ssShapeStream(t, ms, h), ssShapeStream(t, rs, h); !bytes.Equal(x, y) || !bytes.Equal(x, a) {
		t.Fatalf("streams of the restored stores differ")
	}
	for i := 0; i < 3; i++ {
		for j, n := range names {
			if (i+j)%3 == 0 {
				k := fmt.Appendf(nil, "n%d", r.Intn(50))
				ms.GetKVStore(keys[n]).Set(k, big[:1000+i])
				rs.GetKVStore(keys[n]).Set(k, big[:1000+i])
			}
			if j%6 == 2 && i == 1 {
				ms.GetKVStore(keys[n]).Delete([]byte("big0"))
				rs.GetKVStore(keys[n]).Delete([]byte("big0"))
			}
		}
		x, y := ms.Commit(), rs.Commit()
		if x.Version != y.Version || !bytes.Equal(x.Hash, y.Hash) {
			t.Fatalf("after restore commit %d: %v, rootmulti %v", i, x, y)
		}
	}
	want = rs.LastCommitID()
	ms.Close()
	ms = newOurs(t, dir, testConfig(), keys, m, nil)
	if c := ms.LastCommitID(); c.Version != want.Version || !bytes.Equal(c.Hash, want.Hash) {
		t.Fatalf("reopened %v, want %v", c, want)
	}
}
