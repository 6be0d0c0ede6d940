package multitree

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-6dfbb450/memiavl/wal"
)

// BenchmarkViewAtConcurrent runs k concurrent ViewAt calls of uncached old
// versions, each 100 to 190 versions of 500 writes past the only
// snapshot: same/ asks one version k times, distinct/ k versions. One op
// is one batch of k calls; rebuilds/op counts the versions rebuilt.
func BenchmarkViewAtConcurrent(b *testing.B) {
	db, err := Open(b.TempDir(), Options{CreateIfMissing: true, InitialStores: []string{"a"}, SnapshotInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 100)
	for v := 0; v < 200; v++ {
		pairs := make([]wal.KVPair, 500)
		for i := range pairs {
			k := binary.BigEndian.AppendUint64(nil, uint64(v*500+i)*2654435761)
			pairs[i] = wal.KVPair{Key: k, Value: val}
		}
		if err := db.ApplyChangeSets([]wal.ChangeSet{{Name: "a", Pairs: pairs}}); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	next := int64(0)
	for _, distinct := range []bool{false, true} {
		for _, k := range []int{1, 4, 16} {
			name := fmt.Sprintf("same/k=%d", k)
			if distinct {
				name = fmt.Sprintf("distinct/k=%d", k)
			}
			b.Run(name, func(b *testing.B) {
				var rebuilds atomic.Int64
				db.afterRebuild = func(int64) { rebuilds.Add(1) }
				defer func() { db.afterRebuild = nil }()
				for i := 0; i < b.N; i++ {
					var wg sync.WaitGroup
					for q := 0; q < k; q++ {
						// versions 100..189, each asked in one batch only
						// while the cache holds 4
						version := 100 + next%90
						if distinct {
							next++
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							v, err := db.ViewAt(version)
							if err != nil {
								b.Error(err)
								return
							}
							v.Release()
						}()
					}
					if !distinct {
						next++
					}
					wg.Wait()
				}
				b.ReportMetric(float64(rebuilds.Load())/float64(b.N), "rebuilds/op")
			})
		}
	}
}
