package multitree

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/wal"
)

// fuzzReplayTemplate makes a database of stores a, b and c at version 2
// whose versions are all in the log (no snapshot but snapshot 0).
func fuzzReplayTemplate(tb testing.TB, dir string) {
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: []string{"a", "b", "c"}, SnapshotInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	for v := 1; v <= 2; v++ {
		for _, s := range []string{"a", "b", "c"} {
			for i := 0; i < 5; i++ {
				if err := db.Set(s, []byte{byte('k'), byte(i), byte(v)}, []byte{byte(v)}); err != nil {
					tb.Fatal(err)
				}
			}
		}
		if _, err := db.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
}

// FuzzReplayEntry logs an arbitrary entry (checksummed, so only its
// content is hostile) as version 3 of a database and reopens it. The
// writer's open must not panic; it fails, or the database it opens must
// be the one that applying the same upgrades and change sets through
// ApplyUpgrades, ApplyChangeSets and Commit gives (which refuses what the
// writer would never log), and must verify. Read-only opens agree with it.
func FuzzReplayEntry(f *testing.F) {
	add := func(e wal.Entry) {
		b, err := wal.AppendEntry(nil, e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	kv := func(k, v string) wal.KVPair { return wal.KVPair{Key: []byte(k), Value: []byte(v)} }
	del := func(k string) wal.KVPair { return wal.KVPair{Key: []byte(k), Delete: true} }
	add(wal.Entry{Version: 3, ChangeSets: []wal.ChangeSet{{Name: "a", Pairs: []wal.KVPair{kv("x", "1"), del("x"), kv("", "")}}}})
	add(wal.Entry{Version: 3, ChangeSets: []wal.ChangeSet{{Name: "z", Pairs: []wal.KVPair{kv("x", "1")}}}})
	add(wal.Entry{Version: 3, Upgrades: wal.Upgrades{Added: []string{"d"}, Renamed: []wal.RenamedStore{{OldName: "a", NewName: "e"}}, Deleted: []string{"b"}},
		ChangeSets: []wal.ChangeSet{{Name: "e", Pairs: []wal.KVPair{kv("y", "2")}}, {Name: "d", Pairs: []wal.KVPair{del("q")}}}})
	add(wal.Entry{Version: 3, Upgrades: wal.Upgrades{Added: []string{""}}})
	add(wal.Entry{Version: 3, Upgrades: wal.Upgrades{Deleted: []string{"a", "b", "c"}}})
	add(wal.Entry{Version: 3, Upgrades: wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "b"}}}})
	add(wal.Entry{Version: 3, Upgrades: wal.Upgrades{Renamed: []wal.RenamedStore{{OldName: "a", NewName: "x"}, {OldName: "x", NewName: "y"}}}})
	add(wal.Entry{Version: 3, Upgrades: wal.Upgrades{Deleted: []string{"a"}, Added: []string{"a"}}})
	add(wal.Entry{Version: 3, ChangeSets: []wal.ChangeSet{{Name: "a"}, {Name: "a", Pairs: []wal.KVPair{kv("k", "")}}}})
	template := filepath.Join(f.TempDir(), "template")
	fuzzReplayTemplate(f, template)
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := wal.DecodeEntry(body)
		if err != nil {
			return
		}
		e.Version = 3
		live := filepath.Join(t.TempDir(), "live")
		testutil.CopyDir(t, template, live)
		replayed := filepath.Join(t.TempDir(), "replayed")
		testutil.CopyDir(t, template, replayed)

		// the reference: the same version through the writer's API
		var want []byte
		db, err := Open(live, Options{SnapshotInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		err = db.ApplyUpgrades(e.Upgrades)
		if err == nil {
			var css []wal.ChangeSet
			for _, cs := range e.ChangeSets {
				c := wal.ChangeSet{Name: cs.Name}
				for _, p := range cs.Pairs {
					c.Pairs = append(c.Pairs, wal.KVPair{Key: bytes.Clone(p.Key), Value: bytes.Clone(p.Value), Delete: p.Delete})
				}
				css = append(css, c)
			}
			err = db.ApplyChangeSets(css)
		}
		if err == nil {
			var ci interface{ Hash() []byte }
			ci, err = db.Commit()
			if err == nil {
				want = ci.Hash()
			}
		}
		_ = db.Close()

		l, err := wal.Open(filepath.Join(replayed, walDirName), wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(e); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		ro, roErr := Open(replayed, Options{ReadOnly: true})
		var roHash []byte
		if roErr == nil {
			roHash = ro.LastCommitInfo().Hash()
			_ = ro.Close()
		}
		db, err = Open(replayed, Options{SnapshotInterval: -1})
		if err != nil {
			if roErr == nil {
				t.Fatalf("the writer's open fails (%v), a read-only open succeeds", err)
			}
			return
		}
		got := db.LastCommitInfo().Hash()
		version := db.Version()
		_ = db.Close()
		if roErr != nil {
			t.Fatalf("the writer's open succeeds, a read-only open fails: %v", roErr)
		}
		if want == nil {
			t.Fatalf("replay accepted version 3 (%+v), which the writer's API refuses", e)
		}
		if version != 3 || !bytes.Equal(got, want) || !bytes.Equal(roHash, want) {
			t.Fatalf("replayed version %d app hash %x (read-only %x), the writer's %x", version, got, roHash, want)
		}
		if _, err := Verify(replayed); err != nil {
			t.Fatalf("the replayed database does not verify: %v", err)
		}
	})
}
