package benchmarks

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	refmemiavl "github.com/crypto-org-chain/cronos/memiavl"

	"github.com/seed-6dfbb450/memiavl/compat"
	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// The main module's tests import testdata/refmemiavl-v0.1.0, a directory
// written by the reference memiavl v0.1.0 (which only this module
// depends on): a snapshot at version 6 of two stores, then log entries up
// to version 14 that add a store (at 10) and delete one (at 13).
// testdata/refmemiavl-v0.1.0.apphash records the version and app hash the
// reference reports for it.
const (
	refFixtureDir  = "../testdata/refmemiavl-v0.1.0"
	refFixtureHash = "../testdata/refmemiavl-v0.1.0.apphash"
)

// TestWriteRefFixture writes the fixture again; only with
// MEMIAVL_WRITE_REF_FIXTURE=1.
func TestWriteRefFixture(t *testing.T) {
	if os.Getenv("MEMIAVL_WRITE_REF_FIXTURE") != "1" {
		t.Skip("set MEMIAVL_WRITE_REF_FIXTURE=1 to write " + refFixtureDir)
	}
	if err := os.RemoveAll(refFixtureDir); err != nil {
		t.Fatal(err)
	}
	m := &migRef{t: t, r: rand.New(rand.NewSource(20261204)), dir: refFixtureDir,
		stores: []string{"bank", "staking"}, keys: map[string][][]byte{}}
	db, err := refmemiavl.Load(m.dir, refmemiavl.Options{
		CreateIfMissing: true, InitialStores: m.stores,
		SnapshotInterval: 1000, SnapshotKeepRecent: 1, AsyncCommitBuffer: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.db = db
	for v := 1; v <= 14; v++ {
		switch v {
		case 10:
			m.upgrade(&refmemiavl.TreeNameUpgrade{Name: "gov"})
		case 13:
			m.upgrade(&refmemiavl.TreeNameUpgrade{Name: "staking", Delete: true})
		}
		m.block(12)
		if v == 6 {
			if err := m.db.RewriteSnapshot(); err != nil {
				t.Fatal(err)
			}
			if err := m.db.Reload(); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, h := m.closeRef()
	if got := migCurrentVersion(t, refFixtureDir); got != 6 {
		t.Fatalf("the reference's snapshot is at version %d, want 6", got)
	}
	rec := fmt.Sprintf("version %d\napphash %x\n", v, h)
	if err := os.WriteFile(refFixtureHash, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %s", refFixtureDir, rec)
}

// TestRefFixture: the reference opens (a copy of) the fixture at the
// recorded version and app hash, and ImportMemIAVL lands on the same.
func TestRefFixture(t *testing.T) {
	v, h := testutil.ReadAppHashRecord(t, refFixtureHash)
	cp := filepath.Join(t.TempDir(), "ref")
	testutil.CopyDir(t, refFixtureDir, cp)
	db, err := refmemiavl.Load(cp, refmemiavl.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	gotV, gotH := db.Version(), migAppHash(db.LastCommitInfo())
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if gotV != v || !bytes.Equal(gotH, h) {
		t.Fatalf("the reference opens the fixture at version %d app hash %X, recorded %d %X", gotV, gotH, v, h)
	}
	dir := filepath.Join(t.TempDir(), "ours")
	if err := compat.ImportMemIAVL(refFixtureDir, dir, multitree.Options{}); err != nil {
		t.Fatal(err)
	}
	ours, err := multitree.Open(dir, multitree.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	if ours.Version() != v || !bytes.Equal(ours.LastCommitInfo().Hash(), h) {
		t.Fatalf("imported at version %d app hash %X, recorded %d %X", ours.Version(), ours.LastCommitInfo().Hash(), v, h)
	}
}
