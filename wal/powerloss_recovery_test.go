package wal

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// TestPowerLossDuringRecovery: a second power loss during the recovery of a
// crash image (Open's repair: cutting the torn tail, removing an empty
// newest segment or leftovers, its fsyncs) and the appends after it. What a
// first Open found must never get worse: every image of the second crash
// opens at a version >= what the first crash guaranteed and, once the
// recovery Open returned, >= the version it returned (plus what was
// acknowledged after), with entries of the history.
func TestPowerLossDuringRecovery(t *testing.T) {
	res := &plResult{}
	seeds := uint64(6)
	if testing.Short() {
		seeds = 1
	}
	for _, cfg := range []plCfg{{SyncEveryCommit, 0, 6000, 0, false}, {SyncNone, 0, 6000, 0, false}, {SyncGrouped, 3, 1 << 20, 0, false}, {SyncNone, 0, 1 << 20, 0, false}, {SyncGrouped, 0, 40000, 0, true}} {
		for seed := uint64(1); seed <= seeds; seed++ {
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			old := plEntries(rng, 1, 30, cfg.big)
			newer := append(append([]Entry(nil), old[:plRollback]...), plEntries(rng, plRollback+1, 30-plRollback, cfg.big)...)
			points := plWorkload(t, cfg, newPLFS(), old, newer)
			for i, pt := range points {
				if i%3 != 0 {
					continue
				}
				for j, img := range pt.st.images(rng, 6) {
					if j > 3 {
						break
					}
					// the first recovery must work for the second to mean anything
					o := cfg.opts()
					o.fs = imageFS(img)
					l, err := Open(memDir, o)
					if err != nil {
						continue
					}
					l.Close()
					plRecover(t, cfg, pt, img, old, newer, rng, res)
				}
			}
		}
	}
	t.Logf("%d second-crash images", res.images)
	res.report(t)
}

func plRecover(t *testing.T, cfg plCfg, pt0 plPoint, img plImage, old, newer []Entry, rng *rand.Rand, res *plResult) {
	lb0 := max(pt0.acked, pt0.st.syncedLast())
	if pt0.phase == 1 {
		lb0 = min(lb0, plRollback)
	}
	fs := newPLFSFrom(img)
	// read by the log's own goroutines (the segment started ahead) too
	var acked atomic.Int64
	var phase atomic.Int32
	acked.Store(lb0)
	phase.Store(int32(pt0.phase))
	var points []plPoint // appended under fs.mu
	fs.onOp = func(op, p string) {
		points = append(points, plPoint{st: fs.snapshotLocked("recovery: " + op + " " + p), acked: acked.Load(), phase: int(phase.Load())})
	}
	// the recovery opens as the writer did (its policy decides what
	// Open may cut), then appends synchronously, each append durable
	o := cfg.opts()
	o.fs = fs
	if pt0.phase == 1 {
		o.Discarding = plRollback // see plCheck
	}
	l, err := Open(memDir, o)
	if err != nil {
		res.fail("recovery-open", fmt.Sprintf("recovery open: %v", err))
		return
	}
	last := l.LastVersion()
	acked.Store(max(acked.Load(), last))
	// which history the first recovery found
	hist := newer
	if phase.Load() == 1 {
		got, _ := collect(l, l.FirstVersion(), last)
		ok := true
		for i, e := range got {
			if entryDiff(newer[int(l.FirstVersion())-1+i], e) != "" {
				ok = false
			}
		}
		if !ok {
			hist = old
			phase.Store(0)
		} else {
			phase.Store(2)
		}
	} else if phase.Load() == 0 {
		hist = old
	}
	if err := l.Close(); err != nil {
		res.fail("recovery-open", fmt.Sprintf("close after the recovery open: %v", err))
		return
	}
	o.Sync, o.AsyncBuffer, o.Discarding = SyncEveryCommit, 0, 0
	if l, err = Open(memDir, o); err != nil {
		res.fail("recovery-open", fmt.Sprintf("synchronous open after the recovery: %v", err))
		return
	}
	for v := last + 1; v <= last+3 && int(v) <= len(hist); v++ {
		if err := l.Append(hist[v-1]); err != nil {
			res.fail("recovery-append", fmt.Sprintf("append %d: %v", v, err))
			return
		}
		acked.Store(v)
	}
	l.Close()
	fs.mu.Lock()
	points = append(points, plPoint{st: fs.snapshotLocked("recovery: end"), acked: acked.Load(), phase: int(phase.Load())})
	fs.mu.Unlock()
	for _, pt := range points {
		for _, img2 := range pt.st.images(rng, 8) {
			// lb: syncedLast of the second state is fine too
			plCheck(cfg, pt, img2, old, newer, res, false)
		}
	}
}
