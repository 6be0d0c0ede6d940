package multitree_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	storetypes "cosmossdk.io/store/types"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
	"github.com/seed-6dfbb450/memiavl/wal"
)

var updateFixture = flag.Bool("update", false, "rewrite the database fixture under ../testdata")

// The database fixture: a directory in format version 1 of every file
// (multitree/format.go, snapshot, wal), kept as written so that every later
// build must open it, serve its versions with the same app hashes and go on
// committing on it (old formats stay readable).
const (
	fixtureDir    = "../testdata/multitree-v1"
	fixtureHashes = "../testdata/multitree-v1.apphashes"
	// fixtureLatest is the fixture's latest version; fixtureOldest its
	// oldest kept snapshot, the oldest version it can serve
	fixtureLatest = 12
	fixtureOldest = 5
)

// fixtureUpgrade is the store upgrade at version 8: acc renamed to auth,
// staking deleted, gov added.
var fixtureUpgrade = &storetypes.StoreUpgrades{
	Added:   []string{"gov"},
	Renamed: []storetypes.StoreRename{{OldKey: "acc", NewKey: "auth"}},
	Deleted: []string{"staking"},
}

// fixtureStores returns the stores mounted at version v.
func fixtureStores(v int64) []string {
	if v < 8 {
		return []string{"acc", "bank", "staking"}
	}
	return []string{"auth", "bank", "gov"}
}

// fixtureBlock returns the deterministic changes of version v: a few sets
// and deletes per store, keys of every length up to 40 bytes, empty values
// among them.
func fixtureBlock(v int64) []wal.ChangeSet {
	r := rand.New(rand.NewSource(v))
	var css []wal.ChangeSet
	for _, name := range fixtureStores(v) {
		cs := wal.ChangeSet{Name: name}
		for i := 0; i < 6+r.Intn(6); i++ {
			k := make([]byte, 1+r.Intn(40))
			k[0] = byte('a' + r.Intn(4)) // collide often, so that deletes hit
			r.Read(k[1:])
			if r.Intn(4) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k[:1]})
				continue
			}
			val := make([]byte, r.Intn(24))
			r.Read(val)
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: val})
		}
		css = append(css, cs)
	}
	return css
}

// fixtureOracle commits versions 1..upTo of the fixture's workload to
// rootmulti over cosmos/iavl and returns it and the app hashes.
func fixtureOracle(t *testing.T, upTo int64) (*oracle, map[int64][]byte) {
	t.Helper()
	o := newOracle(t, fixtureStores(1))
	hashes := map[int64][]byte{}
	for v := int64(1); v <= upTo; v++ {
		if v == 8 {
			o.load(t, fixtureStores(v), fixtureUpgrade)
		}
		for _, cs := range fixtureBlock(v) {
			s := o.store(cs.Name)
			for _, p := range cs.Pairs {
				if p.Delete {
					s.Delete(p.Key)
				} else {
					s.Set(p.Key, p.Value)
				}
			}
		}
		hashes[v] = o.rs.Commit().Hash
	}
	return o, hashes
}

