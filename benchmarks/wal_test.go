package benchmarks

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	tidwall "github.com/tidwall/wal"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// The WAL benchmarks append and replay changesets shaped like chain blocks
// (about 2,000 pairs of 32-byte keys and ~300-byte values over a few
// stores, ~670 KB encoded) with this database's wal package and with
// github.com/tidwall/wal, which the reference memiavl uses. tidwall/wal
// stores raw bytes, so it is given the same entries encoded with
// wal.AppendEntry: both sides do the same encoding work.

// blockStores splits a block's pairs over stores as a busy chain would.
var blockStores = []struct {
	name  string
	pairs int
}{{"bank", 900}, {"acc", 500}, {"staking", 350}, {"evm", 250}}

// blockEntries returns n distinct block-shaped entries; callers set Version.
func blockEntries(n int) []wal.Entry {
	rng := rand.New(rand.NewPCG(42, 7))
	out := make([]wal.Entry, n)
	for i := range out {
		for _, st := range blockStores {
			cs := wal.ChangeSet{Name: st.name, Pairs: make([]wal.KVPair, st.pairs)}
			for j := range cs.Pairs {
				p := &cs.Pairs[j]
				p.Key = randBytes(rng, 32)
				if rng.IntN(20) == 0 {
					p.Delete = true
				} else {
					p.Value = randBytes(rng, 250+rng.IntN(101))
				}
			}
			out[i].ChangeSets = append(out[i].ChangeSets, cs)
		}
	}
	return out
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for j := i; j < n && j < i+8; j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return b
}

// avgEncodedSize is the mean encoded body size of the entries.
func avgEncodedSize(es []wal.Entry) int64 {
	var total int64
	for _, e := range es {
		e.Version = 1
		total += int64(wal.EncodedSize(e))
	}
	return total / int64(len(es))
}

func reportEntries(b *testing.B, n int, start time.Time) {
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
}

