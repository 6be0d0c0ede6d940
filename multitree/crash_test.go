package multitree

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
	"github.com/seed-6dfbb450/memiavl/memiavl"
	"github.com/seed-6dfbb450/memiavl/wal"
)

var crashStores = []string{"bank", "staking", "acc"}

// crashBlock returns the deterministic changes of version v.
func crashBlock(seed, v int64) []wal.ChangeSet {
	r := rand.New(rand.NewSource(seed*1_000_003 + v))
	var css []wal.ChangeSet
	for _, name := range crashStores {
		cs := wal.ChangeSet{Name: name}
		n := 20 + r.Intn(60)
		for i := 0; i < n; i++ {
			k := make([]byte, 8)
			binary.BigEndian.PutUint64(k, uint64(r.Intn(3000)))
			if r.Intn(5) == 0 {
				cs.Pairs = append(cs.Pairs, wal.KVPair{Delete: true, Key: k})
				continue
			}
			val := make([]byte, 50+r.Intn(300))
			r.Read(val)
			cs.Pairs = append(cs.Pairs, wal.KVPair{Key: k, Value: val})
		}
		ver := make([]byte, 8)
		binary.BigEndian.PutUint64(ver, uint64(v))
		cs.Pairs = append(cs.Pairs, wal.KVPair{Key: []byte("version"), Value: ver})
		css = append(css, cs)
	}
	return css
}

// TestCrashChild is the process that the crash test kills. It commits
// forever and prints each acknowledged version.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("MEMIAVL_CRASH_DIR")
	if dir == "" {
		t.Skip("only run as the crash test's child process")
	}
	seed, _ := strconv.ParseInt(os.Getenv("MEMIAVL_CRASH_SEED"), 10, 64)
	db, err := Open(dir, Options{CreateIfMissing: true, InitialStores: crashStores, SnapshotInterval: 7, SnapshotKeepRecent: 1})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	if os.Getenv("MEMIAVL_CRASH_DELAY") == "1" {
		// every other child holds each rewrite back for a few commits,
		// so that kills also land in catch-up rebases
		DelayRewrites(db, 2)
	}
	for {
		commitAcked(db, seed)
	}
}

// commitAcked commits crashBlock's block of the working version, as a crash
// test's child: it prints "acked <version> <app hash>" once committed, or
// calls childFail.
func commitAcked(db *DB, seed int64) {
	if err := db.ApplyChangeSets(crashBlock(seed, db.WorkingVersion())); err != nil {
		childFail(db, err)
	}
	info, err := db.Commit()
	if err != nil {
		childFail(db, err)
	}
	fmt.Printf("acked %d %X\n", info.Version, info.Hash())
}

// childFail ends a crash test's child on an error of the database: it
// prints "error ..." and exits 2.
var childFail = func(db *DB, err error) {
	fmt.Println("error", err)
	os.Exit(2)
}

func TestCrashRecovery(t *testing.T) {
	if os.Getenv("MEMIAVL_CRASH_DIR") != "" {
		t.Skip("child")
	}
	r := testutil.Rand(t)
	seed := r.Int63()
	dir := t.TempDir()
	rounds := 50
	if testing.Short() && !*fullRun {
		rounds = 5
	}
	// reference trees, advanced to the version each reopen lands on
	ref := newCrashRef(seed)
	lastAcked := int64(0)
	for round := 0; round < rounds; round++ {
		acked := killChild(t, r, "TestCrashChild", "MEMIAVL_CRASH_DIR="+dir, fmt.Sprintf("MEMIAVL_CRASH_SEED=%d", seed),
			fmt.Sprintf("MEMIAVL_CRASH_DELAY=%d", round%2))
		lastAcked = max(lastAcked, acked)

		db, err := Open(dir, Options{})
		if errors.Is(err, ErrNotFound) && lastAcked == 0 {
			continue // killed before the database was created
		}
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		v := checkRecovered(t, db, lastAcked, ref)
		closeVerified(t, db, dir)
		lastAcked = v
	}
	t.Logf("%d kills, final version %d", rounds, ref.version)
}

// killChild runs the test function child of this binary as a child
// process with env added to the environment, kills it with SIGKILL after
// 50 to 550 ms, and returns the last version it printed as acknowledged
// ("acked <version> <hash>"), 0 if none. A line "error ..." from the child
// fails the test.
func killChild(t *testing.T, r *rand.Rand, child string, env ...string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := make(chan int64, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "acked" {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				acked <- v
			} else if len(f) > 0 && f[0] == "error" {
				t.Errorf("child (%q): %s", env, sc.Text())
			}
		}
		close(acked)
	}()
	time.Sleep(time.Duration(50+r.Intn(500)) * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	last := int64(0)
	for v := range acked {
		last = max(last, v)
	}
	if t.Failed() {
		t.FailNow()
	}
	return last
}