// fixtureCommit applies version v of the fixture's workload to db and
// commits it.
func fixtureCommit(t *testing.T, db *multitree.DB, v int64) []byte {
	t.Helper()
	if v == 8 {
		u := wal.Upgrades{Added: fixtureUpgrade.Added, Deleted: fixtureUpgrade.Deleted}
		for _, r := range fixtureUpgrade.Renamed {
			u.Renamed = append(u.Renamed, wal.RenamedStore{OldName: r.OldKey, NewName: r.NewKey})
		}
		if err := db.ApplyUpgrades(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.ApplyChangeSets(fixtureBlock(v)); err != nil {
		t.Fatal(err)
	}
	info, err := db.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != v {
		t.Fatalf("committed version %d, want %d", info.Version, v)
	}
	return info.Hash()
}

// writeFixture writes the fixture: versions 1..12, snapshots written at 5
// and 10 (both kept), the log from 6 on in small segments.
func writeFixture(t *testing.T, want map[int64][]byte) {
	if err := os.RemoveAll(fixtureDir); err != nil {
		t.Fatal(err)
	}
	db, err := multitree.Open(fixtureDir, multitree.Options{CreateIfMissing: true,
		InitialStores: fixtureStores(1), SnapshotInterval: -1, SnapshotKeepRecent: 1,
		WALSegmentSize: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= fixtureLatest; v++ {
		if got := fixtureCommit(t, db, v); !bytes.Equal(got, want[v]) {
			t.Fatalf("version %d: app hash %X, rootmulti %X", v, got, want[v])
		}
		if v == 5 || v == 10 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(fixtureDir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# app hashes of the database fixture multitree-v1, as rootmulti over cosmos/iavl computes them\n")
	for v := int64(1); v <= fixtureLatest; v++ {
		fmt.Fprintf(&b, "%d %x\n", v, want[v])
	}
	if err := os.WriteFile(fixtureHashes, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readFixtureHashes reads the recorded app hashes.
func readFixtureHashes(t *testing.T) map[int64][]byte {
	t.Helper()
	b, err := os.ReadFile(fixtureHashes)
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64][]byte{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		v, err1 := strconv.ParseInt(f[0], 10, 64)
		h, err2 := hex.DecodeString(f[1])
		if len(f) != 2 || err1 != nil || err2 != nil {
			t.Fatalf("%s: bad line %q", fixtureHashes, line)
		}
		hashes[v] = h
	}
	return hashes
}

// TestFormatFixture opens the database fixture, which an earlier build
// wrote: every version it keeps must have the app hash recorded beside it,
// which must be rootmulti's over cosmos/iavl for the same workload; its
// latest contents must equal rootmulti's; Verify must pass; and a writer
// must go on committing on it (and through a snapshot rewrite) with
// rootmulti's hashes. Run with -update to rewrite the fixture (only for a
// new format: the point of it is that it does not change).
func TestFormatFixture(t *testing.T) {
	const more = 4 // versions committed on top of the fixture
	o, want := fixtureOracle(t, fixtureLatest+more)
	if *updateFixture {
		writeFixture(t, want)
	}
	recorded := readFixtureHashes(t)
	if len(recorded) != fixtureLatest {
		t.Fatalf("%s holds %d versions, want %d", fixtureHashes, len(recorded), fixtureLatest)
	}
	for v := int64(1); v <= fixtureLatest; v++ {
		if !bytes.Equal(recorded[v], want[v]) {
			t.Fatalf("recorded app hash of version %d %X, rootmulti computes %X", v, recorded[v], want[v])
		}
	}

	dir := filepath.Join(t.TempDir(), "db")
	testutil.CopyDir(t, fixtureDir, dir)
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if v, err := multitree.LatestVersion(dir); err != nil || v != fixtureLatest {
		t.Fatalf("LatestVersion %d (%v), want %d", v, err, fixtureLatest)
	}
	for v := int64(fixtureOldest); v <= fixtureLatest; v++ {
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v})
		if err != nil {
			t.Fatalf("read-only open at %d: %v", v, err)
		}
		got := db.LastCommitInfo().Hash()
		names := db.StoreNames()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[v]) {
			t.Fatalf("version %d: app hash %X, want %X", v, got, want[v])
		}
		if fmt.Sprint(names) != fmt.Sprint(fixtureStores(v)) {
			t.Fatalf("version %d: stores %v, want %v", v, names, fixtureStores(v))
		}
	}

	// a writer goes on from the latest version, through a rewrite
	db, err := multitree.Open(dir, multitree.Options{SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Version() != fixtureLatest || db.SnapshotVersion() != 10 {
		t.Fatalf("writer opened at %d from snapshot %d", db.Version(), db.SnapshotVersion())
	}
	for v := int64(fixtureLatest + 1); v <= fixtureLatest+more; v++ {
		if got := fixtureCommit(t, db, v); !bytes.Equal(got, want[v]) {
			t.Fatalf("version %d committed on the fixture: app hash %X, rootmulti %X", v, got, want[v])
		}
		if v == fixtureLatest+2 {
			if err := db.RewriteSnapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	for _, name := range fixtureStores(fixtureLatest) {
		var ours, theirs [][2][]byte
		mine := view.Tree(name).Iterator(nil, nil, true)
		for ; mine.Valid(); mine.Next() {
			ours = append(ours, [2][]byte{bytes.Clone(mine.Key()), bytes.Clone(mine.Value())})
		}
		if err := mine.Close(); err != nil {
			t.Fatal(err)
		}
		it := o.store(name).Iterator(nil, nil)
		for ; it.Valid(); it.Next() {
			theirs = append(theirs, [2][]byte{it.Key(), it.Value()})
		}
		it.Close()
		if fmt.Sprintf("%x", ours) != fmt.Sprintf("%x", theirs) {
			t.Fatalf("store %s: %d pairs, rootmulti %d, or they differ", name, len(ours), len(theirs))
		}
	}
}

// TestFormatFixtureLogV1: the fixture's log is in the log's segment format
// version 1 (a rewrite of the fixture by this build would lose that), and a
// writer's commits on it, which go to segments of the current format,
// leave a log that verifies and reopens at every version.
func TestFormatFixtureLogV1(t *testing.T) {
	segs, err := filepath.Glob(filepath.Join(fixtureDir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("fixture log segments: %v %v", segs, err)
	}
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 6 || b[4] != 1 || b[5] != 0 {
			t.Fatalf("%s is not in segment format version 1 (header % x)", s, b[:min(len(b), 8)])
		}
	}
	const more = 3
	_, want := fixtureOracle(t, fixtureLatest+more)
	dir := filepath.Join(t.TempDir(), "db")
	testutil.CopyDir(t, fixtureDir, dir)
	for i, o := range []multitree.Options{{SnapshotInterval: -1}, {SnapshotInterval: -1, Sync: wal.SyncGrouped}, {SnapshotInterval: -1}} {
		db, err := multitree.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		v := int64(fixtureLatest + 1 + i)
		if got := fixtureCommit(t, db, v); !bytes.Equal(got, want[v]) {
			t.Fatalf("version %d committed on the fixture: app hash %X, rootmulti %X", v, got, want[v])
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := multitree.Verify(dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
	for v := int64(fixtureOldest); v <= fixtureLatest+more; v++ {
		db, err := multitree.Open(dir, multitree.Options{ReadOnly: true, TargetVersion: v})
		if err != nil {
			t.Fatalf("read-only open at %d: %v", v, err)
		}
		got := db.LastCommitInfo().Hash()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[v]) {
			t.Fatalf("version %d: app hash %X, want %X", v, got, want[v])
		}
	}
}
