package snapshot

// Tests of forked writers whose leaf and branch records go straight into
// the parent's files, written at once with the parent's own.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// nodeCall is one node a treeGen streamed.
type nodeCall struct {
	leaf          bool
	key, value    []byte
	height        uint8
	size, version int64
	hash          []byte
}

type nodeRecorder struct{ calls []nodeCall }

func (r *nodeRecorder) AddLeaf(key, value []byte, version int64, hash []byte) error {
	r.calls = append(r.calls, nodeCall{leaf: true, key: key, value: value, version: version, hash: append([]byte(nil), hash...)})
	return nil
}

func (r *nodeRecorder) AddBranch(height uint8, size int64, version int64, hash []byte) error {
	r.calls = append(r.calls, nodeCall{height: height, size: size, version: version, hash: append([]byte(nil), hash...)})
	return nil
}

func replayNodes(s nodeSink, calls []nodeCall) error {
	for _, c := range calls {
		var err error
		if c.leaf {
			err = s.AddLeaf(c.key, c.value, c.version, c.hash)
		} else {
			err = s.AddBranch(c.height, c.size, c.version, c.hash)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recordTree streams the evenly split tree over n keys into a recorder.
func recordTree(t *testing.T, r *rand.Rand, n int) []nodeCall {
	t.Helper()
	keys, values := sortedKVs(r, n)
	rec := &nodeRecorder{}
	g := &treeGen{r: rand.New(rand.NewSource(r.Int63())), kv: func(i int) ([]byte, []byte) { return keys[i], values[i] }, treeVersion: 50, sink: rec}
	if _, err := g.run(n); err != nil {
		t.Fatal(err)
	}
	return rec.calls
}

// junkTree streams into s a tree of n leaves whose keys sort after every
// key of sortedKVs.
func junkTree(s nodeSink, n int, seed int64) error {
	g := &treeGen{
		r:           rand.New(rand.NewSource(seed)),
		kv:          func(i int) ([]byte, []byte) { return []byte(fmt.Sprintf("\xff\xff\xff%09d", i)), []byte("junk") },
		treeVersion: 50,
		sink:        s,
	}
	g.build(0, n, -1)
	return g.err
}

// writeOneWriter writes calls with one writer and returns the files.
func writeOneWriter(t *testing.T, dir string, calls []nodeCall) map[string][]byte {
	t.Helper()
	w, err := NewWriter(dir, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := replayNodes(w, calls); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return readDir(t, dir)
}

func sameFiles(t *testing.T, what string, want, got map[string][]byte) {
	t.Helper()
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s: %s differs (len %d, want %d)", what, name, len(got[name]), len(b))
		}
	}
}

// yieldLimiter lets every write through but yields first, so that the
// two writers' flushes interleave; it counts the bytes.
type yieldLimiter struct{ bytes atomic.Int64 }

func (l *yieldLimiter) WaitN(ctx context.Context, n int) error {
	runtime.Gosched()
	l.bytes.Add(int64(n))
	return ctx.Err()
}
func (l *yieldLimiter) Burst() int { return 64 << 10 }

// TestForkPlacedConcurrentHalves: the two halves written at once on two
// goroutines (several buffer-fulls each, so the parent's write(2)s and the
// fork's pwrite(2)s into the same leaf and branch files interleave) give
// the bytes of one writer, and they verify.
func TestForkPlacedConcurrentHalves(t *testing.T) {
	r := testutil.Rand(t)
	for _, n := range []int{2*4096 + 3, 20000 + r.Intn(5000)} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			calls := recordTree(t, r, n)
			parent := t.TempDir()
			want := writeOneWriter(t, filepath.Join(parent, "one"), calls)
			a := (n + 1) / 2
			left, right, root := calls[:2*a-1], calls[2*a-1:len(calls)-1], calls[len(calls)-1:]
			dir := filepath.Join(parent, "forked")
			w, err := NewWriter(dir, 50)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			lim := &yieldLimiter{}
			w.SetLimiter(context.Background(), lim)
			p, err := w.Fork(uint64(a), uint64(a-1))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var perr error
			wg.Add(1)
			go func() { defer wg.Done(); perr = replayNodes(p, right) }()
			lerr := replayNodes(w, left)
			wg.Wait()
			if lerr != nil || perr != nil {
				t.Fatal(lerr, perr)
			}
			if err := w.Join(p); err != nil {
				t.Fatal(err)
			}
			if err := replayNodes(w, root); err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, "forked", want, readDir(t, dir))
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestForkPlacedReforkThenParentWrites: a fork that wrote far more than
// the subtree (several buffer-fulls, so its records are on disk) is
// aborted; a second fork at the same place writes the right child's left
// subtree and is joined; the parent then writes the right child's right
// subtree and the two branches itself after the Join (its own write(2)s
// at its position after adopt's seek, over the aborted fork's stale
// records, not only truncating them). Same bytes as one writer.
func TestForkPlacedReforkThenParentWrites(t *testing.T) {
	r := testutil.Rand(t)
	n := 12000 + r.Intn(3000)
	calls := recordTree(t, r, n)
	parent := t.TempDir()
	want := writeOneWriter(t, filepath.Join(parent, "one"), calls)
	a := (n + 1) / 2
	m := n - a
	a2 := (m + 1) / 2
	iL := 2*a - 1
	iRL := iL + 2*a2 - 1
	dir := filepath.Join(parent, "forked")
	w, err := NewWriter(dir, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := replayNodes(w, calls[:iL]); err != nil {
		t.Fatal(err)
	}
	junk, err := w.Fork(uint64(a), uint64(a-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := junkTree(junk, 3*n, 7); err != nil {
		t.Fatal(err)
	}
	if err := junk.Abort(); err != nil {
		t.Fatal(err)
	}
	p, err := w.Fork(uint64(a), uint64(a-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := replayNodes(p, calls[iL:iRL]); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(p); err != nil {
		t.Fatal(err)
	}
	if err := replayNodes(w, calls[iRL:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "re-forked", want, readDir(t, dir))
}

// failLimiter fails every wait once failing is set.
type failLimiter struct{ failing atomic.Bool }

var errTestLimiter = errors.New("test limiter refuses")

func (l *failLimiter) WaitN(ctx context.Context, n int) error {
	if l.failing.Load() {
		return errTestLimiter
	}
	return nil
}
func (l *failLimiter) Burst() int { return 1 << 20 }

// TestForkPlacedJoinPaceFails: a limiter that fails from Join on (the
// fork's last flush of its placed records, or the copies of its scratch
// files into the parent's files) fails the Join or the Finish after it, and
// Abort leaves nothing behind. With every buffer flushed before, Join waits
// for nothing: the leaf records it rewrites in place were paced when the
// fork wrote them, and its copies may stay in the parent's buffers.
func TestForkPlacedJoinPaceFails(t *testing.T) {
	r := testutil.Rand(t)
	n := 2000
	calls := recordTree(t, r, n)
	a := (n + 1) / 2
	for _, flushFirst := range []bool{false, true} {
		parent := t.TempDir()
		w, err := NewWriter(filepath.Join(parent, "s"), 50)
		if err != nil {
			t.Fatal(err)
		}
		lim := &failLimiter{}
		w.SetLimiter(context.Background(), lim)
		if err := replayNodes(w, calls[:2*a-1]); err != nil {
			t.Fatal(err)
		}
		p, err := w.Fork(uint64(a), uint64(a-1))
		if err != nil {
			t.Fatal(err)
		}
		if err := replayNodes(p, calls[2*a-1:len(calls)-1]); err != nil {
			t.Fatal(err)
		}
		if flushFirst {
			// the fork's records on disk: only adopt's rewrite waits
			for i := range p.files {
				if err := p.files[i].buf.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range w.files {
				if err := w.files[i].buf.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		lim.failing.Store(true)
		err = w.Join(p)
		if err == nil && flushFirst {
			// the root, then Finish flushes the buffers
			err = replayNodes(w, calls[len(calls)-1:])
		}
		if !errors.Is(err, errTestLimiter) && (!flushFirst || err != nil) {
			t.Fatalf("flushFirst %v: Join with a failing limiter: %v", flushFirst, err)
		}
		if err := w.Finish(); !errors.Is(err, errTestLimiter) {
			t.Fatalf("Finish after the failed Join: %v", err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if names := tmpEntries(t, parent); len(names) != 0 {
			t.Fatalf("left behind: %v", names)
		}
	}
}

// TestForkPlacedCRCCombineLong: crcCombine agrees with itself across large
// lengths (associativity: (a+b)+c = a+(b+c)) and with the checksum of runs
// of zero bytes, which is all it models.
func TestForkPlacedCRCCombineLong(t *testing.T) {
	r := testutil.Rand(t)
	for i := 0; i < 200; i++ {
		ca, cb, cc := r.Uint32(), r.Uint32(), r.Uint32()
		lb, lc := uint64(r.Int63n(1<<44)), uint64(r.Int63n(1<<44))
		if i%10 == 0 {
			lb, cb = 0, 0 // the checksum of no bytes is 0
		}
		x := crcCombine(crcCombine(ca, cb, lb), cc, lc)
		y := crcCombine(ca, crcCombine(cb, cc, lc), lb+lc)
		if x != y {
			t.Fatalf("lengths %d, %d: %08x != %08x", lb, lc, x, y)
		}
	}
	zeros := make([]byte, 3<<20)
	for _, l := range []int{1, 7, 4096, 65535, 1 << 20, 3 << 20} {
		a := make([]byte, 1+r.Intn(100))
		r.Read(a)
		want := crc32.Update(crc32.Update(0, crcTable, a), crcTable, zeros[:l])
		if got := crcCombine(crc32.Update(0, crcTable, a), crc32.Update(0, crcTable, zeros[:l]), uint64(l)); got != want {
			t.Fatalf("zeros %d: %08x, want %08x", l, got, want)
		}
	}
}

// TestForkPlacedForkAtZero: a fork at leaf 0 and branch 0 of an empty
// parent writes the whole tree (adopt's delta is 0: no rewrite, the
// fork's own checksums combined onto the empty file's); the bytes are one
// writer's.
func TestForkPlacedForkAtZero(t *testing.T) {
	r := testutil.Rand(t)
	n := 5000 + r.Intn(1000)
	calls := recordTree(t, r, n)
	parent := t.TempDir()
	want := writeOneWriter(t, filepath.Join(parent, "one"), calls)
	dir := filepath.Join(parent, "forked")
	w, err := NewWriter(dir, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	p, err := w.Fork(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := replayNodes(p, calls); err != nil {
		t.Fatal(err)
	}
	if err := w.Join(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "forked at zero", want, readDir(t, dir))
}