// closeVerified closes a database reopened after a crash and checks with
// Verify that what the writer's open left is whole: every snapshot, and a
// log that reaches back to the oldest one.
func closeVerified(t *testing.T, db *DB, dir string) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("verify after the reopen: %v", err)
	}
}

// crashRef is a crash test's reference: the trees of the blocks up to
// version, built in memory.
type crashRef struct {
	trees   map[string]*memiavl.Tree
	version int64
	// entry returns what version v logs, given the stores before it.
	entry func(v int64, stores []string) wal.Entry
	// past, if not nil, holds copies of the trees at the last versions,
	// for rollback.
	past map[int64]map[string]*memiavl.Tree
}

// newCrashRef returns the reference of the blocks of crashBlock(seed, ...).
func newCrashRef(seed int64) *crashRef {
	ref := &crashRef{entry: func(v int64, _ []string) wal.Entry {
		return wal.Entry{Version: v, ChangeSets: crashBlock(seed, v)}
	}}
	ref.reset(crashStores)
	return ref
}

// appHash returns the app hash of the reference trees at version v.
func (ref *crashRef) appHash(t *testing.T, v int64) []byte {
	t.Helper()
	info, err := commitInfo(ref.trees, v)
	if err != nil {
		t.Fatal(err)
	}
	return info.Hash()
}

// reset empties the reference, back to the given stores at version 0.
func (ref *crashRef) reset(stores []string) {
	ref.trees, ref.version = map[string]*memiavl.Tree{}, 0
	for _, name := range stores {
		ref.trees[name], _ = memiavl.New(memiavl.Options{})
	}
}

// stores returns the reference's store names, sorted.
func (ref *crashRef) stores() []string {
	names := make([]string, 0, len(ref.trees))
	for name := range ref.trees {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// advance applies the blocks after the reference's version up to v.
func (ref *crashRef) advance(t *testing.T, v int64) {
	t.Helper()
	for ; ref.version < v; ref.version++ {
		if err := applyEntry(ref.trees, ref.entry(ref.version+1, ref.stores()), true); err != nil {
			t.Fatal(err)
		}
		if ref.past != nil {
			ref.past[ref.version+1] = copyTrees(ref.trees)
			delete(ref.past, ref.version+1-crashPastVersions)
		}
	}
}

// crashPastVersions is how many versions back a crashRef keeps copies of
// its trees, when it keeps them.
const crashPastVersions = 64

// rollback takes the reference back to version v: to the copies kept at v,
// or rebuilt from the first block.
func (ref *crashRef) rollback(t *testing.T, v int64) {
	t.Helper()
	if trees, ok := ref.past[v]; ok {
		ref.trees, ref.version = copyTrees(trees), v
		return
	}
	ref.reset(crashStores)
	ref.advance(t, v)
}

func copyTrees(trees map[string]*memiavl.Tree) map[string]*memiavl.Tree {
	c := make(map[string]*memiavl.Tree, len(trees))
	for name, tr := range trees {
		c[name] = tr.Copy()
	}
	return c
}

// checkRecovered checks a database reopened after a crash or failure of a
// process that committed ref's blocks: it is at least at minVersion and at
// the reference's version, and its stores, app hash and contents are those
// of the blocks up to its version, which ref is advanced to. It returns the
// database's version.
func checkRecovered(t *testing.T, db *DB, minVersion int64, ref *crashRef) int64 {
	t.Helper()
	v := db.Version()
	if v < minVersion {
		t.Fatalf("reopened at %d, but %d was acknowledged", v, minVersion)
	}
	if v < ref.version {
		t.Fatalf("reopened at %d, before %d found earlier", v, ref.version)
	}
	ref.advance(t, v)
	if got, want := db.StoreNames(), ref.stores(); !slices.Equal(got, want) {
		t.Fatalf("version %d: stores %q, want %q", v, got, want)
	}
	want := ref.appHash(t, v)
	if got := db.LastCommitInfo().Hash(); !bytes.Equal(got, want) {
		t.Fatalf("version %d app hash %X, want %X", v, got, want)
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	for _, name := range ref.stores() {
		a := ref.trees[name].Iterator(nil, nil, true)
		b := view.Tree(name).Iterator(nil, nil, true)
		for ; a.Valid(); a.Next() {
			if !b.Valid() || !bytes.Equal(a.Key(), b.Key()) || !bytes.Equal(a.Value(), b.Value()) {
				t.Fatalf("version %d: store %s differs at %X", v, name, a.Key())
			}
			b.Next()
		}
		if b.Valid() {
			t.Fatalf("version %d: store %s has extra keys", v, name)
		}
		if err := view.Tree(name).Check(); err != nil {
			t.Fatal(err)
		}
	}
	return v
}
