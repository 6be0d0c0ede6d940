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
		v := db.WorkingVersion()
		if err := db.ApplyChangeSets(crashBlock(seed, v)); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		info, err := db.Commit()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Printf("acked %d %X\n", info.Version, info.Hash())
	}
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
	ref := newCrashRef()
	refVersion := int64(0)
	lastAcked := int64(0)
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), "MEMIAVL_CRASH_DIR="+dir, fmt.Sprintf("MEMIAVL_CRASH_SEED=%d", seed),
			fmt.Sprintf("MEMIAVL_CRASH_DELAY=%d", round%2))
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
					t.Errorf("child: %s", sc.Text())
				}
			}
			close(acked)
		}()
		time.Sleep(time.Duration(50+r.Intn(500)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		for v := range acked {
			lastAcked = max(lastAcked, v)
		}
		if t.Failed() {
			t.FailNow()
		}

		db, err := Open(dir, Options{})
		if errors.Is(err, ErrNotFound) && lastAcked == 0 {
			continue // killed before the database was created
		}
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		v := checkRecovered(t, db, seed, lastAcked, ref, &refVersion)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		lastAcked = v
	}
	t.Logf("%d kills, final version %d", rounds, refVersion)
}

// newCrashRef returns empty reference trees of crashStores for
// checkRecovered.
func newCrashRef() map[string]*memiavl.Tree {
	ref := map[string]*memiavl.Tree{}
	for _, name := range crashStores {
		ref[name], _ = memiavl.New(memiavl.Options{})
	}
	return ref
}

// checkRecovered checks a database reopened after a crash or failure of a
// process that committed crashBlock(seed, ...): it is at lastAcked or
// later, and its app hash and contents are those of the blocks up to its
// version, which ref (at version *refVersion) is advanced to. It returns the
// database's version.
func checkRecovered(t *testing.T, db *DB, seed, lastAcked int64, ref map[string]*memiavl.Tree, refVersion *int64) int64 {
	t.Helper()
	v := db.Version()
	if v < lastAcked {
		t.Fatalf("reopened at %d, but %d was acknowledged", v, lastAcked)
	}
	if v < *refVersion {
		t.Fatalf("reopened at %d, before %d found earlier", v, *refVersion)
	}
	for ; *refVersion < v; *refVersion++ {
		if err := applyEntry(ref, wal.Entry{Version: *refVersion + 1, ChangeSets: crashBlock(seed, *refVersion+1)}, true); err != nil {
			t.Fatal(err)
		}
	}
	want := commitInfo(ref, v).Hash()
	if got := db.LastCommitInfo().Hash(); !bytes.Equal(got, want) {
		t.Fatalf("version %d app hash %X, want %X", v, got, want)
	}
	view, err := db.View()
	if err != nil {
		t.Fatal(err)
	}
	defer view.Release()
	for _, name := range crashStores {
		a := ref[name].Iterator(nil, nil, true)
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