// BenchmarkWALAppend measures append throughput, including encoding and,
// for the asynchronous modes, a final Flush. Sub-benchmark names say the
// library and the durability mode:
//
//	ours/fsync-each:    SyncEveryCommit, synchronous (fsync before Append returns)
//	ours/fsync-group:   SyncEveryCommit, AsyncBuffer 16 (group commit)
//	ours/grouped-async: SyncGrouped, AsyncBuffer 16
//	ours/nosync:        SyncNone, synchronous
//	tidwall/fsync-each: NoSync=false (fsync in every Write)
//	tidwall/nosync:     NoSync=true
func BenchmarkWALAppend(b *testing.B) {
	entries := blockEntries(16)
	size := avgEncodedSize(entries)
	ours := []struct {
		name string
		opts wal.Options
	}{
		{"fsync-each", wal.Options{Sync: wal.SyncEveryCommit}},
		{"fsync-group", wal.Options{Sync: wal.SyncEveryCommit, AsyncBuffer: 16}},
		{"grouped-async", wal.Options{Sync: wal.SyncGrouped, AsyncBuffer: 16}},
		{"nosync", wal.Options{Sync: wal.SyncNone}},
	}
	for _, tc := range ours {
		b.Run("ours/"+tc.name, func(b *testing.B) {
			opts := tc.opts // default 64 MiB segments
			l, err := wal.Open(filepath.Join(b.TempDir(), "wal"), opts)
			if err != nil {
				b.Fatal(err)
			}
			// The first append creates the first segment (tidwall/wal does
			// that in Open): keep it out of the measurement.
			if err := l.Append(wal.Entry{Version: 1}); err != nil {
				b.Fatal(err)
			}
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				e := entries[i%len(entries)]
				e.Version = int64(i + 2)
				if err := l.Append(e); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
			reportEntries(b, b.N, start)
			b.StopTimer()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		noSync bool
	}{{"fsync-each", false}, {"nosync", true}} {
		b.Run("tidwall/"+tc.name, func(b *testing.B) {
			opts := *tidwall.DefaultOptions // 20 MB segments, as the reference memiavl uses
			opts.NoSync = tc.noSync
			l, err := tidwall.Open(filepath.Join(b.TempDir(), "wal"), &opts)
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				e := entries[i%len(entries)]
				e.Version = int64(i + 1)
				if buf, err = wal.AppendEntry(buf[:0], e); err != nil {
					b.Fatal(err)
				}
				if err := l.Write(uint64(i+1), buf); err != nil {
					b.Fatal(err)
				}
			}
			reportEntries(b, b.N, start)
			b.StopTimer()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkWALReplay measures reading back and decoding a log of
// replayEntries block-shaped entries from the page cache (the files were
// just written). One op reads the whole log:
//
//	warm:        the log is open; Replay (ours) or a Read loop (tidwall/wal)
//	open+replay: Open, read everything, Close: a restart
//
// Both sides decode every entry with wal.DecodeEntry and hand out entries
// the caller may keep (tidwall/wal with NoCopy=false copies each Read).
func BenchmarkWALReplay(b *testing.B) {
	const replayEntries = 64
	entries := blockEntries(16)
	var total int64
	for i := 0; i < replayEntries; i++ {
		e := entries[i%len(entries)]
		e.Version = int64(i + 1)
		total += int64(wal.EncodedSize(e))
	}
	const wantChangeSets = replayEntries * 4

	oursDir := filepath.Join(b.TempDir(), "ours")
	l, err := wal.Open(oursDir, wal.Options{Sync: wal.SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	tidDir := filepath.Join(b.TempDir(), "tidwall")
	tidOpts := *tidwall.DefaultOptions
	tidOpts.NoSync = true
	tl, err := tidwall.Open(tidDir, &tidOpts)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	for i := 0; i < replayEntries; i++ {
		e := entries[i%len(entries)]
		e.Version = int64(i + 1)
		if err := l.Append(e); err != nil {
			b.Fatal(err)
		}
		if buf, err = wal.AppendEntry(buf[:0], e); err != nil {
			b.Fatal(err)
		}
		if err := tl.Write(uint64(i+1), buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		b.Fatal(err)
	}

	replayOurs := func(b *testing.B, l *wal.Log) {
		n := 0
		err := l.Replay(1, replayEntries, func(e wal.Entry) error {
			n += len(e.ChangeSets)
			return nil
		})
		if err != nil || n != wantChangeSets {
			b.Fatalf("replay: %v (%d change sets)", err, n)
		}
	}
	readTidwall := func(b *testing.B, l *tidwall.Log) {
		n := 0
		for idx := uint64(1); idx <= replayEntries; idx++ {
			data, err := l.Read(idx)
			if err != nil {
				b.Fatal(err)
			}
			e, err := wal.DecodeEntry(data)
			if err != nil {
				b.Fatal(err)
			}
			n += len(e.ChangeSets)
		}
		if n != wantChangeSets {
			b.Fatalf("read: %d change sets", n)
		}
	}
	run := func(b *testing.B, op func(b *testing.B)) {
		b.SetBytes(total)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			op(b)
		}
		reportEntries(b, b.N*replayEntries, start)
	}

	b.Run("ours/warm", func(b *testing.B) {
		l, err := wal.Open(oursDir, wal.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, func(b *testing.B) { replayOurs(b, l) })
	})
	b.Run("ours/open+replay", func(b *testing.B) {
		run(b, func(b *testing.B) {
			l, err := wal.Open(oursDir, wal.Options{})
			if err != nil {
				b.Fatal(err)
			}
			replayOurs(b, l)
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("tidwall/warm", func(b *testing.B) {
		l, err := tidwall.Open(tidDir, &tidOpts)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, func(b *testing.B) { readTidwall(b, l) })
	})
	b.Run("tidwall/open+replay", func(b *testing.B) {
		run(b, func(b *testing.B) {
			l, err := tidwall.Open(tidDir, &tidOpts)
			if err != nil {
				b.Fatal(err)
			}
			readTidwall(b, l)
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// TestBlockEntriesShape keeps the benchmark workload what the names claim.
func TestBlockEntriesShape(t *testing.T) {
	es := blockEntries(2)
	pairs := 0
	for _, cs := range es[0].ChangeSets {
		pairs += len(cs.Pairs)
	}
	size := avgEncodedSize(es)
	if pairs != 2000 || size < 500<<10 || size > 800<<10 {
		t.Fatalf("block has %d pairs, %d bytes", pairs, size)
	}
}
