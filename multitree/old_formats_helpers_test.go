package multitree_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/multitree"
)

// oldFmtFixture copies the fixture and converts its snapshots to format 1:
// a directory every file of which is in its oldest format.
func oldFmtFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	testutil.CopyDir(t, fixtureDir, dir)
	testutil.SnapshotsToFormat1(t, dir)
	return dir
}

// oldFmtContents returns every store's pairs of a view, as a string.
func oldFmtViewContents(t *testing.T, v *multitree.View) string {
	t.Helper()
	var b bytes.Buffer
	names := v.StoreNames()
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "[%s]", n)
		it := v.Tree(n).Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			fmt.Fprintf(&b, " %x=%x", it.Key(), it.Value())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		// point reads too: the lookup table or its absence
		it = v.Tree(n).Iterator(nil, nil, true)
		for ; it.Valid(); it.Next() {
			got, err := v.Get(n, it.Key())
			if err != nil || !bytes.Equal(got, it.Value()) {
				t.Fatalf("store %s key %x: Get %x %v, iterator %x", n, it.Key(), got, err, it.Value())
			}
		}
		it.Close()
	}
	return b.String()
}

func oldFmtHex(b []byte) string { return hex.EncodeToString(b) }
